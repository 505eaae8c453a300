/**
 * RL through a real client library, end to end in one process: an agent module (agents/*.ts) runs
 * unchanged against the gateway (`openGatewayAgent`) over a ScriptedPolicy on a tiny random Qwen3, the
 * `agent` generator grows each prompt's G episodes into a tree, the weather task scores it, and the
 * learner's calls (advantages, `buildDatums`, `forwardBackward`, `optimStep`) train the model, step by
 * step. Asserts, per step: no episode failed; each episode is one chain of its calls (no fork, although
 * the AI SDK and LangChain send the arguments back re-serialised); the ids the trainer sees with weight
 * > 0 are exactly the ids the policy returned, each once, where it returned them; `tokenExactReport` is
 * exact; the client parsed the scripted tool call and read the scripted answer. Returns the figures the
 * tests check and print, with what the client sent (agents/wire.ts).
 */
import assert from 'node:assert/strict';
import { hasError, leaves, type RolloutTree } from '../../src/core/tree.js';
import { Rng } from '../../src/core/rng.js';
import type { Datum } from '../../src/engine/types.js';
import { loadHfModel } from '../../src/engine/hf/model.js';
import type { NanoModel } from '../../src/engine/model/model.js';
import { NanoSampler } from '../../src/engine/embedded/sampler.js';
import { NanoTrainer } from '../../src/engine/embedded/trainer.js';
import { HFTokenizer } from '../../src/engine/tokenizer/hf.js';
import { scoreTrees } from '../../src/filter/score-trees.js';
import { agentGenerator, type AgentOptions } from '../../src/generate/agent.js';
import type { GatewayTreeStats } from '../../src/generate/gateway.js';
import { buildDatums, computeAdvantages, lossFromConfig } from '../../src/optimize/index.js';
import { tokenExactReport } from '../../src/optimize/token-exact.js';
import { parseConfig, type ArborConfig } from '../../src/run/config.js';
import { openGatewayAgent, type GatewayAgent } from '../../src/run/gateway-runtime.js';
import { tinyQwen3 } from '../serve/hf-fixture.js';
import { sent as wire } from './agents/wire.js';
import { ScriptedPolicy } from './scripted-policy.js';
import { weatherItems, weatherScript, weatherTask, type ClientSaw } from './weather.js';

/** The policy every client trains in turn: one model, its sampler and its trainer; each run starts from `initial`. */
export interface Policy {
  dir: string;
  model: NanoModel;
  /** The weights as made (a run starts from them, with fresh optimiser moments). */
  initial: Float32Array;
  tokenizer: HFTokenizer;
  sampler: NanoSampler;
  trainer: NanoTrainer;
}

/** What one client's run did (summed over steps). */
export interface ClientReport {
  steps: number;
  episodes: number;
  /** Gateway calls the episodes made. */
  calls: number;
  /** Calls that extended no earlier call of their episode (0 expected). */
  forks: number;
  /** Ids the policy returned, each found trained exactly once at its position in the datums. */
  sampledTokens: number;
  /** Policy tokens whose trainer log-prob was compared with the sampler's (tokenExactReport). */
  exactTokens: number;
  /** Largest |trainer − sampler| log-prob over the run. */
  maxLogprobDiff: number;
  /** Rewards of every episode, step by step. */
  rewards: number[];
  /** Output tokens the client read from the usage the gateway reported. */
  clientOutputTokens: number;
  /** Largest |Δ| of a weight over the run. */
  weightChange: number;
  /** The client's requests: all, those with `stream: true`, and those asking for usage in the stream. */
  requests: { total: number; streamed: number; streamUsage: number };
  /** Tool-call arguments as the gateway sent them, and as the client sent them back in its history (agents/wire.ts). */
  arguments: { sent: string[]; echoed: string[] };
}

/** A tiny random Qwen3 with the real Qwen3 tokenizer; the trainer computes the 151k-wide head only where it trains. */
export async function openPolicy(root: string): Promise<Policy> {
  const dir = tinyQwen3(root);
  const { model } = await loadHfModel(dir);
  const tokenizer = HFTokenizer.fromDirectory(dir);
  const trainer = new NanoTrainer(model, { weightedRowsOnly: true });
  return { dir, model, initial: model.params.data.slice(), tokenizer, sampler: new NanoSampler(model), trainer };
}

