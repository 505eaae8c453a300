/**
 * The model object: config, kernels, the parameter arena, its gradient arena (allocated on first use:
 * a frozen base trained through LoRA never has one), the parameter names of every role, and rotary
 * tables. Forward/backward for training live in forward.ts, incremental decoding in decode.ts; both
 * read weights from here. Publishing weights to an in-process sampler = bumping `weightVersion`.
 */
import type { Kernels } from '../kernels/types.js';
import { loadKernels } from '../kernels/index.js';
import {
  modelDims,
  paramNames,
  parameterCount,
  validateNanoConfig,
  type ModelDims,
  type NanoConfig,
  type ParamNames,
  defaultNanoConfig,
} from './config.js';
import { createParams, initParams, type ParamArena } from './params.js';
import { hfRopeTables, ropeTables, type RopeTables } from './ops/rope.js';

export class NanoModel {
  /** Parameter values. */
  readonly params: ParamArena;
  private gradArena: ParamArena | undefined;
  readonly rope: RopeTables;
  /** The tensor name of every role (the model's own names or the Hugging Face ones). */
  readonly names: ParamNames;
  readonly dims: ModelDims;
  /**
   * The base weights are frozen (LoRA training): backward computes activation gradients only and
   * never allocates `grads`.
   */
  frozen = false;
  /** Incremented whenever weights change in a way samplers must see (optimiser step, load). */
  weightVersion = 0;

  private constructor(
    readonly config: NanoConfig,
    readonly kernels: Kernels,
  ) {
    validateNanoConfig(config);
    this.dims = modelDims(config);
    this.names = paramNames(config);
    this.params = createParams(config, kernels);
    const alloc = (n: number) => kernels.alloc(n);
    this.rope =
      config.rope === 'transformers'
        ? hfRopeTables(config.contextLength, this.dims.hd, config.ropeTheta, config.ropeScaling, alloc)
        : ropeTables(config.contextLength, this.dims.hd, config.ropeTheta, alloc);
  }

  /** Build a model with seeded random weights. */
  static async create(
    config: Partial<NanoConfig>,
    options: { seed?: number; kernels?: Kernels } = {},
  ): Promise<NanoModel> {
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

  /** A model whose weights the caller fills (a checkpoint load): no random init pass over the arena. */
  static createEmpty(config: NanoConfig, kernels: Kernels): NanoModel {
    return new NanoModel(config, kernels);
  }

  /** Gradients (same layout as params), accumulated by backward, zeroed by the optimiser. */
  get grads(): ParamArena {
    if (!this.gradArena) this.gradArena = createParams(this.config, this.kernels);
    return this.gradArena;
  }

  /** Whether the gradient arena exists (a LoRA-only model never allocates it). */
  get hasGrads(): boolean {
    return this.gradArena !== undefined;
  }

  param(name: string): Float32Array {
    return this.params.get(name);
  }

  /** The output head [V, C] (the embedding when tied). */
  get headName(): string {
    return this.names.head;
  }

  get parameterCount(): number {
    return parameterCount(this.config);
  }
}
