/**
 * Token losses of the Trainer interface on top of a forward pass: per-token loss ℓ_t from the target
 * log-prob lp_t (cross_entropy, importance_sampling, ppo with clip-low/high, dual clip and truncated
 * IS, gspo with a sequence-level ratio), plus optional k3 KL to reference log-probs and an entropy
 * bonus. Total = Σ_datums Σ_t weights[t]·ℓ_t. Writes d(total)/d(logits) into graph.dlogits
 * analytically: d lp_t / d z = onehot(target) − softmax(z) (graph.logitGradient, at once or by blocks of rows).
 */
import { NonFiniteLossError, NumericsError } from '../../core/errors.js';
import type { Datum, LossExtras, LossSpec } from '../types.js';
import type { TrainingGraph } from './forward.js';

export interface LossOutput {
  loss: number;
  logprobs: number[][];
  metrics: Record<string, number>;
}

/** Per-token policy objective pieces for ppo/IS, shared with tests. Returns [loss, dloss/dlp, clipped]. */
export function policyTokenLoss(
  loss: LossSpec,
  lp: number,
  behaviour: number,
  advantage: number,
): [number, number, boolean] {
  const ratio = Math.exp(lp - behaviour);
  const trunc = 'truncateAt' in loss && loss.truncateAt !== undefined ? Math.min(ratio, loss.truncateAt) / ratio : 1;
  if (loss.kind === 'importance_sampling') {
    // ℓ = −ρA (times a stop-gradient truncation factor min(ρ,C)/ρ); masked tokens count as clipped
    if (loss.maskAbove !== undefined && ratio > loss.maskAbove) return [0, 0, true];
    return [-ratio * advantage * trunc, -ratio * advantage * trunc, false];
  }
  if (loss.kind === 'ppo') {
    const clippedRatio = Math.min(Math.max(ratio, 1 - loss.clipLow), 1 + loss.clipHigh);
    const unclipped = ratio * advantage;
    const clipped = clippedRatio * advantage;
    let objective = Math.min(unclipped, clipped);
    let grad = unclipped <= clipped ? ratio * advantage : 0;
    let isClipped = unclipped > clipped;
    if (loss.dualClip !== undefined && advantage < 0 && loss.dualClip * advantage > objective) {
      objective = loss.dualClip * advantage;
      grad = 0;
      isClipped = true;
    }
    return [-objective * trunc, -grad * trunc, isClipped];
  }
  throw new Error(`policyTokenLoss: ${loss.kind} is not a token-level policy loss`);
}

