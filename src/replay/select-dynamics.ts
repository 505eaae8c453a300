/**
 * Selection by training dynamics (`arbor select`): rank a dataset's items by how their
 * reward moved during a short run and keep a subset. Input: a run directory's logged trees
 * (`trees/step-N.jsonl`; set `run.logTreesEvery: 1` for a selection run). An item's reward at a step
 * is the mean reward of its leaves there (hinted trees and unscored leaves left out). Its curve is
 * binned by visit (k-th time the item was drawn ≈ epoch k, the default) or by `stepsPerBin` steps.
 *
 * - `limr` (LIMR, Li et al., arXiv 2502.11886; GAIR-NLP/LIMR lim/lim_selection.py @ ca90156307cb5e55ec8e4ccaf6ab607cb09b51fa):
 *   the run's learning curve r̄_k is the mean over items of their reward at bin k; item i scores
 *   s_i = 1 − Σ_k (r_ik − r̄_k)² / Σ_k (R − r̄_k)², R = the maximum reward (1 in their code, where the
 *   reward is an accuracy in [0, 1]). As in their code a missing bin takes the next bin's value and
 *   items still missing a bin among the first K are left unscored; K is the median number of bins
 *   an item has (their max_epochs) unless given. Kept: score ≥ threshold (0.6 in their lim.sh; the
 *   script's own default is 0.2), or the top k.
 * - `s2l` (SmallToLarge, Yang et al., arXiv 2403.07384, Algorithm 1; BigML-CS-UCLA/S2L): k-means over
 *   the items' trajectories (theirs: a small proxy model's per-checkpoint losses; ours: the per-bin
 *   rewards), then balanced sampling: clusters in ascending size, each gives
 *   min(|C_j|, ⌊(B − |S|)/(K − j)⌋) items drawn at random, so small clusters are kept whole and the
 *   budget B is spread evenly over the rest. k-means++ seeding and every draw use a seeded Rng.
 *   An s2l item's score is its mean reward over the curve (reported, not used to choose).
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { configErrorFromIssue, ConfigError } from '../core/errors.js';
import { Rng } from '../core/rng.js';
import { leaves, treeFromJSON, type RolloutTree } from '../core/tree.js';
import { treeFiles } from './export.js';

export const dynamicsSelectSchema = z
  .object({
    method: z
      .enum(['limr', 's2l'])
      .default('limr')
      .describe("limr: alignment with the run's learning curve; s2l: k-means over reward curves, balanced sampling"),
    top: z
      .number()
      .int()
      .min(0)
      .max(100_000_000)
      .default(0)
      .describe('keep this many items (limr: the best scores; s2l: the budget, required); 0 = use threshold'),
    threshold: z
      .number()
      .min(-1e9)
      .max(1e9)
      .default(0.6)
      .describe('limr: keep items scoring ≥ this (LIMR lim.sh: 0.6) when top is 0'),
    clusters: z.number().int().min(1).max(100_000).default(10).describe('s2l: number of k-means clusters'),
    iterations: z.number().int().min(1).max(10_000).default(100).describe('s2l: most k-means (Lloyd) iterations'),
    seed: z
      .number()
      .int()
      .min(0)
      .max(2 ** 32 - 1)
      .default(0)
      .describe('s2l: seed of the k-means++ init and the per-cluster draws'),
    stepsPerBin: z
      .number()
      .int()
      .min(0)
      .max(10_000_000)
      .default(0)
      .describe('bin the curves by this many steps (0 = by visit: the k-th time an item was drawn is bin k)'),
    bins: z
      .number()
      .int()
      .min(0)
      .max(1_000_000)
      .default(0)
      .describe('curve length K (0 = the median number of bins an item has); items missing a bin are left unscored'),
    maxReward: z
      .number()
      .min(-1e9)
      .max(1e9)
      .default(1)
      .describe('limr: the best reward R in the normaliser Σ (R − r̄_k)²'),
  })
  .strict();
export type DynamicsSelectOptions = z.infer<typeof dynamicsSelectSchema>;

export function dynamicsSelectFromConfig(spec: unknown): DynamicsSelectOptions {
  const parsed = dynamicsSelectSchema.safeParse(spec ?? {});
  if (!parsed.success) throw configErrorFromIssue('select', parsed.error.issues[0]);
  if (parsed.data.method === 's2l' && parsed.data.top === 0)
    throw new ConfigError('select.top: s2l needs a budget (--top K)', 'select.top');
  return parsed.data;
}

/** One item's reward at each step it was seen, in step order. */
export type RewardCurves = Map<string, Array<{ step: number; reward: number }>>;

/** Mean leaf reward of each item in one step's trees (hinted trees and unscored leaves left out). */
export function stepItemRewards(trees: RolloutTree[]): Map<string, number> {
  const acc = new Map<string, { sum: number; n: number }>();
  for (const tree of trees) {
    if (tree.meta?.hint !== undefined) continue;
    for (const leaf of leaves(tree)) {
      if (leaf.reward === undefined || !Number.isFinite(leaf.reward)) continue;
      const a = acc.get(tree.itemId) ?? { sum: 0, n: 0 };
      a.sum += leaf.reward;
      a.n++;
      acc.set(tree.itemId, a);
    }
  }
  return new Map([...acc].map(([id, a]) => [id, a.sum / a.n]));
}

