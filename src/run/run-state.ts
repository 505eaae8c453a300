/**
 * What a checkpoint holds besides the engine's own state: the loop counters, the pipeline's position
 * (next batch, data order, produced-but-untrained batches) and the rollout store (ready batches and
 * partial trees). Written after the engine state and the store, state.json last, so a checkpoint
 * directory with state.json is complete; every file is written atomically.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DataError } from '../core/errors.js';
import { writeFileAtomic } from '../core/files.js';
import { RolloutStore, type RolloutStoreOptions } from '../replay/store.js';
import type { PipelineState } from './pipeline.js';

export interface LoopState {
  step: number;
  /** Optimiser updates so far (drives the learning-rate schedule). */
  optimizerSteps: number;
  /** Weight version when the run started (batch t uses baseVersion + max(0, t−1−k)). */
  baseVersion: number;
  tokensDecoded: number;
  prefixTokensReused: number;
  promptTokensComputed: number;
  /** Seconds of the step loop over every session. */
  wallSeconds: number;
  /** Seconds before the first step of the first session (warm-start, step-0 evaluation); absent in older runs. */
  setupSeconds?: number;
  /** Consecutive steps without a usable tree. */
  failedSteps: number;
  evalStart: { greedy: number; passAtK: number | null; sample?: number | null };
  pipeline: PipelineState;
}

export function saveRunState(dir: string, state: LoopState, store: RolloutStore): void {
  store.save(join(dir, 'store.jsonl'));
  writeFileAtomic(join(dir, 'state.json'), JSON.stringify(state, null, 2) + '\n');
}

export function loadRunState(
  dir: string,
  storeOptions: RolloutStoreOptions,
): { state: LoopState; store: RolloutStore } {
  const file = join(dir, 'state.json');
  let state: LoopState;
  try {
    state = JSON.parse(readFileSync(file, 'utf8')) as LoopState;
  } catch (cause) {
    throw new DataError(
      `${file}: cannot read the run state (${(cause as Error).message})`,
      file,
      undefined,
      undefined,
      { cause },
    );
  }
  if (!state.pipeline)
    throw new DataError(
      `${file}: written by an older Arbor (no pipeline state); start a new run`,
      file,
      undefined,
      'pipeline',
    );
  const storeFile = join(dir, 'store.jsonl');
  const store = existsSync(storeFile) ? RolloutStore.load(storeFile, storeOptions) : new RolloutStore(storeOptions);
  return { state, store };
}