/** `steps` RL steps of the agent in `module` (1 prompt × `groupSize` episodes each), with the checks above. */
export async function trainThroughClient(
  policy: Policy,
  module: string,
  options: { steps?: number; groupSize?: number; seed?: number } = {},
): Promise<ClientReport> {
  const { steps = 2, groupSize = 2, seed = 0 } = options;
  const config = parseConfig({
    run: { seed, promptsPerStep: 1 },
    model: { hf: policy.dir, contextLength: 256 },
    env: { kind: 'agent', module, concurrency: groupSize, timeoutSeconds: 60 },
    generate: { kind: 'agent', groupSize },
    sampling: { temperature: 1, maxResponseTokens: 32 },
    optimize: { advantage: { kind: 'grpo' }, loss: { kind: 'ppo_clip' } },
    trainer: { learningRate: 0.01 },
  });
  const scripted = new ScriptedPolicy(policy.sampler, policy.tokenizer, weatherScript);
  const failures: string[] = [];
  const agent = (await openGatewayAgent(config, scripted, policy.tokenizer, { log: (l) => failures.push(l) }))!;
  await resetPolicy(policy);
  const report: ClientReport = {
    ...{ steps, episodes: 0, calls: 0, forks: 0, sampledTokens: 0, exactTokens: 0, maxLogprobDiff: 0 },
    ...{ rewards: [], clientOutputTokens: 0, weightChange: 0 },
    requests: { total: 0, streamed: 0, streamUsage: 0 },
    arguments: { sent: [], echoed: [] },
  };
  try {
    for (let step = 1; step <= steps; step++) {
      const run = { policy, scripted, agent, config, failures, seed };
      await rlStep(run, step, report);
    }
  } finally {
    await agent.close();
  }
  const initial = policy.initial;
  policy.model.params.data.forEach(
    (x, i) => (report.weightChange = Math.max(report.weightChange, Math.abs(x - initial[i]))),
  );
  return report;
}

/** The weights as made, fresh optimiser moments, and a new weight version (the sampler drops its cached states). */
async function resetPolicy(policy: Policy): Promise<void> {
  policy.model.params.data.set(policy.initial);
  policy.trainer.optimizer.m.fill(0);
  policy.trainer.optimizer.v.fill(0);
  policy.trainer.optimizer.step = 0;
  await policy.trainer.saveForSampler();
}

interface Run {
  policy: Policy;
  scripted: ScriptedPolicy;
  agent: GatewayAgent;
  config: ArborConfig;
  /** The driver's lines about failed episodes. */
  failures: string[];
  seed: number;
}

/** One step: grow one prompt's tree through the client, check it, score it, train on it; figures into `report`. */
async function rlStep(run: Run, step: number, report: ClientReport): Promise<void> {
  const { policy, scripted, config } = run;
  const [item] = weatherItems(1, run.seed * 1000 + step);
  const from = scripted.returned.length;
  const wireFrom = wire.length;
  const ctx = {
    ...{ sampler: scripted, rng: new Rng(run.seed).fork(`step/${step}`), step, treeIdPrefix: `s${step}p` },
    ...{ stopTokens: [...policy.tokenizer.eosIds], maxResponseTokens: 32, temperature: 1, topP: 1, topK: 0 },
  };
  const generator = agentGenerator(config.generate as AgentOptions);
  const { trees } = await generator.grow([{ item, promptTokens: [] }], { ...ctx, gateway: run.agent });
  const returned = scripted.returned.slice(from);
  const tree = trees[0];
  assert.ok(!hasError(tree), `step ${step}: ${run.failures.join('; ') || 'an error node'}`);
  const stats = tree.meta!.gateway as GatewayTreeStats;
  assert.equal(stats.forks, 0, `step ${step}: every episode is one chain of its calls`);
  assert.equal(leaves(tree).length, stats.episodes, `step ${step}: one leaf per episode`);
  assert.equal(stats.calls, returned.length, `step ${step}: one scripted continuation per call`);
  checkClientSaw(tree, item.id, item.answer);
  // before the update: the trainer holds the weights that sampled
  const exact = await tokenExactReport(trees, policy.trainer);
  assert.equal(exact.exact, 1, `step ${step}: ${JSON.stringify(exact)}`);
  await scoreTrees(trees, new Map([[item.id, item]]), weatherTask.reward, {
    ...{ decode: (t) => policy.tokenizer.decode(t), concurrency: 4, timeoutMs: 10_000, failureReward: 0 },
  });
  const rewards = leaves(tree).map((l) => l.reward!);
  assert.ok(rewards.includes(0) && rewards.includes(1), `step ${step}: rewards ${rewards} differ`);
  const advantaged = computeAdvantages(trees, config.optimize.advantage);
  const { aggregation } = config.optimize;
  const datums = buildDatums(advantaged, { aggregation, maxResponseTokens: config.sampling.maxResponseTokens });
  report.sampledTokens += checkTrainedIds(datums, returned, step);
  const { loss, extras } = lossFromConfig(config.optimize.loss);
  await policy.trainer.forwardBackward(datums, loss, extras);
  const { learningRate, beta1, beta2, eps, weightDecay, gradClipNorm } = config.trainer;
  await policy.trainer.optimStep({ learningRate, beta1, beta2, eps, weightDecay, gradClipNorm });
  await policy.trainer.saveForSampler();
  report.episodes += stats.episodes;
  report.calls += stats.calls;
  report.forks += stats.forks;
  report.exactTokens += exact.sampledTokens;
  report.maxLogprobDiff = Math.max(report.maxLogprobDiff, exact.maxLogprobDiff);
  report.rewards.push(...rewards);
  const saw = leaves(tree).map((l) => l.episode!.info as unknown as ClientSaw);
  report.clientOutputTokens += saw.reduce((a, s) => a + (s.outputTokens ?? 0), 0);
  addRequests(report, tree, wire.slice(wireFrom));
}

