/**
 * Kernel selection. `loadKernels()` returns the WASM SIMD backend when its build exists and loads
 * (the default; the fused multiply-add build where the runtime supports relaxed SIMD), else the
 * plain-TypeScript reference. The chosen backend is cached per kind.
 */
import { availableParallelism } from 'node:os';
import { ConfigError } from '../../core/errors.js';
import type { Kernels } from './types.js';
import { referenceKernels } from './reference.js';
import { createWasmKernels, type WasmVariant } from './wasm.js';

export type { Kernels } from './types.js';
export { referenceKernels } from './reference.js';

export interface KernelOptions {
  /** "auto" (WASM if available, else reference), "wasm" (fail if unavailable), or "reference". */
  backend?: 'auto' | 'wasm' | 'reference';
  /**
   * WASM build: "auto" (fused multiply-add when the runtime supports relaxed SIMD, unless
   * ARBOR_KERNELS_FMA=0), "fma", "plain".
   */
  variant?: 'auto' | WasmVariant;
  /**
   * Kernel threads, 1 to os.availableParallelism() (default ARBOR_KERNEL_THREADS, else 1; runs set it
   * with engine.threads): with T > 1, T−1 worker threads over the same shared memory each take one
   * share of every large kernel call (GEMM rows or columns, attention (sequence, head) items, element
   * and row ranges), with results bit-identical to one thread.
   */
  threads?: number;
}

const wasmKernels = new Map<string, Promise<Kernels>>();

export async function loadKernels(options: KernelOptions = {}): Promise<Kernels> {
  const backend = options.backend ?? (process.env.ARBOR_KERNELS as KernelOptions['backend']) ?? 'auto';
  if (backend === 'reference') return referenceKernels;
  const variant = options.variant ?? 'auto';
  const threads = options.threads ?? threadsFromEnv();
  const key = `${variant}:${threads}`;
  let pending = wasmKernels.get(key);
  if (!pending) wasmKernels.set(key, (pending = createWasmKernels({ variant, threads })));
  try {
    return await pending;
  } catch (error) {
    // a bad thread count is the caller's error, not a missing WASM build
    if (backend === 'wasm' || error instanceof ConfigError) throw error;
    return referenceKernels;
  }
}

/** ARBOR_KERNEL_THREADS (unset or empty: 1); anything but an integer from 1 to the machine's cores is a ConfigError. */
function threadsFromEnv(): number {
  const raw = process.env.ARBOR_KERNEL_THREADS;
  if (raw === undefined || raw.trim() === '') return 1;
  const threads = Number(raw);
  const cores = availableParallelism();
  if (!Number.isInteger(threads) || threads < 1 || threads > cores) {
    const message = `ARBOR_KERNEL_THREADS: must be an integer from 1 to ${cores} (this machine's cores), got "${raw}"`;
    throw new ConfigError(message, 'ARBOR_KERNEL_THREADS');
  }
  return threads;
}
