/**
 * The output head of the training graph: logits = lnF · headᵀ [rows, V], their log-softmax, the
 * per-row target log-prob and entropy, and the backward from the loss's per-row coefficients. Three
 * ways, by size: the whole [N, V] at once (small vocabularies: the nano models, unchanged); one kept
 * block of selected rows (no recomputation); or blocks of rows whose logits the backward recomputes
 * (no [N, V] buffer with a 150k vocabulary). `rows` restricts the head to the rows that carry loss
 * weight (SFT's prompts carry none): the others get a NaN log-prob and no gradient.
 * Shapes: N rows, C width, V vocabulary; `lnF` [N, C] is the final norm's output.
 */
import type { NanoModel } from './model.js';

/** Logits held whole up to this many floats (N·V, 256 MB per buffer). */
const FULL_HEAD_FLOATS = 1 << 26;
/** Rows per recomputed block: this many floats of logits (large blocks: each head GEMM packs the whole head). */
const HEAD_BLOCK_FLOATS = 1 << 25;

export class OutputHead {
  /** [N or block rows, V] log-softmax rows. */
  logprobs: Float32Array = new Float32Array(0);
  /** [N or block rows, V] d loss / d logits. */
  dlogits: Float32Array = new Float32Array(0);
  /** [N] per-row loss coefficients written by the loss (kernels.logitGrad), entropy, target. */
  rowCoef: Float32Array = new Float32Array(0);
  rowBonus: Float32Array = new Float32Array(0);
  rowEntropy: Float32Array = new Float32Array(0);
  rowTargets = new Int32Array(0);
  private rowLogprob = new Float64Array(0);
  // gathered rows of a block: lnF rows, d lnF rows, coefficients, entropies, targets
  private lnSel: Float32Array = new Float32Array(0);
  private dlnSel: Float32Array = new Float32Array(0);
  private selCoef: Float32Array = new Float32Array(0);
  private selBonus: Float32Array = new Float32Array(0);
  private selEntropy: Float32Array = new Float32Array(0);
  private selTargets = new Int32Array(0);
  private capN = 0;
  private capSel = 0;
  private mode: 'full' | 'kept' | 'blocks' = 'full';
  private rows: Int32Array | undefined;
  private count = 0;
  private blockRows = 0;
  private lnF: Float32Array = new Float32Array(0);
  private N = 0;

  /** `forcedBlockRows`: always blocks of this many rows (tests). */
  constructor(
    readonly model: NanoModel,
    private readonly forcedBlockRows?: number,
  ) {}

  private ensure(N: number): void {
    const { V, C } = this.model.dims;
    const a = (n: number) => this.model.kernels.alloc(n);
    if (N > this.capN) {
      const cap = Math.max(N, Math.ceil(this.capN * 1.5));
      this.capN = cap;
      this.rowCoef = a(cap);
      this.rowBonus = a(cap);
      this.rowEntropy = a(cap);
      this.rowTargets = new Int32Array(cap);
      this.rowLogprob = new Float64Array(cap);
      const sel = Math.max(1, Math.min(cap, Math.floor(FULL_HEAD_FLOATS / V), this.forcedBlockRows ?? Infinity));
      // the logits are capped at FULL_HEAD_FLOATS (then the head runs in blocks): past the cap a larger N
      // needs no new buffers (kernel memory is never freed, so reallocating would only leak)
      const logits = Math.min(cap * V, FULL_HEAD_FLOATS);
      if (logits > this.logprobs.length) {
        this.logprobs = a(logits);
        this.dlogits = a(logits);
      }
      if (sel > this.capSel) {
        this.capSel = sel;
        this.lnSel = a(sel * C);
        this.dlnSel = a(sel * C);
        this.selCoef = a(sel);
        this.selBonus = a(sel);
        this.selEntropy = a(sel);
        this.selTargets = new Int32Array(sel);
      }
    }
  }

  /** Log-softmax of the head for `lnF` [N, C]; `targets` [N] (required unless the whole head fits); `rows` = the rows to compute. */
  forward(lnF: Float32Array, N: number, targets: Int32Array | undefined, rows?: Int32Array): void {
    const { V } = this.model.dims;
    this.ensure(N);
    this.lnF = lnF;
    this.N = N;
    this.rows = rows;
    this.count = rows ? rows.length : N;
    if (!rows && this.forcedBlockRows === undefined && N * V <= FULL_HEAD_FLOATS) {
      this.mode = 'full';
      const lp = this.logprobs.subarray(0, N * V);
      this.model.kernels.matmulBT(lp, lnF, this.model.param(this.model.names.head), N, this.model.dims.C, V, false);
      this.model.kernels.logSoftmaxForward(lp, lp, N, V);
      return;
    }
    if (!targets) throw new Error('forward: a head in blocks of rows needs the batch targets');
    this.rowTargets.set(targets.subarray(0, N));
    this.mode = this.forcedBlockRows === undefined && this.count * V <= FULL_HEAD_FLOATS ? 'kept' : 'blocks';
    this.blockRows =
      this.mode === 'kept'
        ? Math.max(1, this.count)
        : Math.max(1, this.forcedBlockRows ?? Math.floor(HEAD_BLOCK_FLOATS / V));
    this.rowLogprob.fill(NaN, 0, N);
    this.rowEntropy.fill(0, 0, N);
    for (let b0 = 0; b0 < this.count; b0 += this.blockRows) {
      const R = Math.min(this.blockRows, this.count - b0);
      const lp = this.block(this.blockInput(b0, R), R);
      this.selCoef.fill(0, 0, R);
      this.selBonus.fill(0, 0, R);
      // entropy of each row (coef = bonus = 0: dlogits is scratch here)
      this.model.kernels.logitGrad(
        this.dlogits,
        this.selEntropy,
        lp,
        this.selCoef,
        this.selBonus,
        this.selTargets,
        R,
        V,
      );
      for (let i = 0; i < R; i++) {
        const row = this.row(b0 + i);
        this.rowLogprob[row] = lp[i * V + this.rowTargets[row]];
        this.rowEntropy[row] = this.selEntropy[i];
      }
    }
  }

