/**
 * Kernel selection. `loadKernels()` returns the fastest available backend (WASM SIMD once built)
 * and falls back to the plain-TypeScript reference. Callers hold the returned object.
 */
import type { Kernels } from './types.js';
import { referenceKernels } from './reference.js';

export type { Kernels } from './types.js';
export { referenceKernels } from './reference.js';

export interface KernelOptions {
  /** "auto" (WASM if available, else reference), "wasm", or "reference". */
  backend?: 'auto' | 'wasm' | 'reference';
  /** Worker threads for large matmuls (1 = none). */
  threads?: number;
}

export async function loadKernels(options: KernelOptions = {}): Promise<Kernels> {
  void options;
  return referenceKernels;
}
