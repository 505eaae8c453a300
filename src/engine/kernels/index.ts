/**
 * Kernel selection. `loadKernels()` returns the WASM SIMD backend when build/kernels.wasm exists and
 * loads (the default), else the plain-TypeScript reference. The chosen backend is cached per kind.
 */
import type { Kernels } from './types.js';
import { referenceKernels } from './reference.js';
import { createWasmKernels } from './wasm.js';

export type { Kernels } from './types.js';
export { referenceKernels } from './reference.js';

export interface KernelOptions {
  /** "auto" (WASM if available, else reference), "wasm" (fail if unavailable), or "reference". */
  backend?: 'auto' | 'wasm' | 'reference';
}

let wasmKernels: Promise<Kernels> | undefined;

export async function loadKernels(options: KernelOptions = {}): Promise<Kernels> {
  const backend = options.backend ?? (process.env.ARBOR_KERNELS as KernelOptions['backend']) ?? 'auto';
  if (backend === 'reference') return referenceKernels;
  wasmKernels ??= createWasmKernels();
  try {
    return await wasmKernels;
  } catch (error) {
    if (backend === 'wasm') throw error;
    return referenceKernels;
  }
}
