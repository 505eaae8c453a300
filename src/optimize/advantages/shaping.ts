/**
 * Advantage shaping: post-processors applied, in the listed order, after the base estimator (grpo, tree, …) and
 * `negativeScale` (`optimize.advantage.shaping`). `novelty` is XRPO's novelty sharpening
 * (arXiv 2510.06672), `entropy` the entropy-based term of Cheng et al. (arXiv 2506.14758), `ace` the confidence
 * penalty for over-confident errors (arXiv 2602.21420). Each edits advantages in place and never touches rewards.
 * It does not fetch its inputs: entropies come from the tree (the sampler records them), sequence log-probs for
 * `ace` come from `shapingInputs` (one policy and one reference forward). Choices the papers leave open: "our choice".
 */
import { z } from 'zod';
import { ConfigError, DataError } from '../../core/errors.js';
import { leaves, trajectory, type RolloutTree, type Trajectory } from '../../core/tree.js';
import type { Datum, Sampler, Trainer } from '../../engine/types.js';
import type { AdvantagedTrajectory } from '../types.js';

export const noveltyTermSchema = z
  .object({
    kind: z.literal('novelty'),
    lambda: z.number().min(0).max(100).default(2.5).describe('λ_nov: bonus λ·(1 − η) for a correct, unlikely sample'),
    clip: z.number().min(0).max(100).default(0.5).describe('κ_clip: the bonus is at most κ_clip·A (A > 0)'),
    correctReward: z
      .number()
      .min(-1e6)
      .max(1e6)
      .default(1)
      .describe('a sample is correct when its reward ≥ this (our choice: XRPO assumes 0/1 rewards)'),
  })
  .strict();

export const entropyTermSchema = z
  .object({
    kind: z.literal('entropy'),
    alpha: z.number().min(0).max(100).default(0.4).describe('α: ψ_t = min(α·H_t, |A_t|/κ) (0.4 for GRPO, 0.1 for PPO)'),
    kappa: z.number().min(1).max(1e3).default(2).describe('κ ≥ 1: ψ_t ≤ |A_t|/κ, so the sign of A_t never flips'),
  })
  .strict();

export const aceTermSchema = z
  .object({
    kind: z.literal('ace'),
    alpha: z
      .number()
      .min(0)
      .max(100)
      .default(1)
      .describe('α: A ← A·(1 + α·softplus(c)) for A < 0 (softplus form from summaries of the paper; α our choice)'),
    normalize: z
      .enum(['sum', 'mean'])
      .default('sum')
      .describe('c = Σ_t (log π_θ − log π_ref) over policy tokens (sum), or that sum / tokens (mean)'),
  })
  .strict();

export const shapingTermSchema = z.discriminatedUnion('kind', [noveltyTermSchema, entropyTermSchema, aceTermSchema]);
export type ShapingTerm = z.infer<typeof shapingTermSchema>;

export const shapingSchema = z
  .array(shapingTermSchema)
  .max(8)
  .default([])
  .describe('advantage shaping terms applied in order after the estimator: novelty | entropy | ace ([] = none)');

/** Sequence log-probs over each trajectory's policy tokens, keyed by `shapingKey` (what `ace` reads). */
export interface ShapingInputs {
  /** Σ_t log π_θ(y_t | …) under the learner's current policy. */
  policyLogprobs?: Map<string, number>;
  /** Σ_t log π_ref(y_t | …) under the frozen reference policy. */
  referenceLogprobs?: Map<string, number>;
}

/** What the configured terms need from the engines: sampler entropies (`entropy`), a reference policy (`ace`). */
export function shapingNeeds(terms: readonly ShapingTerm[]): { entropy: boolean; reference: boolean } {
  return { entropy: terms.some((t) => t.kind === 'entropy'), reference: terms.some((t) => t.kind === 'ace') };
}

export function shapingKey(tr: Pick<Trajectory, 'treeId' | 'leafId'>): string {
  return `${tr.treeId}\u0000${tr.leafId}`;
}

/** Apply `terms` in order to `items` (in place; scalar advantages become per-token ones where a term needs it). */
export function applyShaping(
  trees: readonly RolloutTree[],
  items: AdvantagedTrajectory[],
  terms: readonly ShapingTerm[],
  inputs: ShapingInputs = {},
): AdvantagedTrajectory[] {
  for (const term of terms) {
    if (term.kind === 'novelty') noveltyShaping(items, term);
    else if (term.kind === 'entropy') entropyShaping(trees, items, term);
    else aceShaping(items, term, inputs);
  }
  return items;
}

