/**
 * Incremental forward over "rows" against the paged KV cache: each row is one token of one sequence
 * at the sequence's next position. Prefill (many rows of one sequence) and batched decoding (one row
 * per sequence) are the same call. Linear layers run on all R rows at once; each row's K/V (NKV·hd
 * wide) is written to its page slot before attention, and attention for a row reads positions 0..pos
 * of its sequence (query head h reads kv head ⌊h·NKV/NH⌋): with kernels.pagedDecodeAttention, all rows
 * of a layer in one call reading the pages in place (the cache is attached to the kernels' memory);
 * otherwise row by row over a gathered copy, in float64. Math is exactly the training forward's
 * (config.ts), with the same optional LoRA adapter; logits are computed only for rows that ask.
 */
import type { NanoModel } from './model.js';
import type { PagedKVCache } from './kvcache.js';
import type { LayerRole } from './config.js';
import type { LoraAdapter } from './lora.js';
import { embeddingForward } from './ops/embedding.js';
import { linearForward } from './ops/linear.js';

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
  x!: Float32Array; // [R,C]
  ln!: Float32Array; // [R,C]
  rstd!: Float32Array; // [R·NH]
  qRaw!: Float32Array; // [R,Cq] (qkNorm only)
  kRaw!: Float32Array; // [R,Ckv] (qkNorm only)
  q!: Float32Array; // [R,Cq]
  k!: Float32Array; // [R,Ckv]
  v!: Float32Array; // [R,Ckv]
  att!: Float32Array; // [R,Cq]
  gate!: Float32Array; // [R,F]
  up!: Float32Array; // [R,F]
  act!: Float32Array; // [R,F]
  loraH!: Float32Array; // [R,r]
  scores = new Float64Array(0);
  /** Contiguous K/V of one sequence at one layer [T, Ckv], gathered from its pages for kernels.decodeAttention. */
  kRows: Float32Array = new Float32Array(0);
  vRows: Float32Array = new Float32Array(0);

  constructor(
    readonly model: NanoModel,
    readonly adapter?: LoraAdapter,
  ) {}

  /** [n] exponentials of the logit rows being sampled (kernels.samplingStats output), grown on demand. */
  private expBuffer: Float32Array = new Float32Array(0);

  /** Kernel-memory room for n floats of sampling exponentials (valid until the next call). */
  exps(n: number): Float32Array {
    const have = this.expBuffer.length;
    if (have < n) this.expBuffer = this.model.kernels.alloc(Math.max(n, 2 * have));
    return this.expBuffer.subarray(0, n);
  }

  /** Kernel-memory gather buffers for T positions. */
  ensureRows(T: number): void {
    const { Ckv } = this.model.dims;
    if (this.kRows.length >= T * Ckv) return;
    const cap = Math.max(T, Math.ceil(this.kRows.length / Ckv) * 2, 64) * Ckv;
    this.kRows = this.model.kernels.alloc(cap);
    this.vRows = this.model.kernels.alloc(cap);
  }

  ensure(R: number): void {
    if (R <= this.cap) return;
    const cap = Math.max(R, Math.ceil(this.cap * 1.5), 16);
    const { C, F, Cq, Ckv, NH } = this.model.dims;
    const qkNorm = this.model.config.qkNorm === true;
    const a = (n: number) => this.model.kernels.alloc(n);
    this.x = a(cap * C);
    this.ln = a(cap * C);
    this.rstd = a(cap * NH);
    this.q = a(cap * Math.max(Cq, C));
    this.k = a(cap * Ckv);
    this.v = a(cap * Ckv);
    this.att = a(cap * Cq);
    this.qRaw = qkNorm ? a(cap * Cq) : this.q;
    this.kRaw = qkNorm ? a(cap * Ckv) : this.k;
    this.gate = a(cap * F);
    this.up = a(cap * F);
    this.act = a(cap * F);
    this.loraH = a(cap * (this.adapter?.rank ?? 0));
    this.cap = cap;
  }
}

