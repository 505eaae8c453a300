/**
 * Teacher-forced forward and backward over a packed batch of sequences (rows of all sequences
 * concatenated: N = Σ T_b). Linear layers run on all N rows at once; attention runs per sequence.
 * Shapes: N rows, C = dModel, Cq = NH·hd, Ckv = NKV·hd, F = dFF, V = vocab, L layers (config.ts).
 * The forward caches exactly what backward needs (per layer: inputs, norm outputs and rstd, q/k/v
 * after rotary, attention probabilities, attention output, MLP pre-activations, LoRA x·Aᵀ) in buffers
 * reused across calls. Grouped-query attention expands K/V to the query heads (repeat_kv) for the
 * attention kernels and sums the expanded gradients back. The output head is head.ts (whole, or in
 * blocks of rows for a large vocabulary, optionally only the rows that carry loss weight). backward
 * ACCUMULATES parameter gradients into model.grads (not when the model is frozen) and the LoRA
 * adapter's grads.
 */
import type { NanoModel } from './model.js';
import type { LayerRole } from './config.js';
import type { LoraAdapter, LoraTarget } from './lora.js';
import { embeddingBackward, embeddingForward } from './ops/embedding.js';
import { addColumnSums, linearForward, repeatKV, scaleInPlace, sumKV } from './ops/linear.js';
import { OutputHead } from './head.js';
import { attentionLayout } from '../kernels/reference.js';
import { treeVisible } from '../kernels/tree.js';
import type { TreePack } from './packing.js';

interface LayerCache {
  xIn: Float32Array; // [N,C] residual stream entering the layer
  ln1: Float32Array; // [N,C]
  rstd1: Float32Array; // [N]
  qRaw: Float32Array; // [N,Cq] projection before the per-head norm (qkNorm only)
  kRaw: Float32Array; // [N,Ckv] (qkNorm only)
  rstdQ: Float32Array; // [N·NH] (qkNorm only)
  rstdK: Float32Array; // [N·NKV] (qkNorm only)
  q: Float32Array; // [N,Cq] after rotary
  k: Float32Array; // [N,Ckv] after rotary
  v: Float32Array; // [N,Ckv]
  kAtt: Float32Array; // [N,Cq] k expanded to the query heads (GQA only; else = k)
  vAtt: Float32Array; // [N,Cq] (GQA only; else = v)
  att: Float32Array; // Σ_b NH·T_b² attention probabilities
  attnOut: Float32Array; // [N,Cq] before Wo
  xMid: Float32Array; // [N,C] after the attention residual
  ln2: Float32Array; // [N,C]
  rstd2: Float32Array; // [N]
  gate: Float32Array; // [N,F]
  up: Float32Array; // [N,F]
  act: Float32Array; // [N,F] silu(gate)·up
  lora: Partial<Record<LayerRole, Float32Array>>; // [N,r] s·(x·Aᵀ) per adapted role
}

/** A packed batch: sequences of input tokens, and (needed with a blocked head) their targets. */
export interface PackedBatch {
  /** Input token ids of each sequence. */
  sequences: number[][];
  /** Target token of each input position (sequence-aligned); required when the head runs in blocks. */
  targets?: number[][];
  /**
   * Loss weight of each position (sequence-aligned): with `weightedRowsOnly`, the head computes only
   * the rows whose weight is not 0 (the others' log-probs are NaN).
   */
  weights?: number[][];
  weightedRowsOnly?: boolean;
  /**
   * The sequences packed as a forest (packing.ts): each unique token is computed once, attending to its
   * ancestors, and the head runs on the pack's (row, target) entries. `targets` are then required.
   */
  tree?: TreePack;
}

