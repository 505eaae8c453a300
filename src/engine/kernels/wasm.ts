/**
 * The WASM SIMD backend: instantiates build/kernels-fma.wasm (relaxed SIMD, fused multiply-add) when
 * the runtime supports it, else build/kernels.wasm (SIMD128), over one shared WebAssembly.Memory and
 * manages it from JS (up to 4 GiB). `alloc` hands out Float32Array views into that memory (a bump
 * allocator; views stay valid when memory grows because the memory is shared); kernels called with such
 * views pass their byte offsets straight to WASM. Arrays living elsewhere are copied into a scratch
 * region above the heap for the call (and outputs copied back). With threads > 1 a KernelPool
 * (threads.ts) runs each large call as one share per thread. Kernels without a WASM version use the
 * reference.
 */
import { readFileSync, existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { ArborError, ConfigError } from '../../core/errors.js';
import type { AdamWStep, Kernels } from './types.js';
import { attentionLayout, referenceKernels, type AttentionLayout } from './reference.js';
import { treeMaxKeys, treeRows, treeVisible } from './tree.js';
import { AdaptiveSplit, KernelPool, partitionByCost, partitionByShares, type Share } from './threads.js';

export { AdaptiveSplit } from './threads.js';

const PAGE = 65536;
/** The most pages a wasm32 memory has: 4 GiB (build-wasm.mjs declares the same maximum). */
export const MAX_PAGES = 65536;
/** Start of the JS-managed heap (the module's static data sits below). */
const HEAP_BASE = 1 << 20;
/** n rounded up to a multiple of 16 (arithmetic, not `& ~15`: offsets reach 2^31 and beyond). */
const align16 = (n: number) => Math.ceil(n / 16) * 16;

/** "fma": the relaxed-SIMD build (fused multiply-add); "plain": SIMD128 mul + add. */
export type WasmVariant = 'fma' | 'plain';

export function kernelWasmPath(variant: WasmVariant = 'plain'): string {
  const file = variant === 'fma' ? 'kernels-fma' : 'kernels';
  return join(dirname(fileURLToPath(import.meta.url)), `../../../build/${file}.wasm`);
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
    if (preference === 'fma' || env === '1') {
      throw new Error(`${path}: relaxed-SIMD kernels unavailable (missing build or unsupported runtime)`);
    }
  }
  const path = kernelWasmPath('plain');
  if (!existsSync(path)) throw new Error(`${path} not found: run "npm run build"`);
  return { variant: 'plain', bytes: new Uint8Array(readFileSync(path)) };
}

interface Exports {
  rmsnormForward(out: number, rstd: number, x: number, weight: number, N: number, C: number, eps: number): void;
  rmsnormBackward(
    dx: number,
    dweight: number,
    dout: number,
    x: number,
    weight: number,
    rstd: number,
    N: number,
    C: number,
  ): void;
  addRows(dst: number, src: number, G: number, C: number): void;
  attentionScratchBytes(T: number, hs: number): number;
  pagedAttentionScratchBytes(G: number, T: number): number;
  treeAttentionScratchBytes(maxKeys: number): number;
}

export class WasmKernelMemory {
  readonly memory: WebAssembly.Memory;
  /** Every SharedArrayBuffer object this memory has exposed (views from any of them are ours). */
  private readonly buffers = new Set<ArrayBufferLike>();
  private heapTop = HEAP_BASE;
  private scratchTop = 0;
  /** Bytes at and above this offset were never handed out: still the zeros memory.grow gave. */
  private dirtyTop = HEAP_BASE;

  constructor(initialPages = 64) {
    this.memory = new WebAssembly.Memory({ initial: initialPages, maximum: MAX_PAGES, shared: true });
    this.buffers.add(this.memory.buffer);
  }

  private ensure(bytes: number): void {
    const have = this.memory.buffer.byteLength;
    if (bytes <= have) return;
    const pages = have / PAGE;
    const need = Math.ceil((bytes - have) / PAGE);
    if (pages + need > MAX_PAGES) {
      const gib = (bytes / 2 ** 30).toFixed(2);
      throw new ArborError(`wasm kernels: ${gib} GiB of kernel memory needed; a wasm32 memory holds at most 4 GiB`);
    }
    this.memory.grow(Math.min(need + 16, MAX_PAGES - pages));
    this.buffers.add(this.memory.buffer);
  }

