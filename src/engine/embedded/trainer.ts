/**
 * NanoTrainer: the Trainer interface on the embedded model. forwardBackward splits the datums into
 * micro-batches by row budget, runs forward → loss → backward on each (gradients accumulate), and
 * returns per-datum current log-probs and weighted metrics. optimStep applies AdamW and zeroes the
 * gradients. What trains is the whole model, or only a LoRA adapter over a frozen base (optimizer state
 * exists for the adapter only). saveForSampler bumps the shared model's weight version (the in-process
 * sampler reads the same arenas). saveState/loadState round-trip weights (the adapter in PEFT's format),
 * moments and counters exactly.
 */
import { mkdirSync, readFileSync } from 'node:fs';
import { writeFileAtomic } from '../../core/files.js';
import { join } from 'node:path';
import { DataError } from '../../core/errors.js';
import type {
  AdamParams,
  Datum,
  ForwardBackwardResult,
  LossExtras,
  LossSpec,
  OptimStepResult,
  Trainer,
} from '../types.js';
import { AdamW } from './adamw.js';
import { loadArena, arenaTensors } from '../formats/checkpoint.js';
import { TrainingGraph } from '../model/forward.js';
import { computeLoss } from '../model/losses.js';
import { checkTreeAttention, ForestBuilder, type TreePack } from '../model/packing.js';
import type { NanoModel } from '../model/model.js';
import { readSafetensors, writeSafetensors } from '../formats/safetensors.js';
import type { LoraAdapter } from '../model/lora.js';
import { referenceKernels } from '../kernels/reference.js';
import type { ParamArena } from '../model/params.js';
import { ADAPTER_WEIGHTS, loadPeftAdapter, savePeftAdapter } from '../formats/peft.js';

export interface NanoTrainerOptions {
  /**
   * Maximum rows (tokens) per forward pass; larger batches are split. Default: what the activation budget
   * holds (passBytes: the kernel memory the weights and optimizer leave, 256 MiB to 1.75 GiB), at most 4096.
   */
  maxRowsPerPass?: number;
  /** Train only this LoRA adapter; the model's weights are frozen. */
  adapter?: LoraAdapter;
  /** base_model_name_or_path written with a saved adapter. */
  baseModelName?: string;
  /** Run the output head in blocks of this many rows (default: only when the logits would pass 256 MB). */
  headBlockRows?: number;
  /**
   * Compute the output head only at positions with a loss weight (SFT: not the prompt); the returned
   * log-probs of the others are NaN. Saves the vocabulary-wide work of unweighted rows.
   */
  weightedRowsOnly?: boolean;
  /**
   * `tree` (default): datums that share a prefix are packed as a forest and each unique token is
   * computed once (packing.ts; the loss and gradients equal the flat computation's up to rounding);
   * `flat`: every datum is computed whole.
   */
  packing?: TrainerPacking;
}

export type TrainerPacking = 'tree' | 'flat';

/** The most bytes a wasm32 kernel memory holds: weights, optimizer state and a pass's activations share it. */
const KERNEL_MEMORY = 4 * 2 ** 30;
/**
 * Kept out of the activation budget: the output head's logit blocks (512 MiB), the attention probabilities
 * (a tree pass keeps at most ATTENTION_BYTES; a flat one NH·T² per sequence and layer), scratch.
 */
const PASS_RESERVE = 1.25 * 2 ** 30;
/** The activation budget's bounds (bytes). */
const PASS_BYTES_MIN = 256 * 2 ** 20;
const PASS_BYTES_MAX = 1.75 * 2 ** 30;
/** Attention probabilities a tree-packed pass may keep (bytes); a pass whose trees see more is split. */
const ATTENTION_BYTES = 512 << 20;

/**
 * Activation memory a training pass may use by default: what the kernel memory has left after the
 * weights and the trained parameters' gradients and moments, less PASS_RESERVE, within 256 MiB–1.75 GiB.
 * A larger budget lets a tree-packed pass hold a whole tree (a GRPO group's prompt is then computed
 * once, not once per pass); a 135M model with LoRA gets 1.75 GiB (about 1,350 rows), a 0.5B one about
 * 0.9 GiB. A budget of 512 MiB or more is allocated whole at the first pass (ALLOCATE_WHOLE_BYTES).
 */
