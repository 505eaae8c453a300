/**
 * Builds the embedded engine for a run: the model (from a checkpoint, from the cached SFT warm-start,
 * or random), the tokenizer, and the in-process NanoSampler / NanoTrainer sharing one model. The
 * warm-start checkpoint is cached under runs/_sft/<hash of task, model and sft config> so repeated
 * runs (and benchmarks) reuse it; it is trained if missing.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { loadKernels } from '../engine/kernels/index.js';
import { loadCheckpoint, saveCheckpoint } from '../engine/nano/checkpoint.js';
import { NanoModel } from '../engine/nano/model.js';
import { NanoSampler } from '../engine/nano/sampler.js';
import { runSft } from '../engine/nano/sft.js';
import { CharTokenizer } from '../engine/nano/tokenizer.js';
import { NanoTrainer } from '../engine/nano/trainer.js';
import type { Task } from '../tasks/types.js';
import type { ArborConfig } from './config.js';
import type { Progress } from './progress.js';

export interface EmbeddedEngine {
  model: NanoModel;
  tokenizer: CharTokenizer;
  sampler: NanoSampler;
  trainer: NanoTrainer;
  /** Where the starting weights came from. */
  origin: string;
}

export function sftCacheDir(config: ArborConfig, runsRoot = 'runs'): string {
  const key = JSON.stringify({ task: config.task, model: config.model, sft: { ...config.sft, checkpoint: undefined }, seed: config.run.seed, v: 1 });
  return join(runsRoot, '_sft', createHash('sha256').update(key).digest('hex').slice(0, 16));
}

/** Load or train the starting checkpoint; returns its directory (or undefined for random init). */
export async function prepareStart(config: ArborConfig, task: Task, progress: Progress): Promise<string | undefined> {
  if (config.model.checkpoint) return config.model.checkpoint;
  if (!config.sft.enabled) return undefined;
  const dir = config.sft.checkpoint ?? sftCacheDir(config);
  if (existsSync(join(dir, 'model.safetensors'))) {
    progress.line(`warm-start: using ${dir}`);
    return dir;
  }
  const tokenizer = new CharTokenizer();
  const kernels = await loadKernels({ backend: config.engine.kernels });
  const m = config.model;
  const model = await NanoModel.create({ vocabSize: tokenizer.vocabSize, dModel: m.dModel, nLayers: m.nLayers, nHeads: m.nHeads, dFF: m.dFF, contextLength: m.contextLength, tieEmbeddings: m.tieEmbeddings }, { seed: m.initSeed, kernels });
  const items = task.makeItems('train', config.sft.examples, config.run.seed + 1);
  progress.line(`warm-start: SFT on ${items.length} ${task.name} demonstrations, ${config.sft.steps} steps, model of ${model.parameterCount} parameters`);
  const result = await runSft(model, tokenizer, items.map((i) => ({ prompt: i.prompt, completion: task.demonstration(i) })), {
    steps: config.sft.steps,
    batchSize: config.sft.batchSize,
    learningRate: config.sft.learningRate,
    seed: config.run.seed,
    onProgress: (p) => progress.update(`sft ${p.step}/${p.steps} loss ${p.loss.toFixed(3)}${p.heldOutLoss !== undefined ? ` held-out ${p.heldOutLoss.toFixed(3)}` : ''} ${Math.round(p.tokensPerSecond)} tok/s`),
  });
  saveCheckpoint(dir, model, tokenizer, { sft: { steps: config.sft.steps, finalLoss: result.trainLoss[result.trainLoss.length - 1] } });
  const held = result.heldOut[result.heldOut.length - 1];
  progress.line(`warm-start: done in ${(result.wallMs / 1000).toFixed(1)} s, train loss ${result.trainLoss[result.trainLoss.length - 1].toFixed(3)}${held ? `, held-out loss ${held.loss.toFixed(3)}` : ''} → ${dir}`);
  return dir;
}

export async function buildEmbedded(config: ArborConfig, startDir: string | undefined): Promise<EmbeddedEngine> {
  const kernels = await loadKernels({ backend: config.engine.kernels });
  let model: NanoModel;
  let tokenizer: CharTokenizer;
  if (startDir) {
    ({ model, tokenizer } = await loadCheckpoint(startDir, { kernels }));
  } else {
    tokenizer = new CharTokenizer();
    const m = config.model;
    model = await NanoModel.create({ vocabSize: tokenizer.vocabSize, dModel: m.dModel, nLayers: m.nLayers, nHeads: m.nHeads, dFF: m.dFF, contextLength: m.contextLength, tieEmbeddings: m.tieEmbeddings }, { seed: m.initSeed, kernels });
  }
  const sampler = new NanoSampler(model, { pageSize: config.engine.pageSize });
  const trainer = new NanoTrainer(model);
  return { model, tokenizer, sampler, trainer, origin: startDir ?? 'random init' };
}