  /** A zeroed, 16-byte aligned, persistent Float32Array in WASM memory. */
  alloc(n: number): Float32Array {
    const start = align16(this.heapTop);
    const bytes = Math.max(n, 1) * 4;
    this.ensure(start + bytes);
    this.heapTop = start + bytes;
    const a = new Float32Array(this.memory.buffer, start, n);
    // the bytes may have served as scratch space of an earlier call (scratch lives above the heap);
    // those never handed out are still zero (and stay untouched: no resident memory for them yet)
    if (start < this.dirtyTop) a.fill(0, 0, Math.min(n, (this.dirtyTop - start) / 4));
    this.dirtyTop = Math.max(this.dirtyTop, this.heapTop);
    return a;
  }

  owns(a: Float32Array): boolean {
    return this.buffers.has(a.buffer);
  }

  /** Begin a call: scratch space starts right above the heap. */
  beginScratch(): void {
    this.scratchTop = align16(this.heapTop);
  }

  /** Scratch bytes (aligned) valid until the next beginScratch. Returns the byte offset. */
  scratch(bytes: number): number {
    const start = align16(this.scratchTop);
    this.ensure(start + bytes);
    this.scratchTop = start + bytes;
    this.dirtyTop = Math.max(this.dirtyTop, this.scratchTop);
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
 * GEMMs below this many multiply-adds stay on one thread, and each thread's share is at least half of
 * it. Measured on the 2-core VM when it was quiet (bench/engine.ts crossover table, x·Wᵀ with K=128,
 * N=384): two threads were slower at 32 and 64 rows (1.6M, 3.1M multiply-adds: 0.70×, 0.96×) and
 * faster from 128 rows (6.3M: 1.72×; 6144 rows: 1.99×).
 */
export const GEMM_THREAD_MIN_WORK = 1 << 22;
/** Attention calls below this much work (Σ T²·C over the sequences; 2·T·NH·hd to decode) stay on one thread. */
export const ATTENTION_THREAD_MIN_WORK = 1 << 18;
/** Elementwise and row kernels below this many elements stay on one thread (a share is at least half). */
export const ELEMENTWISE_THREAD_MIN = 1 << 15;
/**
 * rmsnormBackward's weight gradient above ELEMENTWISE_THREAD_MIN: rows are summed in groups of
 * max(RMSNORM_GROUP_MIN_ROWS, ⌈N / RMSNORM_GROUPS⌉) rows, each into its own partial, and the partials
 * added in order. The groups depend on N only, so dweight is the same bits at every thread count.
 */
export const RMSNORM_GROUPS = 64;
const RMSNORM_GROUP_MIN_ROWS = 4;
/**
 * matmulBT with at most this many rows takes gemmDecodeBT (no packing) instead of the packed GEMM.
 * Crossover on the 2-core VM (one thread, load ~5, assembly/matmul.ts's two kernels, weights cold as in
 * a decode step, medians of interleaved runs): at K = 576 and 1536 and N = 192, 576, 1536 and 49152 the
 * unpacked kernel was 1.1–1.5× as fast up to 32 rows, 2–10% faster at 48, even at 64, and 1–3% slower
 * at 96 and 128 rows.
 */
export const DECODE_MAX_ROWS = 48;
/** The GEMM micro-kernel's tile: MR rows by NR columns; KC the K block; NC the B block (assembly/matmul.ts). */
const MR = 4;
const NR = 8;
const KC = 256;
const NC = 512;

/** The pool behind each multi-threaded backend, for kernelThreadJobs. */
const pools = new WeakMap<Kernels, KernelPool>();

/** Jobs each helper thread of `kernels` has run so far (empty for one thread): how tests see a call split. */
export function kernelThreadJobs(kernels: Kernels): readonly number[] {
  return pools.get(kernels)?.jobs ?? [];
}

/** Thread counts createWasmKernels accepts (a pool beyond the machine's cores is allowed: tests run 4 on 2). */
export const MAX_KERNEL_THREADS = 256;

/** What createWasmKernels builds: the WASM variant, the thread count, and the pool's spin (threads.ts). */
export interface WasmKernelOptions {
  variant?: 'auto' | WasmVariant;
  /** 1 to MAX_KERNEL_THREADS (default 1); the engine config caps it at the machine's parallelism. */
  threads?: number;
  /** Spin before sleeping, ms (default: defaultSpinMs of the machine's load, looked at every second). */
  spinMs?: number;
}
export async function createWasmKernels(options: WasmKernelOptions = {}): Promise<Kernels> {
  const threads = options.threads ?? 1;
  if (!Number.isInteger(threads) || threads < 1 || threads > MAX_KERNEL_THREADS) {
    const message = `wasm kernels: threads must be an integer from 1 to ${MAX_KERNEL_THREADS}, got ${threads}`;
    throw new ConfigError(message, 'threads');
  }
  const { variant, bytes } = chooseVariant(options.variant ?? 'auto');
  const mem = new WasmKernelMemory();
  const module = await WebAssembly.compile(bytes);
  const pool = threads > 1 ? new KernelPool(module, mem.memory, threads, options.spinMs) : undefined;
  const instance = await WebAssembly.instantiate(module, {
    env: {
      memory: mem.memory,
      abort: () => {
        throw new Error('wasm kernel abort');
      },
    },
  });
  const c = new KernelContext(instance, mem, threads, pool);
  const kernels: Kernels = {
    ...referenceKernels,
    ...normKernels(c),
    ...lossKernels(c),
    ...optimizerKernels(c),
    ...ropeKernels(c),
    ...attentionKernels(c),
    ...mlpKernels(c),
    name: (variant === 'fma' ? 'wasm-simd-fma' : 'wasm-simd') + (threads > 1 ? `-${threads}t` : ''),
    alloc: (n: number) => mem.alloc(n),
    ...matmulKernels(c),
  };
  if (pool) pools.set(kernels, pool);
  return kernels;
}

/**
 * What the kernels of one backend share: the module's exports and memory, the thread pool, and the
 * split of a large call across the threads (at their measured speeds).
 */
class KernelContext {
  readonly mem: WasmKernelMemory;
  readonly ex: Exports;
  readonly split: AdaptiveSplit;
  private readonly threads: number;
  private readonly pool: KernelPool | undefined;
  private readonly here: (share: Share) => void;

  constructor(instance: WebAssembly.Instance, mem: WasmKernelMemory, threads: number, pool: KernelPool | undefined) {
    this.mem = mem;
    this.ex = instance.exports as unknown as Exports;
    this.threads = threads;
    this.pool = pool;
    this.split = new AdaptiveSplit(threads);
    const fns = instance.exports as unknown as Record<string, (...args: number[]) => void>;
    this.here = (share: Share) => fns[share.op](...share.args);
  }

  /** Run shares on the pool (one of them here), or the only one here; returns each share's time. */
  runShares(shares: Share[]): number[] {
    return shares.length > 1 ? this.pool!.run(shares, this.here) : (this.here(shares[0]), [0]);
  }

  /** How many threads a call of `work` takes: at most `units`, and each share at least minWork / 2. */
  sharesFor(units: number, work: number, minWork: number): number {
    return this.pool ? Math.max(1, Math.min(this.threads, units, Math.floor((2 * work) / minWork))) : 1;
  }

  /**
   * A kernel over `count` items (rows or elements) doing `work` element operations: `job(i0, n)` is
   * the share for items [i0, i0+n). A large call is cut into equal ranges on multiples of `granule`
   * (4 keeps element ranges on 16-byte boundaries).
   */
  splitRange(count: number, work: number, granule: number, job: (i0: number, n: number) => Share): void {
    const S =
      work >= ELEMENTWISE_THREAD_MIN ? this.sharesFor(Math.floor(count / granule), work, ELEMENTWISE_THREAD_MIN) : 1;
    const bound = (s: number) => (s === S ? count : Math.floor((count * s) / S / granule) * granule);
    const shares: Share[] = [];
    for (let s = 0; s < S; s++) shares.push(job(bound(s), bound(s + 1) - bound(s)));
    this.runShares(shares);
  }

  /** An elementwise kernel over n elements (see splitRange). */
  byElements(n: number, job: (i0: number, n: number) => Share): void {
    this.splitRange(n, n, 4, job);
  }

  /** A row-wise kernel over N rows of C (see splitRange). */
  byRows(N: number, C: number, job: (n0: number, rows: number) => Share): void {
    this.splitRange(N, N * C, 1, job);
  }

  /** The first n entries of an Int32Array, copied into scratch; returns their byte offset. */
  ints(a: Int32Array, n: number): number {
    const p = this.mem.scratch(n * 4);
    new Int32Array(this.mem.memory.buffer, p, n).set(a.subarray(0, n));
    return p;
  }

  /** Run `fn` with WASM pointers for `inputs` (copied in if foreign) and `outputs` (copied back). */
  withPointers(
    inputs: Array<[Float32Array, number]>,
    outputs: Array<[Float32Array, number]>,
    fn: (pointers: number[]) => void,
  ): void {
    this.mem.beginScratch();
    const pointers = [...outputs, ...inputs].map(([a, n]) => this.mem.pointer(a, n));
    fn(pointers);
    outputs.forEach(([a, n], i) => {
      if (!this.mem.owns(a)) a.set(this.mem.view(pointers[i], n));
    });
  }
}

/**
 * out[M,N] (+)= A·B with A(i,k)=a[i*sai+k*sak], B(k,j)=b[k*sbk+j*sbj]. A large call is cut along
 * the longer of M (in 4-row tiles) and N (in 8-column panels): each thread packs the whole of the
 * operand that is not cut, so cutting the longer side repeats the least packing. Shares follow the
 * threads' measured speeds (AdaptiveSplit).
 */
function gemm(
  c: KernelContext,
  out: Float32Array,
  a: Float32Array,
  aFloats: number,
  sai: number,
  sak: number,
  b: Float32Array,
  bFloats: number,
  sbk: number,
  sbj: number,
  M: number,
  K: number,
  N: number,
  accumulate: boolean,
): void {
  c.mem.beginScratch();
  const pa = c.mem.pointer(a, aFloats);
  const pb = c.mem.pointer(b, bFloats);
  const outOwned = c.mem.owns(out);
  const pc = outOwned ? out.byteOffset : c.mem.pointer(out, M * N);
  const kc = Math.min(KC, Math.max(K, 1));
  const packB = (cols: number) => c.mem.scratch(kc * Math.ceil(Math.min(cols, NC) / NR) * NR * 4);
  const packA = () => c.mem.scratch((kc * MR + MR * NR) * 4); // packed A panel + the 4×8 ragged-edge tile
  const acc = accumulate ? 1 : 0;
  const byRows = M >= N;
  const units = byRows ? Math.ceil(M / MR) : Math.ceil(N / NR);
  const S = c.sharesFor(units, M * N * K, GEMM_THREAD_MIN_WORK);
  const bounds = S > 1 ? partitionByShares(units, c.split.shares(S)) : [0, units];
  const shares: Share[] = [];
  for (let s = 0; s < S; s++) {
    if (byRows) {
      const i0 = bounds[s] * MR;
      const rows = Math.min(M, bounds[s + 1] * MR) - i0;
      const [a0, c0] = [pa + i0 * sai * 4, pc + i0 * N * 4];
      const args = [rows, N, K, a0, sai, sak, pb, sbk, sbj, c0, N, acc, packB(N), packA()];
      shares.push({ op: 'gemm', args });
    } else {
      const j0 = bounds[s] * NR;
      const cols = Math.min(N, bounds[s + 1] * NR) - j0;
      const args = [M, cols, K, pa, sai, sak, pb + j0 * sbj * 4, sbk, sbj, pc + j0 * 4, N, acc, packB(cols), packA()];
      shares.push({ op: 'gemm', args });
    }
  }
  const times = c.runShares(shares);
  if (S > 1)
    c.split.observe(
      shares.map((_, s) => bounds[s + 1] - bounds[s]),
      times,
    );
  if (!outOwned) out.set(c.mem.view(pc, M * N));
}
/**
 * C[M,N] (+)= A[M,K]·B[N,K]ᵀ for M ≤ DECODE_MAX_ROWS (decode steps): gemmDecodeBT, nothing packed; a
 * large call is cut into column ranges (any cut gives the same bits) at the threads' measured speeds.
 */
function decodeBT(
  c: KernelContext,
  out: Float32Array,
  a: Float32Array,
  b: Float32Array,
  M: number,
  K: number,
  N: number,
  accumulate: boolean,
): void {
  c.withPointers(
    [
      [a, M * K],
      [b, N * K],
    ],
    [[out, M * N]],
    ([pc, pa, pb]) => {
      const units = Math.ceil(N / 2);
      const S = c.sharesFor(units, M * N * K, GEMM_THREAD_MIN_WORK);
      const bounds = S > 1 ? partitionByShares(units, c.split.shares(S)) : [0, units];
      const share = (s: number): Share => {
        const j0 = bounds[s] * 2;
        const cols = Math.min(N, bounds[s + 1] * 2) - j0;
        const args = [M, cols, K, pa, pb + j0 * K * 4, pc + j0 * 4, N, accumulate ? 1 : 0, c.mem.scratch(16)];
        return { op: 'gemmDecodeBT', args };
      };
      const shares = bounds.slice(0, S).map((_, s) => share(s));
      const times = c.runShares(shares);
      if (S > 1)
        c.split.observe(
          shares.map((_, s) => bounds[s + 1] - bounds[s]),
          times,
        );
    },
  );
}
/**
 * An attention kernel over pointers `p` for a packed batch of `lengths`: the (sequence, head) items,
 * sequence-major, cut into contiguous ranges of equal work (T² per item) for a large call.
 */
function attention(
  c: KernelContext,
  op: 'attentionForward' | 'attentionBackward',
  p: number[],
  lengths: readonly number[],
  layout: AttentionLayout,
  C: number,
  NH: number,
): void {
  const B = lengths.length;
  const seqs = c.mem.scratch(Math.max(1, B) * 12);
  const table = new Int32Array(c.mem.memory.buffer, seqs, B * 3);
  let maxT = 0;
  let work = 0;
  lengths.forEach((T, b) => {
    table[b * 3] = layout.rowOffset[b];
    table[b * 3 + 1] = layout.attOffset[b];
    table[b * 3 + 2] = T;
    maxT = Math.max(maxT, T);
    work += T * T * C;
  });
  const bytes = c.ex.attentionScratchBytes(maxT, Math.floor(C / NH));
  const items = B * NH;
  const S = work >= ATTENTION_THREAD_MIN_WORK ? c.sharesFor(items, work, ATTENTION_THREAD_MIN_WORK) : 1;
  const bounds = S > 1 ? partitionByCost(items, S, (i) => lengths[Math.floor(i / NH)] ** 2) : [0, items];
  const share = (s: number): Share => ({
    op,
    args: [...p, seqs, bounds[s], bounds[s + 1], C, NH, c.mem.scratch(bytes)],
  });
  c.runShares(bounds.slice(0, S).map((_, s) => share(s)));
}
/**
 * A tree attention kernel over pointers `p` (kernels/tree.ts): the layout is copied into scratch and the
 * heads are cut into equal ranges for a large call (a head's work is the same for every head).
 */
function treeAttention(
  c: KernelContext,
  op: 'treeAttentionForward' | 'treeAttentionBackward',
  p: number[],
  layout: Int32Array,
  C: number,
  NH: number,
): void {
  const pl = c.ints(layout, layout.length);
  const work = treeVisible(layout) * C;
  const S = work >= ATTENTION_THREAD_MIN_WORK ? c.sharesFor(NH, work, ATTENTION_THREAD_MIN_WORK) : 1;
  const bounds = partitionByCost(NH, S, () => 1);
  const bytes = op === 'treeAttentionBackward' ? c.ex.treeAttentionScratchBytes(treeMaxKeys(layout)) : 0;
  const share = (s: number): Share => ({
    op,
    args:
      op === 'treeAttentionBackward'
        ? [...p, pl, bounds[s], bounds[s + 1], C, NH, c.mem.scratch(bytes)]
        : [...p, pl, bounds[s], bounds[s + 1], C, NH],
  });
  c.runShares(bounds.slice(0, S).map((_, s) => share(s)));
}
/** Softmax / log-softmax forward by rows; `out` may alias `x`. */
function softmaxFwd(c: KernelContext, out: Float32Array, x: Float32Array, N: number, C: number, log: number): void {
  const rows = (po: number, px: number) =>
    c.byRows(N, C, (n0, n) => ({ op: 'softmaxForward', args: [po + n0 * C * 4, px + n0 * C * 4, n, C, log] }));
  if (out === x || (out.buffer === x.buffer && out.byteOffset === x.byteOffset)) {
    c.withPointers([], [[out, N * C]], ([po]) => rows(po, po));
  } else {
    c.withPointers([[x, N * C]], [[out, N * C]], ([po, px]) => rows(po, px));
  }
}
/** Softmax (log = 0) or log-softmax (log = 1) backward by rows. */
function softmaxBwd(
  c: KernelContext,
  dx: Float32Array,
  dout: Float32Array,
  y: Float32Array,
  N: number,
  C: number,
  log: number,
): void {
  c.withPointers(
    [
      [dout, N * C],
      [y, N * C],
    ],
    [[dx, N * C]],
    ([pdx, pdo, py]) =>
      c.byRows(N, C, (n0, n) => {
        const o = n0 * C * 4;
        return { op: 'softmaxBackward', args: [pdx + o, pdo + o, py + o, n, C, log] };
      }),
  );
}
/**
 * rmsnormBackward: below the threshold one call adds every row into dweight; above it, fixed row
 * groups (RMSNORM_GROUPS) sum into partials, threads take contiguous runs of groups, and the partials
 * are added into dweight in group order.
 */
function rmsnormBwd(
  c: KernelContext,
  pdx: number,
  pdw: number,
  pdo: number,
  px: number,
  pw: number,
  pr: number,
  N: number,
  C: number,
): void {
  if (N * C < ELEMENTWISE_THREAD_MIN || N < 2) {
    c.ex.rmsnormBackward(pdx, pdw, pdo, px, pw, pr, N, C);
    return;
  }
  const groupRows = Math.max(RMSNORM_GROUP_MIN_ROWS, Math.ceil(N / RMSNORM_GROUPS));
  const G = Math.ceil(N / groupRows);
  const partials = c.mem.scratch(G * C * 4);
  const S = c.sharesFor(G, N * C, ELEMENTWISE_THREAD_MIN);
  const bounds = partitionByShares(G, new Array(S).fill(1 / S));
  const args = (s: number) => [pdx, partials, pdo, px, pw, pr, N, C, groupRows, bounds[s], bounds[s + 1]];
  c.runShares(bounds.slice(0, S).map((_, s) => ({ op: 'rmsnormBackwardGroups', args: args(s) })));
  c.ex.addRows(pdw, partials, G, C);
}
/**
 * decodeAttention: a long enough context splits the query heads across threads (kv-head groups
 * kept whole when there are at least as many as threads), each with its own scores.
 */
function decodeAttn(
  c: KernelContext,
  out: Float32Array,
  q: Float32Array,
  k: Float32Array,
  v: Float32Array,
  T: number,
  NH: number,
  NKV: number,
  hd: number,
): void {
  if (!(Number.isInteger(NKV) && NKV >= 1 && NH % NKV === 0)) {
    throw new ArborError(`decodeAttention: ${NH} query heads are not a multiple of ${NKV} key/value heads`);
  }
  const C = NH * hd;
  const kvFloats = T * NKV * hd;
  c.withPointers(
    [
      [q, C],
      [k, kvFloats],
      [v, kvFloats],
    ],
    [[out, C]],
    ([po, pq, pk, pv]) => {
      const work = 2 * T * NH * hd;
      const S = work >= ATTENTION_THREAD_MIN_WORK ? c.sharesFor(NH, work, ATTENTION_THREAD_MIN_WORK) : 1;
      const group = NH / NKV;
      const equal = new Array(S).fill(1 / S);
      const bounds = S <= NKV ? partitionByShares(NKV, equal).map((b) => b * group) : partitionByShares(NH, equal);
      const share = (s: number): Share => ({
        op: 'decodeAttention',
        args: [po, pq, pk, pv, T, NH, NKV, hd, bounds[s], bounds[s + 1], c.mem.scratch(T * 4)],
      });
      c.runShares(bounds.slice(0, S).map((_, s) => share(s)));
    },
  );
}
/**
 * pagedDecodeAttention: i32 tables of every row's page addresses at `layer` (a page outside kernel memory
 * is copied into scratch, once per call), then (row, kv head) items cut into ranges of equal Σ T.
 */
function pagedDecodeAttn(
  c: KernelContext,
  out: Float32Array,
  q: Float32Array,
  kPages: readonly Float32Array[],
  vPages: readonly Float32Array[],
  pages: Int32Array,
  W: number,
  lengths: Int32Array,
  R: number,
  layer: number,
  P: number,
  NH: number,
  NKV: number,
  hd: number,
): void {
  if (!(Number.isInteger(NKV) && NKV >= 1 && NH % NKV === 0)) {
    throw new ArborError(`pagedDecodeAttention: ${NH} query heads are not a multiple of ${NKV} key/value heads`);
  }
  const Cq = NH * hd;
  const layerFloats = P * NKV * hd;
  const at = layer * layerFloats;
  c.withPointers([[q, R * Cq]], [[out, R * Cq]], ([po, pq]) => {
    const copied = new Map<Float32Array, number>();
    const address = (a: Float32Array) => {
      if (c.mem.owns(a)) return a.byteOffset + at * 4;
      let p = copied.get(a);
      if (p === undefined) {
        p = c.mem.scratch(layerFloats * 4);
        c.mem.view(p, layerFloats).set(a.subarray(at, at + layerFloats));
        copied.set(a, p);
      }
      return p;
    };
    const kTable = new Int32Array(R * W);
    const vTable = new Int32Array(R * W);
    let maxT = 0;
    let positions = 0;
    for (let r = 0; r < R; r++) {
      const T = lengths[r];
      maxT = Math.max(maxT, T);
      positions += T;
      for (let i = 0; i < Math.ceil(T / P); i++) {
        const page = pages[r * W + i];
        kTable[r * W + i] = address(kPages[page]);
        vTable[r * W + i] = address(vPages[page]);
      }
    }
    const [pk, pv, pl] = [c.ints(kTable, R * W), c.ints(vTable, R * W), c.ints(lengths, R)];
    const items = R * NKV;
    const work = 2 * positions * Cq;
    const S = work >= ATTENTION_THREAD_MIN_WORK ? c.sharesFor(items, work, ATTENTION_THREAD_MIN_WORK) : 1;
    const bounds = S > 1 ? partitionByCost(items, S, (i) => lengths[Math.floor(i / NKV)] + 1) : [0, items];
    // per thread: the scores and the 16-byte read-ahead sink after them (the kernel sizes both)
    const scratchBytes = c.ex.pagedAttentionScratchBytes(NH / NKV, maxT);
    const share = (s: number): Share => ({
      op: 'pagedAttention',
      args: [po, pq, pk, pv, pl, W, P, NH, NKV, hd, bounds[s], bounds[s + 1], c.mem.scratch(scratchBytes)],
    });
    c.runShares(bounds.slice(0, S).map((_, s) => share(s)));
  });
}

/** RMSNorm forward and backward. */
function normKernels(c: KernelContext): Pick<Kernels, 'rmsnormForward' | 'rmsnormBackward'> {
  return {
    rmsnormForward: (out, rstd, x, weight, N, C, eps) =>
      c.withPointers(
        [
          [x, N * C],
          [weight, C],
        ],
        [
          [out, N * C],
          [rstd, N],
        ],
        ([po, pr, px, pw]) =>
          c.byRows(N, C, (n0, rows) => {
            const o = n0 * C * 4;
            return { op: 'rmsnormForward', args: [po + o, pr + n0 * 4, px + o, pw, rows, C, eps] };
          }),
      ),
    rmsnormBackward: (dx, dweight, dout, x, weight, rstd, N, C) =>
      c.withPointers(
        [
          [dout, N * C],
          [x, N * C],
          [weight, C],
          [rstd, N],
        ],
        [
          [dx, N * C],
          [dweight, C],
        ],
        ([pdx, pdw, pdo, px, pw, pr]) => rmsnormBwd(c, pdx, pdw, pdo, px, pw, pr, N, C),
      ),
  };
}

/** The output head: the loss gradient over the logits, softmax and log-softmax, sampling statistics. */
function lossKernels(
  c: KernelContext,
): Pick<
  Kernels,
  'logitGrad' | 'softmaxForward' | 'logSoftmaxForward' | 'softmaxBackward' | 'logSoftmaxBackward' | 'samplingStats'
> {
  return {
    logitGrad: (dlogits, entropy, lsm, coef, bonus, targets, N, V) =>
      c.withPointers(
        [
          [lsm, N * V],
          [coef, N],
          [bonus, N],
        ],
        [
          [dlogits, N * V],
          [entropy, N],
        ],
        ([pd, pe, pl, pc, pb]) => {
          const pt = c.ints(targets, N);
          c.byRows(N, V, (n0, rows) => {
            const [o, r] = [n0 * V * 4, n0 * 4];
            return { op: 'logitGrad', args: [pd + o, pe + r, pl + o, pc + r, pb + r, pt + r, rows, V] };
          });
        },
      ),
    softmaxForward: (out, x, N, C) => softmaxFwd(c, out, x, N, C, 0),
    logSoftmaxForward: (out, x, N, C) => softmaxFwd(c, out, x, N, C, 1),
    softmaxBackward: (dx, dout, y, N, C) => softmaxBwd(c, dx, dout, y, N, C, 0),
    logSoftmaxBackward: (dx, dout, y, N, C) => softmaxBwd(c, dx, dout, y, N, C, 1),
    samplingStats: (out, stats, x, invT, N, V) =>
      c.withPointers(
        [
          [x, N * V],
          [invT, N],
        ],
        [[out, N * V]],
        ([po, px, pt]) => {
          const ps = c.mem.scratch(N * 24);
          c.byRows(N, V, (n0, rows) => {
            const o = n0 * V * 4;
            return { op: 'samplingStats', args: [po + o, ps + n0 * 24, px + o, pt + n0 * 4, rows, V] };
          });
          stats.set(new Float64Array(c.mem.memory.buffer, ps, N * 3));
        },
      ),
  };
}

/** The AdamW step. */
function optimizerKernels(c: KernelContext): Pick<Kernels, 'adamw'> {
  return {
    adamw: (x, g, m, v, n, h: AdamWStep) =>
      c.withPointers(
        [[g, n]],
        [
          [x, n],
          [m, n],
          [v, n],
        ],
        ([px, pm, pv, pg]) =>
          c.byElements(n, (i0, len) => ({
            op: 'adamw',
            args: [
              px + i0 * 4,
              pg + i0 * 4,
              pm + i0 * 4,
              pv + i0 * 4,
              len,
              h.lr,
              h.beta1,
              h.beta2,
              h.eps,
              h.weightDecay,
              h.bc1,
              h.bc2,
              h.gradScale,
            ],
          })),
      ),
  };
}

/** Rotary position embeddings. */
function ropeKernels(c: KernelContext): Pick<Kernels, 'rope'> {
  return {
    rope: (x, positions, N, C, NH, cos, sin, inverse) =>
      c.withPointers(
        [
          [cos, cos.length],
          [sin, sin.length],
        ],
        [[x, N * C]],
        ([px, pc, ps]) => {
          const pp = c.ints(positions, N);
          const half = C / NH / 2;
          c.byRows(N, C, (n0, rows) => ({
            op: 'rope',
            args: [px + n0 * C * 4, pp + n0 * 4, rows, C, NH, pc, ps, half, inverse ? 1 : 0],
          }));
        },
      ),
  };
}

/** Attention over a packed batch, over a tree, and at decode (contiguous and paged key/value cache). */
function attentionKernels(
  c: KernelContext,
): Pick<
  Kernels,
  | 'attentionForward'
  | 'attentionBackward'
  | 'treeAttentionForward'
  | 'treeAttentionBackward'
  | 'decodeAttention'
  | 'pagedDecodeAttention'
> {
  return {
    attentionForward: (out, att, q, k, v, lengths, C, NH) => {
      const layout = attentionLayout(lengths, NH);
      const n = layout.rows * C;
      const outputs: Array<[Float32Array, number]> = [
        [out, n],
        [att, layout.attSize],
      ];
      c.withPointers(
        [
          [q, n],
          [k, n],
          [v, n],
        ],
        outputs,
        (p) => attention(c, 'attentionForward', p, lengths, layout, C, NH),
      );
    },
    attentionBackward: (dq, dk, dv, dout, att, q, k, v, lengths, C, NH) => {
      const layout = attentionLayout(lengths, NH);
      const n = layout.rows * C;
      const inputs: Array<[Float32Array, number]> = [
        [dout, n],
        [att, layout.attSize],
        [q, n],
        [k, n],
        [v, n],
      ];
      const outputs: Array<[Float32Array, number]> = [
        [dq, n],
        [dk, n],
        [dv, n],
      ];
      c.withPointers(inputs, outputs, (p) => attention(c, 'attentionBackward', p, lengths, layout, C, NH));
    },
    treeAttentionForward: (out, att, q, k, v, layout, C, NH) => {
      const n = treeRows(layout) * C;
      c.withPointers(
        [
          [q, n],
          [k, n],
          [v, n],
        ],
        [
          [out, n],
          [att, NH * treeVisible(layout)],
        ],
        (p) => treeAttention(c, 'treeAttentionForward', p, layout, C, NH),
      );
    },
    treeAttentionBackward: (dq, dk, dv, dout, att, q, k, v, layout, C, NH) => {
      const n = treeRows(layout) * C;
      const inputs: Array<[Float32Array, number]> = [
        [dout, n],
        [att, NH * treeVisible(layout)],
        [q, n],
        [k, n],
        [v, n],
      ];
      const outputs: Array<[Float32Array, number]> = [
        [dq, n],
        [dk, n],
        [dv, n],
      ];
      c.withPointers(inputs, outputs, (p) => treeAttention(c, 'treeAttentionBackward', p, layout, C, NH));
    },
    decodeAttention: (out, q, k, v, T, NH, NKV, hd) => decodeAttn(c, out, q, k, v, T, NH, NKV, hd),
    pagedDecodeAttention: (out, q, kPages, vPages, pages, W, lengths, R, layer, P, NH, NKV, hd) =>
      pagedDecodeAttn(c, out, q, kPages, vPages, pages, W, lengths, R, layer, P, NH, NKV, hd),
  };
}

/** The SwiGLU gate. */
function mlpKernels(c: KernelContext): Pick<Kernels, 'swigluForward' | 'swigluBackward'> {
  return {
    swigluForward: (out, gate, up, n) =>
      c.withPointers(
        [
          [gate, n],
          [up, n],
        ],
        [[out, n]],
        ([po, pg, pu]) =>
          c.byElements(n, (i0, len) => ({ op: 'swigluForward', args: [po + i0 * 4, pg + i0 * 4, pu + i0 * 4, len] })),
      ),
    swigluBackward: (dgate, dup, dout, gate, up, n) =>
      c.withPointers(
        [
          [dout, n],
          [gate, n],
          [up, n],
        ],
        [
          [dgate, n],
          [dup, n],
        ],
        ([pdg, pdu, pdo, pg, pu]) =>
          c.byElements(n, (i0, len) => {
            const o = i0 * 4;
            return { op: 'swigluBackward', args: [pdg + o, pdu + o, pdo + o, pg + o, pu + o, len] };
          }),
      ),
  };
}

/** Matrix products (decode-sized A·Bᵀ without packing). */
function matmulKernels(c: KernelContext): Pick<Kernels, 'matmul' | 'matmulBT' | 'matmulAT'> {
  return {
    matmul: (out, a, b, M, K, N, acc) => gemm(c, out, a, M * K, K, 1, b, K * N, N, 1, M, K, N, acc),
    matmulBT: (out, a, b, M, K, N, acc) =>
      M > DECODE_MAX_ROWS
        ? gemm(c, out, a, M * K, K, 1, b, N * K, 1, K, M, K, N, acc)
        : decodeBT(c, out, a, b, M, K, N, acc),
    matmulAT: (out, a, b, M, K, N, acc) => gemm(c, out, a, K * M, 1, M, b, K * N, N, 1, M, K, N, acc),
  };
}
