/**
 * Teacher-forced forward and backward over a packed batch of sequences (rows of all sequences
 * concatenated: N = Σ T_b). Linear layers run on all N rows at once; attention runs per sequence.
 * Shapes: N rows, C = dModel, F = dFF, V = vocab, NH heads, L layers. The forward caches exactly what
 * backward needs (per layer: inputs, norm outputs and rstd, q/k/v after rotary, attention
 * probabilities, attention output, MLP pre-activations) in buffers reused across calls.
 * backward takes d(logits) and ACCUMULATES parameter gradients into model.grads.
 */
import type { NanoModel } from './model.js';
import { embeddingBackward, embeddingForward } from './ops/embedding.js';
import { attentionLayout } from '../kernels/reference.js';

interface LayerCache {
  xIn: Float32Array; // [N,C] residual stream entering the layer
  ln1: Float32Array; // [N,C]
  rstd1: Float32Array; // [N]
  q: Float32Array; // [N,C] after rotary
  k: Float32Array; // [N,C] after rotary
  v: Float32Array; // [N,C]
  att: Float32Array; // Σ_b NH·T_b² attention probabilities
  attnOut: Float32Array; // [N,C] before Wo
  xMid: Float32Array; // [N,C] after the attention residual
  ln2: Float32Array; // [N,C]
  rstd2: Float32Array; // [N]
  gate: Float32Array; // [N,F]
  up: Float32Array; // [N,F]
  act: Float32Array; // [N,F] silu(gate)·up
}

/** A packed batch: sequences of input tokens. */
export interface PackedBatch {
  /** Input token ids of each sequence. */
  sequences: number[][];
}

export class TrainingGraph {
  private capacityN = 0;
  private capacityAtt = 0;
  private layers: LayerCache[] = [];
  private xF!: Float32Array; // [N,C] final residual
  private lnF!: Float32Array; // [N,C]
  private rstdF!: Float32Array; // [N]
  /** [N,V] log-softmax of the logits after forward. */
  logprobs!: Float32Array;
  /** [N,V] gradient w.r.t. logits, filled by the loss before backward. */
  dlogits!: Float32Array;
  /** [N] per-row scratch of the loss (kernels.logitGrad): d loss / d lp(target), entropy-bonus weight, entropy. */
  rowCoef!: Float32Array;
  rowBonus!: Float32Array;
  rowEntropy!: Float32Array;
  /** [N] target token of each row (set by the loss). */
  rowTargets: Int32Array = new Int32Array(0);
  // backward scratch
  private dx!: Float32Array;
  private dx2!: Float32Array;
  private dln!: Float32Array;
  private dq!: Float32Array;
  private dk!: Float32Array;
  private dv!: Float32Array;
  private dF1!: Float32Array;
  private dF2!: Float32Array;
  private dF3!: Float32Array;
  private datt!: Float32Array;
  private tmpC!: Float32Array;

  /** Rows in the current batch. */
  N = 0;
  tokens: Int32Array = new Int32Array(0);
  positions: Int32Array = new Int32Array(0);
  /** Row offset of each sequence. */
  rowOffset: number[] = [];
  lengths: number[] = [];

  constructor(readonly model: NanoModel) {}

  private ensureCapacity(N: number, attSize: number): void {
    const { dModel: C, dFF: F, vocabSize: V, nLayers: L } = this.model.config;
    const k = this.model.kernels;
    if (N > this.capacityN) {
      const cap = Math.max(N, Math.ceil(this.capacityN * 1.5));
      this.capacityN = cap;
      const a = (n: number) => k.alloc(n);
      this.layers = Array.from({ length: L }, (_, l) => ({
        xIn: a(cap * C), ln1: a(cap * C), rstd1: a(cap), q: a(cap * C), k: a(cap * C), v: a(cap * C),
        att: this.layers[l]?.att ?? a(0), attnOut: a(cap * C), xMid: a(cap * C), ln2: a(cap * C), rstd2: a(cap),
        gate: a(cap * F), up: a(cap * F), act: a(cap * F),
      }));
      this.xF = a(cap * C); this.lnF = a(cap * C); this.rstdF = a(cap);
      this.logprobs = a(cap * V); this.dlogits = a(cap * V);
      this.rowCoef = a(cap); this.rowBonus = a(cap); this.rowEntropy = a(cap); this.rowTargets = new Int32Array(cap);
      this.dx = a(cap * C); this.dx2 = a(cap * C); this.dln = a(cap * C);
      this.dq = a(cap * C); this.dk = a(cap * C); this.dv = a(cap * C);
      this.dF1 = a(cap * F); this.dF2 = a(cap * F); this.dF3 = a(cap * F);
      this.tmpC = a(cap * C);
    }
    if (attSize > this.capacityAtt) {
      const cap = Math.max(attSize, Math.ceil(this.capacityAtt * 1.5));
      this.capacityAtt = cap;
      for (const layer of this.layers) layer.att = k.alloc(cap);
      this.datt = k.alloc(cap);
    }
  }

