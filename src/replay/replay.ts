/**
 * Rollout replay: reuse trees trained on in earlier steps in later updates, importance-corrected
 * against their behaviour log-probs (`node.logprobs`, recorded by the sampler) and bounded in age.
 * Replayed trees are simply stale trees: every replayed policy token gets the weight
 * w = exp(logp_now − logp_behaviour) (logp_now = the learner's policy before the update: the proximal
 * policy of decoupled PPO), truncated at `cap` (TIS, runtime.md §3; the default, applied even when the
 * run's `optimize.loss.correction` is none) or masked above it (decoupled PPO, runtime.md §1). Tokens
 * older than `maxAge` weight versions are dropped (weight 0). The datum transform is the one of
 * src/optimize/off-policy.ts (samplingLogprobs := logp_now, advantages := weight·A), so the run's PPO
 * clip then clips π_θ/π_now: DOTS' rule r = π_θ/π_beh clipped to r_old·[1−ε, 1+ε].
 *
 * Kinds (which stored trees join a step's batch):
 * - `recent`: every tree of the last `steps` steps (newest first, at most `maxTrees`).
 * - `dots`: DOTS rollout replay (arXiv 2506.05316; ASTRAL-Group/data-efficient-llm-rl
 *   `verl/trainer/ppo/ray_trainer.py`): a FIFO buffer of `capacity` groups (512), the newest group per prompt,
 *   all-0/all-1 groups dropped; the batch is σB fresh + (1−σ)B groups drawn uniformly from the buffer
 *   (σ = `freshFraction` = 0.5). Set run.promptsPerStep to σB to keep the batch at B.
 * - `remix`: ReMix (arXiv 2507.06892, code unreleased; defaults from the spec §10): a share `p` = 0.4
 *   of the batch is old data from the last N = `maxAge` = 2 policies, `utd` m = 2 updates per batch,
 *   and from step T = `onPolicyAfter` (50) the run is pure on-policy (the schedule that turns reuse down).
 *   The paper's KL term toward π_{k−1} is not built.
 * - `substituteZeroVariance` (any kind): TRL's experimental replay (huggingface/trl
 *   `trl/experimental/grpo_with_replay_buffer/grpo_with_replay_buffer_trainer.py` @ baa0b06): groups
 *   with reward variance enter a buffer of the `substituteCapacity` highest scores
 *   Σ|A|·std ≈ Σ|r − mean| (GRPO's A = (r − mean)/std); each zero-variance group of the batch is
 *   replaced by a stored group drawn ∝ score (without replacement when the buffer has enough).
 *
 * Every random choice uses Rng(run.seed).fork(`replay/<step>`); the buffers are saved with each run
 * checkpoint (`replay.jsonl`), so a resumed run equals an uninterrupted one.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { DataError, NumericsError } from '../core/errors.js';
import { writeFileAtomic } from '../core/files.js';
import { Rng } from '../core/rng.js';
import { leaves, tokenVersions, treeFromJSON, type RolloutTree } from '../core/tree.js';
import type { Datum } from '../engine/types.js';
import { applyCorrection } from '../optimize/off-policy.js';
import type { AdvantagedTrajectory } from '../optimize/types.js';

const common = {
  substituteZeroVariance: z
    .boolean()
    .default(false)
    .describe(
      'TRL experimental replay: replace each zero-variance group (all rewards equal) by a stored high-advantage group',
    ),
  substituteCapacity: z
    .number()
    .int()
    .min(1)
    .max(1_000_000)
    .default(64)
    .describe('groups kept for substitution (the highest scores Σ|r − mean|)'),
  correction: z
    .enum(['tis', 'decoupled'])
    .default('tis')
    .describe(
      'importance correction of replayed tokens: tis = weight min(w, cap); decoupled = weight w, ' +
        'tokens with w > cap masked (w = exp(logp_now − logp_behaviour))',
    ),
  cap: z
    .number()
    .gt(1)
    .max(1e6)
    .default(2)
    .describe('truncation cap (tis) or masking threshold (decoupled) of the replay importance weight'),
};

export const replayOptionsSchema = z.discriminatedUnion('kind', [
  z
    .object({
      kind: z.literal('none').describe('no replay: every step trains on its fresh batch only'),
      maxAge: z
        .number()
        .int()
        .min(0)
        .max(1_000_000)
        .default(8)
        .describe('substitution only: stored tokens older than this many weight versions are dropped'),
      ...common,
    })
    .strict(),
  z
    .object({
      kind: z.literal('recent').describe('replay every tree of the last `steps` steps alongside the fresh batch'),
      steps: z.number().int().min(1).max(1024).default(1).describe('N: trees trained in the last N steps are replayed'),
      maxTrees: z
        .number()
        .int()
        .min(1)
        .max(1_000_000)
        .default(64)
        .describe('at most this many replayed trees per step (newest first)'),
      maxAge: z
        .number()
        .int()
        .min(0)
        .max(1_000_000)
        .default(2)
        .describe('staleness bound: replayed tokens older than this many weight versions are dropped'),
      ...common,
    })
    .strict(),
  z
    .object({
      kind: z
        .literal('dots')
        .describe(
          'DOTS rollout replay: σB fresh groups + (1−σ)B groups drawn uniformly from a FIFO buffer (newest per prompt, all-0/all-1 dropped)',
        ),
      capacity: z.number().int().min(1).max(1_000_000).default(512).describe('FIFO buffer size in groups (DOTS: 512)'),
      freshFraction: z
        .number()
        .gt(0)
        .max(1)
        .default(0.5)
        .describe('σ: fresh share of the batch; (1−σ)/σ replayed groups per fresh group (DOTS: 0.5)'),
      maxAge: z
        .number()
        .int()
        .min(0)
        .max(1_000_000)
        .default(32)
        .describe('staleness bound in weight versions (DOTS bounds the buffer by size only)'),
      ...common,
    })
    .strict(),
  z
    .object({
      kind: z
        .literal('remix')
        .describe(
          'ReMix: off-policy mix with several updates per batch (UTD > 1), pure on-policy from step onPolicyAfter',
        ),
      probability: z
        .number()
        .min(0)
        .max(0.95)
        .default(0.4)
        .describe('p: share of the batch drawn from stored data (ReMix: 0.4)'),
      utd: z
        .number()
        .int()
        .min(1)
        .max(16)
        .default(2)
        .describe('m: updates per batch, the update-to-data ratio (ReMix: 2)'),
      maxAge: z
        .number()
        .int()
        .min(0)
        .max(1_000_000)
        .default(2)
        .describe('N: stored data comes from the last N policies; older tokens are dropped (ReMix: 2)'),
      onPolicyAfter: z
        .number()
        .int()
        .min(0)
        .max(10_000_000)
        .default(50)
        .describe('T: from this step on, no reuse and one update per batch (ReMix: 50 or 100)'),
      capacity: z.number().int().min(1).max(1_000_000).default(512).describe('FIFO buffer size in groups'),
      ...common,
    })
    .strict(),
]);
export type ReplayOptions = z.infer<typeof replayOptionsSchema>;

/** (Σw)²/Σw² divided by n: 1 when every weight is equal (on-policy), → 1/n when one weight dominates; 1 for no weights. */
export function effectiveSampleSize(weights: number[]): number {
  let s = 0;
  let s2 = 0;
  for (const w of weights) {
    s += w;
    s2 += w * w;
  }
  return weights.length && s2 > 0 ? (s * s) / s2 / weights.length : 1;
}