export function passBytes(model: NanoModel, adapter?: LoraAdapter): number {
  const weights = 4 * model.params.data.length;
  const trained = 4 * (adapter ? adapter.params.data.length : model.params.data.length);
  const free = KERNEL_MEMORY - weights - 3 * trained - PASS_RESERVE;
  return Math.max(PASS_BYTES_MIN, Math.min(PASS_BYTES_MAX, free));
}

/** Bytes of cached activations one row of a training pass keeps. */
function rowBytes(model: NanoModel, adapter?: LoraAdapter): number {
  const { C, F, L, Cq, Ckv, NH, NKV } = model.dims;
  const perLayer = 4 * C + 3 * Cq + 4 * Ckv + 3 * F + (NKV !== NH ? 2 * Cq : 0) + 7 * (adapter?.rank ?? 0);
  return 4 * (L * perLayer + 12 * C + 3 * F + 2 * Cq);
}

/** Rows per forward pass that fit passBytes of cached activations (at most 4096, the nano models' budget). */
function defaultMaxRows(model: NanoModel, adapter?: LoraAdapter): number {
  return Math.max(64, Math.min(4096, Math.floor(passBytes(model, adapter) / rowBytes(model, adapter))));
}

/**
 * A budget of at least this many bytes is allocated whole at the first pass: growing it pass by pass
 * would leak each smaller copy (kernel memory is never freed) where memory is tight. A smaller one grows
 * 1.5× at a time (what leaks is at most twice the largest pass, and small batches stay small).
 */
const ALLOCATE_WHOLE_BYTES = 512 * 2 ** 20;

export class NanoTrainer implements Trainer {
  readonly specificationVersion = 'arbor.trainer.v1' as const;
  readonly optimizer: AdamW;
  private readonly graph: TrainingGraph;
  private readonly maxRows: number;
  /** Most attention pairs (per head) in one tree-packed pass. */
  private readonly maxVisible: number;

  /** The LoRA adapter being trained (undefined = the whole model trains). */
  readonly adapter: LoraAdapter | undefined;
  private readonly baseModelName: string;

  constructor(
    readonly model: NanoModel,
    options: NanoTrainerOptions = {},
  ) {
    this.adapter = options.adapter;
    if (this.adapter) model.frozen = true;
    this.optimizer = new AdamW(this.trained.params, model.kernels);
    this.maxRows = options.maxRowsPerPass ?? defaultMaxRows(model, this.adapter);
    const whole = this.maxRows * rowBytes(model, this.adapter) >= ALLOCATE_WHOLE_BYTES;
    this.graph = new TrainingGraph(model, this.adapter, options.headBlockRows, whole ? this.maxRows : 0);
    // the tree attention's probabilities: NH per visible pair per layer, float32
    this.maxVisible = Math.max(1, Math.floor(ATTENTION_BYTES / (4 * model.dims.NH * model.dims.L)));
    this.baseModelName = options.baseModelName ?? 'base';
    this.weightedRowsOnly = options.weightedRowsOnly === true;
    this.packing = options.packing ?? 'tree';
    if (this.packing === 'tree') checkTreeAttention(model.kernels);
  }

  /** How batches are laid out (NanoTrainerOptions.packing). */
  packing: TrainerPacking;

  private readonly weightedRowsOnly: boolean;

  /** The parameters that train and their gradients: the adapter's, or the model's. */
  private get trained(): { params: ParamArena; grads: ParamArena } {
    return this.adapter ?? this.model;
  }

  async forwardBackward(data: Datum[], loss: LossSpec, extras?: LossExtras): Promise<ForwardBackwardResult> {
    return this.run(data, loss, extras, true);
  }

  /** Weighted cross-entropy of `data` without touching gradients. */
  async logprobsLoss(data: Datum[]): Promise<number> {
    return (await this.run(data, { kind: 'cross_entropy' }, {}, false)).loss;
  }

  async logprobs(data: Datum[]): Promise<number[][]> {
    return (await this.run(data, { kind: 'cross_entropy' }, {}, false)).logprobs;
  }