/**
 * The ids trained with weight > 0, as (context, ids) spans, equal the continuations the policy returned
 * (its prompt ids, its sampled ids) as multisets: each returned id is trained once, right after exactly
 * the context it was sampled in, and nothing else is trained. Returns the number of ids checked.
 */
function checkTrainedIds(datums: Datum[], returned: ScriptedPolicy['returned'], step: number): number {
  const key = (prompt: number[], tokens: number[]) => `${prompt.join(',')}|${tokens.join(',')}`;
  const expected = returned.map((r) => key(r.prompt, r.tokens)).sort();
  const trained: string[] = [];
  for (const d of datums) {
    const seq = [...d.inputTokens, d.targetTokens[d.targetTokens.length - 1]];
    // target position t predicts seq[t + 1]: a span of weighted positions [a, b) trains seq[a + 1 .. b]
    for (let t = 0; t < d.weights.length; t++) {
      if (!(d.weights[t] > 0)) continue;
      const a = t;
      while (t < d.weights.length && d.weights[t] > 0) t++;
      trained.push(key(seq.slice(0, a + 1), seq.slice(a + 1, t + 1)));
    }
  }
  trained.sort();
  assert.equal(trained.length, expected.length, `step ${step}: trained spans vs continuations returned`);
  assert.deepEqual(trained, expected, `step ${step}: the trainer sees exactly the ids the policy sampled`);
  return returned.reduce((a, r) => a + r.tokens.length, 0);
}

/** Every episode's client parsed the one scripted `weather` call and read a scripted answer as its final text. */
function checkClientSaw(tree: RolloutTree, city: string, answer: string): void {
  for (const leaf of leaves(tree)) {
    const episode = leaf.episode!;
    const saw = episode.info as unknown as ClientSaw;
    assert.deepEqual(
      saw.toolCalls,
      [{ name: 'weather', args: { city } }],
      `${episode.episodeId}: the tool call parsed`,
    );
    assert.equal(saw.invalidToolCalls ?? 0, 0, `${episode.episodeId}: no unparsable tool call`);
    assert.ok(
      [answer, `${answer} degrees`].includes(episode.finalAnswer),
      `${episode.episodeId}: ${episode.finalAnswer}`,
    );
    assert.equal(episode.turns, 2, `${episode.episodeId}: the call, then the answer`);
  }
}

/** The step's requests as the client sent them, and its tool calls as the gateway sent them (the episodes' records). */
function addRequests(
  report: ClientReport,
  tree: RolloutTree,
  requests: Array<{ body: Record<string, unknown> }>,
): void {
  type Message = { role?: string; tool_calls?: Array<{ function?: { arguments?: unknown } }> };
  for (const leaf of leaves(tree)) report.arguments.sent.push(...(leaf.episode!.calls ?? []).map((c) => c.arguments));
  for (const { body } of requests) {
    report.requests.total++;
    if (body.stream === true) report.requests.streamed++;
    if ((body.stream_options as { include_usage?: boolean } | undefined)?.include_usage) report.requests.streamUsage++;
    for (const m of (body.messages as Message[] | undefined) ?? [])
      if (m.role === 'assistant')
        for (const c of m.tool_calls ?? []) report.arguments.echoed.push(String(c.function?.arguments));
  }
}
