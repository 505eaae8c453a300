/**
 * `latr` (Lookahead Tree-Based Rollouts, arXiv 2510.24302; starreeze/latr model/sample_filter.py):
 * branch where the model hesitates, keep only branches that go somewhere new.
 *
 * Each prompt starts with one path. Paths are decoded in segments of `segmentLength` tokens with the
 * top-2 log-probs of every position; all paths of all prompts go to the sampler in one call per round.
 * In a new segment, the first position where the runner-up candidate c has P(c) > tauAbs and
 * P(top) − P(c) < tauRel (the authors' rule; math defaults 0.15 / 0.25) is a branch point: a branch
 * starting with the forced token — the best of the two candidates that the path did NOT take — is
 * decoded for `lookahead` tokens from the prefix before that position (one more call for all branch
 * points of the round). A branch whose lookahead stays like the path's own continuation over the same
 * window (token edit distance / window < pruneDistance, 0.4 as in the authors' code) is pruned: its
 * tokens were decoded (and count in tokens_decoded) but it is not added. A kept branch splits the
 * path's node at the branch point (core splitLeaf), so the prefix stays one shared node, and becomes
 * a path of its own. Branching stops once the prompt has G paths; paths then run to the end. A prompt
 * that ends with fewer than G leaves gets the rest as plain samples from the prompt, so every tree has
 * exactly G leaves. Forced tokens record their log-prob under the sampling distribution (the
 * embedded sampler's rule), so the loss sees the model's probability of every trained token.
 * `tree.meta.latr` counts forks and pruned branches.
 */
import {
  addNode,
  createTree,
  isComplete,
  leaves,
  prefixTokens,
  responseTokens,
  ROOT_ID,
  splitLeaf,
  type FinishReason,
  type RolloutTree,
  type TreeNode,
} from '../core/tree.js';
import { ConfigError } from '../core/errors.js';
import type { SampleCompletion, SampleRequest } from '../engine/types.js';
import {
  addUsage,
  emptyStats,
  type GenerateContext,
  type GenerateInput,
  type GenerateStats,
  type Generator,
} from './types.js';

export interface LatrOptions {
  kind: 'latr';
  groupSize: number;
  segmentLength: number;
  tauAbs: number;
  tauRel: number;
  lookahead: number;
  pruneDistance: number;
}

interface PromptState {
  tree: RolloutTree;
  G: number;
  /** Paths still decoding (their latest node). */
  live: TreeNode[];
  forks: number;
  pruned: number;
  leavesBefore: number;
}

/** A branch point found in a path's new segment. */
interface Fork {
  state: PromptState;
  node: TreeNode;
  /** Position in the node's tokens where the branch starts. */
  at: number;
  token: number;
}

export function latrGenerator(options: LatrOptions): Generator {
  return {
    kind: 'latr',
    groupSize: options.groupSize,
    async grow(inputs: GenerateInput[], ctx: GenerateContext) {
      if (ctx.stopAfterTrees !== undefined)
        throw new ConfigError('latr does not support partial rollouts (control.kind april)', 'control');
      const caps = ctx.sampler.capabilities;
      if (!caps.forcedTokens || !caps.topLogprobs)
        throw new ConfigError(
          'latr needs a sampler with forced tokens and top log-probs (the embedded engine)',
          'generate.kind',
        );
      const started = Date.now();
      const stats = emptyStats();
      const states = inputs.map((input, i) => initialState(input, i, options, ctx));
      for (let round = 0; states.some((s) => s.live.length); round++) {
        if (round > 10_000) throw new Error('latr: no progress after 10000 rounds');
        await decodeRound(states, options, ctx, stats);
      }
      await fillMissing(states, ctx, stats);
      for (const s of states) s.tree.meta = { ...s.tree.meta, latr: { forks: s.forks, pruned: s.pruned } };
      stats.trajectories = states.reduce((a, s) => a + leaves(s.tree).length - s.leavesBefore, 0);
      stats.wallMs = Date.now() - started;
      return { trees: states.map((s) => s.tree), stats };
    },
  };
}

