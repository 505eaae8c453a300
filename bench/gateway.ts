/**
 * `npm run bench -- gateway [--seeds 3] [--client-steps 3] [--skip example,clients,overhead,forks]`: the
 * agent gateway (env.kind agent; docs/agent-gateway.md), on examples/ai-sdk-agent (a small HF-format
 * Llama, character-level tokenizer, ChatML template with tool calls; its warm start is made once and
 * shared by every part). Headline:
 * - `ai_sdk_agent_gain_pts`: the example's held-out greedy success, end − start, in points: the mean over
 *   `--seeds` RL runs from the one warm start (`arbor train` of the example's config in a child process;
 *   the seeds and their spread are in the details);
 * - `gateway_token_exact`: over the three clients' runs (the AI SDK agent, the openai-client agent and the
 *   LangChain.js agent of the example, each `--client-steps` RL steps at T = 1 on the warm-started model,
 *   real sampling), the share of trained tokens (weight > 0 in the datums the trainer receives) whose id,
 *   after exactly its context, is an id the gateway recorded as sampled after that same context;
 * - `gateway_overhead`: 1 − (rollout wall time of the same prompts × G episodes driven in process by the
 *   agent generator: the weather tool as a tool environment, prompts and observations rendered by the
 *   model's own chat template) / (rollout wall time through the gateway with the AI SDK agent); both on
 *   the warm-started model at the same threads, mean of `--rounds` rounds each, alternated;
 * - `episode_forks_qwen3_thinking`: calls that forked their episode on Qwen3's real template, which drops
 *   an assistant turn's `<think>` block once a later user message arrives (a scripted policy that
 *   thinks, then the openai client sends a follow-up question); the details say whether the trained ids
 *   are still exactly the sampled ones.
 */
import { join } from 'node:path';
import { ConfigError } from '../src/core/errors.js';
import type { EpisodeRecord } from '../src/core/episode.js';
import { Rng } from '../src/core/rng.js';
import { hasError, leaves, type RolloutTree } from '../src/core/tree.js';
import type { TaskItem } from '../src/core/types.js';
import { loadKernels } from '../src/engine/kernels/index.js';
import { loadHfModel } from '../src/engine/hf/model.js';
import { NanoSampler } from '../src/engine/embedded/sampler.js';
import { NanoTrainer } from '../src/engine/embedded/trainer.js';
import { HFTokenizer } from '../src/engine/tokenizer/hf.js';
import type { Datum, Sampler } from '../src/engine/types.js';
import { toolEnvironmentFactory } from '../src/env/tool-env.js';
import { tool } from '../src/env/tools.js';
import type { TextPiece, ToolCallFormat, ToolResult, ToolSpec } from '../src/env/types.js';
import { scoreTrees } from '../src/filter/score-trees.js';
import { agentGenerator, type AgentOptions } from '../src/generate/agent.js';
import { checkEpisodeTree } from '../src/generate/episode-tree.js';
import type { AgentDriver, AgentRuntime, GenerateContext } from '../src/generate/types.js';
import { buildDatums, computeAdvantages, lossFromConfig } from '../src/optimize/index.js';
import { tokenExactReport } from '../src/optimize/token-exact.js';
import { agentRuntime } from '../src/run/agent-runtime.js';
import { loadConfig, parseConfig, type ArborConfig } from '../src/run/config.js';
import { openGatewayAgent } from '../src/run/gateway-runtime.js';
import { RunDir } from '../src/run/rundir.js';
import { sftCacheDir } from '../src/run/warm-start.js';
import { parseToolCalls } from '../src/serve/tool-calls.js';
import { taskFromConfig } from '../src/tasks/index.js';
import { ScriptedPolicy } from '../testkit/gateway/scripted-policy.js';
import { tinyQwen3 } from '../testkit/serve/hf-fixture.js';
import { temperature } from '../examples/ai-sdk-agent/weather.js';
import { z } from 'zod';
import { benchOutDir, printTable, trainInChild, writeBenchJson } from './util.js';

