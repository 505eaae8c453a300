/**
 * Incremental forward over "rows" against the paged KV cache: each row is one token of one sequence
 * at the sequence's next position. Prefill (many rows of one sequence) and batched decoding (one row
 * per sequence) are the same call. Linear layers run on all R rows at once; each row's K/V is written
 * to its page slot before attention, and attention for a row reads positions 0..pos of its sequence.
 * Math is exactly the training forward's (config.ts); logits are computed only for rows that ask.
 */
import type { NanoModel } from './model.js';
import type { PagedKVCache } from './kvcache.js';
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
  /** Contiguous K/V of one sequence at one layer [T, C], gathered from its pages for kernels.decodeAttention. */
  kRows: Float32Array = new Float32Array(0);
  vRows: Float32Array = new Float32Array(0);

  constructor(readonly model: NanoModel) {}

  /** Kernel-memory gather buffers for T positions. */
  ensureRows(T: number): void {
    const C = this.model.config.dModel;
    if (this.kRows.length >= T * C) return;
    const cap = Math.max(T, Math.ceil(this.kRows.length / C) * 2, 64) * C;
    this.kRows = this.model.kernels.alloc(cap);
    this.vRows = this.model.kernels.alloc(cap);
  }

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
    kern.rope(ws.q, positions, R, C, NH, model.rope.cos, model.rope.sin, false);
    kern.rope(ws.k, positions, R, C, NH, model.rope.cos, model.rope.sin, false);
    const layerOffset = l * P * C;
    for (let r = 0; r < R; r++) {
      cache.k.set(ws.k.subarray(r * C, r * C + C), slot[r] + layerOffset);
      cache.v.set(ws.v.subarray(r * C, r * C + C), slot[r] + layerOffset);
    }
    if (kern.decodeAttention) {
      for (let r = 0; r < R; r++) attendRowKernel(cache, ws, rows[r].seq, positions[r], l, r, C, NH);
    } else {
      for (let r = 0; r < R; r++) attendRow(cache, ws, rows[r].seq, positions[r], l, r, C, NH, hs, scale);
    }
    kern.matmulBT(x, ws.att, model.param(p + 'wo'), R, C, C, true);
    kern.rmsnormForward(ws.ln, ws.rstd, x, model.param(p + 'mlp_norm'), R, C, normEps);
    kern.matmulBT(ws.gate, ws.ln, model.param(p + 'w_gate'), R, C, F, false);
    kern.matmulBT(ws.up, ws.ln, model.param(p + 'w_up'), R, C, F, false);
    kern.swigluForward(ws.act, ws.gate, ws.up, R * F);
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

/**
 * attendRow through kernels.decodeAttention (WASM SIMD): the sequence's K/V rows of layer l are
 * copied page by page (P·C contiguous floats per page) into kernel memory, then one kernel call does
 * every head. Profiling showed decode attention at ~40% of batch-64 sampling in the JS loop below.
 */
function attendRowKernel(cache: PagedKVCache, ws: DecodeWorkspace, seq: number, pos: number, l: number, r: number, C: number, NH: number): void {
  const T = pos + 1;
  ws.ensureRows(T);
  const pages = cache.pagesOf(seq);
  const P = cache.pageSize;
  const L = cache.L;
  const kRows = ws.kRows;
  const vRows = ws.vRows;
  for (let s0 = 0, pi = 0; s0 < T; s0 += P, pi++) {
    const n = Math.min(P, T - s0) * C;
    const base = (pages[pi] * L + l) * P * C;
    kRows.set(cache.k.subarray(base, base + n), s0 * C);
    vRows.set(cache.v.subarray(base, base + n), s0 * C);
  }
  ws.model.kernels.decodeAttention!(ws.att.subarray(r * C, r * C + C), ws.q.subarray(r * C, r * C + C), kRows, vRows, T, C, NH);
}

/**
 * ws.att[r] = attention output of row r over its sequence's positions 0..pos at layer l (the
 * float64 path, for kernels without decodeAttention).
 * Loops run page by page (no division per position), all heads per cached row, and the dot products
 * are unrolled by 4 with ONE accumulator in the original order, so results are bit-identical to the
 * straightforward per-head loop (profiling showed this function at ~half of batch-64 sampling time).
 */
function attendRow(cache: PagedKVCache, ws: DecodeWorkspace, seq: number, pos: number, l: number, r: number, C: number, NH: number, hs: number, scale: number): void {
  const T = pos + 1;
  if (ws.scores.length < NH * T + C) ws.scores = new Float64Array(Math.max(NH * T + C, ws.scores.length * 2));
  const scores = ws.scores; // [NH, T] scores, then [C] output accumulators
  const accBase = NH * T;
  const K = cache.k;
  const Vv = cache.v;
  const pages = cache.pagesOf(seq);
  const P = cache.pageSize;
  const L = cache.L;
  const q = ws.q;
  const out = ws.att;
  const qo = r * C;
  const hs4 = hs - (hs % 4);
  // scores
  for (let s0 = 0, pi = 0; s0 < T; s0 += P, pi++) {
    const end = Math.min(P, T - s0);
    const pageBase = (pages[pi] * L + l) * P * C;
    for (let j = 0; j < end; j++) {
      const rowBase = pageBase + j * C;
      const s = s0 + j;
      for (let h = 0; h < NH; h++) {
        const ko = rowBase + h * hs;
        const qh = qo + h * hs;
        let d = 0;
        let i = 0;
        for (; i < hs4; i += 4) {
          d += q[qh + i] * K[ko + i];
          d += q[qh + i + 1] * K[ko + i + 1];
          d += q[qh + i + 2] * K[ko + i + 2];
          d += q[qh + i + 3] * K[ko + i + 3];
        }
        for (; i < hs; i++) d += q[qh + i] * K[ko + i];
        scores[h * T + s] = d * scale;
      }
    }
  }
  // softmax per head: scores become normalised weights
  for (let h = 0; h < NH; h++) {
    const o = h * T;
    let mx = -Infinity;
    for (let s = 0; s < T; s++) if (scores[o + s] > mx) mx = scores[o + s];
    let sum = 0;
    for (let s = 0; s < T; s++) {
      const e = Math.exp(scores[o + s] - mx);
      scores[o + s] = e;
      sum += e;
    }
    for (let s = 0; s < T; s++) scores[o + s] = scores[o + s] / sum;
  }
  // out = Σ_s w_s · V_s, accumulated in float64 in position order
  scores.fill(0, accBase, accBase + C);
  for (let s0 = 0, pi = 0; s0 < T; s0 += P, pi++) {
    const end = Math.min(P, T - s0);
    const pageBase = (pages[pi] * L + l) * P * C;
    for (let j = 0; j < end; j++) {
      const rowBase = pageBase + j * C;
      const s = s0 + j;
      for (let h = 0; h < NH; h++) {
        const w = scores[h * T + s];
        const vo = rowBase + h * hs;
        const ao = accBase + h * hs;
        for (let i = 0; i < hs; i++) scores[ao + i] += w * Vv[vo + i];
      }
    }
  }
  for (let c = 0; c < C; c++) out[qo + c] = scores[accBase + c];
}
