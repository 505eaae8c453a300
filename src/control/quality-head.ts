/**
 * A quality head: an online predictor of p(success | partial rollout), shared by value-guided TreePO
 * (TRACE anchors, TreePO's value-driven split) and ARRoL's online pruning. Our own design (TRACE's
 * predictor and ARRoL's head are unreleased; the spec marks them [U]): logistic regression, trained
 * with Adam on binary cross-entropy (plus an L2 penalty on the weights), on
 * - six statistics any engine can give: mean, minimum and last sampling log-prob of the response so
 *   far, mean entropy (0 when the sampler reports none), response length / maxResponseTokens, and
 *   the prompt's success posterior mean (control/prompt-stats.ts: the history of the same prompt);
 * - on the embedded engine (`hidden: true`, samplers with `capabilities.hiddenSize`), also the
 *   model's last hidden state at the node's end (`TreeNode.hidden`: the final-norm activation its
 *   last token was sampled from), so the head reads what the policy itself represents there, reduced
 *   to `hiddenDims` entries by a fixed random Gaussian projection (Johnson–Lindenstrauss; fewer
 *   weights to learn online: on the control bench's data 16 dimensions predicted better than all 96);
 * all standardised with running means and variances. Examples: every non-root node of the step's
 * complete trees, labelled with the share of correct leaves below it. Calibration (AUC, Brier) is
 * measured on each step's new nodes BEFORE the head trains on them, so it is out-of-sample. The whole
 * state is plain JSON in ControlState, saved with the run. It may carry ARRoL's histogram calibrator
 * (`calibration`: per equal-width bin of the raw score, the sum of labels and the count; calibrated
 * q = (sum + 1) / (count + 2), Laplace); a state saved before it existed has none and gets a fresh one.
 */
import { z } from 'zod';
import { hasError, isComplete, pathTo, ROOT_ID, treeHint, type RolloutTree } from '../core/tree.js';
import { Rng } from '../core/rng.js';
import { correctness, isCorrect } from '../filter/constants.js';

export const qualityHeadSchema = z
  .object({
    warmup: z
      .number()
      .int()
      .min(0)
      .max(1_000_000)
      .default(64)
      .describe('examples the head must have seen before its predictions are used (value allocation, pruning)'),
    learningRate: z
      .number()
      .positive()
      .max(10)
      .default(0.001)
      .describe('Adam learning rate of the head (one Adam step per example)'),
    epochs: z.number().int().min(1).max(100).default(3).describe("passes over each step's new examples"),
    hidden: z
      .boolean()
      .default(true)
      .describe(
        "add the embedded engine's last hidden state at each node's end to the features (ignored by samplers " +
          'that cannot return it: remote engines use the log-prob/entropy statistics only)',
      ),
    hiddenDims: z
      .number()
      .int()
      .min(0)
      .max(4096)
      .default(16)
      .describe('hidden-state features after a fixed random projection (0 = every entry of the hidden state)'),
    l2: z.number().min(0).max(10).default(0.001).describe("L2 penalty on the head's weights (per example)"),
  })
  .strict();
export type QualityHeadOptions = z.infer<typeof qualityHeadSchema>;

/** The engine-independent statistics; the hidden state's entries follow them. */
export const BASE_FEATURES = 6;

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
  /** ARRoL's online histogram calibrator of the raw score (absent in heads saved before it existed). */
  calibration?: Calibrator;
}

/** Equal-width bins over the raw score in [0, 1]: the sum of the labels and the count in each. */
export interface Calibrator {
  sums: number[];
  counts: number[];
}

/** A calibrator with `bins` empty bins: every score calibrates to the Laplace prior ½. */
export function freshCalibrator(bins: number): Calibrator {
  if (!Number.isInteger(bins) || bins < 1) throw new Error(`quality head: a calibrator needs ≥ 1 bins, got ${bins}`);
  return { sums: new Array(bins).fill(0), counts: new Array(bins).fill(0) };
}

/** The bin of a raw score (scores outside [0, 1] fall in the end bins). */
export function calibrationBin(c: Calibrator, raw: number): number {
  const bins = c.counts.length;
  return Math.min(bins - 1, Math.max(0, Math.floor(raw * bins)));
}

/** Calibrated success probability of a raw score: (sum_b + 1) / (n_b + 2) in its bin b. */
export function calibrated(c: Calibrator, raw: number): number {
  const b = calibrationBin(c, raw);
  return (c.sums[b] + 1) / (c.counts[b] + 2);
}

/** Add (raw score, label) pairs; fractional labels in [0, 1] add to the bin's sum as they are. */
export function feedCalibrator(c: Calibrator, scores: number[], labels: number[]): void {
  if (scores.length !== labels.length)
    throw new Error(`quality head: ${scores.length} scores for ${labels.length} labels in the calibrator`);
  scores.forEach((raw, i) => {
    const b = calibrationBin(c, raw);
    c.sums[b] += labels[i];
    c.counts[b]++;
  });
}