/**
 * Run rows through the model, appending their K/V to the cache. Returns logits [Rl, V] for the rows
 * with wantLogits, in row order; with `hiddenOut` ([Rl, C]), also their final-norm hidden states
 * (the activations the logits are computed from). The workspace's adapter, if any, is applied.
 */
export function forwardRows(
  model: NanoModel,
  cache: PagedKVCache,
  ws: DecodeWorkspace,
  rows: DecodeRow[],
  hiddenOut?: Float32Array,
): Float32Array {
  const { normEps } = model.config;
  const { C, F, V, L, NH, NKV, hd, Cq, Ckv } = model.dims;
  const kern = model.kernels;
  const R = rows.length;
  ws.ensure(R);
  cache.attach(kern);
  const positions = new Int32Array(R);
  const slot = new Int32Array(R);
  for (let r = 0; r < R; r++) {
    positions[r] = cache.length(rows[r].seq);
    if (positions[r] >= model.config.contextLength)
      throw new Error(`decode: position ${positions[r]} exceeds contextLength ${model.config.contextLength}`);
    slot[r] = cache.appendSlot(rows[r].seq);
  }
  const table = kern.pagedDecodeAttention ? pageTable(cache, rows, positions) : undefined;
  const tokens = rows.map((r) => r.token);
  const x = ws.x;
  embeddingForward(x, model.param(model.names.embed), tokens, R, C);
  const adapter = ws.adapter;
  for (let l = 0; l < L; l++) {
    const n = model.names.layers[l];
    const linear = (
      y: Float32Array,
      input: Float32Array,
      role: LayerRole,
      bias: LayerRole,
      inDim: number,
      outDim: number,
      accumulate: boolean,
    ) => {
      const t = adapter?.target(l, role);
      const lora = t && { A: t.A, B: t.B, rank: adapter!.rank, scale: adapter!.scale, h: ws.loraH };
      linearForward(
        kern,
        y,
        input,
        model.param(n[role]),
        model.params.views.get(n[bias]),
        lora,
        R,
        inDim,
        outDim,
        accumulate,
      );
    };
    kern.rmsnormForward(ws.ln, ws.rstd, x, model.param(n.attnNorm), R, C, normEps);
    linear(ws.qRaw, ws.ln, 'wq', 'bq', C, Cq, false);
    linear(ws.kRaw, ws.ln, 'wk', 'bk', C, Ckv, false);
    linear(ws.v, ws.ln, 'wv', 'bv', C, Ckv, false);
    if (model.config.qkNorm) {
      kern.rmsnormForward(ws.q, ws.rstd, ws.qRaw, model.param(n.qNorm), R * NH, hd, normEps);
      kern.rmsnormForward(ws.k, ws.rstd, ws.kRaw, model.param(n.kNorm), R * NKV, hd, normEps);
    }
    kern.rope(ws.q, positions, R, Cq, NH, model.rope.cos, model.rope.sin, false);
    kern.rope(ws.k, positions, R, Ckv, NKV, model.rope.cos, model.rope.sin, false);
    for (let r = 0; r < R; r++)
      cache.write(slot[r], l, ws.k.subarray(r * Ckv, (r + 1) * Ckv), ws.v.subarray(r * Ckv, (r + 1) * Ckv));
    if (table) {
      const { pages, W, lengths } = table;
      const P = cache.pageSize;
      kern.pagedDecodeAttention!(ws.att, ws.q, cache.kPages, cache.vPages, pages, W, lengths, R, l, P, NH, NKV, hd);
    } else
      for (let r = 0; r < R; r++) {
        const T = positions[r] + 1;
        ws.ensureRows(T);
        cache.gather(rows[r].seq, l, T, ws.kRows, ws.vRows);
        const out = ws.att.subarray(r * Cq, (r + 1) * Cq);
        const q = ws.q.subarray(r * Cq, (r + 1) * Cq);
        if (kern.decodeAttention) kern.decodeAttention(out, q, ws.kRows, ws.vRows, T, NH, NKV, hd);
        else attendRow(ws, out, q, T, NH, NKV, hd);
      }
    linear(x, ws.att, 'wo', 'bo', Cq, C, true);
    kern.rmsnormForward(ws.ln, ws.rstd, x, model.param(n.mlpNorm), R, C, normEps);
    linear(ws.gate, ws.ln, 'wGate', 'bGate', C, F, false);
    linear(ws.up, ws.ln, 'wUp', 'bUp', C, F, false);
    kern.swigluForward(ws.act, ws.gate, ws.up, R * F);
    linear(x, ws.act, 'wDown', 'bDown', F, C, true);
  }
  // logits only for the rows that want them
  const want: number[] = [];
  for (let r = 0; r < R; r++) if (rows[r].wantLogits) want.push(r);
  const Rl = want.length;
  const logits = new Float32Array(Rl * V);
  if (Rl === 0) return logits;
  const xs = ws.q; // scratch reuse: q is no longer needed (sized for max(Cq, C) per row)
  want.forEach((r, i) => xs.set(x.subarray(r * C, r * C + C), i * C));
  kern.rmsnormForward(ws.ln, ws.rstd, xs, model.param(model.names.finalNorm), Rl, C, normEps);
  kern.matmulBT(logits, ws.ln, model.param(model.headName), Rl, C, V, false);
  if (hiddenOut) hiddenOut.set(ws.ln.subarray(0, Rl * C));
  return logits;
}