/** Reward curves of every item from a run directory's `trees/step-N.jsonl`. */
export function readRewardCurves(runDir: string): { curves: RewardCurves; files: number; trees: number } {
  const files = treeFiles(runDir);
  const curves: RewardCurves = new Map();
  let count = 0;
  for (const { step, file } of files) {
    const trees = readFileSync(file, 'utf8')
      .split('\n')
      .flatMap((line, i) => (line.trim() ? [treeFromJSON(line, `${file}:${i + 1}`)] : []));
    count += trees.length;
    for (const [id, reward] of stepItemRewards(trees)) {
      const c = curves.get(id) ?? [];
      c.push({ step, reward });
      curves.set(id, c);
    }
  }
  return { curves, files: files.length, trees: count };
}

/** Bin each curve: by visit (stepsPerBin 0) or by steps (bin = ⌊(step − first step) / stepsPerBin⌋, mean within a bin). */
export function binCurves(curves: RewardCurves, stepsPerBin = 0): Map<string, Array<number | undefined>> {
  let first = Infinity;
  for (const c of curves.values()) for (const p of c) first = Math.min(first, p.step);
  const out = new Map<string, Array<number | undefined>>();
  for (const [id, c] of curves) {
    const sorted = [...c].sort((a, b) => a.step - b.step);
    if (stepsPerBin <= 0) {
      out.set(
        id,
        sorted.map((p) => p.reward),
      );
      continue;
    }
    const sums: number[] = [];
    const ns: number[] = [];
    for (const p of sorted) {
      const b = Math.floor((p.step - first) / stepsPerBin);
      sums[b] = (sums[b] ?? 0) + p.reward;
      ns[b] = (ns[b] ?? 0) + 1;
    }
    out.set(
      id,
      Array.from({ length: sums.length }, (_, b) => (ns[b] ? sums[b] / ns[b] : undefined)),
    );
  }
  return out;
}

/** Aligned curves of length K (LIMR's gap rule: a missing bin takes the next bin's value); items still missing one are dropped. */
export function alignCurves(
  binned: Map<string, Array<number | undefined>>,
  bins = 0,
): { ids: string[]; rows: number[][]; dropped: string[]; bins: number } {
  const lengths = [...binned.values()].map((c) => c.length).sort((a, b) => a - b);
  const K = bins > 0 ? bins : lengths.length ? lengths[Math.floor((lengths.length - 1) / 2)] : 0;
  const ids: string[] = [];
  const rows: number[][] = [];
  const dropped: string[] = [];
  for (const id of [...binned.keys()].sort()) {
    const c = binned.get(id)!.slice(0, K);
    for (let k = c.length - 2; k >= 0; k--) if (c[k] === undefined) c[k] = c[k + 1];
    if (K === 0 || c.length < K || c.some((v) => v === undefined)) dropped.push(id);
    else {
      ids.push(id);
      rows.push(c as number[]);
    }
  }
  return { ids, rows, dropped, bins: K };
}

/** The run's learning curve: the mean over items at each bin. */
export function learningCurve(rows: number[][]): number[] {
  if (!rows.length) return [];
  return rows[0].map((_, k) => rows.reduce((s, r) => s + r[k], 0) / rows.length);
}

/** LIMR alignment scores 1 − Σ (r − r̄)² / Σ (R − r̄)² (a zero normaliser, r̄ ≡ R, counts as 1e-12). */
export function limrScores(rows: number[][], maxReward = 1): number[] {
  const base = learningCurve(rows);
  const den = Math.max(
    base.reduce((s, b) => s + (maxReward - b) ** 2, 0),
    1e-12,
  );
  return rows.map((r) => 1 - r.reduce((s, v, k) => s + (v - base[k]) ** 2, 0) / den);
}

const dist2 = (a: number[], b: number[]) => a.reduce((s, v, i) => s + (v - b[i]) ** 2, 0);

/** k-means++ seeding (Arthur & Vassilvitskii 2007): fewer centres when the points have fewer distinct values. */
function seedCentres(rows: number[][], k: number, rng: Rng): number[][] {
  const centres = [rows[rng.int(rows.length)].slice()];
  const d = rows.map((r) => dist2(r, centres[0]));
  while (centres.length < k) {
    const total = d.reduce((a, b) => a + b, 0);
    if (total <= 0) break;
    let u = rng.next() * total;
    let pick = d.length - 1;
    for (let i = 0; i < d.length; i++) {
      u -= d[i];
      if (u < 0 && d[i] > 0) {
        pick = i;
        break;
      }
    }
    const c = rows[pick].slice();
    centres.push(c);
    rows.forEach((r, i) => (d[i] = Math.min(d[i], dist2(r, c))));
  }
  return centres;
}