export class TrainingGraph {
  private capacityN = 0;
  private capacityAtt = 0;
  private layers: LayerCache[] = [];
  private xF!: Float32Array; // [N,C] final residual
  private lnF!: Float32Array; // [N,C]
  private rstdF!: Float32Array; // [N]
  /** The output head: logits, their log-softmax, the loss's per-row coefficients (head.ts). */
  readonly head: OutputHead;
  /** [N] per-row scratch of the loss: d loss / d lp(target), entropy-bonus weight, entropy, target. */
  get rowCoef(): Float32Array {
    return this.head.rowCoef;
  }
  get rowBonus(): Float32Array {
    return this.head.rowBonus;
  }
  get rowEntropy(): Float32Array {
    return this.head.rowEntropy;
  }
  get rowTargets(): Int32Array {
    return this.head.rowTargets;
  }
  // backward scratch
  private dx!: Float32Array;
  private dx2!: Float32Array;
  private dln!: Float32Array;
  private dq!: Float32Array;
  private dk!: Float32Array;
  private dv!: Float32Array;
  private dkAtt!: Float32Array;
  private dvAtt!: Float32Array;
  private dqRaw!: Float32Array;
  private dkRaw!: Float32Array;
  private dF1!: Float32Array;
  private dF2!: Float32Array;
  private dF3!: Float32Array;
  private tmpC!: Float32Array;
  private dLora!: Float32Array;
  /** Weight-gradient sink for frozen norms (rmsnormBackward always writes one). */
  private sink!: Float32Array;

  /** Rows in the current batch (unique tokens when tree-packed). */
  N = 0;
  /** The current batch's forest (tree-packed), or undefined (flat). */
  tree: TreePack | undefined;
  /** Head entries of the current batch: one per (row, target) when tree-packed, else one per row. */
  entries = 0;
  private lnE: Float32Array = new Float32Array(0);
  private dlnE: Float32Array = new Float32Array(0);
  tokens: Int32Array = new Int32Array(0);
  positions: Int32Array = new Int32Array(0);
  /** Row offset of each sequence. */
  rowOffset: number[] = [];
  lengths: number[] = [];

  /**
   * `adapter`: a LoRA on the model's linear layers (trained; the base is frozen when `model.frozen`).
   * `blockRows`: run the head in blocks of this many rows whatever the size (tests); default by size.
   * `rowsHint`: the rows a pass may reach (the trainer's budget): the activations are allocated for that
   * many rows on first use, not grown pass by pass (kernel memory is never freed, so growing leaks).
   */
  constructor(
    readonly model: NanoModel,
    readonly adapter?: LoraAdapter,
    blockRows?: number,
    private readonly rowsHint = 0,
  ) {
    this.head = new OutputHead(model, blockRows);
  }

  private ensureCapacity(N: number, attSize: number): void {
    const { C, F, L, NH, NKV, Cq, Ckv } = this.model.dims;
    const k = this.model.kernels;
    const gqa = NKV !== NH;
    const qkNorm = this.model.config.qkNorm === true;
    const r = this.adapter?.rank ?? 0;
    if (N > this.capacityN) {
      const cap = Math.max(N, this.rowsHint, Math.ceil(this.capacityN * 1.5));
      this.capacityN = cap;
      const a = (n: number) => k.alloc(n);
      this.layers = Array.from({ length: L }, (_, l) => {
        const q = a(cap * Cq);
        const kk = a(cap * Ckv);
        const v = a(cap * Ckv);
        const lora: LayerCache['lora'] = {};
        for (const role of Object.keys(this.adapter?.layers[l] ?? {}) as LayerRole[]) lora[role] = a(cap * r);
        return {
          xIn: a(cap * C),
          ln1: a(cap * C),
          rstd1: a(cap),
          qRaw: qkNorm ? a(cap * Cq) : q,
          kRaw: qkNorm ? a(cap * Ckv) : kk,
          rstdQ: qkNorm ? a(cap * NH) : a(0),
          rstdK: qkNorm ? a(cap * NKV) : a(0),
          q,
          k: kk,
          v,
          kAtt: gqa ? a(cap * Cq) : kk,
          vAtt: gqa ? a(cap * Cq) : v,
          att: this.layers[l]?.att ?? a(0),
          attnOut: a(cap * Cq),
          xMid: a(cap * C),
          ln2: a(cap * C),
          rstd2: a(cap),
          gate: a(cap * F),
          up: a(cap * F),
          act: a(cap * F),
          lora,
        };
      });
      this.xF = a(cap * C);
      this.lnF = a(cap * C);
      this.rstdF = a(cap);
      this.dx = a(cap * C);
      this.dx2 = a(cap * C);
      this.dln = a(cap * C);
      this.dq = a(cap * Cq);
      this.dk = a(cap * Ckv);
      this.dv = a(cap * Ckv);
      this.dkAtt = gqa ? a(cap * Cq) : this.dk;
      this.dvAtt = gqa ? a(cap * Cq) : this.dv;
      this.dqRaw = qkNorm ? a(cap * Cq) : a(0);
      this.dkRaw = qkNorm ? a(cap * Ckv) : a(0);
      this.dF1 = a(cap * F);
      this.dF2 = a(cap * F);
      this.dF3 = a(cap * F);
      this.tmpC = a(cap * Math.max(C, Cq));
      this.dLora = a(cap * r);
      this.sink = a(Math.max(C, this.model.dims.hd));
    }
    if (attSize > this.capacityAtt) {
      const cap = Math.max(attSize, Math.ceil(this.capacityAtt * 1.5));
      this.capacityAtt = cap;
      for (const layer of this.layers) layer.att = k.alloc(cap);
    }
  }

