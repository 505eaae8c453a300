/**
 * Online pruning (ARRoL, arXiv 2603.24840 §4 Eq. 2; code unreleased, constants from a secondary
 * summary): after `atRound` TreePO rounds, the quality head scores each continuing path and the raw
 * score is calibrated to q_i (online histogram with Laplace smoothing, control/quality-head.ts, when
 * `calibrate`); each path is kept with probability p_i = clip(κ + δ + λ(ρ − q_i), 0.1, 0.9). With
 * `delta: group` δ is found by bisection per group so that the mean keep probability is κ (per-group
 * δ is our reading; the spec marks it [U]); with `delta: fixed` δ = 0, so a group the head is
 * confident about keeps more or fewer paths than κ. At least `minKeep` paths of a group survive (the
 * likeliest kept). A pruned path's leaf slots are freed: the group ends with fewer leaves and decodes
 * fewer tokens, which is where the saving comes from. Until the quality head has seen
 * `qualityHead.warmup` examples nothing is pruned.
 */
import { z } from 'zod';
import type { Rng } from '../core/rng.js';

export const pruneOptionsSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('none').describe('no online pruning') }).strict(),
  z
    .object({
      kind: z
        .literal('arrol')
        .describe(
          'ARRoL: prune partial TreePO paths to keep each group correctness-balanced (needs generate.kind treepo)',
        ),
      atRound: z
        .number()
        .int()
        .min(0)
        .max(1000)
        .default(1)
        .describe('prune after this TreePO round (0 = after the first segment)'),
      keep: z.number().gt(0).lt(1).default(0.5).describe('κ: mean keep probability'),
      target: z.number().min(0).max(1).default(0.5).describe('ρ: target share of successful paths'),
      strength: z
        .number()
        .min(0)
        .max(10)
        .default(0.5)
        .describe('λ: how strongly the prediction moves the keep probability'),
      minKeep: z.number().int().min(1).max(1024).default(2).describe('paths of a group that always survive'),
      delta: z
        .enum(['group', 'fixed'])
        .default('group')
        .describe(
          'δ: group = bisection per group so the mean keep probability is κ; fixed = 0, so a group the head is ' +
            'confident about keeps more or fewer paths',
        ),
      calibrate: z
        .boolean()
        .default(true)
        .describe("use the head's score calibrated by an online histogram (Laplace) instead of the raw score"),
      calibrationBins: z
        .number()
        .int()
        .min(2)
        .max(4096)
        .default(128)
        .describe('equal-width bins of the calibration histogram over the raw score in [0, 1]'),
    })
    .strict(),
]);
export type PruneOptions = z.infer<typeof pruneOptionsSchema>;
export type ArrolOptions = Extract<PruneOptions, { kind: 'arrol' }>;

/** p_i = clip(κ + δ + λ(ρ − q_i), 0.1, 0.9), δ such that mean p_i = κ (bisection; `group`) or δ = 0 (`fixed`). */
export function keepProbabilities(
  q: number[],
  o: Pick<ArrolOptions, 'keep' | 'target' | 'strength' | 'delta'>,
): number[] {
  const at = (delta: number) =>
    q.map((qi) => Math.min(0.9, Math.max(0.1, o.keep + delta + o.strength * (o.target - qi))));
  if (o.delta === 'fixed') return at(0);
  const meanAt = (delta: number) => at(delta).reduce((a, c) => a + c, 0) / Math.max(1, q.length);
  let lo = -2;
  let hi = 2;
  for (let i = 0; i < 60; i++) {
    const mid = (lo + hi) / 2;
    if (meanAt(mid) < o.keep) lo = mid;
    else hi = mid;
  }
  return at((lo + hi) / 2);
}

/** Which paths survive: a Bernoulli draw per path, then the likeliest-kept are restored up to minKeep. */
export function choosePruned(q: number[], o: ArrolOptions, rng: Rng): boolean[] {
  const p = keepProbabilities(q, o);
  const kept = p.map((pi) => rng.next() < pi);
  const order = p.map((pi, i) => [pi, i] as const).sort((a, b) => b[0] - a[0] || a[1] - b[1]);
  let count = kept.filter(Boolean).length;
  for (const [, i] of order) {
    if (count >= Math.min(o.minKeep, q.length)) break;
    if (!kept[i]) {
      kept[i] = true;
      count++;
    }
  }
  return kept.map((k) => !k);
}
