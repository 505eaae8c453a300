/**
 * Choosing one token from a logits row: temperature (0 = greedy), top-k, top-p, forced tokens.
 * The reported log-prob and entropy are those of the temperature-scaled distribution BEFORE top-k/top-p
 * truncation (what a trainer recomputes from logits at the same temperature; identical when
 * truncation is off, the RL default). The common draws (full distribution, greedy, forced; no top
 * log-probs, no exclusions) can take a row's distribution from kernels.samplingStats (`rowDistributions`,
 * one call for a decode step's rows): then only the random walk over its exponentials runs here;
 * every other draw computes the row in float64 here.
 */
import type { Rng } from '../../core/rng.js';
import type { Kernels } from '../kernels/types.js';

export interface TokenChoice {
  token: number;
  logprob: number;
  entropy: number;
  top?: Array<[number, number]>;
}

export interface ChoiceOptions {
  temperature: number;
  topP: number;
  topK: number;
  topLogprobs: number;
  forced?: number;
  /**
   * Tokens this draw may not produce (sampling without replacement across siblings): their mass is
   * removed before sampling. The reported log-prob is still the full distribution's. Ignored when it
   * would exclude every token.
   */
  exclude?: Set<number>;
}

/** A row's distribution from kernels.samplingStats: e = exp(z − max z) at e[offset..offset+V), z = logits / T. */
export interface RowDistribution {
  e: Float32Array;
  offset: number;
  /** log Σ exp z. */
  lse: number;
  /** −Σ p·log p. */
  entropy: number;
  /** Σ e. */
  sum: number;
}

/** Whether a draw with these options can use a RowDistribution (chooseToken's kernel path). */
export function usesDistribution(o: ChoiceOptions, V: number): boolean {
  if (o.topLogprobs > 0 || (o.exclude?.size && o.exclude.size < V)) return false;
  return o.temperature <= 0 || ((o.topK <= 0 || o.topK >= V) && o.topP >= 1);
}

/**
 * The distributions of the R rows of logits [R, V], row r at temperature temperatures[r] (≤ 0: greedy,
 * computed at 1), in one kernels.samplingStats call writing the exponentials into e [R, V]; undefined
 * when the kernels have no samplingStats.
 */
export function rowDistributions(
  kernels: Kernels,
  logits: Float32Array,
  R: number,
  V: number,
  temperatures: ArrayLike<number>,
  e: Float32Array,
): RowDistribution[] | undefined {
  if (!kernels.samplingStats) return undefined;
  const invT = Float32Array.from({ length: R }, (_, r) => (temperatures[r] > 0 ? 1 / temperatures[r] : 1));
  const stats = new Float64Array(R * 3);
  kernels.samplingStats(e, stats, logits, invT, R, V);
  return Array.from({ length: R }, (_, r) => ({
    e,
    offset: r * V,
    lse: stats[r * 3],
    entropy: stats[r * 3 + 1],
    sum: stats[r * 3 + 2],
  }));
}

/**
 * One token from logits[offset..offset+V) (a row's raw logits). With `dist`, the distribution of this
 * row at this temperature from rowDistributions, a draw that usesDistribution takes its log-prob,
 * entropy and random walk from it (one uniform draw, as the float64 path).
 */