/** Each row's pages [R, W] (W: the most any row spans) and its length after this step (position + 1). */
function pageTable(
  cache: PagedKVCache,
  rows: DecodeRow[],
  positions: Int32Array,
): { pages: Int32Array; W: number; lengths: Int32Array } {
  const P = cache.pageSize;
  const lengths = Int32Array.from(positions, (p) => p + 1);
  const W = Math.ceil(Math.max(...lengths) / P);
  const pages = new Int32Array(rows.length * W);
  rows.forEach((row, r) => pages.set(cache.pagesOf(row.seq).slice(0, Math.ceil(lengths[r] / P)), r * W));
  return { pages, W, lengths };
}

/**
 * out [NH·hd] = attention of one query row q over T contiguous cached positions ws.kRows/vRows
 * [T, NKV·hd], in float64 (the path for kernels without decodeAttention): per head, scores scaled by
 * 1/√hd, softmax, weighted sum of values in position order.
 */
function attendRow(
  ws: DecodeWorkspace,
  out: Float32Array,
  q: Float32Array,
  T: number,
  NH: number,
  NKV: number,
  hd: number,
): void {
  if (ws.scores.length < T + hd) ws.scores = new Float64Array(Math.max(T + hd, ws.scores.length * 2));
  const scores = ws.scores;
  const K = ws.kRows;
  const Vv = ws.vRows;
  const Ckv = NKV * hd;
  const scale = 1 / Math.sqrt(hd);
  const group = NH / NKV;
  for (let h = 0; h < NH; h++) {
    const kvh = Math.floor(h / group) * hd;
    const qh = h * hd;
    let mx = -Infinity;
    for (let s = 0; s < T; s++) {
      let d = 0;
      for (let i = 0; i < hd; i++) d += q[qh + i] * K[s * Ckv + kvh + i];
      scores[s] = d * scale;
      if (scores[s] > mx) mx = scores[s];
    }
    let sum = 0;
    for (let s = 0; s < T; s++) {
      scores[s] = Math.exp(scores[s] - mx);
      sum += scores[s];
    }
    const acc = T;
    scores.fill(0, acc, acc + hd);
    for (let s = 0; s < T; s++) {
      const w = scores[s] / sum;
      for (let i = 0; i < hd; i++) scores[acc + i] += w * Vv[s * Ckv + kvh + i];
    }
    for (let i = 0; i < hd; i++) out[qh + i] = scores[acc + i];
  }
}