const EXAMPLE = 'examples/ai-sdk-agent/config.yaml';
const FETCH_AGENT = 'testkit/gateway/agents/fetch-weather.ts';
const CLIENTS = {
  'ai-sdk': 'examples/ai-sdk-agent/agent.ts',
  openai: 'examples/ai-sdk-agent/openai-agent.ts',
  langchain: 'examples/ai-sdk-agent/langchain-agent.ts',
};

function arg(args: string[], name: string, fallback: string): string {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : fallback;
}

const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN);
const spread = (xs: number[]) =>
  xs.length > 1 ? Math.sqrt(xs.reduce((a, x) => a + (x - mean(xs)) ** 2, 0) / (xs.length - 1)) : 0;

export async function main(args: string[]): Promise<void> {
  const skip = new Set(arg(args, 'skip', '').split(',').filter(Boolean));
  const example = loadConfig(EXAMPLE);
  const warm = example.sft.checkpoint ?? sftCacheDir(example);
  // the warm start, made once by a one-step run of the example when it is not cached yet
  const needWarm = ['clients', 'overhead', 'example'].some((part) => !skip.has(part));
  if (needWarm && !hasModel(warm)) {
    console.log(`making the warm start ${warm} ...`);
    trainInChild(
      { ...example, run: { ...example.run, steps: 1, evalCount: 8, outDir: join(benchOutDir, 'gateway', 'warm') } },
      { force: true },
    );
  }
  const details: Record<string, unknown> = { warm_start: warm };
  const headline: Record<string, number | null> = {
    gateway_token_exact: null,
    gateway_overhead: null,
    ai_sdk_agent_gain_pts: null,
    episode_forks_qwen3_thinking: null,
  };
  if (!skip.has('forks')) {
    const forks = await qwen3ThinkingForks();
    headline.episode_forks_qwen3_thinking = forks.forks;
    details.qwen3_thinking = forks;
  }
  if (!skip.has('clients')) {
    const steps = Number(arg(args, 'client-steps', '3'));
    const runs = [];
    for (const [name, module] of Object.entries(CLIENTS))
      runs.push({ client: name, ...(await clientRun(example, warm, module, steps)) });
    printTable(
      runs.map(({ client, steps: s, episodes, calls, forks, trained, exact, maxLogprobDiff, reward }) => ({
        client,
        steps: s,
        episodes,
        calls,
        forks,
        trained,
        exact,
        maxLogprobDiff,
        reward,
      })),
    );
    const trained = runs.reduce((a, r) => a + r.trained, 0);
    headline.gateway_token_exact = trained ? runs.reduce((a, r) => a + r.exact, 0) / trained : null;
    details.clients = runs;
  }
  if (!skip.has('overhead')) {
    const rounds = Number(arg(args, 'rounds', '3'));
    const o = await overhead(example, warm, rounds, CLIENTS['ai-sdk']);
    headline.gateway_overhead = o.overhead;
    details.overhead = { ...o, fetch_agent: await overhead(example, warm, rounds, FETCH_AGENT) };
  }
  if (!skip.has('example')) {
    const seeds = Number(arg(args, 'seeds', '3'));
    const runs = [];
    for (let seed = 0; seed < seeds; seed++) {
      const outDir = join(benchOutDir, 'gateway', `example-seed${seed}`);
      const config = { ...example, run: { ...example.run, seed, outDir }, sft: { ...example.sft, checkpoint: warm } };
      const summary = trainInChild(config, { force: true });
      const metrics = new RunDir(outDir).readMetrics();
      const start = summary.heldout_acc_start as number;
      const end = summary.heldout_acc_end as number;
      runs.push({
        seed,
        start,
        end,
        gain_pts: 100 * (end - start),
        wall_s: summary.wall_s,
        ...exampleFigures(metrics),
      });
      console.log(`example seed ${seed}: held-out greedy ${(100 * start).toFixed(1)}% → ${(100 * end).toFixed(1)}%`);
    }
    printTable(runs);
    const gains = runs.map((r) => r.gain_pts);
    headline.ai_sdk_agent_gain_pts = mean(gains);
    details.example = { runs, gain_pts_mean: mean(gains), gain_pts_spread: spread(gains), seeds: gains.length };
  }
  console.log(JSON.stringify(headline));
  writeBenchJson('gateway', headline, details);
}