export function chooseToken(
  logits: Float32Array,
  offset: number,
  V: number,
  rng: Rng,
  o: ChoiceOptions,
  dist?: RowDistribution,
): TokenChoice {
  if (dist && usesDistribution(o, V)) return chooseFromDistribution(logits, offset, V, rng, o, dist);
  const t = o.temperature > 0 ? o.temperature : 1;
  const logp = new Float64Array(V);
  let mx = -Infinity;
  for (let v = 0; v < V; v++) {
    const z = logits[offset + v] / t;
    logp[v] = z;
    if (z > mx) mx = z;
  }
  let sum = 0;
  for (let v = 0; v < V; v++) sum += Math.exp(logp[v] - mx);
  const lse = mx + Math.log(sum);
  let entropy = 0;
  for (let v = 0; v < V; v++) {
    logp[v] -= lse;
    entropy -= Math.exp(logp[v]) * logp[v];
  }
  let token: number;
  // without-replacement draws sample from a copy whose excluded tokens have no mass
  let from = logp;
  if (o.exclude?.size && o.exclude.size < V) {
    from = Float64Array.from(logp);
    let kept = 0;
    for (let v = 0; v < V; v++) if (o.exclude.has(v)) from[v] = -Infinity;
    for (let v = 0; v < V; v++) kept += Math.exp(from[v]);
    if (kept > 0) for (let v = 0; v < V; v++) from[v] -= Math.log(kept);
    else from = logp;
  }
  if (o.forced !== undefined) token = o.forced;
  else if (o.temperature <= 0) token = argmax(from);
  else token = sampleTruncated(from, V, rng, o.topK, o.topP);
  const choice: TokenChoice = { token, logprob: logp[token], entropy };
  if (o.topLogprobs > 0) choice.top = topEntries(logp, o.topLogprobs);
  return choice;
}

function chooseFromDistribution(
  logits: Float32Array,
  offset: number,
  V: number,
  rng: Rng,
  o: ChoiceOptions,
  dist: RowDistribution,
): TokenChoice {
  let token: number;
  if (o.forced !== undefined) token = o.forced;
  else if (o.temperature <= 0) token = argmax(logits.subarray(offset, offset + V));
  else {
    // the token where the running sum of e first exceeds u·Σe (sampleTruncated's walk over p = e/Σe)
    const target = rng.next() * dist.sum;
    const e = dist.e.subarray(dist.offset, dist.offset + V);
    let acc = 0;
    token = -1;
    for (let v = 0; v < V; v++) {
      acc += e[v];
      if (target < acc) {
        token = v;
        break;
      }
    }
    if (token < 0) token = argmax(logits.subarray(offset, offset + V));
  }
  const t = o.temperature > 0 ? o.temperature : 1;
  return { token, logprob: logits[offset + token] / t - dist.lse, entropy: dist.entropy };
}

function argmax(x: Float64Array | Float32Array): number {
  let best = 0;
  for (let i = 1; i < x.length; i++) if (x[i] > x[best]) best = i;
  return best;
}

/**
 * The k largest entries, largest first, ties to the lower id (the order of a full sort), in one pass
 * over V keeping a sorted list of at most k: O(V) for small k where a sort of a 150k vocabulary is not.
 */
function topEntries(logp: Float64Array, k: number): Array<[number, number]> {
  const best: number[] = [];
  for (let i = 0; i < logp.length; i++) {
    const x = logp[i];
    if (best.length === k) {
      if (!(x > logp[best[k - 1]])) continue;
      best.pop();
    }
    let j = best.length;
    best.push(i);
    while (j > 0 && x > logp[best[j - 1]]) {
      best[j] = best[j - 1];
      j--;
    }
    best[j] = i;
  }
  return best.map((i) => [i, logp[i]]);
}

/** Sample from softmax(logp) restricted to the top-k, then the top-p nucleus. One uniform draw. */
function sampleTruncated(logp: Float64Array, V: number, rng: Rng, topK: number, topP: number): number {
  const u = rng.next();
  if ((topK <= 0 || topK >= V) && topP >= 1) {
    let acc = 0;
    for (let v = 0; v < V; v++) {
      acc += Math.exp(logp[v]);
      if (u < acc) return v;
    }
    return argmax(logp);
  }
  let idx =
    topK > 0 && topK < V
      ? topEntries(logp, topK).map(([i]) => i)
      : Array.from(logp.keys()).sort((a, b) => logp[b] - logp[a] || a - b);
  if (topP < 1) {
    let acc = 0;
    let cut = idx.length;
    for (let i = 0; i < idx.length; i++) {
      acc += Math.exp(logp[idx[i]]);
      if (acc >= topP) {
        cut = i + 1;
        break;
      }
    }
    idx = idx.slice(0, cut);
  }
  let mass = 0;
  for (const i of idx) mass += Math.exp(logp[i]);
  let acc = 0;
  for (const i of idx) {
    acc += Math.exp(logp[i]) / mass;
    if (u < acc) return i;
  }
  return idx[idx.length - 1];
}
