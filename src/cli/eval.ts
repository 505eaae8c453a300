/**
 * `arbor eval`: accuracy (greedy and pass@k) of a model on a task's test split.
 *   --task <name> --checkpoint <dir>   an embedded checkpoint: nano, a Hugging Face model directory, or a
 *                                      PEFT adapter directory (over --base, else its base_model_name_or_path)
 *   --config <file> [--task <name>]    the engine and task of a run config (remote servers included)
 */
import { ArborError, ConfigError } from '../core/errors.js';
import type { ProgressUpdate } from '../core/progress-count.js';
import { Rng } from '../core/rng.js';
import { buildSamplingEngine } from '../engine/build.js';
import { loadConfig, parseConfig, type ArborConfig } from '../run/config.js';
import { evaluate } from '../run/evaluate.js';
import { evaluateAgent } from '../run/evaluate-agent.js';
import { agentRuntime, openAgentEnv, scratchLogDir, type AgentEnv } from '../run/agent-runtime.js';
import { openGatewayAgent, type GatewayAgent } from '../run/gateway-runtime.js';
import { Progress } from '../run/progress.js';
import { fitPrompts, promptEncoder, skippedLine, stopTokens, toolOffer } from '../run/prompts.js';
import type { TaskItem } from '../core/types.js';
import type { AgentOptions } from '../generate/agent.js';
import { taskFromConfig } from '../tasks/index.js';
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
  const config = configFile ? loadConfig(configFile) : undefined;
  const kwargsText = f.string('chat-template-kwargs');
  const progress = new Progress(f.bool('quiet'));
  const report = await evaluateModel({
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
  });
  progress.line(`arbor eval: ${report.count} items evaluated in ${progress.elapsed().toFixed(1)} s`);
  console.log(JSON.stringify(report, null, 2));
  return 0;
}

/** What to evaluate: a checkpoint and/or a run config; absent fields come from the config, else defaults. */
export interface EvalRequest {
  config?: ArborConfig;
  /** Names the config in errors. */
  configFile?: string;
  checkpoint?: string;
  base?: string;
  /** A built-in task name (default: the config's task, built-in or module). */
  task?: string;
  taskOptions?: unknown;
  seed?: number;
  k?: number;
  count?: number;
  maxTokens?: number;
  maxModelLen?: number;
  chatTemplate?: boolean;
  chatTemplateKwargs?: Record<string, unknown>;
  /** A prompt too long for the model's context: fail naming it, or leave it out (default: task.overlong). */
  overlong?: 'error' | 'skip';
  /** Status lines while the samples run ("evaluating: <done>/<total> samples eta <time>"). */
  progress?: ProgressUpdate;
}

/** The printed result of `arbor eval` (and of the public `evaluate`). */
export interface EvalReport {
  task: string;
  model: string;
  count: number;
  greedy_accuracy: number;
  /** `pass_at_<k>` is keyed by k; the samples, the agent figures and the rest ride along. */
  [key: string]: unknown;
}