  /** y[N,out] (+)= x[N,in]·Wᵀ + b + s·(x·Aᵀ)·Bᵀ for layer l's `role` (bias role `biasRole` when the model has it). */
  private linear(
    y: Float32Array,
    x: Float32Array,
    l: number,
    role: LayerRole,
    biasRole: LayerRole,
    N: number,
    inDim: number,
    outDim: number,
    accumulate: boolean,
  ): void {
    const m = this.model;
    const names = m.names.layers[l];
    const bias = m.params.views.get(names[biasRole]);
    const t = this.adapter?.target(l, role);
    const lora = t && {
      A: t.A,
      B: t.B,
      rank: this.adapter!.rank,
      scale: this.adapter!.scale,
      h: this.layers[l].lora[role]!,
    };
    linearForward(m.kernels, y, x, m.param(names[role]), bias, lora, N, inDim, outDim, accumulate);
  }

  /** Backward of `linear`: dx (+)= dy·W (+ LoRA), and the weight, bias and adapter gradients. */
  private linearBackward(
    dx: Float32Array,
    dy: Float32Array,
    x: Float32Array,
    l: number,
    role: LayerRole,
    biasRole: LayerRole,
    N: number,
    inDim: number,
    outDim: number,
    accumulate: boolean,
  ): void {
    const m = this.model;
    const k = m.kernels;
    const names = m.names.layers[l];
    k.matmul(dx, dy, m.param(names[role]), N, outDim, inDim, accumulate);
    if (!m.frozen) {
      k.matmulAT(m.grads.get(names[role]), dy, x, outDim, N, inDim, true);
      if (m.params.views.has(names[biasRole])) addColumnSums(m.grads.get(names[biasRole]), dy, N, outDim);
    }
    const t = this.adapter?.target(l, role);
    if (t) this.loraBackward(dx, dy, x, t, this.layers[l].lora[role]!, N);
  }

  /** dB += dyᵀ·h; dh = s·dy·B; dA += dhᵀ·x; dx += dh·A (h = s·x·Aᵀ cached by the forward). */
  private loraBackward(
    dx: Float32Array,
    dy: Float32Array,
    x: Float32Array,
    t: LoraTarget,
    h: Float32Array,
    N: number,
  ): void {
    const k = this.model.kernels;
    const a = this.adapter!;
    const r = a.rank;
    const dh = this.dLora;
    k.matmulAT(a.grads.get(t.nameB), dy, h, t.out, N, r, true);
    k.matmul(dh, dy, t.B, N, t.out, r, false);
    scaleInPlace(dh, a.scale, N * r);
    k.matmulAT(a.grads.get(t.nameA), dh, x, r, N, t.in, true);
    k.matmul(dx, dh, t.A, N, r, t.in, true);
  }

  /** A norm weight's gradient buffer (a sink when the base is frozen). */
  private normGrad(name: string): Float32Array {
    return this.model.frozen ? this.sink.fill(0) : this.model.grads.get(name);
  }