/** True when every complete leaf of the tree has the same reward (no GRPO signal). */
export function isZeroVariance(tree: RolloutTree): boolean {
  const rs = leaves(tree).map((l) => l.reward ?? 0);
  return rs.every((r) => r === rs[0]);
}

/** TRL's buffer score Σ|A|·std with A = (r − mean)/std, i.e. Σ|r − mean| over the group's leaves. */
export function groupScore(tree: RolloutTree): number {
  const rs = leaves(tree).map((l) => l.reward ?? 0);
  const m = rs.reduce((a, b) => a + b, 0) / Math.max(1, rs.length);
  return rs.reduce((a, r) => a + Math.abs(r - m), 0);
}

/** Weight version − the oldest token version of the tree (0 without tokens). */
export function treeAge(tree: RolloutTree, version: number): number {
  let oldest = Infinity;
  for (const v of tokenVersions(tree)) if (v < oldest) oldest = v;
  return oldest === Infinity ? 0 : version - oldest;
}

export interface ReplayEntry {
  tree: RolloutTree;
  /** The learner step the tree was (first) trained at. */
  step: number;
  /** Priority (substitution buffer: Σ|r − mean|). */
  score: number;
}

/**
 * A bounded buffer of stored trees. `fifo`: oldest out first beyond `capacity` (optionally one entry
 * per prompt, the newest); `top`: the `capacity` highest scores (TRL's min-heap: a new entry enters
 * only if it beats the lowest).
 */
