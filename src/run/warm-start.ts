/**
 * The embedded engine's warm-start for a run: SFT on the task's demonstrations, cached under
 * runs/_sft/<hash of task, model, SFT options and seed> so repeated runs and benchmarks reuse it (an
 * explicit sft.checkpoint wins). `buildEngine` trains it when the directory is empty.
 */
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import type { WarmStart } from '../engine/build.js';
import type { Task } from '../tasks/types.js';
import type { ArborConfig } from './config.js';

export function sftCacheDir(config: ArborConfig, runsRoot = 'runs'): string {
  const key = JSON.stringify({ task: config.task, model: config.model, sft: { ...config.sft, checkpoint: undefined }, seed: config.run.seed, v: 1 });
  return join(runsRoot, '_sft', createHash('sha256').update(key).digest('hex').slice(0, 16));
}

export function warmStartFor(config: ArborConfig, task: Task): WarmStart {
  return {
    dir: config.sft.checkpoint ?? sftCacheDir(config),
    seed: config.run.seed,
    examples: () => task.makeItems('train', config.sft.examples, config.run.seed + 1).map((i) => ({ prompt: i.prompt, completion: task.demonstration(i), source: `${task.name} demonstration for item ${i.id}` })),
  };
}