/** The policy tokens of a trajectory (mask = 1). */
function policyTokens(tr: Trajectory): number {
  return tr.mask.reduce((s, m) => s + m, 0);
}

/** Edit the advantage (per token where present) with f(A). */
function mapAdvantage(item: AdvantagedTrajectory, f: (a: number) => number): void {
  if (item.tokenAdvantages)
    item.tokenAdvantages = item.tokenAdvantages.map((a, t) => (item.trajectory.mask[t] ? f(a) : a));
  else item.advantage = f(item.advantage);
}

/**
 * XRPO: s(y) = mean_t log π(y_t|…) (behaviour log-probs), η_i = exp(s_i − s̄), and for a correct sample
 * A_i ← A_i + min(max(λ(1 − η_i), 0), κ_clip·A_i). Our choices: s̄ averages every member of the group (one tree);
 * the bonus is floored at 0 so a correct sample with A ≤ 0 (non-binary rewards) is never pushed down; with
 * per-token advantages the cap uses each token's A_t.
 */
export function noveltyShaping(items: AdvantagedTrajectory[], term: z.infer<typeof noveltyTermSchema>): void {
  const groups = new Map<string, AdvantagedTrajectory[]>();
  for (const item of items) {
    const group = groups.get(item.trajectory.treeId) ?? [];
    group.push(item);
    groups.set(item.trajectory.treeId, group);
  }
  for (const group_G of groups.values()) {
    const s_G = group_G.map((a) => {
      const n = policyTokens(a.trajectory);
      return n ? a.trajectory.logprobs.reduce((s, lp, t) => s + (a.trajectory.mask[t] ? lp : 0), 0) / n : 0;
    });
    const mean = s_G.reduce((a, b) => a + b, 0) / s_G.length;
    group_G.forEach((item, i) => {
      if ((item.trajectory.reward ?? -Infinity) < term.correctReward) return;
      const bonus = Math.max(term.lambda * (1 - Math.exp(s_G[i] - mean)), 0);
      mapAdvantage(item, (a) => a + Math.max(0, Math.min(bonus, term.clip * a)));
    });
  }
}

/**
 * Cheng et al.: A_t ← A_t + min(α·H_t, |A_t|/κ) on each policy token, H_t the entropy the sampler recorded for
 * the token (the behaviour policy's full-vocabulary entropy at the sampling temperature; on-policy at T = 1 this is
 * π_θ's, the paper's training-forward H_t, detached either way). A tree without entropies is an error.
 */
export function entropyShaping(
  trees: readonly RolloutTree[],
  items: AdvantagedTrajectory[],
  term: z.infer<typeof entropyTermSchema>,
): void {
  const byId = new Map(trees.map((t) => [t.id, t]));
  for (const item of items) {
    const tr = item.trajectory;
    const H_T = trajectoryEntropies(byId.get(tr.treeId), tr);
    const A_T = item.tokenAdvantages ?? tr.tokens.map(() => item.advantage);
    item.tokenAdvantages = A_T.map((a, t) =>
      tr.mask[t] ? a + Math.min(term.alpha * H_T[t], Math.abs(a) / term.kappa) : a,
    );
  }
}

function trajectoryEntropies(tree: RolloutTree | undefined, tr: Trajectory): number[] {
  if (!tree) throw new DataError(`advantage shaping: no tree ${tr.treeId} for trajectory ${tr.leafId}`);
  const H_T: number[] = [];
  for (const id of tr.nodeIds.slice(1)) {
    const node = tree.nodes[id];
    if (!node.entropies || node.entropies.length !== node.tokens.length)
      throw new DataError(
        `tree ${tree.id} node ${id} has no per-token entropies: the entropy shaping term needs a sampler that ` +
          'reports them (capabilities.entropy)',
        undefined,
        undefined,
        `nodes.${id}.entropies`,
      );
    H_T.push(...node.entropies);
  }
  return H_T;
}

const softplus = (x: number) => (x > 30 ? x : Math.log1p(Math.exp(x)));