export function computeLoss(graph: TrainingGraph, data: Datum[], loss: LossSpec, extras: LossExtras = {}): LossOutput {
  const coef = graph.rowCoef;
  const bonus = graph.rowBonus;
  const targets = graph.rowTargets;
  const klCoef = extras.klCoef ?? 0;
  const entropyCoef = extras.entropyCoef ?? 0;
  let total = 0;
  let weightSum = 0;
  let clippedWeight = 0;
  let klSum = 0;
  const logprobs: number[][] = [];
  // a head entry may serve several datums (a shared prefix, tree-packed): their terms add up
  const coefSum = new Float64Array(graph.entries);
  const bonusSum = new Float64Array(graph.entries);
  data.forEach((d, i) => {
    const T = d.inputTokens.length;
    const lps = new Array<number>(T);
    for (let t = 0; t < T; t++) lps[t] = graph.targetLogprob(graph.entry(i, t), d.targetTokens[t]);
    logprobs.push(lps);
    // d(total)/d(lp_t) per token
    const g = new Float64Array(T);
    if (loss.kind === 'cross_entropy') {
      for (let t = 0; t < T; t++) {
        if (d.weights[t] === 0) continue; // (its log-prob may be NaN: a head computed on weighted rows only)
        total -= d.weights[t] * lps[t];
        g[t] = -d.weights[t];
      }
    } else {
      const behaviour = d.samplingLogprobs;
      const adv = d.advantages;
      if (!behaviour || !adv)
        throw new NumericsError(`loss ${loss.kind}: datum ${i} lacks samplingLogprobs/advantages`);
      if (loss.kind === 'gspo') {
        gspoSequence(loss, lps, behaviour, adv, d.weights, g, (l, c) => {
          total += l;
          clippedWeight += c;
        });
      } else {
        for (let t = 0; t < T; t++) {
          const w = d.weights[t];
          if (w === 0) continue;
          const [l, dl, clipped] = policyTokenLoss(loss, lps[t], behaviour[t], adv[t]);
          total += w * l;
          g[t] = w * dl;
          if (clipped) clippedWeight += w;
        }
      }
      for (let t = 0; t < T; t++) {
        const w = d.weights[t];
        if (w === 0) continue;
        const r = lps[t] - behaviour[t];
        klSum += w * (Math.exp(r) - 1 - r);
      }
    }
    if (klCoef !== 0) {
      const ref = d.referenceLogprobs;
      if (!ref) throw new NumericsError(`klCoef > 0 but datum ${i} lacks referenceLogprobs`);
      for (let t = 0; t < T; t++) {
        const w = d.weights[t];
        if (w === 0) continue;
        const r = ref[t] - lps[t];
        total += klCoef * w * (Math.exp(r) - r - 1);
        g[t] += klCoef * w * (1 - Math.exp(r));
      }
    }
    for (let t = 0; t < T; t++) {
      const e = graph.entry(i, t);
      coefSum[e] += g[t];
      bonusSum[e] += entropyCoef * d.weights[t];
      targets[e] = d.targetTokens[t];
    }
  });
  coef.set(coefSum);
  bonus.set(bonusSum);
  // per row: entropy H and d(total)/d(logits) = g·(onehot − p) + c·w·p·(log p + H) (the bonus: loss −= c·w·H)
  graph.logitGradient();
  let entropySum = 0;
  data.forEach((d, i) => {
    for (let t = 0; t < d.inputTokens.length; t++) {
      const w = d.weights[t];
      const H = graph.rowEntropy[graph.entry(i, t)];
      weightSum += w;
      entropySum += w * H;
      if (entropyCoef !== 0) total -= entropyCoef * w * H;
    }
  });
  if (!Number.isFinite(total)) throw new NonFiniteLossError(`loss is ${total}`);
  const denom = weightSum || 1;
  return {
    loss: total,
    logprobs,
    metrics: {
      clip_fraction: clippedWeight / denom,
      approx_kl: klSum / denom,
      entropy: entropySum / denom,
      tokens: data.reduce((s, d) => s + d.inputTokens.length, 0),
      rows: graph.N,
    },
  };
}

/**
 * GSPO: s = exp(Σ_t ŵ_t (lp_t − b_t)) with ŵ the datum's weights normalised to sum 1; Â = Σ ŵ_t A_t;
 * ℓ_seq = −min(s·Â, clip(s)·Â); contributes (Σ_t w_t)·ℓ_seq.
 */
function gspoSequence(
  loss: { clipLow: number; clipHigh: number },
  lps: number[],
  b: number[],
  adv: number[],
  w: number[],
  g: Float64Array,
  add: (loss: number, clippedWeight: number) => void,
): void {
  let wsum = 0;
  for (const x of w) wsum += x;
  if (wsum === 0) return;
  let logRatio = 0;
  let A = 0;
  for (let t = 0; t < lps.length; t++) {
    logRatio += (w[t] / wsum) * (lps[t] - b[t]);
    A += (w[t] / wsum) * adv[t];
  }
  const s = Math.exp(logRatio);
  const clipped = Math.min(Math.max(s, 1 - loss.clipLow), 1 + loss.clipHigh) * A;
  const unclipped = s * A;
  const active = unclipped <= clipped;
  add(-wsum * Math.min(unclipped, clipped), active ? 0 : wsum);
  if (active) for (let t = 0; t < lps.length; t++) g[t] = -wsum * s * A * (w[t] / wsum);
}
