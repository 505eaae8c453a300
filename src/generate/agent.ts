/**
 * `agent`: multi-turn tool-use episodes grown as turn trees (TRACE, PORTool).
 *
 * A turn is a node: the policy's sampled tokens up to and including its stop token (mask 1, with their
 * sampling log-probs), then the environment's observation rendered by the run's tool-call format with
 * the chat template's exact separators (mask 0, log-prob 0). The next turn is sampled from the token
 * ids of the path so far: earlier turns are never decoded and re-encoded, so the trainer sees exactly
 * the sampled tokens (test/generate/agent-token-exact.test.ts checks it on the embedded engine).
 *
 * Branching happens at turn boundaries (after an observation):
 * - `iid`: G independent episodes from the prompt (multi-turn GRPO, the baseline);
 * - `uniform`: `rootCopies` episodes, and every turn boundary branches into up to `branchFactor`
 *   continuations while the tree has leaves left in its budget of G;
 * - `trace` (TRACE, arXiv 2510.xxxx "turn-level branching"; our reading): the same budget goes to the
 *   anchors whose predicted success (the quality head's predictor over the turn history, control/
 *   quality-head.ts) is nearest 0.5 (weight p(1 − p)), so branching is spent where outcomes are mixed;
 *   before the predictor has warmed up it falls back to `uniform`.
 * A tree that ends with fewer than G leaves (episodes that finished before they could branch) gets the
 * missing ones as fresh episodes from the prompt. Environments fork with the tree: each extra child of
 * an anchor continues in `env.fork()` taken before any child steps; a tool result on a shared prefix
 * belongs to the shared node, so it is executed once.
 *
 * Limits: `maxTurns` policy turns, `maxTurnTokens` per turn, the run's `maxResponseTokens` for the whole
 * episode (policy and observation tokens: both fill the context), `toolTimeoutMs` per call and
 * `episodeTimeoutMs` per episode. A limit ends the episode at its leaf (`episode.end` says which).
 * The leaf records the final answer and the environment's reward (`TreeNode.episode`) for the Filter.
 *
 * Infrastructure failures: an environment that throws a recoverable `EnvironmentError` (its
 * MCP server exited under an episode) cuts that episode's tree: every open path of the tree ends in an
 * `error` node with the reason, so the tree is an error tree (`hasError`), logged but never trained on,
 * and the other trees of the batch go on. A fatal one (the server cannot be restarted) is rethrown and
 * fails the run; on every error path the environments still open are closed.
 */
import { z } from 'zod';
import { largestRemainder } from '../core/apportion.js';
import { ConfigError, EnvironmentError } from '../core/errors.js';
import {
  addNode,
  createTree,
  isComplete,
  leaves,
  prefixTokens,
  responseTokens,
  ROOT_ID,
  type EpisodeInfo,
  type RolloutTree,
} from '../core/tree.js';
import type { SampleCompletion, SampleRequest } from '../engine/types.js';
import type { Environment, StepResult, ToolResult } from '../env/types.js';
import { growThroughGateway } from './gateway.js';
import {
  addUsage,
  emptyStats,
  type AgentRuntime,
  type GenerateContext,
  type GenerateInput,
  type GenerateStats,
  type Generator,
} from './types.js';