  /** Forward pass; afterwards the head holds each row's log-probs (`targetLogprob`) and entropy. */
  forward(batch: PackedBatch): void {
    const m = this.model;
    const { contextLength, normEps } = m.config;
    const { C, F, V, L, NH, NKV, Cq, Ckv, hd } = m.dims;
    const k = m.kernels;
    const seqs = batch.sequences;
    for (const s of seqs) {
      if (s.length === 0) throw new Error('forward: empty sequence');
      if (s.length > contextLength)
        throw new Error(`forward: sequence of ${s.length} tokens exceeds contextLength ${contextLength}`);
    }
    this.lengths = seqs.map((s) => s.length);
    const { rowOffset, rows: flatRows, attSize } = attentionLayout(this.lengths, NH);
    for (const s of seqs)
      for (const t of s) if (!(t >= 0 && t < V)) throw new Error(`forward: token id ${t} outside vocabulary of ${V}`);
    const tree = batch.tree;
    this.tree = tree;
    this.rowOffset = rowOffset;
    const N = tree ? tree.N : flatRows;
    this.ensureCapacity(N, tree ? NH * treeVisible(tree.layout) : attSize);
    this.N = N;
    this.entries = tree ? tree.E : N;
    if (tree) {
      this.tokens = tree.tokens;
      this.positions = tree.positions;
    } else {
      this.tokens = new Int32Array(N);
      this.positions = new Int32Array(N);
      seqs.forEach((s, b) => {
        for (let t = 0; t < s.length; t++) {
          this.tokens[rowOffset[b] + t] = s[t];
          this.positions[rowOffset[b] + t] = t;
        }
      });
    }
    const NC = N * C;
    const NF = N * F;
    const names = m.names;
    embeddingForward(this.layers.length ? this.layers[0].xIn : this.xF, m.param(names.embed), this.tokens, N, C);
    for (let l = 0; l < L; l++) {
      const c = this.layers[l];
      const n = names.layers[l];
      k.rmsnormForward(c.ln1, c.rstd1, c.xIn, m.param(n.attnNorm), N, C, normEps);
      this.linear(c.qRaw, c.ln1, l, 'wq', 'bq', N, C, Cq, false);
      this.linear(c.kRaw, c.ln1, l, 'wk', 'bk', N, C, Ckv, false);
      this.linear(c.v, c.ln1, l, 'wv', 'bv', N, C, Ckv, false);
      if (m.config.qkNorm) {
        k.rmsnormForward(c.q, c.rstdQ, c.qRaw, m.param(n.qNorm), N * NH, hd, normEps);
        k.rmsnormForward(c.k, c.rstdK, c.kRaw, m.param(n.kNorm), N * NKV, hd, normEps);
      }
      k.rope(c.q, this.positions, N, Cq, NH, m.rope.cos, m.rope.sin, false);
      k.rope(c.k, this.positions, N, Ckv, NKV, m.rope.cos, m.rope.sin, false);
      if (NKV !== NH) {
        repeatKV(c.kAtt, c.k, N, NKV, NH / NKV, hd);
        repeatKV(c.vAtt, c.v, N, NKV, NH / NKV, hd);
      }
      const NQ = N * Cq;
      const NK = N * Cq;
      if (tree) {
        const [q, kk, v] = [c.q.subarray(0, NQ), c.kAtt.subarray(0, NK), c.vAtt.subarray(0, NK)];
        k.treeAttentionForward(c.attnOut.subarray(0, NQ), c.att, q, kk, v, tree.layout, Cq, NH);
      } else {
        k.attentionForward(
          c.attnOut.subarray(0, NQ),
          c.att,
          c.q.subarray(0, NQ),
          c.kAtt.subarray(0, NK),
          c.vAtt.subarray(0, NK),
          this.lengths,
          Cq,
          NH,
        );
      }
      const xMid = c.xMid;
      xMid.set(c.xIn.subarray(0, NC));
      this.linear(xMid, c.attnOut, l, 'wo', 'bo', N, Cq, C, true);
      k.rmsnormForward(c.ln2, c.rstd2, xMid, m.param(n.mlpNorm), N, C, normEps);
      this.linear(c.gate, c.ln2, l, 'wGate', 'bGate', N, C, F, false);
      this.linear(c.up, c.ln2, l, 'wUp', 'bUp', N, C, F, false);
      k.swigluForward(c.act, c.gate, c.up, NF);
      const xOut = l + 1 < L ? this.layers[l + 1].xIn : this.xF;
      xOut.set(xMid.subarray(0, NC));
      this.linear(xOut, c.act, l, 'wDown', 'bDown', N, F, C, true);
    }
    k.rmsnormForward(this.lnF, this.rstdF, this.xF, m.param(names.finalNorm), N, C, normEps);
    if (tree) return this.treeHeadForward(batch, tree);
    const targets = batch.targets ? new Int32Array(N) : undefined;
    batch.targets?.forEach((ts, b) => ts.forEach((t, i) => (targets![this.rowOffset[b] + i] = t)));
    let rows: Int32Array | undefined;
    if (batch.weightedRowsOnly && batch.weights) {
      const list: number[] = [];
      batch.weights.forEach((ws, b) => ws.forEach((w, i) => w !== 0 && list.push(this.rowOffset[b] + i)));
      rows = Int32Array.from(list);
    }
    this.head.forward(this.lnF, N, targets, rows);
  }