  private async run(
    data: Datum[],
    loss: LossSpec,
    extras: LossExtras | undefined,
    backward: boolean,
  ): Promise<ForwardBackwardResult> {
    data.forEach(validateDatum);
    let total = 0;
    const logprobs: number[][] = [];
    const sums: Record<string, number> = {};
    let weight = 0;
    for (const { chunk, tree } of this.chunks(data)) {
      this.graph.forward({
        sequences: chunk.map((d) => d.inputTokens),
        targets: chunk.map((d) => d.targetTokens),
        weights: chunk.map((d) => d.weights),
        weightedRowsOnly: this.weightedRowsOnly,
        tree,
      });
      const out = computeLoss(this.graph, chunk, loss, extras);
      if (backward) this.graph.backward();
      total += out.loss;
      logprobs.push(...out.logprobs);
      const w = chunk.reduce((s, d) => s + d.weights.reduce((a, b) => a + b, 0), 0);
      for (const [k, v] of Object.entries(out.metrics)) sums[k] = (sums[k] ?? 0) + (COUNTS.has(k) ? v : v * w);
      weight += w;
    }
    const metrics: Record<string, number> = {};
    for (const [k, v] of Object.entries(sums)) if (!COUNTS.has(k)) metrics[k] = v / (weight || 1);
    metrics.tokens = sums.tokens ?? 0;
    // tokens computed over tokens trained: 1 flat, below 1 where tree packing shared prefixes
    metrics.train_token_ratio = sums.tokens ? (sums.rows ?? 0) / sums.tokens : 1;
    return { loss: total, logprobs, metrics };
  }

  /**
   * Split data into passes of at most maxRows rows (a longer single datum gets its own pass); tree
   * packing counts the rows a datum adds to its pass's forest (its tokens past the prefix it shares).
   */
  private *chunks(data: Datum[]): Generator<{ chunk: Datum[]; tree?: TreePack }> {
    if (this.packing === 'flat') {
      let cur: Datum[] = [];
      let rows = 0;
      for (const d of data) {
        if (cur.length && rows + d.inputTokens.length > this.maxRows) {
          yield { chunk: cur };
          cur = [];
          rows = 0;
        }
        cur.push(d);
        rows += d.inputTokens.length;
      }
      if (cur.length) yield { chunk: cur };
      return;
    }
    let cur: Datum[] = [];
    let forest = new ForestBuilder();
    for (const d of data) {
      const more = forest.added(d.inputTokens);
      const full = forest.rows + more.rows > this.maxRows || forest.visible + more.visible > this.maxVisible;
      if (cur.length && full) {
        yield { chunk: cur, tree: forest.build() };
        cur = [];
        forest = new ForestBuilder();
      }
      cur.push(d);
      forest.add(d.inputTokens, d.targetTokens);
    }
    if (cur.length) yield { chunk: cur, tree: forest.build() };
  }

  async optimStep(params: AdamParams): Promise<OptimStepResult> {
    const grads = this.trained.grads.data;
    const gradNorm = this.optimizer.update(grads, params);
    grads.fill(0);
    return Number.isFinite(gradNorm)
      ? { gradNorm, step: this.optimizer.step }
      : { gradNorm, step: this.optimizer.step, skipped: true };
  }

  /** Discard accumulated gradients without stepping. */
  zeroGrad(): void {
    this.trained.grads.data.fill(0);
  }

  /** Start over as a new optimizer: no moments, step 0, no accumulated gradients (the weights stay). */
  reset(): void {
    this.optimizer.m.fill(0);
    this.optimizer.v.fill(0);
    this.optimizer.step = 0;
    this.zeroGrad();
  }

  async saveForSampler(): Promise<{ weightVersion: number }> {
    this.model.weightVersion++;
    return { weightVersion: this.model.weightVersion };
  }