/** Greedy accuracy and pass@k of a model on a task's test split (`arbor eval` without the printing). */
export async function evaluateModel(request: EvalRequest): Promise<EvalReport> {
  const { config, configFile, checkpoint } = request;
  const taskName = request.task ?? config?.task.name;
  if (!taskName || (!checkpoint && !config)) throw new ArborError(USAGE);
  const seed = request.seed ?? config?.run.seed ?? 0;
  const k = request.k ?? config?.run.evalPassK ?? 4;
  const count = request.count ?? config?.run.evalCount ?? 200;
  const maxTokensFlag = request.maxTokens;
  // the config's own task (a built-in or a user module) unless --task names another one
  const ownTask = config && taskName === config.task.name;
  const options = (request.taskOptions ?? (ownTask ? config.task.options : {})) as Record<string, unknown>;
  const task = ownTask
    ? await taskFromConfig({ ...config.task, options })
    : await taskFromConfig({ name: taskName, options });
  const items = task.makeItems('test', count, seed);

  const embedded = checkpoint || config?.engine.kind !== 'remote';
  const dir = checkpoint ?? config?.model.checkpoint ?? config?.model.hf;
  if (embedded && !dir)
    throw new ConfigError(
      `${configFile ?? 'config'}: an embedded evaluation needs --checkpoint, model.checkpoint or model.hf`,
      'model.checkpoint',
    );
  const maxModelLen = request.maxModelLen ?? (config?.model.hf ? config.model.contextLength : undefined);
  const source0 = embedded
    ? {
        checkpoint: dir!,
        base: request.base,
        contextLength: maxModelLen,
        // with --config, the config's kernels and threads (engine.kernels, engine.threads)
        kernels: config ? { backend: config.engine.kernels, threads: config.engine.threads } : undefined,
      }
    : { engine: config!.engine };
  const { sampler, tokenizer, origin: source, contextLength } = await buildSamplingEngine(source0);
  const kwargs = request.chatTemplateKwargs ?? config?.engine.chatTemplateKwargs;
  const encodePrompt = promptEncoder(tokenizer, request.chatTemplate || (config?.engine.chatTemplate ?? false), kwargs);
  const decode = (t: number[]) => tokenizer.decode(t);
  const stops = stopTokens(tokenizer);
  const maxTokens = maxTokensFlag ?? config?.sampling.maxResponseTokens ?? Math.min(128, (contextLength ?? 160) - 32);
  let agentEnv: AgentEnv | undefined;
  let gateway: GatewayAgent | undefined;
  try {
    // your own agent (env.kind agent): its episodes run through a gateway over this sampler
    gateway = config ? await openGatewayAgent(config, sampler, tokenizer) : undefined;
    // an agent config evaluates whole episodes in its environment
    // eval has no run directory: MCP server stderr goes to <os tmpdir>/arbor-logs/mcp.stderr.log
    agentEnv = config ? await openAgentEnv(config, { logDir: scratchLogDir() }) : undefined;
    // the context is the model's own (a checkpoint may differ from the config's model.contextLength)
    const isAgent = agentEnv && config!.generate.kind === 'agent';
    const agent = isAgent ? { ...agentRuntime(agentEnv!, tokenizer, config!), contextLength } : undefined;
    // the same fitting as `arbor train` (prompts.ts): task.overlong decides, and what is left out is said
    const encodeForFit = agent ? (item: TaskItem) => agent.encodePrompt(item, '') : encodePrompt;
    const offer = agent && toolOffer(agent.format, agent.tools, (text) => tokenizer.encode(text));
    const overlong = request.overlong ?? config?.task.overlong ?? parseConfig({}).task.overlong;
    const fit = fitPrompts(items, encodeForFit, contextLength, overlong, 'held-out', offer);
    const skipped = skippedLine(fit, 'held-out');
    if (skipped) console.error(`arbor eval: ${skipped}`);
    const rng = new Rng(seed).fork('eval');
    const base = { sampler, decode, stopTokens: stops, maxResponseTokens: maxTokens, reward: task.reward, rng };
    const { progress } = request;
    const result =
      agent || gateway
        ? await evaluateAgent(fit.items, k, {
            ...base,
            agent,
            gateway,
            options: config!.generate as AgentOptions,
            progress,
          })
        : await evaluate(fit.items, k, { ...base, encodePrompt, progress });
    return {
      task: config?.task.module && ownTask ? task.name : taskName,
      model: source,
      count: result.count,
      skipped: fit.skipped,
      greedy_accuracy: result.greedyAccuracy,
      [`pass_at_${k}`]: result.passAtK,
      ...(result.extra ?? {}),
      samples: result.samples,
    };
  } finally {
    await gateway?.close();
    await sampler.close?.();
    await agentEnv?.factory.close();
  }
}
