/**
 * Choosing one token from a logits row: temperature (0 = greedy), top-k, top-p, forced tokens.
 * The reported log-prob and entropy are those of the temperature-scaled distribution BEFORE top-k/top-p
 * truncation (what a trainer recomputes from logits at the same temperature; identical when
 * truncation is off, the RL default).
 */
import type { Rng } from '../../core/rng.js';

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

export function chooseToken(logits: Float32Array, offset: number, V: number, rng: Rng, o: ChoiceOptions): TokenChoice {
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

function argmax(x: Float64Array): number {
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
  let idx = topK > 0 && topK < V
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
