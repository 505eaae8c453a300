/**
 * The programmatic entry points: `train` runs a whole run from a config file or object (what
 * `arbor train` does) and returns its summary; `evaluate` scores a checkpoint on a task's held-out
 * split (what `arbor eval` does) and returns the report it would print. Both are thin: the loop is
 * run/loop.ts and the evaluation run/evaluate-model.ts. Config objects resolve module paths against `baseDir`.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { evaluateModel, type EvalReport, type EvalRequest } from '../run/evaluate-model.js';
import { deepMerge, loadConfig, parseConfig, type ArborConfig } from '../run/config.js';
import { train as runTraining, type RunSummary } from '../run/loop.js';
import { RunDir } from '../run/rundir.js';

/** A config: a YAML/JSON file, or an object in the shape of one (as the file would parse). */
export type ConfigInput = string | Record<string, unknown>;

export interface TrainOptions {
  /** Directory that module paths of a config object resolve against (default: the working directory). */
  baseDir?: string;
  /** Start over in an existing run directory. */
  force?: boolean;
  /** No progress output. */
  quiet?: boolean;
}

/** The validated config of `config` with `overrides` merged in (a file's paths resolve against its directory). */
export function resolveConfig(
  config: ConfigInput,
  overrides: Record<string, unknown> = {},
  baseDir?: string,
): ArborConfig {
  if (typeof config === 'string') return loadConfig(config, overrides);
  return parseConfig(deepMerge(config, overrides), 'config', baseDir ?? process.cwd());
}

/** Run RL (the SFT warm start first when configured) and return the run's summary (also in summary.json). */
export async function train(
  config: ConfigInput,
  overrides: Record<string, unknown> = {},
  options: TrainOptions = {},
): Promise<RunSummary> {
  return runTraining(resolveConfig(config, overrides, options.baseDir), { force: options.force, quiet: options.quiet });
}

export interface EvaluateOptions extends Omit<EvalRequest, 'config' | 'configFile'> {
  /** Merged into the config first. */
  overrides?: Record<string, unknown>;
  baseDir?: string;
}

/**
 * Greedy accuracy (and pass@k, k > 0) on the test split of the config's task (or `options.task`).
 * `checkpoint` is a model directory, or a run directory (its newest checkpoint); without it the
 * config's model.checkpoint/model.hf or its remote engine is scored.
 */
export async function evaluate(config: ConfigInput | undefined, options: EvaluateOptions = {}): Promise<EvalReport> {
  const { overrides, baseDir, ...request } = options;
  const resolved = config === undefined ? undefined : resolveConfig(config, overrides, baseDir);
  const checkpoint = request.checkpoint && runCheckpoint(request.checkpoint);
  return evaluateModel({
    ...request,
    checkpoint,
    config: resolved,
    configFile: typeof config === 'string' ? config : undefined,
  });
}

/** A run directory's newest checkpoint's model (checkpoints/step-N/engine), else `dir` itself. */
function runCheckpoint(dir: string): string {
  if (!existsSync(join(dir, 'checkpoints'))) return dir;
  const steps = new RunDir(dir).checkpoints();
  return steps.length ? join(new RunDir(dir).checkpointDir(steps[steps.length - 1]), 'engine') : dir;
}
