/**
 * `arbor eval`: accuracy (greedy and pass@k) of a model on a task's test split.
 *   --task <name> --checkpoint <dir>   an embedded (nano) checkpoint
 *   --config <file> [--task <name>]    the engine and task of a run config (remote servers included)
 */
import { ArborError, ConfigError } from '../core/errors.js';
import { Rng } from '../core/rng.js';
import { buildSamplingEngine } from '../engine/build.js';
import { loadConfig } from '../run/config.js';
import { evaluate } from '../run/evaluate.js';
import { promptEncoder } from '../run/prompts.js';
import { getTask } from '../tasks/index.js';
import { flag, numberFlag } from './args.js';

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

  const embedded = checkpoint || config?.engine.kind !== 'remote';
  const dir = checkpoint ?? config?.model.checkpoint;
  if (embedded && !dir) throw new ConfigError(`${configFile}: an embedded evaluation needs --checkpoint or model.checkpoint`, 'model.checkpoint');
  const { sampler, tokenizer, origin: source, contextLength } = await buildSamplingEngine(embedded ? { checkpoint: dir! } : { engine: config!.engine });
  const encodePrompt = promptEncoder(tokenizer, !embedded && config!.engine.chatTemplate);
  const decode = (t: number[]) => tokenizer.decode(t);
  const stopTokens = [tokenizer.eos];
  const maxTokens = numberFlag(argv, 'max-tokens', config?.sampling.maxResponseTokens ?? Math.min(128, (contextLength ?? 160) - 32));
  try {
    const result = await evaluate(items, k, { sampler, encodePrompt, decode, stopTokens, maxResponseTokens: maxTokens, reward: task.reward, rng: new Rng(seed).fork('eval') });
    console.log(JSON.stringify({ task: taskName, model: source, count: result.count, greedy_accuracy: result.greedyAccuracy, [`pass_at_${k}`]: result.passAtK, samples: result.samples }, null, 2));
  } finally {
    await sampler.close?.();
  }
  return 0;
}
