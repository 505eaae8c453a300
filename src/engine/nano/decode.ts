/**
 * Incremental forward over "rows" against the paged KV cache: each row is one token of one sequence
 * at the sequence's next position. Prefill (many rows of one sequence) and batched decoding (one row
 * per sequence) are the same call. Linear layers run on all R rows at once; each row's K/V is written
 * to its page slot before attention, and attention for a row reads positions 0..pos of its sequence.
 * Math is exactly the training forward's (config.ts); logits are computed only for rows that ask.
 */
import type { NanoModel } from './model.js';
import type { PagedKVCache } from './kvcache.js';
import { ropeForward } from './ops/rope.js';
import { swigluForward } from './ops/swiglu.js';
import { embeddingForward } from './ops/embedding.js';

export interface DecodeRow {
  /** KV-cache sequence id. */
  seq: number;
  /** Token fed at this row. */
  token: number;
  /** Whether to return logits for the next token after this row. */
  wantLogits: boolean;
}

/** Reusable scratch buffers, grown on demand. */
export class DecodeWorkspace {
  private cap = 0;
  x!: Float32Array;
  ln!: Float32Array;
  rstd!: Float32Array;
  q!: Float32Array;
  k!: Float32Array;
  v!: Float32Array;
  att!: Float32Array;
  gate!: Float32Array;
  up!: Float32Array;
  act!: Float32Array;
  scores = new Float64Array(0);

  constructor(readonly model: NanoModel) {}

  ensure(R: number): void {
    if (R <= this.cap) return;
    const cap = Math.max(R, Math.ceil(this.cap * 1.5), 16);
    const { dModel: C, dFF: F } = this.model.config;
    const a = (n: number) => this.model.kernels.alloc(n);
    this.x = a(cap * C); this.ln = a(cap * C); this.rstd = a(cap);
    this.q = a(cap * C); this.k = a(cap * C); this.v = a(cap * C); this.att = a(cap * C);
    this.gate = a(cap * F); this.up = a(cap * F); this.act = a(cap * F);
    this.cap = cap;
  }
}

/**
 * Run rows through the model, appending their K/V to the cache. Returns logits [Rl, V] for the rows
 * with wantLogits, in row order; with `hiddenOut` ([Rl, C]), also their final-norm hidden states
 * (the activations the logits are computed from).
 */
export function forwardRows(model: NanoModel, cache: PagedKVCache, ws: DecodeWorkspace, rows: DecodeRow[], hiddenOut?: Float32Array): Float32Array {
  const { dModel: C, dFF: F, vocabSize: V, nLayers: L, nHeads: NH, normEps } = model.config;
  const hs = C / NH;
  const scale = 1 / Math.sqrt(hs);
  const kern = model.kernels;
  const R = rows.length;
  ws.ensure(R);
  const positions = new Int32Array(R);
  const slot = new Int32Array(R);
  for (let r = 0; r < R; r++) {
    positions[r] = cache.length(rows[r].seq);
    if (positions[r] >= model.config.contextLength) throw new Error(`decode: position ${positions[r]} exceeds contextLength ${model.config.contextLength}`);
    slot[r] = cache.appendSlot(rows[r].seq);
  }
  const tokens = rows.map((r) => r.token);
  const x = ws.x;
  embeddingForward(x, model.param('tok_emb'), tokens, R, C);
  const P = cache.pageSize;
  for (let l = 0; l < L; l++) {
    const p = `layers.${l}.`;
    kern.rmsnormForward(ws.ln, ws.rstd, x, model.param(p + 'attn_norm'), R, C, normEps);
    kern.matmulBT(ws.q, ws.ln, model.param(p + 'wq'), R, C, C, false);
    kern.matmulBT(ws.k, ws.ln, model.param(p + 'wk'), R, C, C, false);
    kern.matmulBT(ws.v, ws.ln, model.param(p + 'wv'), R, C, C, false);
    ropeForward(ws.q, positions, R, C, NH, model.rope);
    ropeForward(ws.k, positions, R, C, NH, model.rope);
    const layerOffset = l * P * C;
    for (let r = 0; r < R; r++) {
      cache.k.set(ws.k.subarray(r * C, r * C + C), slot[r] + layerOffset);
      cache.v.set(ws.v.subarray(r * C, r * C + C), slot[r] + layerOffset);
    }
    for (let r = 0; r < R; r++) attendRow(cache, ws, rows[r].seq, positions[r], l, r, C, NH, hs, scale);
    kern.matmulBT(x, ws.att, model.param(p + 'wo'), R, C, C, true);
    kern.rmsnormForward(ws.ln, ws.rstd, x, model.param(p + 'mlp_norm'), R, C, normEps);
    kern.matmulBT(ws.gate, ws.ln, model.param(p + 'w_gate'), R, C, F, false);
    kern.matmulBT(ws.up, ws.ln, model.param(p + 'w_up'), R, C, F, false);
    swigluForward(ws.act, ws.gate, ws.up, R * F);
    kern.matmulBT(x, ws.act, model.param(p + 'w_down'), R, F, C, true);
  }
  // logits only for the rows that want them
  const want: number[] = [];
  for (let r = 0; r < R; r++) if (rows[r].wantLogits) want.push(r);
  const Rl = want.length;
  const logits = new Float32Array(Rl * V);
  if (Rl === 0) return logits;
  const xs = ws.q; // scratch reuse: q is no longer needed
  want.forEach((r, i) => xs.set(x.subarray(r * C, r * C + C), i * C));
  kern.rmsnormForward(ws.ln, ws.rstd, xs, model.param('final_norm'), Rl, C, normEps);
  kern.matmulBT(logits, ws.ln, model.param(model.headName), Rl, C, V, false);
  if (hiddenOut) hiddenOut.set(ws.ln.subarray(0, Rl * C));
  return logits;
}

/** ws.att[r] = attention output of row r over its sequence's positions 0..pos at layer l. */
function attendRow(cache: PagedKVCache, ws: DecodeWorkspace, seq: number, pos: number, l: number, r: number, C: number, NH: number, hs: number, scale: number): void {
  const T = pos + 1;
  if (ws.scores.length < T) ws.scores = new Float64Array(Math.max(T, ws.scores.length * 2));
  const scores = ws.scores;
  const K = cache.k;
  const Vv = cache.v;
  const pages = cache.pagesOf(seq);
  const P = cache.pageSize;
  const L = cache.L;
  const q = ws.q;
  const out = ws.att;
  for (let h = 0; h < NH; h++) {
    const qo = r * C + h * hs;
    let mx = -Infinity;
    for (let s = 0; s < T; s++) {
      const ko = ((pages[(s / P) | 0] * L + l) * P + (s % P)) * C + h * hs;
      let d = 0;
      for (let i = 0; i < hs; i++) d += q[qo + i] * K[ko + i];
      d *= scale;
      scores[s] = d;
      if (d > mx) mx = d;
    }
    let sum = 0;
    for (let s = 0; s < T; s++) {
      const e = Math.exp(scores[s] - mx);
      scores[s] = e;
      sum += e;
    }
    for (let i = 0; i < hs; i++) out[qo + i] = 0;
    const acc = new Float64Array(hs);
    for (let s = 0; s < T; s++) {
      const w = scores[s] / sum;
      const vo = ((pages[(s / P) | 0] * L + l) * P + (s % P)) * C + h * hs;
      for (let i = 0; i < hs; i++) acc[i] += w * Vv[vo + i];
    }
    for (let i = 0; i < hs; i++) out[qo + i] = acc[i];
  }
}
