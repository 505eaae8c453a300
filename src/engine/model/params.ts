/**
 * Parameter arenas for the nano model: every tensor named in `paramSpecs(config)` is a view into one
 * Float32Array (allocated in kernel memory so WASM kernels use it without copying). The gradient arena
 * has the same layout. Initialisation is seeded. This module does no math beyond init.
 */
import { Rng } from '../../core/rng.js';
import type { Kernels } from '../kernels/types.js';
import { numel, paramSpecs, type NanoConfig, type ParamSpec } from './config.js';

export class ParamArena {
  /** All values, in `specs` order. */
  readonly data: Float32Array;
  /** Named views into `data`. */
  readonly views: Map<string, Float32Array>;
  /** Offsets (in floats) of each tensor in `data`. */
  readonly offsets: Map<string, number>;

  constructor(
    readonly specs: ParamSpec[],
    kernels: Kernels,
  ) {
    const total = specs.reduce((s, p) => s + numel(p.shape), 0);
    this.data = kernels.alloc(total);
    this.views = new Map();
    this.offsets = new Map();
    let offset = 0;
    for (const p of specs) {
      const n = numel(p.shape);
      this.views.set(p.name, this.data.subarray(offset, offset + n));
      this.offsets.set(p.name, offset);
      offset += n;
    }
  }

  get(name: string): Float32Array {
    const v = this.views.get(name);
    if (!v) throw new Error(`no parameter named ${name}`);
    return v;
  }

  /** Total number of floats. */
  get size(): number {
    return this.data.length;
  }
}

/** Initialise weights: normal(0, std) for matrices, ones for norm gains, zeros for biases. */
export function initParams(arena: ParamArena, seed: number): void {
  const rng = new Rng(seed);
  for (const p of arena.specs) {
    const v = arena.get(p.name);
    if (p.init === 'ones') v.fill(1);
    else if (p.init === 'zeros') v.fill(0);
    else for (let i = 0; i < v.length; i++) v[i] = rng.normal() * (p.std ?? 0.02);
  }
}

export function createParams(config: NanoConfig, kernels: Kernels): ParamArena {
  return new ParamArena(paramSpecs(config), kernels);
}
