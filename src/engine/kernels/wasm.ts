/**
 * The WASM SIMD backend: instantiates build/kernels-fma.wasm (relaxed SIMD, fused multiply-add) when
 * the runtime supports it, else build/kernels.wasm (SIMD128), over one shared WebAssembly.Memory and
 * manages it from JS. `alloc` hands out Float32Array views into that memory (a bump allocator; views
 * stay valid when memory grows because the memory is shared); kernels called with such views pass
 * their byte offsets straight to WASM. Arrays living elsewhere are copied into a scratch region above
 * the heap for the call (and outputs copied back). Kernels without a WASM version use the reference.
 */
import { readFileSync, existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { Worker } from 'node:worker_threads';
import type { AdamWStep, Kernels } from './types.js';
import { attentionLayout, referenceKernels, type AttentionLayout } from './reference.js';

const PAGE = 65536;
/** Start of the JS-managed heap (the module's static data sits below). */
const HEAP_BASE = 1 << 20;

/** "fma": the relaxed-SIMD build (fused multiply-add); "plain": SIMD128 mul + add. */
export type WasmVariant = 'fma' | 'plain';

export function kernelWasmPath(variant: WasmVariant = 'plain'): string {
  return join(dirname(fileURLToPath(import.meta.url)), `../../../build/${variant === 'fma' ? 'kernels-fma' : 'kernels'}.wasm`);
}

/**
 * Whether this runtime compiles relaxed SIMD. Node 20's V8 keeps it behind
 * --experimental-wasm-relaxed-simd; the flag is turned on here (it only gates which wasm modules
 * validate) and the module is validated before use.
 */
export function relaxedSimdSupported(bytes: Uint8Array<ArrayBuffer>): boolean {
  if (WebAssembly.validate(bytes)) return true;
  try {
    setFlagsFromString('--experimental-wasm-relaxed-simd');
  } catch {
    return false;
  }
  return WebAssembly.validate(bytes);
}

/** Which build to load: `preference` (or ARBOR_KERNELS_FMA=0/1), falling back to plain when FMA cannot load. */
function chooseVariant(preference: 'auto' | WasmVariant): { variant: WasmVariant; bytes: Uint8Array<ArrayBuffer> } {
  const env = process.env.ARBOR_KERNELS_FMA;
  const want = preference !== 'auto' ? preference : env === '0' ? 'plain' : 'fma';
  if (want === 'fma') {
    const path = kernelWasmPath('fma');
    if (existsSync(path)) {
      const bytes = new Uint8Array(readFileSync(path));
      if (relaxedSimdSupported(bytes)) return { variant: 'fma', bytes };
    }
    if (preference === 'fma' || env === '1') throw new Error(`${path}: relaxed-SIMD kernels unavailable (missing build or unsupported runtime)`);
  }
  const path = kernelWasmPath('plain');
  if (!existsSync(path)) throw new Error(`${path} not found: run "npm run build"`);
  return { variant: 'plain', bytes: new Uint8Array(readFileSync(path)) };
}

interface Exports {
  gemmSmallBT(M: number, N: number, K: number, a: number, b: number, c: number, accumulate: number): void;
  rmsnormForward(out: number, rstd: number, x: number, weight: number, N: number, C: number, eps: number): void;
  rmsnormBackward(dx: number, dweight: number, dout: number, x: number, weight: number, rstd: number, N: number, C: number): void;
  softmaxForward(out: number, x: number, N: number, C: number, log: number): void;
  softmaxBackward(dx: number, dout: number, y: number, N: number, C: number, log: number): void;
  attentionForward(out: number, att: number, q: number, k: number, v: number, seqs: number, b0: number, b1: number, C: number, NH: number, h0: number, h1: number, scratch: number): void;
  attentionBackward(dq: number, dk: number, dv: number, dout: number, att: number, q: number, k: number, v: number, seqs: number, b0: number, b1: number, C: number, NH: number, h0: number, h1: number, scratch: number): void;
  attentionScratchBytes(T: number, hs: number): number;
  swigluForward(out: number, gate: number, up: number, n: number): void;
  logitGrad(dlogits: number, entropy: number, lsm: number, coef: number, bonus: number, targets: number, N: number, V: number): void;
  adamw(x: number, g: number, m: number, v: number, n: number, lr: number, beta1: number, beta2: number, eps: number, wd: number, bc1: number, bc2: number, gradScale: number): void;
  rope(x: number, positions: number, N: number, C: number, NH: number, cos: number, sin: number, half: number, inverse: number): void;
  swigluBackward(dgate: number, dup: number, dout: number, gate: number, up: number, n: number): void;
  decodeAttention(out: number, q: number, k: number, v: number, T: number, C: number, NH: number, scores: number): void;
  gemm(M: number, N: number, K: number, a: number, sai: number, sak: number, b: number, sbk: number, sbj: number, c: number, ldc: number, accumulate: number, packB: number, packA: number): void;
}

export class WasmKernelMemory {
  readonly memory: WebAssembly.Memory;
  /** Every SharedArrayBuffer object this memory has exposed (views from any of them are ours). */
  private readonly buffers = new Set<ArrayBufferLike>();
  private heapTop = HEAP_BASE;
  private scratchTop = 0;

  constructor(initialPages = 64) {
    this.memory = new WebAssembly.Memory({ initial: initialPages, maximum: 32768, shared: true });
    this.buffers.add(this.memory.buffer);
  }

  private ensure(bytes: number): void {
    const have = this.memory.buffer.byteLength;
    if (bytes <= have) return;
    this.memory.grow(Math.ceil((bytes - have) / PAGE) + 16);
    this.buffers.add(this.memory.buffer);
  }

  /** A zeroed, 16-byte aligned, persistent Float32Array in WASM memory. */
  alloc(n: number): Float32Array {
    const start = (this.heapTop + 15) & ~15;
    const bytes = Math.max(n, 1) * 4;
    this.ensure(start + bytes);
    this.heapTop = start + bytes;
    // the bytes may have served as scratch space of an earlier call (scratch lives above the heap)
    return new Float32Array(this.memory.buffer, start, n).fill(0);
  }

  owns(a: Float32Array): boolean {
    return this.buffers.has(a.buffer);
  }

  /** Begin a call: scratch space starts right above the heap. */
  beginScratch(): void {
    this.scratchTop = (this.heapTop + 15) & ~15;
  }

  /** Scratch bytes (aligned) valid until the next beginScratch. Returns the byte offset. */
  scratch(bytes: number): number {
    const start = (this.scratchTop + 15) & ~15;
    this.ensure(start + bytes);
    this.scratchTop = start + bytes;
    return start;
  }

  /** Byte offset of `a` in WASM memory, copying it into scratch if it lives elsewhere. */
  pointer(a: Float32Array, floats: number): number {
    if (this.owns(a)) return a.byteOffset;
    const p = this.scratch(floats * 4);
    new Float32Array(this.memory.buffer, p, floats).set(a.subarray(0, floats));
    return p;
  }

  view(pointer: number, floats: number): Float32Array {
    return new Float32Array(this.memory.buffer, pointer, floats);
  }
}

/**
 * A helper thread: a worker instantiates the same module over the same shared memory and runs one
 * share of a kernel call (the lower rows of a GEMM, the later sequences or the upper heads of an
 * attention call, the upper half of an element or row range) while the calling thread runs the rest. Control is an Int32Array in a
 * SharedArrayBuffer: [state, op, argc, args...] with op an index into HELPER_OPS; state 1 = job
 * posted, 0 = done, 3 = the helper failed (the caller resets it and throws). The caller blocks in
 * Atomics.wait (no event loop round trip), with a time limit so a dead helper is an error, not a
 * hang. Each output element is computed by the same code in the same order whichever thread runs
 * it, so results are bit-identical to one thread.
 */
const HELPER_OPS = ['gemm', 'attentionForward', 'attentionBackward', 'swigluForward', 'swigluBackward', 'rope', 'rmsnormForward', 'rmsnormBackward', 'logitGrad', 'adamw'] as const;
type HelperOp = (typeof HELPER_OPS)[number];
/** Arguments passed as f32 (read through a Float32Array view of the control words); all others are i32. */
const FLOAT_ARGS: Partial<Record<HelperOp, number[]>> = { rmsnormForward: [6], adamw: [5, 6, 7, 8, 9, 10, 11, 12] };

/** Byte offset in the control buffer of the helper's last job duration (a float64, ms, its own clock). */
const DONE_OFFSET = 128;

/**
 * How long each side spins on the control word before sleeping in Atomics.wait. A futex wake on this
 * 2-core VM took ~100 µs (a 2×80 µs elementwise call took 145 µs on two threads, 82 µs on one), as
 * long as a whole attention call; spinning hands a job over in well under a microsecond. The helper
 * spins only this long after its last job, so between steps it sleeps and leaves the core free.
 */
const SPIN_MS = 2;

const HELPER_WORKER = `const DONE_OFFSET = ${DONE_OFFSET};
const { workerData } = require('node:worker_threads');
const { module, memory, control, ops, floatArgs, spinMs: SPIN_MS } = workerData;
const c = new Int32Array(control);
const f = new Float32Array(control);
const done = new Float64Array(control, DONE_OFFSET, 1);
let fns = [];
try {
  const ex = new WebAssembly.Instance(module, { env: { memory } }).exports;
  fns = ops.map((name) => ex[name]);
} catch {}
let last = performance.now();
for (;;) {
  // spin for a while after a job (calls come back to back while a step runs), then sleep
  while (Atomics.load(c, 0) !== 1) {
    if (performance.now() - last > SPIN_MS) {
      Atomics.wait(c, 0, 0, 1000);
      last = performance.now();
      if (Atomics.load(c, 0) !== 1) last -= SPIN_MS;
    }
  }
  let state = 0;
  const started = performance.now();
  try {
    const args = [];
    const floats = floatArgs[c[1]];
    for (let i = 0; i < c[2]; i++) args.push(floats.includes(i) ? f[3 + i] : c[3 + i]);
    fns[c[1]].apply(null, args);
  } catch {
    state = 3;
  }
  last = performance.now();
  done[0] = last - started;
  Atomics.store(c, 0, state);
  Atomics.notify(c, 0);
}
`;

/** Longest a job may take on the helper before the caller gives up (a dead worker, not a slow one). */
const HELPER_TIMEOUT_MS = 120_000;
const HELPER_MAX_ARGS = 20;

class KernelHelper {
  private readonly control = new Int32Array(new SharedArrayBuffer(DONE_OFFSET + 8));
  private readonly done = new Float64Array(this.control.buffer, DONE_OFFSET, 1);
  private readonly floats = new Float32Array(this.control.buffer);
  private readonly worker: Worker;

  constructor(module: WebAssembly.Module, memory: WebAssembly.Memory, private readonly spinMs = SPIN_MS) {
    this.worker = new Worker(HELPER_WORKER, { eval: true, workerData: { module, memory, control: this.control.buffer, ops: [...HELPER_OPS], floatArgs: HELPER_OPS.map((op) => FLOAT_ARGS[op] ?? []), spinMs } });
    this.worker.unref();
  }

  /** Start `op(...args)` on the helper (i32 arguments, f32 at the positions FLOAT_ARGS names). */
  post(op: HelperOp, args: number[]): void {
    if (args.length > HELPER_MAX_ARGS) throw new Error(`wasm kernels: ${op} has ${args.length} arguments, the helper takes ${HELPER_MAX_ARGS}`);
    this.control[1] = HELPER_OPS.indexOf(op);
    this.control[2] = args.length;
    const floats = FLOAT_ARGS[op] ?? [];
    for (let i = 0; i < args.length; i++) {
      if (floats.includes(i)) this.floats[i + 3] = args[i];
      else this.control[i + 3] = args[i];
    }
    Atomics.store(this.control, 0, 1);
    Atomics.notify(this.control, 0);
  }

  /** How long the last job ran on the helper (its own clock: the threads' time origins differ). */
  lastJobMs(): number {
    return this.done[0];
  }

  wait(): void {
    const spinUntil = performance.now() + this.spinMs;
    while (Atomics.load(this.control, 0) === 1 && performance.now() < spinUntil);
    const deadline = Date.now() + HELPER_TIMEOUT_MS;
    while (Atomics.load(this.control, 0) === 1) {
      if (Atomics.wait(this.control, 0, 1, 1000) === 'timed-out' && Date.now() > deadline) throw new Error('wasm kernels: the helper thread did not answer');
    }
    if (Atomics.load(this.control, 0) === 3) {
      Atomics.store(this.control, 0, 0);
      throw new Error('wasm kernels: the helper thread failed');
    }
  }
}

/**
 * GEMMs below this many multiply-adds stay on one thread. Measured on this 2-core VM when it was quiet
 * (bench/engine.ts crossover table, x·Wᵀ with K=128, N=384): two threads were slower at 32 and 64
 * rows (1.6M, 3.1M multiply-adds: 0.70×, 0.96×) and faster from 128 rows (6.3M: 1.72×; 6144 rows: 1.99×).
 */
export const GEMM_THREAD_MIN_WORK = 1 << 22;
/** Attention calls below this much work (Σ T²·C over the sequences) stay on one thread. */
export const ATTENTION_THREAD_MIN_WORK = 1 << 18;
/** Elementwise kernels below this many elements stay on one thread. */
export const ELEMENTWISE_THREAD_MIN = 1 << 15;

/**
 * The helper's share of a GEMM's rows, following the two threads' measured throughput. Equal halves
 * left the calling thread waiting ~190 µs per large GEMM on this VM: the helper ran its half ~12%
 * slower and wakes with a delay (see SPIN_MS). Which thread computes a row does not change its value,
 * so results stay bit-identical whatever the split.
 */
export class AdaptiveSplit {
  helperShare = 0.5;

  /** One split call: `mainRows` took `mainMs` on this thread, `helperRows` took `helperMs` on the helper. */
  observe(mainRows: number, mainMs: number, helperRows: number, helperMs: number): void {
    if (!(mainMs > 0.05 && helperMs > 0.05)) return;
    const main = mainRows / mainMs;
    const help = helperRows / helperMs;
    const ideal = help / (main + help);
    this.helperShare = Math.min(0.65, Math.max(0.35, 0.8 * this.helperShare + 0.2 * ideal));
  }
}

export async function createWasmKernels(options: { variant?: 'auto' | WasmVariant; threads?: number; spinMs?: number } = {}): Promise<Kernels> {
  const { variant, bytes } = chooseVariant(options.variant ?? 'auto');
  const mem = new WasmKernelMemory();
  const module = await WebAssembly.compile(bytes);
  const threads = Math.max(1, Math.min(2, Math.floor(options.threads ?? 1)));
  const helper = threads > 1 ? new KernelHelper(module, mem.memory, options.spinMs) : undefined;
  const instance = await WebAssembly.instantiate(module, {
    env: {
      memory: mem.memory,
      abort: () => {
        throw new Error('wasm kernel abort');
      },
    },
  });
  const ex = instance.exports as unknown as Exports;
  const KC = 256;
  const split = new AdaptiveSplit();

  /** out[M,N] (+)= A·B with A(i,k)=a[i*sai+k*sak], B(k,j)=b[k*sbk+j*sbj]. */
  function gemm(out: Float32Array, a: Float32Array, aFloats: number, sai: number, sak: number, b: Float32Array, bFloats: number, sbk: number, sbj: number, M: number, K: number, N: number, accumulate: boolean): void {
    mem.beginScratch();
    const pa = mem.pointer(a, aFloats);
    const pb = mem.pointer(b, bFloats);
    const outOwned = mem.owns(out);
    const pc = outOwned ? out.byteOffset : mem.pointer(out, M * N);
    const packBytesB = Math.min(KC, Math.max(K, 1)) * (Math.ceil(N / 8) * 8) * 4;
    const packBytesA = Math.min(KC, Math.max(K, 1)) * 4 * 4 + 4 * 8 * 4; // packed A panel + the 4×8 ragged-edge tile
    const packB = mem.scratch(packBytesB);
    const packA = mem.scratch(packBytesA);
    if (helper && M >= 16 && M * N * K >= GEMM_THREAD_MIN_WORK) {
      // rows [0, M1) here, [M1, M) on the helper (split on a multiple of the 4-row tile, in proportion
      // to the threads' measured speeds)
      const M1 = Math.min(M - 4, Math.max(4, Math.round((M * (1 - split.helperShare)) / 4) * 4));
      const t0 = performance.now();
      helper.post('gemm', [M - M1, N, K, pa + M1 * sai * 4, sai, sak, pb, sbk, sbj, pc + M1 * N * 4, N, accumulate ? 1 : 0, mem.scratch(packBytesB), mem.scratch(packBytesA)]);
      ex.gemm(M1, N, K, pa, sai, sak, pb, sbk, sbj, pc, N, accumulate ? 1 : 0, packB, packA);
      const t1 = performance.now();
      helper.wait();
      // the helper's time: from the post until it was seen done when this thread waited for it
      // (start latency included), else its own run time
      const end = performance.now();
      split.observe(M1, t1 - t0, M - M1, end - t1 > 0.02 ? end - t0 : helper.lastJobMs());
    } else {
      ex.gemm(M, N, K, pa, sai, sak, pb, sbk, sbj, pc, N, accumulate ? 1 : 0, packB, packA);
    }
    if (!outOwned) out.set(mem.view(pc, M * N));
  }

  /**
   * An attention kernel over pointers `p` for a packed batch of `lengths`: with the helper, a large
   * call is split by sequences (at half the work, Σ T²) or, for one sequence, by heads.
   */
  function attention(op: 'attentionForward' | 'attentionBackward', p: number[], lengths: readonly number[], layout: AttentionLayout, C: number, NH: number): void {
    const B = lengths.length;
    const seqs = mem.scratch(Math.max(1, B) * 12);
    const table = new Int32Array(mem.memory.buffer, seqs, B * 3);
    let maxT = 0;
    let work = 0;
    lengths.forEach((T, b) => {
      table[b * 3] = layout.rowOffset[b];
      table[b * 3 + 1] = layout.attOffset[b];
      table[b * 3 + 2] = T;
      maxT = Math.max(maxT, T);
      work += T * T * C;
    });
    const bytes = ex.attentionScratchBytes(maxT, Math.floor(C / NH));
    const run = (b0: number, b1: number, h0: number, h1: number, scratch: number) => (ex[op] as (...a: number[]) => void)(...p, seqs, b0, b1, C, NH, h0, h1, scratch);
    if (helper && work >= ATTENTION_THREAD_MIN_WORK && (B >= 2 || NH >= 2)) {
      let s = B;
      if (B >= 2) {
        // the first sequence index where the work done so far reaches half
        let acc = 0;
        s = 1;
        for (let b = 0; b < B - 1; b++) {
          acc += lengths[b] * lengths[b];
          s = b + 1;
          if (2 * acc * C >= work) break;
        }
        helper.post(op, [...p, seqs, s, B, C, NH, 0, NH, mem.scratch(bytes)]);
        run(0, s, 0, NH, mem.scratch(bytes));
      } else {
        const H1 = NH >> 1;
        helper.post(op, [...p, seqs, 0, 1, C, NH, H1, NH, mem.scratch(bytes)]);
        run(0, 1, 0, H1, mem.scratch(bytes));
      }
      helper.wait();
    } else {
      run(0, B, 0, NH, mem.scratch(bytes));
    }
  }

  /**
   * A kernel over `count` items (rows or elements) doing `work` element operations: `job(i0, n, run)`
   * runs items [i0, i0+n). A large call splits at half, rounded down to a multiple of `granule` (4
   * keeps element ranges on 16-byte boundaries), and the upper part goes to the helper. With
   * `alwaysSplit`, one thread also runs the same two ranges (for a result that depends on the split,
   * like a partial reduction).
   */
  function split2(count: number, work: number, granule: number, job: (i0: number, n: number, run: (op: HelperOp, args: number[]) => void) => void, alwaysSplit = false): void {
    const here = (op: HelperOp, args: number[]) => (ex[op] as (...a: number[]) => void)(...args);
    const n1 = Math.floor(count / (2 * granule)) * granule;
    const large = n1 > 0 && work >= ELEMENTWISE_THREAD_MIN;
    if (helper && large) {
      job(n1, count - n1, (op, args) => helper.post(op, args));
      job(0, n1, here);
      helper.wait();
    } else if (alwaysSplit && large) {
      job(0, n1, here);
      job(n1, count - n1, here);
    } else {
      job(0, count, here);
    }
  }

  /** An elementwise kernel over n elements (see split2). */
  const byHalves = (n: number, job: Parameters<typeof split2>[3]) => split2(n, n, 4, job);
  /** A row-wise kernel over N rows of C (see split2). */
  const byRows = (N: number, C: number, job: Parameters<typeof split2>[3], alwaysSplit = false) => split2(N, N * C, 1, job, alwaysSplit);

  /** The first n entries of an Int32Array, copied into scratch; returns their byte offset. */
  function ints(a: Int32Array, n: number): number {
    const p = mem.scratch(n * 4);
    new Int32Array(mem.memory.buffer, p, n).set(a.subarray(0, n));
    return p;
  }

  /** Softmax / log-softmax forward; `out` may alias `x`. */
  function softmaxFwd(out: Float32Array, x: Float32Array, N: number, C: number, log: number): void {
    if (out === x || (out.buffer === x.buffer && out.byteOffset === x.byteOffset)) {
      withPointers([], [[out, N * C]], ([po]) => ex.softmaxForward(po, po, N, C, log));
    } else {
      withPointers([[x, N * C]], [[out, N * C]], ([po, px]) => ex.softmaxForward(po, px, N, C, log));
    }
  }

  /** Run `fn` with WASM pointers for `inputs` (copied in if foreign) and `outputs` (copied back). */
  function withPointers(inputs: Array<[Float32Array, number]>, outputs: Array<[Float32Array, number]>, fn: (pointers: number[]) => void): void {
    mem.beginScratch();
    const pointers = [...outputs, ...inputs].map(([a, n]) => mem.pointer(a, n));
    fn(pointers);
    outputs.forEach(([a, n], i) => {
      if (!mem.owns(a)) a.set(mem.view(pointers[i], n));
    });
  }

  return {
    ...referenceKernels,
    rmsnormForward: (out, rstd, x, weight, N, C, eps) =>
      withPointers([[x, N * C], [weight, C]], [[out, N * C], [rstd, N]], ([po, pr, px, pw]) =>
        byRows(N, C, (n0, rows, run) => run('rmsnormForward', [po + n0 * C * 4, pr + n0 * 4, px + n0 * C * 4, pw, rows, C, eps]))),
    rmsnormBackward: (dx, dweight, dout, x, weight, rstd, N, C) =>
      withPointers([[dout, N * C], [x, N * C], [weight, C], [rstd, N]], [[dx, N * C], [dweight, C]], ([pdx, pdw, pdo, px, pw, pr]) => {
        // rows [0, n1) add into dweight, rows [n1, N) into a zeroed partial added afterwards: the same
        // sums in the same order on one thread or two
        const partial = N * C >= ELEMENTWISE_THREAD_MIN ? mem.scratch(C * 4) : 0;
        if (partial) mem.view(partial, C).fill(0);
        byRows(N, C, (n0, rows, run) => run('rmsnormBackward', [pdx + n0 * C * 4, n0 ? partial : pdw, pdo + n0 * C * 4, px + n0 * C * 4, pw, pr + n0 * 4, rows, C]), partial !== 0);
        if (partial) {
          const dw = mem.view(pdw, C);
          const pv = mem.view(partial, C);
          for (let c = 0; c < C; c++) dw[c] += pv[c];
        }
      }),
    logitGrad: (dlogits, entropy, lsm, coef, bonus, targets, N, V) =>
      withPointers([[lsm, N * V], [coef, N], [bonus, N]], [[dlogits, N * V], [entropy, N]], ([pd, pe, pl, pc, pb]) => {
        const pt = ints(targets, N);
        byRows(N, V, (n0, rows, run) => run('logitGrad', [pd + n0 * V * 4, pe + n0 * 4, pl + n0 * V * 4, pc + n0 * 4, pb + n0 * 4, pt + n0 * 4, rows, V]));
      }),
    adamw: (x, g, m, v, n, h: AdamWStep) =>
      withPointers([[g, n]], [[x, n], [m, n], [v, n]], ([px, pm, pv, pg]) =>
        byHalves(n, (i0, len, run) => run('adamw', [px + i0 * 4, pg + i0 * 4, pm + i0 * 4, pv + i0 * 4, len, h.lr, h.beta1, h.beta2, h.eps, h.weightDecay, h.bc1, h.bc2, h.gradScale]))),
    rope: (x, positions, N, C, NH, cos, sin, inverse) =>
      withPointers([[cos, cos.length], [sin, sin.length]], [[x, N * C]], ([px, pc, ps]) => {
        const pp = ints(positions, N);
        const half = C / NH / 2;
        byRows(N, C, (n0, rows, run) => run('rope', [px + n0 * C * 4, pp + n0 * 4, rows, C, NH, pc, ps, half, inverse ? 1 : 0]));
      }),
    softmaxForward: (out, x, N, C) => softmaxFwd(out, x, N, C, 0),
    logSoftmaxForward: (out, x, N, C) => softmaxFwd(out, x, N, C, 1),
    softmaxBackward: (dx, dout, y, N, C) =>
      withPointers([[dout, N * C], [y, N * C]], [[dx, N * C]], ([pdx, pdo, py]) => ex.softmaxBackward(pdx, pdo, py, N, C, 0)),
    logSoftmaxBackward: (dx, dout, y, N, C) =>
      withPointers([[dout, N * C], [y, N * C]], [[dx, N * C]], ([pdx, pdo, py]) => ex.softmaxBackward(pdx, pdo, py, N, C, 1)),
    attentionForward: (out, att, q, k, v, lengths, C, NH) => {
      const layout = attentionLayout(lengths, NH);
      const n = layout.rows * C;
      withPointers([[q, n], [k, n], [v, n]], [[out, n], [att, layout.attSize]], (p) => attention('attentionForward', p, lengths, layout, C, NH));
    },
    attentionBackward: (dq, dk, dv, dout, att, q, k, v, lengths, C, NH) => {
      const layout = attentionLayout(lengths, NH);
      const n = layout.rows * C;
      withPointers([[dout, n], [att, layout.attSize], [q, n], [k, n], [v, n]], [[dq, n], [dk, n], [dv, n]], (p) => attention('attentionBackward', p, lengths, layout, C, NH));
    },
    swigluForward: (out, gate, up, n) => withPointers([[gate, n], [up, n]], [[out, n]], ([po, pg, pu]) => byHalves(n, (i0, len, run) => run('swigluForward', [po + i0 * 4, pg + i0 * 4, pu + i0 * 4, len]))),
    swigluBackward: (dgate, dup, dout, gate, up, n) =>
      withPointers([[dout, n], [gate, n], [up, n]], [[dgate, n], [dup, n]], ([pdg, pdu, pdo, pg, pu]) => byHalves(n, (i0, len, run) => run('swigluBackward', [pdg + i0 * 4, pdu + i0 * 4, pdo + i0 * 4, pg + i0 * 4, pu + i0 * 4, len]))),
    decodeAttention: (out, q, k, v, T, C, NH) =>
      withPointers([[q, C], [k, T * C], [v, T * C]], [[out, C]], ([po, pq, pk, pv]) => ex.decodeAttention(po, pq, pk, pv, T, C, NH, mem.scratch(T * 4))),
    name: (variant === 'fma' ? 'wasm-simd-fma' : 'wasm-simd') + (helper ? '-2t' : ''),
    alloc: (n: number) => mem.alloc(n),
    matmul: (out, a, b, M, K, N, acc) => gemm(out, a, M * K, K, 1, b, K * N, N, 1, M, K, N, acc),
    matmulBT: (out, a, b, M, K, N, acc) => {
      if (M > 8) return gemm(out, a, M * K, K, 1, b, N * K, 1, K, M, K, N, acc);
      // decode-sized: row·row dot products, no packing
      withPointers([[a, M * K], [b, N * K]], [[out, M * N]], ([pc, pa, pb]) => ex.gemmSmallBT(M, N, K, pa, pb, pc, acc ? 1 : 0));
    },
    matmulAT: (out, a, b, M, K, N, acc) => gemm(out, a, K * M, 1, M, b, K * N, N, 1, M, K, N, acc),
  };
}