  /** The head over a forest's entries: their rows of lnF gathered (a row per target it predicts). */
  private treeHeadForward(batch: PackedBatch, tree: TreePack): void {
    const C = this.model.dims.C;
    const E = tree.E;
    if (E * C > this.lnE.length) {
      this.lnE = this.model.kernels.alloc(Math.ceil(E * 1.5) * C);
      this.dlnE = this.model.kernels.alloc(Math.ceil(E * 1.5) * C);
    }
    for (let e = 0; e < E; e++) {
      const r = tree.entryRow[e];
      this.lnE.set(this.lnF.subarray(r * C, (r + 1) * C), e * C);
    }
    let rows: Int32Array | undefined;
    if (batch.weightedRowsOnly && batch.weights) {
      const used = new Uint8Array(E);
      batch.weights.forEach((ws, b) => ws.forEach((w, i) => w !== 0 && (used[tree.entryOf[b][i]] = 1)));
      const list: number[] = [];
      used.forEach((u, e) => u && list.push(e));
      rows = Int32Array.from(list);
    }
    this.head.forward(this.lnE, E, tree.entryTarget, rows);
  }

  /** The head entry (coefficient and log-prob slot) of datum b's position t in the current batch. */
  entry(b: number, t: number): number {
    return this.tree ? this.tree.entryOf[b][t] : this.rowOffset[b] + t;
  }

  /** Log-prob of `target` at row n (after forward; NaN for a row the head skipped). */
  targetLogprob(n: number, target: number): number {
    return this.head.targetLogprob(n, target);
  }

  /** d loss / d logits from the per-row coefficients the loss wrote (rowCoef, rowBonus, rowTargets). */
  logitGradient(): void {
    this.head.gradient();
  }

