/**
 * `arbor eval`: accuracy (greedy and pass@k) of a model on a task's test split.
 *   --task <name> --checkpoint <dir>   an embedded (nano) checkpoint
 *   --config <file> [--task <name>]    the engine and task of a run config (remote servers included)
 */
import { ArborError, ConfigError } from '../core/errors.js';
import { Rng } from '../core/rng.js';
import { loadCheckpoint } from '../engine/nano/checkpoint.js';
import { NanoSampler } from '../engine/nano/sampler.js';
import type { Sampler } from '../engine/types.js';
import { loadConfig } from '../run/config.js';
import { evaluate } from '../run/evaluate.js';
import { promptEncoder } from '../run/prompts.js';
import { buildRemoteSampler } from '../run/remote.js';
import { getTask } from '../tasks/index.js';
import { flag, numberFlag } from './main.js';

const USAGE = 'usage: arbor eval (--checkpoint <dir> | --config <run.yaml>) [--task <name>] [--options JSON] [--count 200] [--k 4] [--seed 0] [--max-tokens N]';

function parseOptions(text: string | undefined): unknown {
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text);
  } catch (cause) {
    throw new ConfigError(`--options: not valid JSON (${(cause as Error).message})`, '--options', undefined, { cause });
  }
}

export async function evalCommand(argv: string[]): Promise<number> {
  const configFile = flag(argv, 'config');
  const checkpoint = flag(argv, 'checkpoint');
  const config = configFile ? loadConfig(configFile) : undefined;
  const taskName = flag(argv, 'task') ?? config?.task.name;
  if (!taskName || (!checkpoint && !config)) throw new ArborError(USAGE);
  const options = parseOptions(flag(argv, 'options')) ?? (config && taskName === config.task.name ? config.task.options : {});
  const task = getTask(taskName, options);
  await task.prepare?.();
  const seed = numberFlag(argv, 'seed', config?.run.seed ?? 0);
  const k = numberFlag(argv, 'k', config?.run.evalPassK ?? 4);
  const items = task.makeItems('test', numberFlag(argv, 'count', config?.run.evalCount ?? 200), seed);

  let sampler: Sampler & { close?: () => Promise<void> };
  let encodePrompt, decode: (t: number[]) => string, stopTokens: number[], maxTokens: number, source: string;
  if (checkpoint || config?.engine.kind !== 'remote') {
    const dir = checkpoint ?? config?.model.checkpoint;
    if (!dir) throw new ConfigError(`${configFile}: an embedded evaluation needs --checkpoint or model.checkpoint`, 'model.checkpoint');
    const { model, tokenizer } = await loadCheckpoint(dir);
    sampler = new NanoSampler(model);
    encodePrompt = promptEncoder(tokenizer, false);
    decode = (t) => tokenizer.decode(t);
    stopTokens = [tokenizer.eos];
    maxTokens = numberFlag(argv, 'max-tokens', config?.sampling.maxResponseTokens ?? Math.min(128, model.config.contextLength - 32));
    source = dir;
  } else {
    const remote = buildRemoteSampler(config);
    sampler = remote.sampler;
    encodePrompt = promptEncoder(remote.tokenizer, config.engine.chatTemplate);
    decode = (t) => remote.tokenizer.decode(t);
    stopTokens = [remote.tokenizer.eos];
    maxTokens = numberFlag(argv, 'max-tokens', config.sampling.maxResponseTokens);
    source = remote.origin;
  }
  try {
    const result = await evaluate(items, k, { sampler, encodePrompt, decode, stopTokens, maxResponseTokens: maxTokens, reward: task.reward, rng: new Rng(seed).fork('eval') });
    console.log(JSON.stringify({ task: taskName, model: source, count: result.count, greedy_accuracy: result.greedyAccuracy, [`pass_at_${k}`]: result.passAtK, samples: result.samples }, null, 2));
  } finally {
    await sampler.close?.();
  }
  return 0;
}