  /** Forward pass; afterwards `logprobs` [N,V] holds log-softmax rows. */
  forward(batch: PackedBatch): void {
    const m = this.model;
    const { dModel: C, dFF: F, vocabSize: V, nLayers: L, nHeads: NH, contextLength, normEps } = m.config;
    const k = m.kernels;
    const seqs = batch.sequences;
    for (const s of seqs) {
      if (s.length === 0) throw new Error('forward: empty sequence');
      if (s.length > contextLength) throw new Error(`forward: sequence of ${s.length} tokens exceeds contextLength ${contextLength}`);
    }
    this.lengths = seqs.map((s) => s.length);
    const { rowOffset, rows: N, attSize } = attentionLayout(this.lengths, NH);
    this.rowOffset = rowOffset;
    this.ensureCapacity(N, attSize);
    this.N = N;
    this.tokens = new Int32Array(N);
    this.positions = new Int32Array(N);
    seqs.forEach((s, b) => {
      for (let t = 0; t < s.length; t++) {
        if (!(s[t] >= 0 && s[t] < V)) throw new Error(`forward: token id ${s[t]} outside vocabulary of ${V}`);
        this.tokens[this.rowOffset[b] + t] = s[t];
        this.positions[this.rowOffset[b] + t] = t;
      }
    });
    const NC = N * C;
    const NF = N * F;
    embeddingForward(this.layers.length ? this.layers[0].xIn : this.xF, m.param('tok_emb'), this.tokens, N, C);
    for (let l = 0; l < L; l++) {
      const c = this.layers[l];
      const p = `layers.${l}.`;
      k.rmsnormForward(c.ln1, c.rstd1, c.xIn, m.param(p + 'attn_norm'), N, C, normEps);
      k.matmulBT(c.q, c.ln1, m.param(p + 'wq'), N, C, C, false);
      k.matmulBT(c.k, c.ln1, m.param(p + 'wk'), N, C, C, false);
      k.matmulBT(c.v, c.ln1, m.param(p + 'wv'), N, C, C, false);
      k.rope(c.q, this.positions, N, C, NH, m.rope.cos, m.rope.sin, false);
      k.rope(c.k, this.positions, N, C, NH, m.rope.cos, m.rope.sin, false);
      k.attentionForward(c.attnOut.subarray(0, NC), c.att, c.q.subarray(0, NC), c.k.subarray(0, NC), c.v.subarray(0, NC), this.lengths, C, NH);
      const xMid = c.xMid;
      xMid.set(c.xIn.subarray(0, NC));
      k.matmulBT(xMid, c.attnOut, m.param(p + 'wo'), N, C, C, true);
      k.rmsnormForward(c.ln2, c.rstd2, xMid, m.param(p + 'mlp_norm'), N, C, normEps);
      k.matmulBT(c.gate, c.ln2, m.param(p + 'w_gate'), N, C, F, false);
      k.matmulBT(c.up, c.ln2, m.param(p + 'w_up'), N, C, F, false);
      k.swigluForward(c.act, c.gate, c.up, NF);
      const xOut = l + 1 < L ? this.layers[l + 1].xIn : this.xF;
      xOut.set(xMid.subarray(0, NC));
      k.matmulBT(xOut, c.act, m.param(p + 'w_down'), N, F, C, true);
    }
    k.rmsnormForward(this.lnF, this.rstdF, this.xF, m.param('final_norm'), N, C, normEps);
    const lp = this.logprobs.subarray(0, N * V);
    k.matmulBT(lp, this.lnF, m.param(m.headName), N, C, V, false);
    k.logSoftmaxForward(lp, lp, N, V);
  }