  async saveState(dir: string): Promise<void> {
    mkdirSync(dir, { recursive: true });
    const arena = this.trained.params;
    if (this.adapter) savePeftAdapter(dir, this.adapter, this.baseModelName);
    else writeSafetensors(join(dir, 'model.safetensors'), arenaTensors(arena));
    const moments: Record<string, { shape: number[]; data: Float32Array }> = {};
    for (const s of arena.specs) {
      const o = arena.offsets.get(s.name)!;
      const n = arena.get(s.name).length;
      moments[`m.${s.name}`] = { shape: s.shape, data: this.optimizer.m.subarray(o, o + n) };
      moments[`v.${s.name}`] = { shape: s.shape, data: this.optimizer.v.subarray(o, o + n) };
    }
    writeSafetensors(join(dir, 'optimizer.safetensors'), moments);
    const trained = this.adapter ? { lora: { rank: this.adapter.rank, targets: this.adapter.settings.targets } } : {};
    writeFileAtomic(
      join(dir, 'trainer.json'),
      JSON.stringify(
        { step: this.optimizer.step, weightVersion: this.model.weightVersion, config: this.model.config, ...trained },
        null,
        2,
      ),
    );
  }

  /** Load weights, moments and counters; everything is read and checked before anything is replaced. */
  async loadState(dir: string): Promise<void> {
    const file = join(dir, 'optimizer.safetensors');
    const { tensors } = readSafetensors(file);
    const arena = this.trained.params;
    for (const s of arena.specs) {
      const n = arena.get(s.name).length;
      for (const key of [`m.${s.name}`, `v.${s.name}`]) {
        const t = tensors[key];
        if (!t) throw new DataError(`${file}: missing moments for ${s.name}`, file, undefined, s.name);
        if (t.data.length !== n)
          throw new DataError(
            `${file}: ${key} has ${t.data.length} values, the model's ${s.name} has ${n}`,
            file,
            undefined,
            key,
          );
      }
    }
    const stateFile = join(dir, 'trainer.json');
    let state: { step: number; weightVersion: number };
    try {
      state = JSON.parse(readFileSync(stateFile, 'utf8')) as { step: number; weightVersion: number };
    } catch (cause) {
      throw new DataError(`${stateFile}: cannot read (${(cause as Error).message})`, stateFile, undefined, undefined, {
        cause,
      });
    }
    if (!Number.isInteger(state?.step) || !Number.isInteger(state?.weightVersion))
      throw new DataError(`${stateFile}: needs integer step and weightVersion`, stateFile);
    if (this.adapter) {
      // read into a fresh adapter (validated against the base) before anything of the live one changes
      const loaded = loadPeftAdapter(dir, this.model, { kernels: referenceKernels });
      if (loaded.params.size !== arena.size || loaded.scale !== this.adapter.scale) {
        throw new DataError(
          `${join(dir, ADAPTER_WEIGHTS)}: adapter of rank ${loaded.rank} on ${loaded.settings.targets.join(',')}, ` +
            `the run trains rank ${this.adapter.rank} on ${this.adapter.settings.targets.join(',')}`,
          join(dir, ADAPTER_WEIGHTS),
        );
      }
      for (const s of arena.specs) arena.get(s.name).set(loaded.params.get(s.name));
    } else {
      loadArena(arena, join(dir, 'model.safetensors')); // validates every tensor before copying any
    }
    for (const s of arena.specs) {
      const o = arena.offsets.get(s.name)!;
      this.optimizer.m.set(tensors[`m.${s.name}`].data, o);
      this.optimizer.v.set(tensors[`v.${s.name}`].data, o);
    }
    this.optimizer.step = state.step;
    this.model.weightVersion = state.weightVersion;
    this.trained.grads.data.fill(0);
  }
}

/** Metrics summed over passes (counts), not weighted means. */
const COUNTS = new Set(['tokens', 'rows']);

function validateDatum(d: Datum, i: number): void {
  const T = d.inputTokens.length;
  if (T === 0) throw new DataError(`datum ${i}: empty inputTokens`);
  for (const [name, arr] of [
    ['targetTokens', d.targetTokens],
    ['weights', d.weights],
    ['samplingLogprobs', d.samplingLogprobs],
    ['advantages', d.advantages],
    ['referenceLogprobs', d.referenceLogprobs],
  ] as const) {
    if (arr !== undefined && arr.length !== T)
      throw new DataError(
        `datum ${i}: ${name} has length ${arr.length}, inputTokens has ${T}`,
        undefined,
        undefined,
        name,
      );
  }
}
