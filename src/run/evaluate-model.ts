/**
 * The evaluation behind `arbor eval` and the public `evaluate()`: a model (an embedded checkpoint, or
 * the engine of a run config, remote servers included) scored on a task's test split, greedy accuracy
 * and pass@k. It prints nothing: progress and notices go to the request's callbacks, the report is
 * returned.
 */
import { ArborError, ConfigError } from '../core/errors.js';
import type { ProgressUpdate } from '../core/progress-count.js';
import { Rng } from '../core/rng.js';
import type { TaskItem } from '../core/types.js';
import { buildSamplingEngine } from '../engine/build.js';
import type { AgentOptions } from '../generate/agent.js';
import { taskFromConfig } from '../tasks/index.js';
import { agentRuntime, openAgentEnv, scratchLogDir, type AgentEnv } from './agent-runtime.js';
import { parseConfig, type ArborConfig } from './config.js';
import { evaluate } from './evaluate.js';
import { evaluateAgent } from './evaluate-agent.js';
import { openGatewayAgent, type GatewayAgent } from './gateway-runtime.js';
import { fitPrompts, promptEncoder, skippedLine, stopTokens, toolOffer } from './prompts.js';

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
  /** Lines for the user that are not part of the report: which held-out prompts were left out (overlong skip). */
  notice?: (line: string) => void;
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

/** Greedy accuracy and pass@k of a model on a task's test split (what `arbor eval` prints; nothing is printed here). */
export async function evaluateModel(request: EvalRequest): Promise<EvalReport> {
  const { config, configFile, checkpoint } = request;
  const taskName = request.task ?? config?.task.name;
  if (!taskName || (!checkpoint && !config)) {
    throw new ArborError('evaluate: needs a task and a checkpoint, or a config (its task, engine and model)');
  }
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
    if (skipped) request.notice?.(skipped);
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