function initialState(input: GenerateInput, i: number, options: LatrOptions, ctx: GenerateContext): PromptState {
  const G = input.groupSize ?? options.groupSize;
  const tree =
    input.tree ?? createTree(`${ctx.treeIdPrefix}${i}`, input.item.id, input.promptTokens, { generator: 'latr' });
  const started = tree.nodes[ROOT_ID].children.length > 0;
  if (started && !isComplete(tree))
    throw new ConfigError(`latr: tree ${tree.id} is unfinished; latr does not continue partial trees`, 'control');
  // a fresh tree starts one path at the root; a complete one only gets its missing leaves (fillMissing)
  return {
    tree,
    G,
    live: started ? [] : [tree.nodes[ROOT_ID]],
    forks: 0,
    pruned: 0,
    leavesBefore: started ? leaves(tree).length : 0,
  };
}

function request(
  ctx: GenerateContext,
  tokens: number[],
  maxTokens: number,
  extra: Partial<SampleRequest> = {},
): SampleRequest {
  return {
    tokens,
    n: 1,
    maxTokens,
    temperature: ctx.temperature,
    topP: ctx.topP,
    topK: ctx.topK,
    stopTokens: ctx.stopTokens,
    seed: ctx.rng.nextU32(),
    ...extra,
  };
}

function finishOf(c: SampleCompletion, length: number, ctx: GenerateContext): FinishReason | null {
  if (c.finishReason === 'stop') return 'stop';
  if (c.finishReason === 'abort') return 'abort';
  return length >= ctx.maxResponseTokens ? 'length' : null;
}

/** Paths (live + finished) a prompt has; branching stops at G. */
function width(s: PromptState): number {
  return (
    leaves(s.tree).filter((l) => l.id !== ROOT_ID).length + (s.live.length === 1 && s.live[0].id === ROOT_ID ? 1 : 0)
  );
}

/** One round: extend every live path by a segment, then try the round's branch points. */
async function decodeRound(
  states: PromptState[],
  options: LatrOptions,
  ctx: GenerateContext,
  stats: GenerateStats,
): Promise<void> {
  const jobs = states.flatMap((s) => s.live.map((node) => ({ s, node })));
  const branching = (s: PromptState) => width(s) < s.G;
  const requests = jobs.map(({ s, node }) => {
    const used = responseTokens(s.tree, node.id).length;
    return request(
      ctx,
      prefixTokens(s.tree, node.id),
      Math.max(1, Math.min(options.segmentLength, ctx.maxResponseTokens - used)),
      branching(s) ? { topLogprobs: 2 } : {},
    );
  });
  const results = await ctx.sampler.sample(requests, { signal: ctx.signal });
  stats.samplerCalls++;
  for (const s of states) s.live = [];
  const forks: Fork[] = [];
  results.forEach((result, j) => {
    addUsage(stats, result.usage);
    const { s, node: from } = jobs[j];
    const c = result.completions[0];
    const node = addNode(s.tree, from.id, {
      tokens: c.tokens,
      logprobs: c.logprobs,
      entropies: c.entropies,
      weightVersion: result.weightVersion,
    });
    node.finishReason = finishOf(c, responseTokens(s.tree, node.id).length, ctx);
    if (node.finishReason === null) s.live.push(node);
    if (!branching(s) || !c.topLogprobs) return;
    const at = branchPoint(c, options);
    if (at !== undefined && forks.filter((f) => f.state === s).length + width(s) < s.G)
      forks.push({ state: s, node, at, token: forkToken(c, at) });
  });
  if (forks.length) await tryForks(forks, options, ctx, stats);
}