export const agentOptionsSchema = z
  .object({
    kind: z.literal('agent').describe('multi-turn tool-use episodes as turn trees (needs an `env` section)'),
    groupSize: z.number().int().min(1).max(4096).default(8).describe('G: episodes (leaves) per prompt'),
    format: z
      .enum(['arbor', 'qwen3'])
      .default('arbor')
      .describe(
        "tool-call format: arbor (the embedded engine's compact text format) or qwen3 (the Qwen3 chat template's <tool_call> JSON)",
      ),
    branching: z
      .enum(['iid', 'uniform', 'trace'])
      .default('iid')
      .describe(
        'iid: G independent episodes; uniform: branch at every turn boundary; trace: branch where the predicted success is nearest 0.5',
      ),
    rootCopies: z
      .number()
      .int()
      .min(0)
      .max(4096)
      .default(0)
      .describe('trees: episodes started from the prompt (0 = ceil(G / branchFactor))'),
    branchFactor: z
      .number()
      .int()
      .min(2)
      .max(64)
      .default(2)
      .describe('trees: continuations per anchor (turn boundary)'),
    maxTurns: z.number().int().min(1).max(256).default(4).describe('policy turns per episode'),
    maxTurnTokens: z
      .number()
      .int()
      .min(0)
      .max(65536)
      .default(0)
      .describe('tokens per policy turn (0 = the rest of the episode budget, sampling.maxResponseTokens)'),
    toolTimeoutMs: z
      .number()
      .int()
      .min(1)
      .max(3_600_000)
      .default(5000)
      .describe('time limit of one tool call / environment request'),
    episodeTimeoutMs: z
      .number()
      .int()
      .min(1)
      .max(86_400_000)
      .default(60_000)
      .describe('time limit of one episode (sampling and tools)'),
  })
  .strict();
export type AgentOptions = z.infer<typeof agentOptionsSchema>;

/** Per-tree counters kept in `tree.meta.agent` (summed into the step's metrics by the producer). */
export interface AgentTreeStats {
  episodes: number;
  turns: number;
  toolCalls: number;
  toolErrors: number;
  toolTimeouts: number;
  forks: number;
}

/** An episode in progress: it continues from node `nodeId` (the root or a turn with its observation). */
interface Path {
  tree: number;
  nodeId: string;
  env: Environment;
  turns: number;
  toolCalls: number;
  toolErrors: number;
  envReward?: number;
  started: number;
}

interface TreeState {
  tree: RolloutTree;
  target: number;
  /** Leaves started (finished or in progress) towards the target. */
  started: number;
  stats: AgentTreeStats;
  /** Why an infrastructure failure cut the tree (it is an error tree; no more episodes start). */
  cut?: string;
}

/** A recoverable infrastructure failure: it cuts the episode's tree, not the run. */
function isCut(error: unknown): error is EnvironmentError {
  return error instanceof EnvironmentError && error.recoverable;
}

/** Close environments whose paths will not go on (errors while closing are dropped: the path is over). */
async function closeAll(envs: Environment[]): Promise<void> {
  await Promise.all(envs.map((env) => env.close().catch(() => undefined)));
}

/** Cut the tree of `s` at `nodeId`: an `error` leaf there records the failure (the tree is not trained on). */
function cutAt(s: TreeState, nodeId: string, reason: string): void {
  s.cut ??= reason;
  addNode(s.tree, nodeId, { tokens: [], finishReason: 'error', error: `infrastructure failure: ${reason}` });
}

/** The paths whose tree was not cut; the others end in an error leaf and their environments close. */
async function dropCut(paths: Path[], states: TreeState[]): Promise<Path[]> {
  const cut = paths.filter((p) => states[p.tree].cut !== undefined);
  for (const p of cut) cutAt(states[p.tree], p.nodeId, states[p.tree].cut!);
  await closeAll(cut.map((p) => p.env));
  return paths.filter((p) => states[p.tree].cut === undefined);
}

export function agentGenerator(options: AgentOptions): Generator {
  return {
    kind: 'agent',
    groupSize: options.groupSize,
    async grow(inputs: GenerateInput[], ctx: GenerateContext) {
      // env.kind agent: the user's own agent drives its turns through the gateway
      if (ctx.gateway) return growThroughGateway(inputs, ctx, options);
      const agent = ctx.agent;
      if (!agent)
        throw new ConfigError('generate.kind "agent" needs an environment: add an `env` section to the config', 'env');
      const started = Date.now();
      const stats = emptyStats();
      const states: TreeState[] = [];
      for (const [i, input] of inputs.entries()) states.push(await startTree(input, i, options, ctx, agent));
      // rounds: start missing episodes from the prompt, then run every open path to its end
      for (let refill = 0; refill < 3; refill++) {
        let paths: Path[] = [];
        try {
          for (const [i, s] of states.entries()) {
            paths.push(...(await startEpisodes(s, i, inputs[i], options, ctx, agent)));
          }
        } catch (error) {
          await closeAll(paths.map((p) => p.env));
          throw error;
        }
        if (!paths.length) break;
        // turn() closes every environment of its paths when it throws
        while (paths.length) paths = await turn(paths, states, options, ctx, agent, stats);
      }
      for (const s of states) {
        s.tree.meta = { ...s.tree.meta, agent: s.stats };
        stats.trajectories += leaves(s.tree).length;
      }
      stats.wallMs = Date.now() - started;
      return { trees: states.map((s) => s.tree), stats };
    },
  };
}

