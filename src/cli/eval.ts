/**
 * `arbor eval`: accuracy (greedy and pass@k) of a model on a task's test split.
 *   --task <name> --checkpoint <dir>   an embedded checkpoint: nano, a Hugging Face model directory, or a
 *                                      PEFT adapter directory (over --base, else its base_model_name_or_path)
 *   --config <file> [--task <name>]    the engine and task of a run config (remote servers included)
 */
import { ArborError, ConfigError } from '../core/errors.js';
import { Rng } from '../core/rng.js';
import { buildSamplingEngine } from '../engine/build.js';
import { loadConfig } from '../run/config.js';
import { evaluate } from '../run/evaluate.js';
import { evaluateAgent } from '../run/evaluate-agent.js';
import { agentRuntime, openAgentEnv } from '../run/agent-runtime.js';
import { promptEncoder, stopTokens } from '../run/prompts.js';
import { getTask } from '../tasks/index.js';
import { parseCommand, printHelp, type CommandSpec } from './args.js';

const USAGE = 'usage: arbor eval (--checkpoint <dir> | --config <run.yaml>) [--task <name>] [--options JSON] [--count 200] [--k 4] [--seed 0] [--max-tokens N]';

export const EVAL: CommandSpec = {
  name: 'eval',
  positionals: '',
  maxPositionals: 0,
  summary: 'Accuracy (greedy and pass@k) of a model on a task\'s test split: an embedded checkpoint, or the engine and task of a run config (remote servers included).',
  flags: {
    checkpoint: { type: 'string', value: 'DIR', doc: 'a model to run on the embedded engine: a nano checkpoint, a Hugging Face model directory (Llama, Qwen2, Qwen3) or a PEFT LoRA adapter directory' },
    base: { type: 'string', value: 'DIR', doc: 'the base model directory of a --checkpoint adapter (default: its adapter_config.json base_model_name_or_path)' },
    'chat-template': { type: 'boolean', doc: 'wrap each prompt as a user message with the model\'s chat template (default: the config\'s engine.chatTemplate)' },
    'chat-template-kwargs': { type: 'string', value: 'JSON', doc: 'extra chat-template variables, e.g. \'{"enable_thinking": false}\'' },
    'max-model-len': { type: 'string', value: 'N', doc: 'cap the context of a Hugging Face model (default: the config\'s model.contextLength, else the model\'s own)' },
    config: { type: 'string', value: 'FILE', doc: 'a run config: its engine, task, seed, evalCount, evalPassK and maxResponseTokens' },
    task: { type: 'string', value: 'NAME', doc: 'the task (default: the config\'s)' },
    options: { type: 'string', value: 'JSON', doc: 'task options as JSON' },
    count: { type: 'string', value: 'N', doc: 'test items (default: run.evalCount, else 200)' },
    k: { type: 'string', value: 'K', doc: 'k of pass@k (0 = off; default: run.evalPassK, else 4)' },
    seed: { type: 'string', value: 'S', doc: 'seed of the items and samples' },
    'max-tokens': { type: 'string', value: 'N', doc: 'maximum response tokens' },
  },
};

function parseOptions(text: string | undefined): unknown {
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text);
  } catch (cause) {
    throw new ConfigError(`--options: not valid JSON (${(cause as Error).message})`, '--options', undefined, { cause });
  }
}

export async function evalCommand(argv: string[]): Promise<number> {
  const f = parseCommand(argv, EVAL);
  if (f.help) return printHelp(EVAL);
  const configFile = f.string('config');
  const checkpoint = f.string('checkpoint');
  const config = configFile ? loadConfig(configFile) : undefined;
  const taskName = f.string('task') ?? config?.task.name;
  if (!taskName || (!checkpoint && !config)) throw new ArborError(USAGE);
  const options = parseOptions(f.string('options')) ?? (config && taskName === config.task.name ? config.task.options : {});
  const seed = f.number('seed', config?.run.seed ?? 0, { integer: true, min: 0, max: 2 ** 32 - 1 });
  const k = f.number('k', config?.run.evalPassK ?? 4, { integer: true, min: 0, max: 1024 });
  const count = f.number('count', config?.run.evalCount ?? 200, { integer: true, min: 1, max: 1_000_000 });
  const maxTokensFlag = f.number('max-tokens', undefined, { integer: true, min: 1, max: 65536 });
  const task = getTask(taskName, options);
  await task.prepare?.();
  const items = task.makeItems('test', count, seed);

  const embedded = checkpoint || config?.engine.kind !== 'remote';
  const dir = checkpoint ?? config?.model.checkpoint ?? config?.model.hf;
  if (embedded && !dir) throw new ConfigError(`${configFile}: an embedded evaluation needs --checkpoint, model.checkpoint or model.hf`, 'model.checkpoint');
  const maxModelLen = f.number('max-model-len', undefined, { integer: true, min: 8, max: 1 << 20 }) ?? (config?.model.hf ? config.model.contextLength : undefined);
  const source0 = embedded ? { checkpoint: dir!, base: f.string('base'), contextLength: maxModelLen } : { engine: config!.engine };
  const { sampler, tokenizer, origin: source, contextLength } = await buildSamplingEngine(source0);
  const kwargsText = f.string('chat-template-kwargs');
  const kwargs = kwargsText !== undefined ? (parseOptions(kwargsText) as Record<string, unknown>) : config?.engine.chatTemplateKwargs;
  const encodePrompt = promptEncoder(tokenizer, f.bool('chat-template') || (config?.engine.chatTemplate ?? false), kwargs);
  const decode = (t: number[]) => tokenizer.decode(t);
  const stops = stopTokens(tokenizer);
  const maxTokens = maxTokensFlag ?? config?.sampling.maxResponseTokens ?? Math.min(128, (contextLength ?? 160) - 32);
  // an agent config evaluates whole episodes in its environment
  const agentEnv = config ? await openAgentEnv(config) : undefined;
  try {
    const result =
      agentEnv && config!.generate.kind === 'agent'
        ? await evaluateAgent(items, k, { sampler, agent: agentRuntime(agentEnv, tokenizer, config!), options: config!.generate, decode, stopTokens: stops, maxResponseTokens: maxTokens, reward: task.reward, rng: new Rng(seed).fork('eval') })
        : await evaluate(items, k, { sampler, encodePrompt, decode, stopTokens: stops, maxResponseTokens: maxTokens, reward: task.reward, rng: new Rng(seed).fork('eval') });
    console.log(JSON.stringify({ task: taskName, model: source, count: result.count, greedy_accuracy: result.greedyAccuracy, [`pass_at_${k}`]: result.passAtK, ...(result.extra ?? {}), samples: result.samples }, null, 2));
  } finally {
    await sampler.close?.();
    await agentEnv?.factory.close();
  }
  return 0;
}