/**
 * ACE: c_i = log π_θ(y_i|x) − log π_ref(y_i|x); for A < 0, A ← A·(1 + α·softplus(c_i)); A ≥ 0 unchanged. The paper
 * states c_i and that only negative advantages are modulated; summaries of it say they are scaled by a softplus of
 * c_i. The exact form 1 + α·softplus(c), α, `normalize`, and π_θ = the learner's weights before the step's first
 * update (one forward, not the behaviour log-probs, which are tempered when T ≠ 1) are our choice.
 */
export function aceShaping(
  items: AdvantagedTrajectory[],
  term: z.infer<typeof aceTermSchema>,
  inputs: ShapingInputs,
): void {
  const { policyLogprobs, referenceLogprobs } = inputs;
  if (!policyLogprobs || !referenceLogprobs)
    throw new ConfigError(
      'optimize.advantage.shaping: the ace term needs policy and reference sequence log-probs (shapingInputs)',
      'optimize.advantage.shaping',
    );
  for (const item of items) {
    const key = shapingKey(item.trajectory);
    const lp = policyLogprobs.get(key);
    const ref = referenceLogprobs.get(key);
    if (lp === undefined || ref === undefined)
      throw new DataError(
        `advantage shaping (ace): no sequence log-probs for tree ${item.trajectory.treeId} leaf ` +
          `${item.trajectory.leafId}`,
        undefined,
        undefined,
        'referenceLogprobs',
      );
    const n = policyTokens(item.trajectory);
    const c = term.normalize === 'mean' ? (n ? (lp - ref) / n : 0) : lp - ref;
    const factor = 1 + term.alpha * softplus(c);
    mapAdvantage(item, (a) => (a < 0 ? a * factor : a));
  }
}

/**
 * Sequence log-probs the `ace` term needs, for every leaf of `trees`: one forward of the learner's policy and one
 * of the frozen reference ({} when no term needs them). Summed over policy tokens (mask = 1).
 */
export async function shapingInputs(
  trees: readonly RolloutTree[],
  terms: readonly ShapingTerm[],
  models: { policy: Pick<Trainer, 'logprobs'>; reference?: Pick<Trainer, 'logprobs'> },
): Promise<ShapingInputs> {
  if (!shapingNeeds(terms).reference) return {};
  if (!models.reference)
    throw new ConfigError(
      'optimize.advantage.shaping: the ace term needs a reference policy (the embedded engine with a warm-start ' +
        'or model.checkpoint)',
      'optimize.advantage.shaping',
    );
  const trs = trees.flatMap((tree) => leaves(tree).map((l) => trajectory(tree, l.id)));
  const data = trs.map(sequenceDatum);
  const sums = async (model: Pick<Trainer, 'logprobs'>) => {
    const lp = data.length ? await model.logprobs(data) : [];
    return new Map(trs.map((tr, i) => [shapingKey(tr), sumPolicy(tr, lp[i])]));
  };
  return { policyLogprobs: await sums(models.policy), referenceLogprobs: await sums(models.reference) };
}

function sequenceDatum(tr: Trajectory): Datum {
  const seq = tr.promptTokens.concat(tr.tokens);
  const weights = new Array<number>(Math.max(0, seq.length - 1)).fill(0);
  tr.mask.forEach((m, t) => (weights[tr.promptTokens.length - 1 + t] = m));
  return { inputTokens: seq.slice(0, -1), targetTokens: seq.slice(1), weights };
}

function sumPolicy(tr: Trajectory, lp_T: number[] | undefined): number {
  if (!lp_T) throw new DataError(`advantage shaping (ace): the trainer returned no log-probs for ${tr.treeId}`);
  let s = 0;
  const P = tr.promptTokens.length;
  for (let t = 0; t < tr.tokens.length; t++) if (tr.mask[t]) s += lp_T[P - 1 + t];
  return s;
}

/** The sampler with `returnEntropy` set on every request (the `entropy` term reads the recorded entropies). */
export function requestEntropy(sampler: Sampler): Sampler {
  if (!sampler.capabilities.entropy)
    throw new ConfigError(
      'optimize.advantage.shaping: the entropy term needs a sampler that reports per-token entropy',
      'optimize.advantage.shaping',
    );
  return {
    specificationVersion: sampler.specificationVersion,
    capabilities: sampler.capabilities,
    sample: (requests, options) =>
      sampler.sample(
        requests.map((r) => ({ ...r, returnEntropy: true })),
        options,
      ),
    release: (handles) => sampler.release(handles),
    weightVersion: () => sampler.weightVersion(),
    ...(sampler.close ? { close: () => sampler.close!() } : {}),
  };
}