async function startTree(
  input: GenerateInput,
  index: number,
  options: AgentOptions,
  ctx: GenerateContext,
  agent: AgentRuntime,
): Promise<TreeState> {
  const target = input.groupSize ?? options.groupSize;
  const stats: AgentTreeStats = { episodes: 0, turns: 0, toolCalls: 0, toolErrors: 0, toolTimeouts: 0, forks: 0 };
  if (input.tree) {
    if (!isComplete(input.tree))
      throw new ConfigError(
        'generate.kind "agent" does not continue partial rollouts (control.kind "april"): use a control strategy that completes its trees',
        'control.kind',
      );
    const prior = input.tree.meta?.agent as AgentTreeStats | undefined;
    return { tree: input.tree, target, started: leaves(input.tree).length, stats: prior ? { ...prior } : stats };
  }
  // the prompt tokens include the environment's initial observation: reset one episode to read it
  const meta = { generator: 'agent', branching: options.branching };
  let env: Environment | undefined;
  try {
    env = await agent.factory.create();
    const { observation } = await env.reset(input.item, {
      seed: episodeSeed(ctx, index),
      signal: ctx.signal,
      timeoutMs: options.toolTimeoutMs,
    });
    const prompt = agent.encodePrompt(input.item, observation);
    const tree = createTree(`${ctx.treeIdPrefix}${index}`, input.item.id, prompt, meta);
    return { tree, target, started: 0, stats };
  } catch (error) {
    if (!isCut(error)) throw error;
    const tree = createTree(`${ctx.treeIdPrefix}${index}`, input.item.id, input.promptTokens, meta);
    const s: TreeState = { tree, target, started: 0, stats };
    cutAt(s, ROOT_ID, error.message);
    return s;
  } finally {
    await env?.close();
  }
}

/** Seeds of episode resets derive from the tree's prompt seed: every episode of a tree sees the same start. */
function episodeSeed(ctx: GenerateContext, tree: number): number {
  return (ctx.step * 1_000_003 + tree * 7919) >>> 0;
}

/** Fresh episodes from the prompt for the leaves the tree still lacks (all of them in a new tree). */
async function startEpisodes(
  s: TreeState,
  index: number,
  input: GenerateInput,
  options: AgentOptions,
  ctx: GenerateContext,
  agent: AgentRuntime,
): Promise<Path[]> {
  const missing = s.target - s.started;
  if (missing <= 0 || s.cut !== undefined) return [];
  const first = s.started === 0;
  const copies =
    options.branching === 'iid' || !first
      ? missing
      : Math.min(missing, options.rootCopies || Math.ceil(s.target / options.branchFactor));
  let envs: Environment[];
  try {
    const env = await agent.factory.create();
    try {
      const seed = episodeSeed(ctx, index);
      await env.reset(input.item, { seed, signal: ctx.signal, timeoutMs: options.toolTimeoutMs });
    } catch (error) {
      await closeAll([env]);
      throw error;
    }
    envs = await forkInto(env, copies, s.stats);
  } catch (error) {
    if (!isCut(error)) throw error;
    cutAt(s, ROOT_ID, error.message);
    return [];
  }
  s.started += copies;
  s.stats.episodes += copies;
  const now = Date.now();
  return envs.map((e) => ({
    tree: index,
    nodeId: ROOT_ID,
    env: e,
    turns: 0,
    toolCalls: 0,
    toolErrors: 0,
    started: now,
  }));
}

