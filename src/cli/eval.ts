/**
 * `arbor eval`: accuracy (greedy and pass@k) of a model on a task's test split.
 *   --task <name> --checkpoint <dir>   an embedded checkpoint: nano, a Hugging Face model directory, or a
 *                                      PEFT adapter directory (over --base, else its base_model_name_or_path)
 *   --config <file> [--task <name>]    the engine and task of a run config (remote servers included)
 */
import { ArborError, ConfigError } from '../core/errors.js';
import type { EvalRequest } from '../run/evaluate-model.js';
import { Progress } from '../run/progress.js';
import { parseCommand, printHelp, type CommandSpec } from './args.js';

const USAGE =
  'usage: arbor eval (--checkpoint <dir> | --config <run.yaml>) [--task <name>] [--options JSON] ' +
  '[--count 200] [--k 4] [--seed 0] [--max-tokens N] [--quiet]';

export const EVAL: CommandSpec = {
  name: 'eval',
  positionals: '',
  maxPositionals: 0,
  summary:
    "Accuracy (greedy and pass@k) of a model on a task's test split: an embedded checkpoint, or the engine and task of a run config (remote servers included).",
  flags: {
    checkpoint: {
      type: 'string',
      value: 'DIR',
      doc: 'a model to run on the embedded engine: a nano checkpoint, a Hugging Face model directory (Llama, Qwen2, Qwen3) or a PEFT LoRA adapter directory',
    },
    base: {
      type: 'string',
      value: 'DIR',
      doc: 'the base model directory of a --checkpoint adapter (default: its adapter_config.json base_model_name_or_path)',
    },
    'chat-template': {
      type: 'boolean',
      doc: "wrap each prompt as a user message with the model's chat template (default: the config's engine.chatTemplate)",
    },
    'chat-template-kwargs': {
      type: 'string',
      value: 'JSON',
      doc: 'extra chat-template variables, e.g. \'{"enable_thinking": false}\'',
    },
    'max-model-len': {
      type: 'string',
      value: 'N',
      doc: "cap the context of a Hugging Face model (default: the config's model.contextLength, else the model's own)",
    },
    config: {
      type: 'string',
      value: 'FILE',
      doc: 'a run config: its engine, task, seed, evalCount, evalPassK and maxResponseTokens',
    },
    task: { type: 'string', value: 'NAME', doc: "the task (default: the config's)" },
    options: { type: 'string', value: 'JSON', doc: 'task options as JSON' },
    count: { type: 'string', value: 'N', doc: 'test items (default: run.evalCount, else 200)' },
    k: { type: 'string', value: 'K', doc: 'k of pass@k (0 = off; default: run.evalPassK, else 4)' },
    seed: { type: 'string', value: 'S', doc: 'seed of the items and samples' },
    'max-tokens': { type: 'string', value: 'N', doc: 'maximum response tokens' },
    overlong: {
      type: 'string',
      value: 'error|skip',
      doc: "a prompt too long for the model's context: fail naming it, or leave it out and say so (task.overlong)",
    },
    quiet: { type: 'boolean', doc: 'no progress on stderr (samples done, ETA)' },
  },
};

/** `--overlong error|skip`, checked. */
function overlongFlag(text: string | undefined): 'error' | 'skip' | undefined {
  if (text === undefined || text === 'error' || text === 'skip') return text;
  throw new ConfigError(`--overlong: expected error or skip, got ${JSON.stringify(text)}`, '--overlong');
}

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
  // the config and evaluation modules load after the arguments parse: `--help` and a bad flag answer at once
  const { loadConfig } = await import('../run/config.js');
  const config = configFile ? loadConfig(configFile) : undefined;
  const kwargsText = f.string('chat-template-kwargs');
  const progress = new Progress(f.bool('quiet'));
  const request: EvalRequest = {
    config,
    configFile,
    checkpoint: f.string('checkpoint'),
    base: f.string('base'),
    task: f.string('task'),
    taskOptions: parseOptions(f.string('options')),
    seed: f.number('seed', undefined, { integer: true, min: 0, max: 2 ** 32 - 1 }),
    k: f.number('k', undefined, { integer: true, min: 0, max: 1024 }),
    count: f.number('count', undefined, { integer: true, min: 1, max: 1_000_000 }),
    maxTokens: f.number('max-tokens', undefined, { integer: true, min: 1, max: 65536 }),
    maxModelLen: f.number('max-model-len', undefined, { integer: true, min: 8, max: 1 << 20 }),
    chatTemplate: f.bool('chat-template') || undefined,
    chatTemplateKwargs: kwargsText !== undefined ? (parseOptions(kwargsText) as Record<string, unknown>) : undefined,
    overlong: overlongFlag(f.string('overlong')),
    progress: (text, milestone) => progress.update(text, milestone),
    notice: (line) => console.error(`arbor eval: ${line}`),
  };
  if (!(request.task ?? config?.task.name) || (!request.checkpoint && !config)) throw new ArborError(USAGE);
  const { evaluateModel } = await import('../run/evaluate-model.js');
  const report = await evaluateModel(request);
  progress.line(`arbor eval: ${report.count} items evaluated in ${progress.elapsed().toFixed(1)} s`);
  console.log(JSON.stringify(report, null, 2));
  return 0;
}