function hasModel(dir: string): boolean {
  try {
    HFTokenizer.fromDirectory(dir);
    return true;
  } catch {
    return false;
  }
}

/** The figures of an example run besides its held-out success: tool use, forks, exactness. */
function exampleFigures(metrics: Array<Record<string, unknown>>): Record<string, number> {
  const steps = metrics.filter((m) => (m.step as number) > 0);
  const num = (m: Record<string, unknown>, k: string) => (typeof m[k] === 'number' ? (m[k] as number) : 0);
  const evals = metrics.filter((m) => typeof m.eval_tool_call_rate === 'number');
  return {
    tool_call_rate_start: evals.length ? num(evals[0], 'eval_tool_call_rate') : NaN,
    tool_call_rate_end: evals.length ? num(evals[evals.length - 1], 'eval_tool_call_rate') : NaN,
    episode_forks: steps.reduce((a, m) => a + num(m, 'episode_forks'), 0),
    agent_errors: steps.reduce((a, m) => a + num(m, 'agent_errors'), 0),
    tool_parse_failures: steps.reduce((a, m) => a + num(m, 'tool_parse_failures'), 0),
    logprob_gap_max: Math.max(0, ...steps.map((m) => num(m, 'logprob_gap_max'))),
  };
}

/** The example's model (the warm start) with its sampler and trainer at the config's threads. */
async function openModel(config: ArborConfig, dir: string) {
  const kernels = await loadKernels({ backend: config.engine.kernels, threads: config.engine.threads });
  const { model } = await loadHfModel(dir, { contextLength: config.model.contextLength, kernels });
  const tokenizer = HFTokenizer.fromDirectory(dir);
  return { model, tokenizer, sampler: new NanoSampler(model), trainer: new NanoTrainer(model) };
}

/** The context of one growth round. */
function growContext(config: ArborConfig, sampler: Sampler, tokenizer: HFTokenizer, step: number): GenerateContext {
  return {
    sampler,
    rng: new Rng(config.run.seed).fork(`bench/${step}`),
    step,
    stopTokens: [...tokenizer.eosIds],
    maxResponseTokens: config.sampling.maxResponseTokens,
    temperature: config.sampling.temperature,
    topP: config.sampling.topP,
    topK: config.sampling.topK,
    treeIdPrefix: `s${step}p`,
  };
}

/** Keys of (context, id) pairs: an order-sensitive 64-bit hash of the context, then the id. */
function prefixKeys(sequence: number[], from: number): string[] {
  let a = 0x811c9dc5;
  let b = 0x9747b28c;
  const keys: string[] = [];
  for (let i = 0; i < sequence.length; i++) {
    if (i >= from) keys.push(`${a.toString(16)}${b.toString(16)}:${sequence[i]}`);
    a = Math.imul(a ^ sequence[i], 0x01000193) >>> 0;
    b = Math.imul(b ^ (sequence[i] + 0x9e3779b9), 0x85ebca6b) >>> 0;
  }
  return keys;
}

/** Trained tokens of the datums and how many of them the gateway recorded as sampled after the same context. */
function trainedExactness(datums: Datum[], records: EpisodeRecord[]): { trained: number; exact: number } {
  const sampled = new Map<string, number>();
  for (const call of records.flatMap((r) => r.calls))
    for (const c of call.choices)
      for (const key of prefixKeys(call.promptIds.concat(c.tokens), call.promptIds.length))
        sampled.set(key, (sampled.get(key) ?? 0) + 1);
  let trained = 0;
  let exact = 0;
  for (const d of datums) {
    const sequence = [...d.inputTokens, d.targetTokens[d.targetTokens.length - 1]];
    const keys = prefixKeys(sequence, 1);
    d.weights.forEach((w, t) => {
      if (!(w > 0)) return;
      trained++;
      const left = sampled.get(keys[t]) ?? 0;
      if (left > 0) {
        exact++;
        sampled.set(keys[t], left - 1);
      }
    });
  }
  return { trained, exact };
}