/** `env` and `count − 1` forks of it, taken before any of them steps. */
async function forkInto(env: Environment, count: number, stats: AgentTreeStats): Promise<Environment[]> {
  const out = [env];
  try {
    for (let k = 1; k < count; k++) out.push(await env.fork());
  } catch (error) {
    // `env` and its forks so far are closed: the caller's path does not go on
    await closeAll(out);
    throw error;
  }
  stats.forks += count - 1;
  return out;
}

/** One policy turn for every open path (one sampler call), then the environment steps; returns the paths still open. */
async function turn(
  paths: Path[],
  states: TreeState[],
  options: AgentOptions,
  ctx: GenerateContext,
  agent: AgentRuntime,
  stats: GenerateStats,
): Promise<Path[]> {
  // the paths continuing from one node (an anchor's children, the episodes from the prompt) share one
  // request with n = their count: the engine computes their common context once
  const groups = new Map<string, Path[]>();
  for (const p of paths) {
    const key = `${p.tree}/${p.nodeId}`;
    groups.set(key, [...(groups.get(key) ?? []), p]);
  }
  const requests: SampleRequest[] = [];
  const live: Path[][] = [];
  for (const group of groups.values()) {
    const tree = states[group[0].tree].tree;
    const context = prefixTokens(tree, group[0].nodeId);
    const budget = turnBudget(tree, group[0], context.length, options, ctx, agent);
    if (budget <= 0) {
      for (const p of group) await endAt(tree, p, 'max_tokens', '');
      continue;
    }
    live.push(group);
    requests.push({
      tokens: context,
      n: group.length,
      maxTokens: budget,
      temperature: ctx.temperature,
      topP: ctx.topP,
      topK: ctx.topK,
      stopTokens: ctx.stopTokens,
      seed: ctx.rng.nextU32(),
      affinityKey: tree.id,
      ...(ctx.quality?.wants?.entropy ? { returnEntropy: true } : {}),
      ...(ctx.quality?.wants?.hidden ? { returnHidden: true } : {}),
    });
  }
  if (!requests.length) return [];
  let results: Awaited<ReturnType<typeof ctx.sampler.sample>>;
  try {
    results = await ctx.sampler.sample(requests, { signal: ctx.signal });
  } catch (error) {
    await closeAll(live.flat().map((p) => p.env));
    throw error;
  }
  stats.samplerCalls++;
  const anchors: Path[] = [];
  for (const r of results) addUsage(stats, r.usage);
  // every path finishes its turn (afterTurn closes the environment of a path that ends or fails)
  const settled = await Promise.allSettled(
    live.flatMap((group, j) =>
      group.map(async (p, k) => {
        const next = await afterTurn(
          p,
          results[j].completions[k],
          results[j].weightVersion,
          states[p.tree],
          options,
          ctx,
          agent,
        );
        if (next) anchors.push(next);
      }),
    ),
  );
  const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) {
    await closeAll(anchors.map((p) => p.env));
    throw failed.reason;
  }
  anchors.sort((a, b) => a.tree - b.tree || (a.nodeId < b.nodeId ? -1 : 1));
  return branch(await dropCut(anchors, states), states, options, ctx);
}

/** Tokens the next turn of `p` may sample: the turn limit, the episode's response budget, the context. */
function turnBudget(
  tree: RolloutTree,
  p: Path,
  contextTokens: number,
  options: AgentOptions,
  ctx: GenerateContext,
  agent: AgentRuntime,
): number {
  const used = responseTokens(tree, p.nodeId).length;
  let budget = ctx.maxResponseTokens - used;
  if (options.maxTurnTokens > 0) budget = Math.min(budget, options.maxTurnTokens);
  if (agent.contextLength !== undefined) budget = Math.min(budget, agent.contextLength - contextTokens);
  return budget;
}