export class ReplayBuffer {
  entries: ReplayEntry[] = [];

  constructor(
    readonly capacity: number,
    readonly policy: 'fifo' | 'top' = 'fifo',
    readonly newestPerPrompt = false,
  ) {}

  get size(): number {
    return this.entries.length;
  }

  add(added: ReplayEntry[]): void {
    for (const e of added) {
      if (this.policy === 'top') {
        if (this.entries.length < this.capacity) this.entries.push(e);
        else {
          const low = this.lowest();
          if (e.score > this.entries[low].score) this.entries[low] = e;
        }
        continue;
      }
      if (this.newestPerPrompt) this.entries = this.entries.filter((x) => x.tree.itemId !== e.tree.itemId);
      this.entries.push(e);
      if (this.entries.length > this.capacity) this.entries.splice(0, this.entries.length - this.capacity);
    }
  }

  /** Drop entries whose oldest token is more than `maxAge` versions older than `version`; returns how many. */
  evictOlderThan(version: number, maxAge: number): number {
    const before = this.entries.length;
    this.entries = this.entries.filter((e) => treeAge(e.tree, version) <= maxAge);
    return before - this.entries.length;
  }

  /** `n` entries drawn uniformly without replacement (all of them when n ≥ size), in buffer order. */
  sampleUniform(n: number, rng: Rng): ReplayEntry[] {
    if (n >= this.entries.length) return this.entries.slice();
    const idx = rng
      .shuffle(this.entries.map((_, i) => i))
      .slice(0, n)
      .sort((a, b) => a - b);
    return idx.map((i) => this.entries[i]);
  }

  /** `n` entries drawn ∝ score, without replacement unless n > size (TRL's torch.multinomial). */
  sampleByScore(n: number, rng: Rng): ReplayEntry[] {
    const pool = this.entries.slice();
    const out: ReplayEntry[] = [];
    const replacement = n > pool.length;
    while (out.length < n && pool.length) {
      const total = pool.reduce((a, e) => a + Math.max(0, e.score), 0);
      let u = rng.next() * total;
      let i = 0;
      if (total > 0) while (i < pool.length - 1 && (u -= Math.max(0, pool[i].score)) >= 0) i++;
      else i = rng.int(pool.length);
      out.push(pool[i]);
      if (!replacement) pool.splice(i, 1);
    }
    return out;
  }

  private lowest(): number {
    let low = 0;
    for (let i = 1; i < this.entries.length; i++) if (this.entries[i].score < this.entries[low].score) low = i;
    return low;
  }
}

/** What the learner needs to correct replayed datums (passed to Learner.train). */
export interface ReplayCorrection {
  /** Rewrite the chunk's datums of replayed trees; `proximal` gives the current policy's log-probs. */
  correct(
    chunk: AdvantagedTrajectory[],
    datums: Datum[],
    proximal: (d: Datum[]) => Promise<number[][]>,
  ): Promise<Datum[]>;
}

/**
 * Importance-correct replayed datums. `versions[i]` is the weight version of each target position of
 * datums[i] (NaN where not a response token). Policy tokens older than `minVersion` get weight 0
 * (dropped); the others are rewritten by applyCorrection (tis: advantage × min(w, cap); decoupled:
 * × w, masked above cap) with w = exp(proximal − behaviour). Returns the raw w of kept tokens (for the
 * ESS), their ages at `version`, and the count of dropped tokens.
 */