  /** Backward from the loss's row coefficients; accumulates into model.grads (unless frozen) and the adapter's grads. */
  backward(): void {
    const m = this.model;
    const { C, F, L, NH, NKV, Cq, Ckv, hd } = m.dims;
    const k = m.kernels;
    const N = this.N;
    const NC = N * C;
    const NF = N * F;
    const names = m.names;
    const dlnF = this.dln.subarray(0, NC);
    const tree = this.tree;
    if (tree) {
      // each entry's gradient goes back to its row: a branch row sums its targets'
      const dlnE = this.dlnE.subarray(0, tree.E * C);
      this.head.backward(dlnE);
      dlnF.fill(0);
      for (let e = 0; e < tree.E; e++) {
        const o = tree.entryRow[e] * C;
        for (let c = 0; c < C; c++) dlnF[o + c] += dlnE[e * C + c];
      }
    } else {
      this.head.backward(dlnF);
    }
    let dx = this.dx.subarray(0, NC);
    dx.fill(0);
    k.rmsnormBackward(dx, this.normGrad(names.finalNorm), dlnF, this.xF, m.param(names.finalNorm), this.rstdF, N, C);
    for (let l = L - 1; l >= 0; l--) {
      const c = this.layers[l];
      const n = names.layers[l];
      // MLP branch: xOut = xMid + act · W_downᵀ
      const dact = this.dF1.subarray(0, NF);
      this.linearBackward(dact, dx, c.act, l, 'wDown', 'bDown', N, F, C, false);
      const dgate = this.dF2.subarray(0, NF);
      const dup = this.dF3.subarray(0, NF);
      k.swigluBackward(dgate, dup, dact, c.gate, c.up, NF);
      const dln2 = this.dln.subarray(0, NC);
      this.linearBackward(dln2, dgate, c.ln2, l, 'wGate', 'bGate', N, C, F, false);
      this.linearBackward(dln2, dup, c.ln2, l, 'wUp', 'bUp', N, C, F, true);
      const dxMid = this.dx2.subarray(0, NC);
      dxMid.set(dx);
      k.rmsnormBackward(dxMid, this.normGrad(n.mlpNorm), dln2, c.xMid, m.param(n.mlpNorm), c.rstd2, N, C);
      // attention branch: xMid = xIn + attnOut · Woᵀ
      const dattnOut = this.tmpC.subarray(0, N * Cq);
      this.linearBackward(dattnOut, dxMid, c.attnOut, l, 'wo', 'bo', N, Cq, C, false);
      const NQ = N * Cq;
      const dq = this.dq.subarray(0, NQ);
      const dkAtt = this.dkAtt.subarray(0, NQ);
      const dvAtt = this.dvAtt.subarray(0, NQ);
      const [q, kAtt, vAtt] = [c.q.subarray(0, NQ), c.kAtt.subarray(0, NQ), c.vAtt.subarray(0, NQ)];
      if (tree) k.treeAttentionBackward(dq, dkAtt, dvAtt, dattnOut, c.att, q, kAtt, vAtt, tree.layout, Cq, NH);
      else k.attentionBackward(dq, dkAtt, dvAtt, dattnOut, c.att, q, kAtt, vAtt, this.lengths, Cq, NH);
      const dk = this.dk.subarray(0, N * Ckv);
      const dv = this.dv.subarray(0, N * Ckv);
      if (NKV !== NH) {
        sumKV(dk, dkAtt, N, NKV, NH / NKV, hd);
        sumKV(dv, dvAtt, N, NKV, NH / NKV, hd);
      }
      k.rope(dq, this.positions, N, Cq, NH, m.rope.cos, m.rope.sin, true);
      k.rope(dk, this.positions, N, Ckv, NKV, m.rope.cos, m.rope.sin, true);
      let dqIn = dq;
      let dkIn = dk;
      if (m.config.qkNorm) {
        dqIn = this.dqRaw.subarray(0, NQ).fill(0);
        dkIn = this.dkRaw.subarray(0, N * Ckv).fill(0);
        k.rmsnormBackward(dqIn, this.normGrad(n.qNorm), dq, c.qRaw, m.param(n.qNorm), c.rstdQ, N * NH, hd);
        k.rmsnormBackward(dkIn, this.normGrad(n.kNorm), dk, c.kRaw, m.param(n.kNorm), c.rstdK, N * NKV, hd);
      }
      const dln1 = this.dln.subarray(0, NC);
      this.linearBackward(dln1, dqIn, c.ln1, l, 'wq', 'bq', N, C, Cq, false);
      this.linearBackward(dln1, dkIn, c.ln1, l, 'wk', 'bk', N, C, Ckv, true);
      this.linearBackward(dln1, dv, c.ln1, l, 'wv', 'bv', N, C, Ckv, true);
      // dxIn = dxMid + rmsnorm backward
      const dxIn = this.dx.subarray(0, NC);
      dxIn.set(dxMid);
      k.rmsnormBackward(dxIn, this.normGrad(n.attnNorm), dln1, c.xIn, m.param(n.attnNorm), c.rstd1, N, C);
      dx = dxIn;
    }
    if (!m.frozen) embeddingBackward(m.grads.get(names.embed), dx, this.tokens, N, C);
  }
}