/** First position of a new segment where the runner-up is likely and close to the top candidate. */
export function branchPoint(c: SampleCompletion, o: Pick<LatrOptions, 'tauAbs' | 'tauRel'>): number | undefined {
  const top = c.topLogprobs ?? [];
  for (let i = 0; i < top.length; i++) {
    if (top[i].length < 2) continue;
    const p1 = Math.exp(top[i][0][1]);
    const p2 = Math.exp(top[i][1][1]);
    if (p2 > o.tauAbs && p1 - p2 < o.tauRel) return i;
  }
  return undefined;
}

/** The better of the two top candidates that the path did not take at `at`. */
function forkToken(c: SampleCompletion, at: number): number {
  const [[a], [b]] = c.topLogprobs![at];
  return c.tokens[at] === a ? b : a;
}

/** Normalised token edit distance (Levenshtein / the longer length; 0 when both are empty). */
export function editDistance(a: number[], b: number[]): number {
  const n = Math.max(a.length, b.length);
  if (!n) return 0;
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++)
      cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = cur;
  }
  return prev[b.length] / n;
}

/** Decode every branch's lookahead in one call; keep the branches that diverge from their path. */
async function tryForks(
  forks: Fork[],
  options: LatrOptions,
  ctx: GenerateContext,
  stats: GenerateStats,
): Promise<void> {
  const requests = forks.map((f) => {
    const prefix = prefixTokens(f.state.tree, f.node.id).slice(0, -(f.node.tokens.length - f.at));
    const used = responseTokens(f.state.tree, f.node.id).length - (f.node.tokens.length - f.at);
    return request(ctx, prefix, Math.max(1, Math.min(options.lookahead, ctx.maxResponseTokens - used)), {
      forcedTokens: [f.token],
    });
  });
  const results = await ctx.sampler.sample(requests, { signal: ctx.signal });
  stats.samplerCalls++;
  results.forEach((result, k) => {
    addUsage(stats, result.usage);
    const f = forks[k];
    const c = result.completions[0];
    const own = f.node.tokens.slice(f.at, f.at + c.tokens.length);
    if (editDistance(c.tokens, own) < options.pruneDistance) {
      f.state.pruned++;
      return;
    }
    // split the path's node at the branch point (the branch is the tail's sibling); at 0 the
    // branch point is the node's start and the branch is the node's sibling
    let parent = f.node.parent!;
    if (f.at > 0) {
      const wasLive = f.state.live.indexOf(f.node);
      const tail = splitLeaf(f.state.tree, f.node.id, f.at);
      if (wasLive >= 0) f.state.live[wasLive] = tail;
      parent = f.node.id;
    }
    const branch = addNode(f.state.tree, parent, {
      tokens: c.tokens,
      logprobs: c.logprobs,
      entropies: c.entropies,
      weightVersion: result.weightVersion,
    });
    branch.finishReason = finishOf(c, responseTokens(f.state.tree, branch.id).length, ctx);
    if (branch.finishReason === null) f.state.live.push(branch);
    f.state.forks++;
  });
}

/** Prompts with fewer than G leaves get the rest as plain full-length samples from the prompt. */
async function fillMissing(states: PromptState[], ctx: GenerateContext, stats: GenerateStats): Promise<void> {
  const need = states.map((s) => s.G - leaves(s.tree).filter((l) => l.id !== ROOT_ID).length);
  const jobs = states.map((s, i) => ({ s, n: need[i] })).filter((j) => j.n > 0);
  if (!jobs.length) return;
  const results = await ctx.sampler.sample(
    jobs.map(({ s, n }) => ({ ...request(ctx, s.tree.nodes[ROOT_ID].tokens, ctx.maxResponseTokens), n })),
    { signal: ctx.signal },
  );
  stats.samplerCalls++;
  results.forEach((result, k) => {
    addUsage(stats, result.usage);
    for (const c of result.completions) {
      const node = addNode(jobs[k].s.tree, ROOT_ID, {
        tokens: c.tokens,
        logprobs: c.logprobs,
        entropies: c.entropies,
        weightVersion: result.weightVersion,
      });
      node.finishReason = c.finishReason === 'stop' ? 'stop' : c.finishReason === 'abort' ? 'abort' : 'length';
    }
  });
}