/** RL steps of one client's agent through the gateway, from the warm start, with real sampling. */
async function clientRun(example: ArborConfig, warm: string, module: string, steps: number) {
  const config = parseConfig({ ...example, env: { ...example.env, module } });
  const { model, tokenizer, sampler, trainer } = await openModel(config, warm);
  const task = await taskFromConfig(config.task);
  const items = task.makeItems('train', config.run.promptsPerStep * steps, config.run.seed + 7);
  const records: EpisodeRecord[] = [];
  const agent = (await openGatewayAgent(config, sampler, tokenizer, { log: () => {} }))!;
  const driver: AgentDriver = {
    runEpisode: async (item, spec) => {
      const record = await agent.runEpisode(item, spec);
      records.push(record);
      return record;
    },
  };
  const generator = agentGenerator(config.generate as AgentOptions);
  const { loss, extras } = lossFromConfig(config.optimize.loss);
  const out = { steps, episodes: 0, calls: 0, forks: 0, trained: 0, exact: 0, maxLogprobDiff: 0, reward: 0, errors: 0 };
  const rewards: number[] = [];
  try {
    for (let step = 1; step <= steps; step++) {
      const batch = items.slice((step - 1) * config.run.promptsPerStep, step * config.run.promptsPerStep);
      const from = records.length;
      const ctx = { ...growContext(config, sampler, tokenizer, step), gateway: driver };
      const { trees } = await generator.grow(
        batch.map((item) => ({ item, promptTokens: [] })),
        ctx,
      );
      await scoreTrees(trees, new Map(batch.map((i) => [i.id, i])), task.reward, {
        ...{ decode: (t) => tokenizer.decode(t), concurrency: 8, timeoutMs: 10_000, failureReward: 0 },
      });
      const good = trees.filter((t) => !hasError(t));
      const report = await tokenExactReport(good, trainer);
      const datums = buildDatums(computeAdvantages(good, config.optimize.advantage), {
        aggregation: config.optimize.aggregation,
        maxResponseTokens: config.sampling.maxResponseTokens,
      });
      const step_ = trainedExactness(datums, records.slice(from));
      out.trained += step_.trained;
      out.exact += step_.exact;
      out.maxLogprobDiff = Math.max(out.maxLogprobDiff, report.maxLogprobDiff);
      for (const t of trees) {
        const g = t.meta?.gateway as { episodes: number; calls: number; forks: number; errors: number };
        out.episodes += g.episodes;
        out.calls += g.calls;
        out.forks += g.forks;
        out.errors += g.errors;
      }
      rewards.push(...good.flatMap((t) => leaves(t).map((l) => l.reward ?? 0)));
      if (datums.length) {
        await trainer.forwardBackward(datums, loss, extras);
        const { learningRate, beta1, beta2, eps, weightDecay, gradClipNorm } = config.trainer;
        await trainer.optimStep({ learningRate, beta1, beta2, eps, weightDecay, gradClipNorm });
        await trainer.saveForSampler();
      }
      console.log(`${module} step ${step}: ${step_.exact}/${step_.trained} trained tokens exact`);
    }
  } finally {
    await agent.close();
  }
  model.params.data.fill(0); // this run's weights are done with
  out.reward = mean(rewards);
  return out;
}

/**
 * The example's chat template as a tool-call format for the in-process agent generator: the prompt is
 * the template's rendering of the user message with the tools and its generation prompt, a turn's calls
 * are read by the hermes parser, and an observation is what the template writes between the end of an
 * assistant turn and the next generation prompt.
 */