export function weighReplayed(
  datums: Datum[],
  proximal: number[][],
  versions: number[][],
  version: number,
  maxAge: number,
  correction: { kind: 'tis' | 'decoupled'; cap: number },
): { datums: Datum[]; weights: number[]; ages: number[]; dropped: number } {
  let dropped = 0;
  const weights: number[] = [];
  const ages: number[] = [];
  const masked = datums.map((d, i) => {
    const w = d.weights.slice();
    const adv = d.advantages?.slice();
    for (let t = 0; t < w.length; t++) {
      if (w[t] === 0) continue;
      const age = version - versions[i][t];
      if (age > maxAge) {
        w[t] = 0;
        if (adv) adv[t] = 0;
        dropped++;
        continue;
      }
      ages.push(age);
      weights.push(Math.exp(proximal[i][t] - d.samplingLogprobs![t]));
    }
    return { ...d, weights: w, advantages: adv };
  });
  const spec =
    correction.kind === 'tis'
      ? { kind: 'tis' as const, cap: correction.cap }
      : { kind: 'decoupled' as const, maxWeight: correction.cap };
  return { datums: applyCorrection(masked, proximal, spec).datums, weights, ages, dropped };
}

/** Per-target-position weight versions of a trajectory's datum (buildDatums' alignment). */
function targetVersions(a: AdvantagedTrajectory): number[] {
  const tr = a.trajectory;
  const P = tr.promptTokens.length;
  const out = new Array<number>(P + tr.tokens.length - 1).fill(NaN);
  for (let t = 0; t < tr.tokens.length; t++) out[P - 1 + t] = tr.weightVersions[t];
  return out;
}

/** One step's correction of its replayed trees (by tree id); accumulates the step's replay metrics. */
export class StepCorrection implements ReplayCorrection {
  readonly weights: number[] = [];
  readonly ages: number[] = [];
  dropped = 0;

  constructor(
    readonly ids: Set<string>,
    readonly version: number,
    readonly maxAge: number,
    readonly correction: { kind: 'tis' | 'decoupled'; cap: number },
  ) {}

  async correct(
    chunk: AdvantagedTrajectory[],
    datums: Datum[],
    proximal: (d: Datum[]) => Promise<number[][]>,
  ): Promise<Datum[]> {
    // buildDatums keeps exactly these trajectories, in order
    const kept = chunk.filter((a) => !a.excluded && a.trajectory.tokens.length > 0);
    if (kept.length !== datums.length)
      throw new NumericsError(`replay: ${datums.length} datums for ${kept.length} trajectories`);
    const idx = kept.map((a, i) => (this.ids.has(a.trajectory.treeId) ? i : -1)).filter((i) => i >= 0);
    if (!idx.length) return datums;
    const sub = idx.map((i) => datums[i]);
    const r = weighReplayed(
      sub,
      await proximal(sub),
      idx.map((i) => targetVersions(kept[i])),
      this.version,
      this.maxAge,
      this.correction,
    );
    this.weights.push(...r.weights);
    this.ages.push(...r.ages);
    this.dropped += r.dropped;
    const out = datums.slice();
    idx.forEach((i, j) => (out[i] = r.datums[j]));
    return out;
  }
}

/** The learner as the replay driver needs it (src/run/learner.ts). */
export interface ReplayLearner {
  train(
    trees: RolloutTree[],
    version: number,
    optimizerStep: number,
    replay?: ReplayCorrection,
  ): Promise<{
    metrics: Record<string, number>;
    stalenessHistogram: Record<number, number>;
    updates: number;
    nonFiniteUpdates: number;
  }>;
}
type LearnResult = Awaited<ReturnType<ReplayLearner['train']>>;

/** The replay metrics of a step's learner result (0 / 1 when nothing was replayed). */
export function replayMetrics(learned: { metrics: Record<string, number> } | undefined): Record<string, number> {
  const m = learned?.metrics ?? {};
  return Object.fromEntries(Object.entries(m).filter(([k]) => k.startsWith('replay_')));
}

const FILE = 'replay.jsonl';

