/**
 * A quality head: an online predictor of p(success | partial rollout), shared by value-guided TreePO
 * (TRACE anchors, TreePO's value-driven split) and ARRoL's online pruning. Our own design (TRACE's
 * predictor and ARRoL's head are unreleased; the spec marks them [U]): logistic regression, trained
 * with Adam on binary cross-entropy, on features any engine can give —
 *   mean, minimum and last sampling log-prob of the response so far, mean entropy (0 when the sampler
 *   reports none), response length / maxResponseTokens, and the prompt's success posterior mean
 *   (control/prompt-stats.ts: the history of the same prompt, the strongest cue on a fixed pool) —
 * standardised with running means and variances. Examples: every non-root node of the step's
 * complete trees, labelled with the share of correct leaves below it. Calibration (AUC, Brier) is
 * measured on each step's new nodes BEFORE the head trains on them, so it is out-of-sample. The whole
 * state is plain JSON in ControlState, saved with the run. The embedded engine's hidden state is not
 * used as a feature (see README: what fell short).
 */
import { z } from 'zod';
import { hasError, isComplete, pathTo, treeHint, type RolloutTree } from '../core/tree.js';
import { correctness, isCorrect } from '../filter/constants.js';

export const qualityHeadSchema = z
  .object({
    warmup: z.number().int().min(0).max(1_000_000).default(64).describe('examples the head must have seen before its predictions are used (value allocation, pruning)'),
    learningRate: z.number().positive().max(10).default(0.05).describe('Adam learning rate of the head'),
    epochs: z.number().int().min(1).max(100).default(3).describe('passes over each step\'s new examples'),
  })
  .strict();
export type QualityHeadOptions = z.infer<typeof qualityHeadSchema>;

export const FEATURES = 6;

export interface QualityHeadState {
  w: number[];
  b: number;
  /** Adam moments of [w..., b] and the step count. */
  m: number[];
  v: number[];
  t: number;
  /** Running feature means and sums of squared deviations (Welford), and the examples seen. */
  mean: number[];
  m2: number[];
  examples: number;
}

export function freshHead(): QualityHeadState {
  return { w: new Array(FEATURES).fill(0), b: 0, m: new Array(FEATURES + 1).fill(0), v: new Array(FEATURES + 1).fill(0), t: 0, mean: new Array(FEATURES).fill(0), m2: new Array(FEATURES).fill(0), examples: 0 };
}

/** The raw features of the path from the root to `nodeId`. */
export function nodeFeatures(tree: RolloutTree, nodeId: string, maxResponseTokens: number, promptPrior: number): number[] {
  const lp: number[] = [];
  const ent: number[] = [];
  for (const n of pathTo(tree, nodeId).slice(1)) {
    n.logprobs.forEach((x, i) => n.mask[i] && lp.push(x));
    if (n.entropies) n.entropies.forEach((x, i) => n.mask[i] && ent.push(x));
  }
  const mean = (xs: number[]) => (xs.length ? xs.reduce((a, c) => a + c, 0) / xs.length : 0);
  return [mean(lp), lp.length ? Math.min(...lp) : 0, lp.length ? lp[lp.length - 1] : 0, mean(ent), lp.length / Math.max(1, maxResponseTokens), promptPrior];
}

function standardise(s: QualityHeadState, x: number[]): number[] {
  return x.map((v, i) => {
    const sd = s.examples > 1 ? Math.sqrt(s.m2[i] / (s.examples - 1)) : 1;
    return sd > 1e-8 ? (v - s.mean[i]) / sd : 0;
  });
}

const sigmoid = (z: number) => 1 / (1 + Math.exp(-z));

export function predict(s: QualityHeadState, x: number[]): number {
  const z = standardise(s, x);
  return sigmoid(z.reduce((a, v, i) => a + v * s.w[i], s.b));
}

/** Add examples to the normaliser, then `epochs` Adam passes of BCE over them (in order: deterministic). */
export function train(s: QualityHeadState, xs: number[][], ys: number[], options: { learningRate?: number; epochs?: number } = {}): void {
  for (const x of xs) {
    s.examples++;
    x.forEach((v, i) => {
      const d = v - s.mean[i];
      s.mean[i] += d / s.examples;
      s.m2[i] += d * (v - s.mean[i]);
    });
  }
  const lr = options.learningRate ?? 0.05;
  const [b1, b2, eps] = [0.9, 0.999, 1e-8];
  for (let e = 0; e < (options.epochs ?? 3); e++) {
    xs.forEach((x, k) => {
      const z = standardise(s, x);
      const err = sigmoid(z.reduce((a, v, i) => a + v * s.w[i], s.b)) - ys[k];
      const grad = [...z.map((v) => err * v), err];
      s.t++;
      grad.forEach((g, i) => {
        s.m[i] = b1 * s.m[i] + (1 - b1) * g;
        s.v[i] = b2 * s.v[i] + (1 - b2) * g * g;
        const step = (lr * (s.m[i] / (1 - b1 ** s.t))) / (Math.sqrt(s.v[i] / (1 - b2 ** s.t)) + eps);
        if (i < FEATURES) s.w[i] -= step;
        else s.b -= step;
      });
    });
  }
}

/** Area under the ROC curve (Mann-Whitney; ties count ½), labels thresholded at 0.5; undefined without both classes. */
export function auc(scores: number[], labels: number[]): number | undefined {
  const pos = scores.filter((_, i) => labels[i] > 0.5);
  const neg = scores.filter((_, i) => labels[i] <= 0.5);
  if (!pos.length || !neg.length) return undefined;
  let wins = 0;
  for (const p of pos) for (const n of neg) wins += p > n ? 1 : p === n ? 0.5 : 0;
  return wins / (pos.length * neg.length);
}

/** Mean squared error of probabilities against labels. */
export function brier(scores: number[], labels: number[]): number | undefined {
  return scores.length ? scores.reduce((a, p, i) => a + (p - labels[i]) ** 2, 0) / scores.length : undefined;
}

/** Share of correct leaves below every non-root node of a complete, error-free, hint-free tree. */
export function nodeLabels(tree: RolloutTree): Map<string, number> {
  const out = new Map<string, number>();
  if (!isComplete(tree) || hasError(tree) || treeHint(tree)) return out;
  const walk = (id: string): [number, number] => {
    const n = tree.nodes[id];
    let correct = 0;
    let total = 0;
    if (!n.children.length) [correct, total] = [isCorrect(correctness(n)) ? 1 : 0, 1];
    for (const c of n.children) {
      const [a, b] = walk(c);
      correct += a;
      total += b;
    }
    if (n.parent !== null) out.set(id, correct / total);
    return [correct, total];
  };
  walk('0');
  return out;
}