/**
 * Record the sampled turn as a node (with the observation when the environment answers); returns the
 * path continuing from it, or undefined when the episode ended here. The node is created before the
 * first await, so node ids follow the request order however long each environment takes (runs stay
 * deterministic with asynchronous tools).
 */
async function afterTurn(
  p: Path,
  c: SampleCompletion,
  weightVersion: number,
  s: TreeState,
  options: AgentOptions,
  ctx: GenerateContext,
  agent: AgentRuntime,
): Promise<Path | undefined> {
  const tree = s.tree;
  s.stats.turns++;
  p.turns++;
  const node = addNode(tree, p.nodeId, {
    tokens: c.tokens,
    logprobs: c.logprobs,
    entropies: c.entropies,
    hidden: c.hidden,
    weightVersion,
    mask: c.tokens.map(() => 1),
    finishReason: null,
  });
  const here = { ...p, nodeId: node.id };
  const text = agent.decodeTurn(c.tokens);
  const leaf = async (end: EpisodeInfo['end'], finalAnswer: string, finishReason: 'stop' | 'length' | 'depth') => {
    node.finishReason = finishReason;
    await endAt(tree, here, end, finalAnswer);
  };
  if (c.finishReason !== 'stop') return void (await leaf('max_tokens', '', 'length'));
  // a text environment (no tools: OpenEnv games, echo) reads every turn; a tool environment only calls
  const textEnv = p.env.tools.length === 0;
  const { calls, errors } = textEnv ? { calls: [], errors: [] } : agent.format.parseCalls(text);
  if (!textEnv && !calls.length && !errors.length)
    return void (await leaf('answer', agent.format.finalAnswer(text), 'stop'));
  if (p.turns >= options.maxTurns) return void (await leaf('max_turns', '', 'depth'));
  const remaining = options.episodeTimeoutMs - (Date.now() - p.started);
  if (remaining <= 0) return void (await leaf('timeout', '', 'length'));
  // only malformed calls: the errors are the observation, the environment is not stepped
  let step: StepResult = { results: [], done: false, metrics: { toolCalls: 0, toolErrors: 0 } };
  try {
    const timeoutMs = Math.min(options.toolTimeoutMs, remaining);
    if (textEnv || calls.length) step = await p.env.step({ text, calls }, { signal: ctx.signal, timeoutMs });
  } catch (error) {
    await closeAll([p.env]);
    if (!isCut(error)) throw error;
    // the calls' results are lost with the server: the episode ends here, its tree is an error tree
    cutAt(s, node.id, error.message);
    return undefined;
  }
  const results: ToolResult[] = [...errors, ...step.results];
  for (const counter of [here, s.stats]) {
    counter.toolCalls += step.metrics.toolCalls + errors.length;
    counter.toolErrors += step.metrics.toolErrors + errors.length;
  }
  s.stats.toolTimeouts += step.metrics.toolTimeouts ?? 0;
  if (step.reward !== undefined) here.envReward = (here.envReward ?? 0) + step.reward;
  const observation = agent.encodePieces(agent.format.renderObservation(results));
  // the observation must leave room for another turn in the episode budget and the context
  const used = responseTokens(tree, node.id).length + observation.length;
  const context = prefixTokens(tree, node.id).length + observation.length;
  if (
    !step.done &&
    (used >= ctx.maxResponseTokens || (agent.contextLength !== undefined && context >= agent.contextLength))
  )
    return void (await leaf('max_tokens', '', 'length'));
  // the observation joins the turn's node: environment tokens, mask 0, no sampling log-prob
  node.tokens.push(...observation);
  node.logprobs.push(...observation.map(() => 0));
  node.mask.push(...observation.map(() => 0));
  if (node.entropies) node.entropies.push(...observation.map(() => 0));
  if (step.done) return void (await leaf('env_done', agent.format.finalAnswer(text), 'stop'));
  return here;
}

