/**
 * The nano model object: config, kernels, the parameter arena and its gradient arena, and rotary
 * tables. Forward/backward for training live in forward.ts, incremental decoding in decode.ts; both
 * read weights from here. Publishing weights to an in-process sampler = bumping `weightVersion`.
 */
import type { Kernels } from '../kernels/types.js';
import { loadKernels } from '../kernels/index.js';
import { parameterCount, validateNanoConfig, type NanoConfig, defaultNanoConfig } from './config.js';
import { createParams, initParams, type ParamArena } from './params.js';
import { ropeTables, type RopeTables } from './ops/rope.js';

export class NanoModel {
  /** Parameter values. */
  readonly params: ParamArena;
  /** Gradients (same layout), accumulated by backward, zeroed by the optimiser. */
  readonly grads: ParamArena;
  readonly rope: RopeTables;
  /** Incremented whenever weights change in a way samplers must see (optimiser step, load). */
  weightVersion = 0;

  private constructor(readonly config: NanoConfig, readonly kernels: Kernels) {
    validateNanoConfig(config);
    this.params = createParams(config, kernels);
    this.grads = createParams(config, kernels);
    this.rope = ropeTables(config.contextLength, config.dModel / config.nHeads, config.ropeTheta, (n) => kernels.alloc(n));
  }

  /** Build a model with seeded random weights. */
  static async create(config: Partial<NanoConfig>, options: { seed?: number; kernels?: Kernels } = {}): Promise<NanoModel> {
    const full = { ...defaultNanoConfig, ...config };
    const kernels = options.kernels ?? (await loadKernels());
    const model = new NanoModel(full, kernels);
    initParams(model.params, options.seed ?? 0);
    return model;
  }

  /** Synchronous constructor for callers that already hold kernels. */
  static createSync(config: NanoConfig, kernels: Kernels, seed = 0): NanoModel {
    const model = new NanoModel(config, kernels);
    initParams(model.params, seed);
    return model;
  }

  param(name: string): Float32Array {
    return this.params.get(name);
  }

  /** The output head [V, C] (the embedding when tied). */
  get headName(): string {
    return this.config.tieEmbeddings ? 'tok_emb' : 'lm_head';
  }

  get parameterCount(): number {
    return parameterCount(this.config);
  }
}
