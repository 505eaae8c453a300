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
import type { Kernels } from './types.js';
import { referenceKernels } from './reference.js';

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
  attentionForward(out: number, att: number, q: number, k: number, v: number, B: number, T: number, C: number, NH: number): void;
  attentionBackward(dq: number, dk: number, dv: number, dout: number, att: number, q: number, k: number, v: number, B: number, T: number, C: number, NH: number, scratch: number): void;
  decodeAttention(out: number, q: number, k: number, v: number, T: number, C: number, NH: number, scores: number): void;
  gemm(M: number, N: number, K: number, a: number, sai: number, sak: number, b: number, sbk: number, sbj: number, c: number, accumulate: number, packB: number, packA: number): void;
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
 * A helper thread for large GEMMs: a worker instantiates the same module over the same shared memory
 * and computes the lower rows of C while the calling thread computes the upper rows. Control is an
 * Int32Array in a SharedArrayBuffer: [state, M, N, K, a, sai, sak, b, sbk, sbj, c, accumulate, packB,
 * packA]; state 1 = job posted, 0 = done, 3 = the helper failed (the caller resets it and throws).
 * The caller blocks in Atomics.wait (no event loop round trip), with a time limit so a dead helper
 * is an error, not a hang. Each output row is computed by the same code in the same order whichever
 * thread runs it, so results are bit-identical to one thread.
 */
const GEMM_WORKER = `
const { workerData } = require('node:worker_threads');
const { module, memory, control } = workerData;
const c = new Int32Array(control);
let gemm = null;
try {
  gemm = new WebAssembly.Instance(module, { env: { memory } }).exports.gemm;
} catch {}
for (;;) {
  Atomics.wait(c, 0, 0);
  if (Atomics.load(c, 0) !== 1) continue;
  let state = 0;
  try {
    gemm(c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[9], c[10], c[11], c[12], c[13]);
  } catch {
    state = 3;
  }
  Atomics.store(c, 0, state);
  Atomics.notify(c, 0);
}
`;

/** Longest a GEMM may take on the helper before the caller gives up (a dead worker, not a slow one). */
const HELPER_TIMEOUT_MS = 120_000;

class GemmHelper {
  private readonly control = new Int32Array(new SharedArrayBuffer(16 * 4));
  private readonly worker: Worker;

  constructor(module: WebAssembly.Module, memory: WebAssembly.Memory) {
    this.worker = new Worker(GEMM_WORKER, { eval: true, workerData: { module, memory, control: this.control.buffer } });
    this.worker.unref();
  }

  post(args: number[]): void {
    for (let i = 0; i < args.length; i++) this.control[i + 1] = args[i];
    Atomics.store(this.control, 0, 1);
    Atomics.notify(this.control, 0);
  }

  wait(): void {
    const deadline = Date.now() + HELPER_TIMEOUT_MS;
    while (Atomics.load(this.control, 0) === 1) {
      if (Atomics.wait(this.control, 0, 1, 1000) === 'timed-out' && Date.now() > deadline) throw new Error('wasm kernels: the GEMM helper thread did not answer');
    }
    if (Atomics.load(this.control, 0) === 3) {
      Atomics.store(this.control, 0, 0);
      throw new Error('wasm kernels: the GEMM helper thread failed');
    }
  }
}

/**
 * GEMMs below this many multiply-adds stay on one thread. Measured on this 2-core VM when it was quiet
 * (bench/engine.ts crossover table, x·Wᵀ with K=128, N=384): two threads were slower at 32 and 64
 * rows (1.6M, 3.1M multiply-adds: 0.70×, 0.96×) and faster from 128 rows (6.3M: 1.72×; 6144 rows: 1.99×).
 */
export const GEMM_THREAD_MIN_WORK = 1 << 22;

export async function createWasmKernels(options: { variant?: 'auto' | WasmVariant; threads?: number } = {}): Promise<Kernels> {
  const { variant, bytes } = chooseVariant(options.variant ?? 'auto');
  const mem = new WasmKernelMemory();
  const module = await WebAssembly.compile(bytes);
  const threads = Math.max(1, Math.min(2, Math.floor(options.threads ?? 1)));
  const helper = threads > 1 ? new GemmHelper(module, mem.memory) : undefined;
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
      // rows [0, M1) here, [M1, M) on the helper (split on a multiple of the 4-row tile)
      const M1 = (M >> 3) << 2;
      helper.post([M - M1, N, K, pa + M1 * sai * 4, sai, sak, pb, sbk, sbj, pc + M1 * N * 4, accumulate ? 1 : 0, mem.scratch(packBytesB), mem.scratch(packBytesA)]);
      ex.gemm(M1, N, K, pa, sai, sak, pb, sbk, sbj, pc, accumulate ? 1 : 0, packB, packA);
      helper.wait();
    } else {
      ex.gemm(M, N, K, pa, sai, sak, pb, sbk, sbj, pc, accumulate ? 1 : 0, packB, packA);
    }
    if (!outOwned) out.set(mem.view(pc, M * N));
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
      withPointers([[x, N * C], [weight, C]], [[out, N * C], [rstd, N]], ([po, pr, px, pw]) => ex.rmsnormForward(po, pr, px, pw, N, C, eps)),
    rmsnormBackward: (dx, dweight, dout, x, weight, rstd, N, C) =>
      withPointers([[dout, N * C], [x, N * C], [weight, C], [rstd, N]], [[dx, N * C], [dweight, C]], ([pdx, pdw, pdo, px, pw, pr]) => ex.rmsnormBackward(pdx, pdw, pdo, px, pw, pr, N, C)),
    softmaxForward: (out, x, N, C) => softmaxFwd(out, x, N, C, 0),
    logSoftmaxForward: (out, x, N, C) => softmaxFwd(out, x, N, C, 1),
    softmaxBackward: (dx, dout, y, N, C) =>
      withPointers([[dout, N * C], [y, N * C]], [[dx, N * C]], ([pdx, pdo, py]) => ex.softmaxBackward(pdx, pdo, py, N, C, 0)),
    logSoftmaxBackward: (dx, dout, y, N, C) =>
      withPointers([[dout, N * C], [y, N * C]], [[dx, N * C]], ([pdx, pdo, py]) => ex.softmaxBackward(pdx, pdo, py, N, C, 1)),
    attentionForward: (out, att, q, k, v, B, T, C, NH) => {
      const n = B * T * C;
      withPointers([[q, n], [k, n], [v, n]], [[out, n], [att, B * NH * T * T]], ([po, pa, pq, pk, pv]) => ex.attentionForward(po, pa, pq, pk, pv, B, T, C, NH));
    },
    attentionBackward: (dq, dk, dv, dout, att, q, k, v, B, T, C, NH) => {
      const n = B * T * C;
      withPointers([[dout, n], [att, B * NH * T * T], [q, n], [k, n], [v, n]], [[dq, n], [dk, n], [dv, n]], ([pdq, pdk, pdv, pdo, pa, pq, pk, pv]) => ex.attentionBackward(pdq, pdk, pdv, pdo, pa, pq, pk, pv, B, T, C, NH, mem.scratch(T * 4)));
    },
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