/** The episode of `p` ends at its node (a leaf): record what it did and close its environment. */
async function endAt(tree: RolloutTree, p: Path, end: EpisodeInfo['end'], finalAnswer: string): Promise<void> {
  const node = tree.nodes[p.nodeId];
  if (node.finishReason === null)
    node.finishReason = end === 'max_tokens' || end === 'timeout' ? 'length' : end === 'max_turns' ? 'depth' : 'stop';
  node.episode = {
    finalAnswer,
    turns: p.turns,
    toolCalls: p.toolCalls,
    toolErrors: p.toolErrors,
    end,
    ...(p.envReward !== undefined ? { envReward: p.envReward } : {}),
  };
  await p.env.close().catch(() => {});
}

/**
 * The anchors of this round (paths that continue after an observation) get their children: one each,
 * plus the extra continuations the tree's leaf budget allows, spread uniformly or by TRACE's p(1 − p).
 */
async function branch(
  anchors: Path[],
  states: TreeState[],
  options: AgentOptions,
  ctx: GenerateContext,
): Promise<Path[]> {
  const out: Path[] = [];
  const forked = new Set<Path>();
  const byTree = new Map<number, Path[]>();
  for (const a of anchors) byTree.set(a.tree, [...(byTree.get(a.tree) ?? []), a]);
  for (const [t, group] of byTree) {
    const s = states[t];
    const extra = options.branching === 'iid' ? group.map(() => 0) : spread(group, s, options, ctx);
    for (const [i, a] of group.entries()) {
      let envs: Environment[];
      try {
        envs = await forkInto(a.env, 1 + extra[i], s.stats);
      } catch (error) {
        if (!isCut(error)) {
          // forkInto closed a's environment; the anchors not reached yet still hold theirs
          const waiting = anchors.filter((b) => b !== a && !forked.has(b));
          await closeAll([...out, ...waiting].map((p) => p.env));
          throw error;
        }
        cutAt(s, a.nodeId, error.message);
        forked.add(a);
        continue;
      }
      forked.add(a);
      s.started += extra[i];
      for (const env of envs) out.push({ ...a, env });
    }
  }
  // a fork that failed cut its tree: that tree's other paths end too
  return dropCut(out, states);
}

/**
 * Extra children per anchor within the tree's remaining leaf budget. uniform: round-robin, at most
 * branchFactor − 1 each. trace: the budget (up to branchFactor − 1 per anchor on average) is split in
 * proportion to p(1 − p) of each anchor's predicted success, at most 2·(branchFactor − 1) per anchor,
 * so anchors whose outcome is already certain get none; uniform until the predictor is ready.
 */
function spread(group: Path[], s: TreeState, options: AgentOptions, ctx: GenerateContext): number[] {
  const budget = Math.min(s.target - s.started, group.length * (options.branchFactor - 1));
  if (budget <= 0) return group.map(() => 0);
  const p =
    options.branching === 'trace'
      ? ctx.quality?.predict(
          s.tree,
          group.map((a) => a.nodeId),
        )
      : undefined;
  if (p) {
    const cap = 2 * (options.branchFactor - 1);
    const weights = p.map((q) => Math.max(1e-6, q * (1 - q)));
    const out = group.map(() => 0);
    // water-filling: apportion by weight, cap, and hand what the capped ones could not take to the rest
    let left = budget;
    while (left > 0) {
      const open = out.map((v, i) => (v < cap ? i : -1)).filter((i) => i >= 0);
      if (!open.length) break;
      const total = open.reduce((a, i) => a + weights[i], 0);
      const share = largestRemainder(
        open.map((i) => (left * weights[i]) / total),
        left,
      );
      let given = 0;
      open.forEach((i, k) => {
        const add = Math.min(share[k], cap - out[i]);
        out[i] += add;
        given += add;
      });
      left -= given;
      if (given === 0) break;
    }
    return out;
  }
  const extra = group.map(() => 0);
  let left = budget;
  for (let round = 0; round < options.branchFactor - 1 && left > 0; round++) {
    for (let i = 0; i < group.length && left > 0; i++) {
      extra[i]++;
      left--;
    }
  }
  return extra;
}