/** The run's replay stage: picks the stored trees of each step, trains, stores the fresh ones. */
export class Replay {
  readonly main: ReplayBuffer;
  readonly substitute: ReplayBuffer;

  constructor(
    readonly options: ReplayOptions,
    readonly seed: number,
    readonly updatesPerStep = 1,
  ) {
    const o = options;
    const capacity = o.kind === 'recent' ? o.maxTrees * o.steps : o.kind === 'none' ? 1 : o.capacity;
    this.main = new ReplayBuffer(capacity, 'fifo', o.kind === 'dots');
    this.substitute = new ReplayBuffer(o.substituteCapacity, 'top');
  }

  get active(): boolean {
    return this.options.kind !== 'none' || this.options.substituteZeroVariance;
  }

  /** A fresh replay stage, or the one saved in `checkpointDir` (when it holds replay.jsonl). */
  static open(options: ReplayOptions, seed: number, updatesPerStep = 1, checkpointDir?: string): Replay {
    const r = new Replay(options, seed, updatesPerStep);
    const file = checkpointDir ? join(checkpointDir, FILE) : undefined;
    if (file && existsSync(file)) r.load(file);
    return r;
  }

  /** Throw the DataError load() would for `checkpointDir`'s replay.jsonl (so resume can fall back to an older checkpoint). */
  static validate(checkpointDir: string): void {
    const file = join(checkpointDir, FILE);
    if (existsSync(file)) new Replay(replayOptionsSchema.parse({ kind: 'none' }), 0).load(file);
  }

  /** Write both buffers as JSONL (`{buffer, step, score, tree}` per line), atomically; nothing when inactive. */
  save(checkpointDir: string): void {
    if (!this.active) return;
    const line = (buffer: string, e: ReplayEntry) =>
      JSON.stringify({ buffer, step: e.step, score: e.score, tree: e.tree }) + '\n';
    writeFileAtomic(
      join(checkpointDir, FILE),
      this.main.entries.map((e) => line('main', e)).join('') +
        this.substitute.entries.map((e) => line('substitute', e)).join(''),
    );
  }

  /** Read buffers written by save(); errors are DataErrors naming `file:line N`. */
  load(file: string): void {
    this.main.entries = [];
    this.substitute.entries = [];
    readFileSync(file, 'utf8')
      .split('\n')
      .forEach((text, i) => {
        if (!text.trim()) return;
        const where = `${file}:line ${i + 1}`;
        let raw: { buffer?: unknown; step?: unknown; score?: unknown; tree?: unknown };
        try {
          raw = JSON.parse(text);
        } catch (cause) {
          throw new DataError(`${where}: invalid JSON`, file, i + 1, undefined, { cause });
        }
        if (raw.buffer !== 'main' && raw.buffer !== 'substitute')
          throw new DataError(`${where}: field "buffer" must be "main" or "substitute"`, file, i + 1, 'buffer');
        if (!Number.isInteger(raw.step) || typeof raw.score !== 'number')
          throw new DataError(
            `${where}: fields "step" (integer) and "score" (number) are required`,
            file,
            i + 1,
            'step',
          );
        if (!raw.tree || typeof raw.tree !== 'object')
          throw new DataError(`${where}: field "tree" must be an object`, file, i + 1, 'tree');
        const entry = {
          tree: treeFromJSON(JSON.stringify(raw.tree), where),
          step: raw.step as number,
          score: raw.score,
        };
        (raw.buffer === 'main' ? this.main : this.substitute).entries.push(entry);
      });
  }

  /** How many stored trees join a batch of `fresh` fresh trees at `step`. */
  private replayCount(fresh: number, step: number): number {
    const o = this.options;
    if (o.kind === 'dots') return Math.round((fresh * (1 - o.freshFraction)) / o.freshFraction);
    if (o.kind === 'remix')
      return step >= o.onPolicyAfter ? 0 : Math.round((fresh * o.probability) / (1 - o.probability));
    if (o.kind === 'recent') return o.maxTrees;
    return 0;
  }