function templateFormat(tokenizer: HFTokenizer, tools: ToolSpec[]): ToolCallFormat {
  const chatTools = tools.map((t) => ({
    type: 'function' as const,
    function: { name: t.name, description: t.description, parameters: t.inputSchema },
  }));
  const user = (prompt: string) => ({ role: 'user', content: prompt });
  const call = {
    role: 'assistant',
    content: '',
    tool_calls: [{ type: 'function' as const, function: { name: 'x', arguments: {} } }],
  };
  return {
    name: 'template',
    renderTools: () => '',
    renderPrompt: (prompt) =>
      tokenizer.applyChatTemplate([user(prompt)], { tools: chatTools, addGenerationPrompt: true }),
    parseCalls: (text) => {
      const parsed = parseToolCalls('hermes', text, () => 'id');
      const calls = parsed.toolCalls.map((c) => ({
        name: c.function.name,
        arguments: JSON.parse(c.function.arguments) as Record<string, unknown>,
        raw: c.function.arguments,
      }));
      const errors: ToolResult[] = parsed.failed ? [{ name: '', content: 'malformed tool call', isError: true }] : [];
      return { calls, errors };
    },
    renderObservation: (results) => {
      const base = [user('q'), call];
      const before = tokenizer.applyChatTemplate(base, { tools: chatTools });
      const after = tokenizer.applyChatTemplate(
        [...base, ...results.map((r) => ({ role: 'tool', content: r.content }))],
        { tools: chatTools, addGenerationPrompt: true },
      );
      // the sampled turn ends with the end token; what the template writes after it is the observation
      const end = before.lastIndexOf('<|im_end|>') + '<|im_end|>'.length;
      const pieces: TextPiece[] = [{ text: before.slice(end) + after.slice(before.length), special: true }];
      return pieces;
    },
    finalAnswer: (text) => text,
  };
}

/**
 * Rollout wall time of the same prompts × G episodes through the gateway and in process, alternated
 * round by round: `module` is the agent driven through the gateway (the example's AI SDK agent for the
 * headline; a plain-fetch agent for the gateway's own share, without a client library's).
 */
async function overhead(example: ArborConfig, warm: string, rounds: number, module: string) {
  const config = parseConfig({ ...example, env: { ...example.env, module } });
  const { tokenizer, sampler } = await openModel(config, warm);
  const task = await taskFromConfig(config.task);
  const items = task.makeItems('train', config.run.promptsPerStep * rounds, config.run.seed + 11);
  const agent = (await openGatewayAgent(config, sampler, tokenizer, { log: () => {} }))!;
  const weather = tool({
    description: 'temperature',
    inputSchema: z.object({ city: z.string() }),
    execute: ({ city }) => temperature(city),
  });
  const factory = toolEnvironmentFactory({ kind: 'tools', tools: { weather } });
  const probe = await factory.create();
  const format = templateFormat(tokenizer, probe.tools);
  await probe.close();
  const inProcess: AgentRuntime = agentRuntime({ factory, format, tools: probe.tools }, tokenizer, config);
  // in process, the episode budget covers observations too: each turn gets the gateway's per-call cap instead
  const turnTokens = config.sampling.maxResponseTokens;
  const generator = agentGenerator({ ...(config.generate as AgentOptions), maxTurns: 3, maxTurnTokens: turnTokens });
  const times = { gateway: [] as number[], inProcess: [] as number[] };
  const tokens = { gateway: 0, inProcess: 0 };
  const episodes = { gateway: 0, inProcess: 0 };
  try {
    for (let r = 0; r < rounds; r++) {
      const batch: TaskItem[] = items.slice(r * config.run.promptsPerStep, (r + 1) * config.run.promptsPerStep);
      const inputs = batch.map((item) => ({ item, promptTokens: [] }));
      for (const mode of r % 2 ? (['inProcess', 'gateway'] as const) : (['gateway', 'inProcess'] as const)) {
        const ctx = {
          ...growContext(config, sampler, tokenizer, 100 + r),
          maxResponseTokens: config.model.contextLength,
        };
        const started = performance.now();
        const { trees, stats } = await generator.grow(
          inputs,
          mode === 'gateway' ? { ...ctx, gateway: agent } : { ...ctx, agent: inProcess },
        );
        times[mode].push(performance.now() - started);
        tokens[mode] += stats.tokensDecoded;
        episodes[mode] += trees.reduce((a: number, t: RolloutTree) => a + leaves(t).length, 0);
      }
    }
  } finally {
    await agent.close();
    await factory.close();
  }
  const gatewayMs = mean(times.gateway);
  const inProcessMs = mean(times.inProcess);
  const calls = agent.gateway.batches.calls;
  const result = {
    agent: module,
    overhead: 1 - inProcessMs / gatewayMs,
    ms_per_gateway_call: (rounds * (gatewayMs - inProcessMs)) / Math.max(1, calls),
    gateway_ms: times.gateway,
    in_process_ms: times.inProcess,
    tokens_per_episode: {
      gateway: tokens.gateway / episodes.gateway,
      in_process: tokens.inProcess / episodes.inProcess,
    },
    batches: agent.gateway.batches,
  };
  printTable([
    { gateway_ms: gatewayMs, in_process_ms: inProcessMs, overhead: result.overhead, ...result.tokens_per_episode },
  ]);
  return result;
}