  /** The batch row of the i-th computed row. */
  private row(i: number): number {
    return this.rows ? this.rows[i] : i;
  }

  /** lnF rows of block [b0, b0+R) of the computed rows (a view, or gathered), with their targets in selTargets. */
  private blockInput(b0: number, R: number): Float32Array {
    const C = this.model.dims.C;
    for (let i = 0; i < R; i++) this.selTargets[i] = this.rowTargets[this.row(b0 + i)];
    if (!this.rows) return this.lnF.subarray(b0 * C, (b0 + R) * C);
    for (let i = 0; i < R; i++) {
      const r = this.rows[b0 + i];
      this.lnSel.set(this.lnF.subarray(r * C, (r + 1) * C), i * C);
    }
    return this.lnSel.subarray(0, R * C);
  }

  /** Log-softmax of block [b0, b0+R) (its lnF rows `x`) into `logprobs` [R, V]. */
  private block(x: Float32Array, R: number): Float32Array {
    const { C, V } = this.model.dims;
    const lp = this.logprobs.subarray(0, R * V);
    this.model.kernels.matmulBT(lp, x, this.model.param(this.model.names.head), R, C, V, false);
    this.model.kernels.logSoftmaxForward(lp, lp, R, V);
    return lp;
  }

  /** Log-prob of `target` at row n (NaN for a row the head skipped). */
  targetLogprob(n: number, target: number): number {
    return this.mode === 'full' ? this.logprobs[n * this.model.dims.V + target] : this.rowLogprob[n];
  }

  /**
   * d loss / d logits from the coefficients the loss wrote (rowCoef, rowBonus, rowTargets): now for a
   * whole or kept head (rowEntropy too); a head in blocks does it block by block in backward.
   */
  gradient(): void {
    const V = this.model.dims.V;
    if (this.mode === 'full') {
      this.model.kernels.logitGrad(
        this.dlogits,
        this.rowEntropy,
        this.logprobs,
        this.rowCoef,
        this.rowBonus,
        this.rowTargets,
        this.N,
        V,
      );
    } else if (this.mode === 'kept') {
      this.blockGradient(0, this.count, this.logprobs.subarray(0, this.count * V));
    }
  }

  /** logitGrad of block [b0, b0+R) from its rows' coefficients into dlogits [R, V]. */
  private blockGradient(b0: number, R: number, lp: Float32Array): void {
    for (let i = 0; i < R; i++) {
      const row = this.row(b0 + i);
      this.selCoef[i] = this.rowCoef[row];
      this.selBonus[i] = this.rowBonus[row];
      this.selTargets[i] = this.rowTargets[row];
    }
    this.model.kernels.logitGrad(
      this.dlogits.subarray(0, R * this.model.dims.V),
      this.selEntropy,
      lp,
      this.selCoef,
      this.selBonus,
      this.selTargets,
      R,
      this.model.dims.V,
    );
  }

  /** Backward into dlnF [N, C] (rows the head skipped get 0), and the head weight's gradient unless frozen. */
  backward(dlnF: Float32Array): void {
    const m = this.model;
    const k = m.kernels;
    const { C, V } = m.dims;
    const head = m.param(m.names.head);
    const grad = m.frozen ? undefined : m.grads.get(m.names.head);
    if (this.mode === 'full') {
      const dlogits = this.dlogits.subarray(0, this.N * V);
      k.matmul(dlnF, dlogits, head, this.N, V, C, false);
      if (grad) k.matmulAT(grad, dlogits, this.lnF, V, this.N, C, true);
      return;
    }
    if (this.rows) dlnF.fill(0, 0, this.N * C);
    for (let b0 = 0; b0 < this.count; b0 += this.blockRows) {
      const R = Math.min(this.blockRows, this.count - b0);
      const x = this.blockInput(b0, R);
      if (this.mode === 'blocks') this.blockGradient(b0, R, this.block(x, R));
      const dlogits = this.dlogits.subarray(0, R * V);
      const out = this.rows ? this.dlnSel.subarray(0, R * C) : dlnF.subarray(b0 * C, (b0 + R) * C);
      k.matmul(out, dlogits, head, R, V, C, false);
      if (this.rows) for (let i = 0; i < R; i++) dlnF.set(out.subarray(i * C, (i + 1) * C), this.rows[b0 + i] * C);
      if (grad) k.matmulAT(grad, dlogits, x, V, R, C, true);
    }
  }
}