  /** The stored trees joining step `step`'s batch. */
  private pick(fresh: number, step: number, rng: Rng): ReplayEntry[] {
    const o = this.options;
    const n = this.replayCount(fresh, step);
    if (!n || o.kind === 'none') return [];
    if (o.kind === 'recent')
      return this.main.entries
        .filter((e) => e.step >= step - o.steps)
        .reverse()
        .slice(0, n);
    return this.main.sampleUniform(n, rng);
  }

  /** Replace zero-variance fresh groups by stored ones (TRL); returns the batch and the substituted entries. */
  private substitution(usable: RolloutTree[], step: number, rng: Rng): { batch: RolloutTree[]; used: ReplayEntry[] } {
    if (!this.options.substituteZeroVariance) return { batch: usable, used: [] };
    const zero = usable.filter(isZeroVariance);
    // the batch's groups with variance enter the buffer first, as in TRL's update_with_replay_buffer
    this.substitute.add(
      usable.filter((t) => !isZeroVariance(t)).map((tree) => ({ tree, step, score: groupScore(tree) })),
    );
    const fromThisStep = new Set(usable.map((t) => t.id));
    const candidates = new ReplayBuffer(this.substitute.capacity, 'top');
    candidates.entries = this.substitute.entries.filter((e) => !fromThisStep.has(e.tree.id));
    const used = zero.length && candidates.size ? candidates.sampleByScore(zero.length, rng) : [];
    const replaced = new Set(zero.slice(0, used.length).map((t) => t.id));
    return { batch: usable.filter((t) => !replaced.has(t.id)), used };
  }

  /**
   * Train step `step` (learner weight version `version`) on the fresh usable trees plus the replayed
   * ones, then store the fresh trees. With replay off (kind none, no substitution) this is exactly
   * `learner.train(usable, version, optimizerStep)`. ReMix's extra updates share the step's
   * learning rate (the schedule follows RL steps: optimizer step (step − 1)·updatesPerStep).
   */
  async train(
    learner: ReplayLearner,
    usable: RolloutTree[],
    version: number,
    optimizerStep: number,
    step: number,
  ): Promise<LearnResult> {
    if (!this.active) return learner.train(usable, version, optimizerStep);
    const o = this.options;
    const rng = new Rng(this.seed).fork(`replay/${step}`);
    this.main.evictOlderThan(version, o.maxAge);
    this.substitute.evictOlderThan(version, o.maxAge);
    const { batch: fresh, used } = this.substitution(usable, step, rng);
    const replayed = [...used, ...this.pick(fresh.length, step, rng)].map((e) => e.tree);
    const ids = new Set(replayed.map((t) => t.id));
    // a tree both substituted and picked joins once
    const batch = [...fresh, ...replayed.filter((t, i) => replayed.findIndex((x) => x.id === t.id) === i)];
    const correction = new StepCorrection(ids, version, o.maxAge, { kind: o.correction, cap: o.cap });
    const passes = o.kind === 'remix' && step < o.onPolicyAfter ? o.utd : 1;
    let out: LearnResult | undefined;
    for (let p = 0; p < passes; p++) {
      const r = await learner.train(
        batch,
        version,
        passes > 1 ? (step - 1) * this.updatesPerStep : optimizerStep,
        ids.size ? correction : undefined,
      );
      out = out
        ? { ...r, updates: out.updates + r.updates, nonFiniteUpdates: out.nonFiniteUpdates + r.nonFiniteUpdates }
        : r;
    }
    this.store(usable, step);
    const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);
    out!.metrics = {
      ...out!.metrics,
      replay_trees: ids.size,
      replay_substituted: used.length,
      replay_tokens: correction.weights.length / passes,
      replay_dropped_tokens: correction.dropped / passes,
      replay_ess: effectiveSampleSize(correction.weights),
      replay_age_mean: mean(correction.ages),
      replay_updates_per_batch: passes,
    };
    return out!;
  }

  /** Store the step's fresh trees for later steps (DOTS: groups with reward variance only). */
  private store(usable: RolloutTree[], step: number): void {
    const o = this.options;
    if (o.kind === 'none') return;
    const keep = o.kind === 'dots' ? usable.filter((t) => !isZeroVariance(t)) : usable;
    this.main.add(keep.map((tree) => ({ tree, step, score: groupScore(tree) })));
  }
}
