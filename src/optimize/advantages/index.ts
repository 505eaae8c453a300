/**
 * Advantage estimators by name. `computeAdvantages(trees, spec)` turns scored trees (rewards on the
 * leaves) into one AdvantagedTrajectory per leaf. Flat estimators treat each tree's leaves as the
 * group; `tree` uses the tree's structure and whitens over the whole batch's policy tokens; `fork`
 * and `turn_grpo` (turn.ts) give per-turn token advantages on agent trees.
 */
import { z } from 'zod';
import { configErrorFromIssue } from '../../core/errors.js';
import { leaves, trajectory, type RolloutTree } from '../../core/tree.js';
import type { AdvantagedTrajectory } from '../types.js';
import { drGrpoAdvantages, grpoAdvantages, mcGrpoAdvantages, rlooAdvantages } from './group.js';
import { nodeValues, treeLeafAdvantages, whitenTokenAdvantages, whitenTokenWeighted } from './tree.js';
import { turnAdvantages } from './turn.js';
import { applyShaping, shapingSchema, type ShapingInputs } from './shaping.js';

export * from './group.js';
export * from './shaping.js';
export * from './tree.js';
export * from './turn.js';

export const advantageOptionsSchema = z
  .object({
    kind: z
      .enum(['grpo', 'dr_grpo', 'rloo', 'mc_grpo', 'tree', 'fork', 'turn_grpo'])
      .default('grpo')
      .describe(
        "advantage estimator (fork: PORTool fork-relative + trajectory GRPO per turn; turn_grpo: GRPO over each turn's siblings)",
      ),
    weighting: z.enum(['average', 'group_size']).default('average').describe('tree: how sub-group terms are combined'),
    level: z
      .enum(['trajectory', 'segment'])
      .default('trajectory')
      .describe('tree: one scalar per trajectory, or per-segment value differences'),
    whiten: z.boolean().default(true).describe('tree: whiten over all policy tokens of the batch'),
    forkWeight: z
      .number()
      .min(0)
      .max(1)
      .default(0.5)
      .describe('fork: weight w of the fork advantage in w·fork + (1 − w)·trajectory GRPO'),
    forkStd: z
      .boolean()
      .default(false)
      .describe("fork: divide a fork's centred child values by their std (GRPO-style) instead of centring only"),
    onlyChild: z
      .enum(['inherit', 'zero'])
      .default('inherit')
      .describe("fork: an only child's fork advantage: its parent's (inherit; 0 when no ancestor forks) or 0"),
    turnWhiten: z
      .boolean()
      .default(false)
      .describe('fork/turn_grpo: whiten the token advantages over all policy tokens of the batch'),
    negativeScale: z
      .number()
      .min(0)
      .max(100)
      .default(1)
      .describe(
        'multiply negative advantages by this factor (1 = unchanged; < 1 favours reinforcing successes over suppressing failures)',
      ),
    shaping: shapingSchema,
  })
  .strict();
export type AdvantageOptions = z.infer<typeof advantageOptionsSchema>;
/** What a caller may pass: every field optional, shaping terms with their own defaults. */
export type AdvantageOptionsInput = z.input<typeof advantageOptionsSchema>;

export function advantagesFromConfig(spec: unknown): AdvantageOptions {
  const parsed = advantageOptionsSchema.safeParse(spec ?? {});
  if (!parsed.success) {
    throw configErrorFromIssue('optimize.advantage', parsed.error.issues[0]);
  }
  return parsed.data;
}

/** `inputs`: the sequence log-probs the `ace` shaping term reads (`shapingInputs`); unused otherwise. */
export function computeAdvantages(
  trees: RolloutTree[],
  spec: AdvantageOptionsInput = {},
  inputs: ShapingInputs = {},
): AdvantagedTrajectory[] {
  const o = advantagesFromConfig(spec);
  const out = rawAdvantages(trees, o);
  if (o.negativeScale !== 1) {
    for (const a of out) {
      if (a.advantage < 0) a.advantage *= o.negativeScale;
      if (a.tokenAdvantages) a.tokenAdvantages = a.tokenAdvantages.map((v) => (v < 0 ? v * o.negativeScale : v));
    }
  }
  if (o.shaping.length) applyShaping(trees, out, o.shaping, inputs);
  return out;
}

function rawAdvantages(trees: RolloutTree[], o: AdvantageOptions): AdvantagedTrajectory[] {
  const out: AdvantagedTrajectory[] = [];
  if (o.kind === 'tree') return treeAdvantages(trees, o);
  if (o.kind === 'fork' || o.kind === 'turn_grpo') return turnAdvantages(trees, { ...o, kind: o.kind });
  for (const tree of trees) {
    const ls = leaves(tree);
    const rewards = ls.map((l) => l.reward ?? 0);
    let adv: number[];
    let pivot = -1;
    if (o.kind === 'grpo') adv = grpoAdvantages(rewards);
    else if (o.kind === 'dr_grpo') adv = drGrpoAdvantages(rewards);
    else if (o.kind === 'rloo') adv = rlooAdvantages(rewards);
    else ({ advantages: adv, pivot } = mcGrpoAdvantages(rewards));
    ls.forEach((l, i) => out.push({ trajectory: trajectory(tree, l.id), advantage: adv[i], excluded: i === pivot }));
  }
  return out;
}

function treeAdvantages(trees: RolloutTree[], o: AdvantageOptions): AdvantagedTrajectory[] {
  const out: AdvantagedTrajectory[] = [];
  if (o.level === 'trajectory') {
    for (const tree of trees) {
      const adv = treeLeafAdvantages(tree, o.weighting);
      for (const l of leaves(tree))
        out.push({ trajectory: trajectory(tree, l.id), advantage: adv.get(l.id)!, excluded: false });
    }
    if (o.whiten) {
      const tokens = out.map((a) => a.trajectory.mask.reduce((s, m) => s + m, 0));
      const white = whitenTokenWeighted(
        out.map((a) => a.advantage),
        tokens,
      );
      out.forEach((a, i) => (a.advantage = white[i]));
    }
    return out;
  }
  // segment level: value(node) − value(parent) on each segment's tokens
  for (const tree of trees) {
    const values = nodeValues(tree);
    for (const l of leaves(tree)) {
      const tr = trajectory(tree, l.id);
      const tokenAdvantages: number[] = [];
      for (const id of tr.nodeIds.slice(1)) {
        const node = tree.nodes[id];
        const a = values.get(id)! - values.get(node.parent!)!;
        for (let t = 0; t < node.tokens.length; t++) tokenAdvantages.push(a);
      }
      out.push({ trajectory: tr, advantage: 0, tokenAdvantages, excluded: false });
    }
  }
  if (o.whiten) whitenTokenAdvantages(out);
  return out;
}