/** Seeded k-means (k-means++ init, Lloyd iterations until no point moves); ties go to the lower cluster. */
export function kMeans(
  rows: number[][],
  k: number,
  rng: Rng,
  maxIterations = 100,
): { assign: number[]; centres: number[][]; iterations: number } {
  if (!rows.length) return { assign: [], centres: [], iterations: 0 };
  const centres = seedCentres(rows, Math.min(k, rows.length), rng);
  const assign = rows.map(() => -1);
  let it = 0;
  for (; it < maxIterations; it++) {
    let moved = false;
    rows.forEach((r, i) => {
      let best = 0;
      let bestD = dist2(r, centres[0]);
      for (let c = 1; c < centres.length; c++) {
        const dc = dist2(r, centres[c]);
        if (dc < bestD) {
          best = c;
          bestD = dc;
        }
      }
      if (best !== assign[i]) {
        assign[i] = best;
        moved = true;
      }
    });
    if (!moved) break;
    const sums = centres.map((c) => c.map(() => 0));
    const counts = centres.map(() => 0);
    rows.forEach((r, i) => (counts[assign[i]]++, r.forEach((v, d) => (sums[assign[i]][d] += v))));
    centres.forEach((c, j) => counts[j] && c.forEach((_, d) => (c[d] = sums[j][d] / counts[j])));
  }
  return { assign, centres, iterations: it };
}

/** S2L balanced sampling: clusters in ascending size (ties: lower index), each gives min(|C_j|, ⌊(B − |S|)/(K − j)⌋) random members. */
export function s2lSample(assign: number[], budget: number, rng: Rng): number[] {
  const clusters = new Map<number, number[]>();
  assign.forEach((c, i) => clusters.set(c, [...(clusters.get(c) ?? []), i]));
  const order = [...clusters.entries()].sort((a, b) => a[1].length - b[1].length || a[0] - b[0]);
  const chosen: number[] = [];
  order.forEach(([, members], j) => {
    const take = Math.min(members.length, Math.floor((budget - chosen.length) / (order.length - j)));
    chosen.push(...rng.shuffle(members.slice()).slice(0, take));
  });
  return chosen.sort((a, b) => a - b);
}

export interface RankedItem {
  id: string;
  score: number;
  chosen: boolean;
  /** s2l: the item's cluster. */
  cluster?: number;
  /** The item's aligned curve. */
  curve: number[];
}

export interface DynamicsSelection {
  /** Scored items, best score first (ties: id order). */
  ranked: RankedItem[];
  /** Items left unscored (a bin missing). */
  dropped: string[];
  /** The run's learning curve r̄_k and its length K. */
  baseline: number[];
  bins: number;
  /** s2l: cluster sizes by cluster index. */
  clusterSizes?: number[];
}

/** Score and choose items from their reward curves. */
export function selectByDynamics(curves: RewardCurves, spec: Partial<DynamicsSelectOptions> = {}): DynamicsSelection {
  const o = dynamicsSelectFromConfig(spec);
  const { ids, rows, dropped, bins } = alignCurves(binCurves(curves, o.stepsPerBin), o.bins);
  const baseline = learningCurve(rows);
  let items: RankedItem[];
  let clusterSizes: number[] | undefined;
  if (o.method === 'limr') {
    const scores = limrScores(rows, o.maxReward);
    items = ids.map((id, i) => ({ id, score: scores[i], chosen: false, curve: rows[i] }));
  } else {
    const rng = new Rng(o.seed).fork('s2l');
    const { assign, centres } = kMeans(rows, o.clusters, rng.fork('kmeans'), o.iterations);
    const picked = new Set(s2lSample(assign, o.top, rng.fork('sample')));
    clusterSizes = centres.map((_, c) => assign.filter((a) => a === c).length);
    items = ids.map((id, i) => ({
      id,
      score: rows[i].reduce((a, b) => a + b, 0) / rows[i].length,
      chosen: picked.has(i),
      cluster: assign[i],
      curve: rows[i],
    }));
  }
  items.sort((a, b) => b.score - a.score || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  if (o.method === 'limr') items.forEach((it, r) => (it.chosen = o.top > 0 ? r < o.top : it.score >= o.threshold));
  return { ranked: items, dropped, baseline, bins, clusterSizes };
}

/** Counts of `values` in `n` equal-width bins over [min, max] (the last bin closed). */
export function histogram(values: number[], n = 10): { lo: number; hi: number; counts: number[] } {
  if (!values.length) return { lo: 0, hi: 0, counts: new Array(n).fill(0) };
  const lo = values.reduce((a, b) => Math.min(a, b), Infinity);
  const hi = values.reduce((a, b) => Math.max(a, b), -Infinity);
  const counts = new Array(n).fill(0);
  for (const v of values) counts[hi > lo ? Math.min(n - 1, Math.floor(((v - lo) / (hi - lo)) * n)) : 0]++;
  return { lo, hi, counts };
}