/**
 * Qwen3's template drops an assistant turn's `<think>` block once a later user message arrives: a
 * scripted policy that thinks, asked a follow-up question by the openai client, forks its episode there.
 */
async function qwen3ThinkingForks() {
  const root = join(benchOutDir, 'gateway');
  const dir = tinyQwen3(root);
  const { model } = await loadHfModel(dir);
  const tokenizer = HFTokenizer.fromDirectory(dir);
  const policy = new ScriptedPolicy(new NanoSampler(model), tokenizer, (prompt) =>
    prompt.includes('And tomorrow?')
      ? '<think>\nsame city\n</think>\n\nStill sunny.'
      : '<think>\nlet me see\n</think>\n\nSunny.',
  );
  const config = parseConfig({
    model: { hf: dir, contextLength: 256 },
    env: { kind: 'agent', module: 'testkit/gateway/agents/follow-up.ts', concurrency: 8, timeoutSeconds: 60 },
    generate: { kind: 'agent', groupSize: 4 },
    sampling: { maxResponseTokens: 32 },
  });
  const agent = await openGatewayAgent(config, policy, tokenizer, { log: () => {} });
  if (!agent) throw new ConfigError('no gateway', 'env');
  const records: EpisodeRecord[] = [];
  const driver: AgentDriver = {
    runEpisode: async (item, spec) => (records.push(await agent.runEpisode(item, spec)), records[records.length - 1]),
  };
  try {
    const items = [1, 2].map((k) => ({ id: `q${k}`, prompt: `How is the weather in town ${k}?`, answer: '' }));
    const ctx = { ...growContext(config, policy, tokenizer, 1), gateway: driver };
    const { trees } = await agentGenerator(config.generate as AgentOptions).grow(
      items.map((item) => ({ item, promptTokens: [] })),
      ctx,
    );
    const forks = trees.reduce((a, t) => a + ((t.meta?.gateway as { forks: number }).forks ?? 0), 0);
    const checks = trees.map((t) =>
      checkEpisodeTree(
        t,
        records.filter((r) => r.episodeId.startsWith(`${t.id}/`)),
      ),
    );
    const sampled = checks.reduce((a, c) => a + c.sampled, 0);
    const exact = checks.reduce((a, c) => a + c.exact, 0);
    return {
      forks,
      episodes: records.length,
      calls: records.reduce((a, r) => a + r.calls.length, 0),
      sampled,
      exact,
      exact_share: sampled ? exact / sampled : null,
      errors: records.filter((r) => r.error).length,
    };
  } finally {
    await agent.close();
  }
}