  /** Backward from `dlogits` [N,V] (d loss / d logits); accumulates into model.grads. */
  backward(): void {
    const m = this.model;
    const { dModel: C, dFF: F, vocabSize: V, nLayers: L, nHeads: NH } = m.config;
    const k = m.kernels;
    const g = m.grads;
    const N = this.N;
    const NC = N * C;
    const NF = N * F;
    const dlogits = this.dlogits.subarray(0, N * V);
    // head: logits = lnF · headᵀ
    const dlnF = this.dln.subarray(0, NC);
    k.matmul(dlnF, dlogits, m.param(m.headName), N, V, C, false);
    k.matmulAT(g.get(m.headName), dlogits, this.lnF, V, N, C, true);
    let dx = this.dx.subarray(0, NC);
    dx.fill(0);
    k.rmsnormBackward(dx, g.get('final_norm'), dlnF, this.xF, m.param('final_norm'), this.rstdF, N, C);
    for (let l = L - 1; l >= 0; l--) {
      const c = this.layers[l];
      const p = `layers.${l}.`;
      // MLP branch: xOut = xMid + act · W_downᵀ
      const dact = this.dF1.subarray(0, NF);
      k.matmul(dact, dx, m.param(p + 'w_down'), N, C, F, false);
      k.matmulAT(g.get(p + 'w_down'), dx, c.act, C, N, F, true);
      const dgate = this.dF2.subarray(0, NF);
      const dup = this.dF3.subarray(0, NF);
      k.swigluBackward(dgate, dup, dact, c.gate, c.up, NF);
      const dln2 = this.dln.subarray(0, NC);
      k.matmul(dln2, dgate, m.param(p + 'w_gate'), N, F, C, false);
      k.matmul(dln2, dup, m.param(p + 'w_up'), N, F, C, true);
      k.matmulAT(g.get(p + 'w_gate'), dgate, c.ln2, F, N, C, true);
      k.matmulAT(g.get(p + 'w_up'), dup, c.ln2, F, N, C, true);
      const dxMid = this.dx2.subarray(0, NC);
      dxMid.set(dx);
      k.rmsnormBackward(dxMid, g.get(p + 'mlp_norm'), dln2, c.xMid, m.param(p + 'mlp_norm'), c.rstd2, N, C);
      // attention branch: xMid = xIn + attnOut · Woᵀ
      const dattnOut = this.tmpC.subarray(0, NC);
      k.matmul(dattnOut, dxMid, m.param(p + 'wo'), N, C, C, false);
      k.matmulAT(g.get(p + 'wo'), dxMid, c.attnOut, C, N, C, true);
      const dq = this.dq.subarray(0, NC);
      const dk = this.dk.subarray(0, NC);
      const dv = this.dv.subarray(0, NC);
      k.attentionBackward(dq, dk, dv, dattnOut, c.att, c.q.subarray(0, NC), c.k.subarray(0, NC), c.v.subarray(0, NC), this.lengths, C, NH);
      k.rope(dq, this.positions, N, C, NH, m.rope.cos, m.rope.sin, true);
      k.rope(dk, this.positions, N, C, NH, m.rope.cos, m.rope.sin, true);
      const dln1 = this.dln.subarray(0, NC);
      k.matmul(dln1, dq, m.param(p + 'wq'), N, C, C, false);
      k.matmul(dln1, dk, m.param(p + 'wk'), N, C, C, true);
      k.matmul(dln1, dv, m.param(p + 'wv'), N, C, C, true);
      k.matmulAT(g.get(p + 'wq'), dq, c.ln1, C, N, C, true);
      k.matmulAT(g.get(p + 'wk'), dk, c.ln1, C, N, C, true);
      k.matmulAT(g.get(p + 'wv'), dv, c.ln1, C, N, C, true);
      // dxIn = dxMid + rmsnorm backward
      const dxIn = this.dx.subarray(0, NC);
      dxIn.set(dxMid);
      k.rmsnormBackward(dxIn, g.get(p + 'attn_norm'), dln1, c.xIn, m.param(p + 'attn_norm'), c.rstd1, N, C);
      dx = dxIn;
    }
    embeddingBackward(g.get('tok_emb'), dx, this.tokens, N, C);
  }

  /** Log-prob of `target` at row n (after forward). */
  targetLogprob(n: number, target: number): number {
    return this.logprobs[n * this.model.config.vocabSize + target];
  }
}
