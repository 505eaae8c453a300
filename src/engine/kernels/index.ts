/**
 * Kernel selection. `loadKernels()` returns the WASM SIMD backend when its build exists and loads
 * (the default; the fused multiply-add build where the runtime supports relaxed SIMD), else the
 * plain-TypeScript reference. The chosen backend is cached per kind.
 */
import type { Kernels } from './types.js';
import { referenceKernels } from './reference.js';
import { createWasmKernels, type WasmVariant } from './wasm.js';

export type { Kernels } from './types.js';
export { referenceKernels } from './reference.js';

export interface KernelOptions {
  /** "auto" (WASM if available, else reference), "wasm" (fail if unavailable), or "reference". */
  backend?: 'auto' | 'wasm' | 'reference';
  /** WASM build: "auto" (fused multiply-add when the runtime supports relaxed SIMD, unless ARBOR_KERNELS_FMA=0), "fma", "plain". */
  variant?: 'auto' | WasmVariant;
  /**
   * Kernel threads (1 or 2; default ARBOR_KERNEL_THREADS, else 1; runs set it with engine.threads):
   * with 2, a worker thread over the same shared memory takes one share of each large kernel call
   * (GEMM rows, attention heads, element and row ranges), with bit-identical results.
   */
  threads?: number;
}

const wasmKernels = new Map<string, Promise<Kernels>>();

export async function loadKernels(options: KernelOptions = {}): Promise<Kernels> {
  const backend = options.backend ?? (process.env.ARBOR_KERNELS as KernelOptions['backend']) ?? 'auto';
  if (backend === 'reference') return referenceKernels;
  const variant = options.variant ?? 'auto';
  const threads = options.threads ?? (Number(process.env.ARBOR_KERNEL_THREADS) || 1);
  const key = `${variant}:${threads}`;
  let pending = wasmKernels.get(key);
  if (!pending) wasmKernels.set(key, (pending = createWasmKernels({ variant, threads })));
  try {
    return await pending;
  } catch (error) {
    if (backend === 'wasm') throw error;
    return referenceKernels;
  }
}
