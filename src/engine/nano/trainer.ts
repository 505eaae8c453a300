/**
 * NanoTrainer: the Trainer interface on the embedded model. forwardBackward splits the datums into
 * micro-batches by row budget, runs forward → loss → backward on each (gradients accumulate), and
 * returns per-datum current log-probs and weighted metrics. optimStep applies AdamW and zeroes the
 * gradients. saveForSampler bumps the shared model's weight version (the in-process sampler reads the
 * same parameter arena). saveState/loadState round-trip weights, moments and counters exactly.
 */
import { mkdirSync, readFileSync } from 'node:fs';
import { writeFileAtomic } from '../../core/files.js';
import { join } from 'node:path';
import { DataError } from '../../core/errors.js';
import type { AdamParams, Datum, ForwardBackwardResult, LossExtras, LossSpec, OptimStepResult, Trainer } from '../types.js';
import { AdamW } from './adamw.js';
import { loadArena, arenaTensors } from './checkpoint.js';
import { TrainingGraph } from './forward.js';
import { computeLoss } from './losses.js';
import type { NanoModel } from './model.js';
import { readSafetensors, writeSafetensors } from './safetensors.js';

export interface NanoTrainerOptions {
  /** Maximum rows (tokens) per forward pass; larger batches are split. */
  maxRowsPerPass?: number;
}

export class NanoTrainer implements Trainer {
  readonly specificationVersion = 'arbor.trainer.v1' as const;
  readonly optimizer: AdamW;
  private readonly graph: TrainingGraph;
  private readonly maxRows: number;

  constructor(readonly model: NanoModel, options: NanoTrainerOptions = {}) {
    this.optimizer = new AdamW(model.params, model.kernels);
    this.graph = new TrainingGraph(model);
    this.maxRows = options.maxRowsPerPass ?? 4096;
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

  private async run(data: Datum[], loss: LossSpec, extras: LossExtras | undefined, backward: boolean): Promise<ForwardBackwardResult> {
    data.forEach(validateDatum);
    let total = 0;
    const logprobs: number[][] = [];
    const sums: Record<string, number> = {};
    let weight = 0;
    for (const chunk of this.chunks(data)) {
      this.graph.forward({ sequences: chunk.map((d) => d.inputTokens) });
      const out = computeLoss(this.graph, chunk, loss, extras);
      if (backward) this.graph.backward();
      total += out.loss;
      logprobs.push(...out.logprobs);
      const w = chunk.reduce((s, d) => s + d.weights.reduce((a, b) => a + b, 0), 0);
      for (const [k, v] of Object.entries(out.metrics)) sums[k] = (sums[k] ?? 0) + (k === 'tokens' ? v : v * w);
      weight += w;
    }
    const metrics: Record<string, number> = {};
    for (const [k, v] of Object.entries(sums)) metrics[k] = k === 'tokens' ? v : v / (weight || 1);
    return { loss: total, logprobs, metrics };
  }

  /** Split data into passes of at most maxRows rows (a longer single datum gets its own pass). */
  private *chunks(data: Datum[]): Generator<Datum[]> {
    let cur: Datum[] = [];
    let rows = 0;
    for (const d of data) {
      if (cur.length && rows + d.inputTokens.length > this.maxRows) {
        yield cur;
        cur = [];
        rows = 0;
      }
      cur.push(d);
      rows += d.inputTokens.length;
    }
    if (cur.length) yield cur;
  }

  async optimStep(params: AdamParams): Promise<OptimStepResult> {
    const gradNorm = this.optimizer.update(this.model.grads.data, params);
    this.model.grads.data.fill(0);
    return Number.isFinite(gradNorm) ? { gradNorm, step: this.optimizer.step } : { gradNorm, step: this.optimizer.step, skipped: true };
  }

  /** Discard accumulated gradients without stepping. */
  zeroGrad(): void {
    this.model.grads.data.fill(0);
  }

  async saveForSampler(): Promise<{ weightVersion: number }> {
    this.model.weightVersion++;
    return { weightVersion: this.model.weightVersion };
  }

  async saveState(dir: string): Promise<void> {
    mkdirSync(dir, { recursive: true });
    writeSafetensors(join(dir, 'model.safetensors'), arenaTensors(this.model.params));
    const shapes = this.model.params.specs;
    const moments: Record<string, { shape: number[]; data: Float32Array }> = {};
    for (const s of shapes) {
      const o = this.model.params.offsets.get(s.name)!;
      const n = this.model.params.get(s.name).length;
      moments[`m.${s.name}`] = { shape: s.shape, data: this.optimizer.m.subarray(o, o + n) };
      moments[`v.${s.name}`] = { shape: s.shape, data: this.optimizer.v.subarray(o, o + n) };
    }
    writeSafetensors(join(dir, 'optimizer.safetensors'), moments);
    writeFileAtomic(join(dir, 'trainer.json'), JSON.stringify({ step: this.optimizer.step, weightVersion: this.model.weightVersion, config: this.model.config }, null, 2));
  }

  /** Load weights, moments and counters; everything is read and checked before anything is replaced. */
  async loadState(dir: string): Promise<void> {
    const file = join(dir, 'optimizer.safetensors');
    const { tensors } = readSafetensors(file);
    for (const s of this.model.params.specs) {
      const n = this.model.params.get(s.name).length;
      for (const key of [`m.${s.name}`, `v.${s.name}`]) {
        const t = tensors[key];
        if (!t) throw new DataError(`${file}: missing moments for ${s.name}`, file, undefined, s.name);
        if (t.data.length !== n) throw new DataError(`${file}: ${key} has ${t.data.length} values, the model's ${s.name} has ${n}`, file, undefined, key);
      }
    }
    const stateFile = join(dir, 'trainer.json');
    let state: { step: number; weightVersion: number };
    try {
      state = JSON.parse(readFileSync(stateFile, 'utf8')) as { step: number; weightVersion: number };
    } catch (cause) {
      throw new DataError(`${stateFile}: cannot read (${(cause as Error).message})`, stateFile, undefined, undefined, { cause });
    }
    if (!Number.isInteger(state?.step) || !Number.isInteger(state?.weightVersion)) throw new DataError(`${stateFile}: needs integer step and weightVersion`, stateFile);
    loadArena(this.model.params, join(dir, 'model.safetensors')); // validates every tensor before copying any
    for (const s of this.model.params.specs) {
      const o = this.model.params.offsets.get(s.name)!;
      this.optimizer.m.set(tensors[`m.${s.name}`].data, o);
      this.optimizer.v.set(tensors[`v.${s.name}`].data, o);
    }
    this.optimizer.step = state.step;
    this.model.weightVersion = state.weightVersion;
    this.model.grads.data.fill(0);
  }
}

function validateDatum(d: Datum, i: number): void {
  const T = d.inputTokens.length;
  if (T === 0) throw new DataError(`datum ${i}: empty inputTokens`);
  for (const [name, arr] of [['targetTokens', d.targetTokens], ['weights', d.weights], ['samplingLogprobs', d.samplingLogprobs], ['advantages', d.advantages], ['referenceLogprobs', d.referenceLogprobs]] as const) {
    if (arr !== undefined && arr.length !== T) throw new DataError(`datum ${i}: ${name} has length ${arr.length}, inputTokens has ${T}`, undefined, undefined, name);
  }
}