/** Examples a calibrator has seen. */
export function calibrationExamples(c: Calibrator): number {
  return c.counts.reduce((a, n) => a + n, 0);
}

/** A head over `BASE_FEATURES + hiddenWidth` features, all weights zero. */
export function freshHead(hiddenWidth = 0): QualityHeadState {
  const d = BASE_FEATURES + hiddenWidth;
  const zeros = (n: number) => new Array(n).fill(0);
  return { w: zeros(d), b: 0, m: zeros(d + 1), v: zeros(d + 1), t: 0, mean: zeros(d), m2: zeros(d), examples: 0 };
}

/** Hidden-state features a head reads (its width less the base statistics). */
export function headHiddenWidth(s: QualityHeadState): number {
  return s.w.length - BASE_FEATURES;
}

/** How a node's hidden state (`size` entries) becomes `width` features. */
export interface HiddenFeatures {
  size: number;
  width: number;
  /** The features of one state; zeros for a node without one. */
  map(hidden: number[] | undefined): number[];
}

/** Seed of the projection: fixed, so a saved head reads the same features in every run and resume. */
const PROJECTION_SEED = 0x41d;

/** Every entry (dims 0 or ≥ size), or a fixed Gaussian projection P[k][i] ~ N(0, 1/dims). */
export function hiddenFeatures(size: number, dims: number): HiddenFeatures {
  if (dims <= 0 || dims >= size) return { size, width: size, map: (h) => (h ? h.slice() : new Array(size).fill(0)) };
  const rng = new Rng(PROJECTION_SEED);
  const P = Array.from({ length: dims }, () => Array.from({ length: size }, () => rng.normal() / Math.sqrt(dims)));
  return { size, width: dims, map: (h) => P.map((row) => (h ? row.reduce((a, w, i) => a + w * h[i], 0) : 0)) };
}

/**
 * The raw features of the path from the root to `nodeId`: the base statistics, then (with `hidden`)
 * the node's hidden-state features, zeros when the node has none (e.g. a segment continued on
 * another engine).
 */
export function nodeFeatures(
  tree: RolloutTree,
  nodeId: string,
  maxResponseTokens: number,
  promptPrior: number,
  hidden?: HiddenFeatures,
): number[] {
  const lp: number[] = [];
  const ent: number[] = [];
  for (const n of pathTo(tree, nodeId).slice(1)) {
    n.logprobs.forEach((x, i) => n.mask[i] && lp.push(x));
    if (n.entropies) n.entropies.forEach((x, i) => n.mask[i] && ent.push(x));
  }
  const mean = (xs: number[]) => (xs.length ? xs.reduce((a, c) => a + c, 0) / xs.length : 0);
  const base = [
    mean(lp),
    lp.length ? Math.min(...lp) : 0,
    lp.length ? lp[lp.length - 1] : 0,
    mean(ent),
    lp.length / Math.max(1, maxResponseTokens),
    promptPrior,
  ];
  if (!hidden) return base;
  const h = tree.nodes[nodeId].hidden;
  if (h && h.length !== hidden.size)
    throw new Error(
      `quality head: node ${nodeId} of tree ${tree.id} has a hidden state of ${h.length} entries, the head reads ${hidden.size}`,
    );
  return base.concat(hidden.map(h));
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

/** Add examples to the normaliser, then `epochs` Adam passes of BCE (+ l2·|w|²/2) over them (in order: deterministic). */
export function train(
  s: QualityHeadState,
  xs: number[][],
  ys: number[],
  options: Pick<QualityHeadOptions, 'learningRate' | 'epochs' | 'l2'>,
): void {
  const d = s.w.length;
  for (const x of xs)
    if (x.length !== d) throw new Error(`quality head: an example has ${x.length} features, the head reads ${d}`);
  for (const x of xs) {
    s.examples++;
    x.forEach((v, i) => {
      const d = v - s.mean[i];
      s.mean[i] += d / s.examples;
      s.m2[i] += d * (v - s.mean[i]);
    });
  }
  const { learningRate: lr, l2 } = options;
  const [b1, b2, eps] = [0.9, 0.999, 1e-8];
  for (let e = 0; e < options.epochs; e++) {
    xs.forEach((x, k) => {
      const z = standardise(s, x);
      const err = sigmoid(z.reduce((a, v, i) => a + v * s.w[i], s.b)) - ys[k];
      const grad = [...z.map((v, i) => err * v + l2 * s.w[i]), err];
      s.t++;
      grad.forEach((g, i) => {
        s.m[i] = b1 * s.m[i] + (1 - b1) * g;
        s.v[i] = b2 * s.v[i] + (1 - b2) * g * g;
        const step = (lr * (s.m[i] / (1 - b1 ** s.t))) / (Math.sqrt(s.v[i] / (1 - b2 ** s.t)) + eps);
        if (i < d) s.w[i] -= step;
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
  walk(ROOT_ID);
  return out;
}
