/**
 * `treepo` (TreePO segment trees). Every round, each live path of
 * every prompt is extended by one segment of L tokens, all in ONE sampler call; a path with k queued
 * copies is one request with n = k from the path's cached KV (cacheHandle), so shared prefixes are
 * computed once. After a round, finished paths (stop token, max length, depth, repetition) give their
 * branching budget to survivors: T = max(n_c, min(G − F, b·f_s + b·n_c)), split by `allocation`.
 * When a prompt has no live path but F < G, fallback truncates copies of naturally finished leaves at
 * a random earlier segment boundary (0 = the prompt) and grows new siblings from the TRUNCATED prefix
 * (the reference's stale-context bug is not reproduced), so every prompt ends with exactly G leaves.
 *
 * Partial rollouts. With `stopAfterTrees`, the call stops BETWEEN rounds (before issuing the next one)
 * once that many of its trees are complete (no live path, F = G). Each unfinished tree is returned with
 * its state in `meta.pending` (TreepoPending, plain JSON); a later call given that tree
 * (`GenerateInput.tree`) restores it, recomputes lengths from its tokens and goes on with the same
 * rounds an uninterrupted run would do (KV handles do not outlive a call: the weights may have changed,
 * so the first request re-sends the prefix). A segment the sampler aborted (cancellation) stays a live
 * path of one copy and is continued IN PLACE (appendToNode), so the tree keeps its shape; a round with
 * an aborted segment ends the call. `meta.pending` is deleted when the tree completes. Without
 * `stopAfterTrees` and without aborts, a fresh call makes exactly the draws and trees it always did.
 */
import {
  addNode,
  appendToNode,
  createTree,
  leaves,
  prefixTokens,
  removeLeaf,
  responseTokens,
  ROOT_ID,
  type FinishReason,
  type RolloutTree,
  type TreeNode,
} from '../core/tree.js';
import { largestRemainder } from '../core/apportion.js';
import { DataError } from '../core/errors.js';
import type { Rng } from '../core/rng.js';
import { ConfigError } from '../core/errors.js';
import type { SampleCompletion, SampleRequest, SampleResult, Sampler } from '../engine/types.js';
import {
  addUsage,
  emptyStats,
  type GenerateContext,
  type GenerateInput,
  type GenerateStats,
  type Generator,
} from './types.js';

export interface TreepoOptions {
  kind: 'treepo';
  /** G: final trajectories (leaves) per prompt. */
  groupSize: number;
  /** L: tokens per segment. */
  segmentLength: number;
  /** b: children per continuing path. */
  branchingFactor: number;
  /** First-step copies: a fixed number, or uniform in [min, max] per prompt (clipped to G). */
  initialDivergence: number | { min: number; max: number };
  /** Maximum segments per trajectory (0 = ceil(maxResponseTokens / L)). */
  maxDepth: number;
  /** How T is split among continuing paths. */
  allocation: 'fixed_avg' | 'low_prob' | 'high_prob' | 'high_entropy' | 'value';
  /** Softmax temperature τ of the probability/entropy-driven allocations. */
  allocationTemperature: number;
  /** Siblings start with different tokens: a path's copies draw their first token without replacement. */
  distinct: boolean;
  /** Repetition stop: an n-gram of this many tokens occurring `repetitionCount` times in the response (0 = off). */
  repetitionNgram: number;
  repetitionCount: number;
}

/** The state of an unfinished treepo tree, kept in `tree.meta.pending` between calls. */
export interface TreepoPending {
  /** Paths the next round extends: node id and copies. An `abort` node is resumed in place (1 copy). */
  live: Array<{ node: string; copies: number }>;
  /** Finished leaf ids in the order they finished (the fallback's draws depend on it). */
  finished: string[];
}

interface Live {
  /** Extended by `copies` new children, or continued in place when its finishReason is `abort`. */
  node: TreeNode;
  copies: number;
}

interface PromptState {
  tree: RolloutTree;
  live: Live[];
  finished: TreeNode[];
  /** KV handle of each node's state after its segment (this call only). */
  handles: Map<string, string>;
  /** Response tokens up to each node (filled lazily for nodes of earlier calls). */
  lengths: Map<string, number>;
  /** The tree was already complete when the call began (not counted in stats). */
  completeBefore: boolean;
  /** Leaves this tree ends with (the generator's G, or the input's groupSize). */
  G: number;
  /** Leaves it had when the call began (a grown-on tree's old leaves are not this call's trajectories). */
  leavesBefore: number;
}

/** One request of a round: a live path of one prompt. */
interface Job {
  state: PromptState;
  live: Live;
}

/** What one round did to one prompt. */
interface RoundOutcome {
  finished: number;
  continuing: TreeNode[];
  /** Segments the sampler aborted: continued in place later. */
  aborted: TreeNode[];
}

interface RoundContext {
  options: TreepoOptions;
  ctx: GenerateContext;
  maxDepth: number;
}

export function treepoGenerator(options: TreepoOptions): Generator {
  const G = options.groupSize;
  const b = options.branchingFactor;
  if (!(G >= 1 && b >= 1 && options.segmentLength >= 1))
    throw new ConfigError('treepo: groupSize, branchingFactor and segmentLength must be ≥ 1', 'generate');
  return {
    kind: 'treepo',
    groupSize: G,
    async grow(inputs: GenerateInput[], ctx: GenerateContext) {
      if (options.distinct && !ctx.sampler.capabilities.distinctFirstTokens) {
        throw new ConfigError(
          'treepo "distinct" needs a sampler that samples first tokens without replacement (the embedded engine)',
          'generate.distinct',
        );
      }
      if (options.allocation === 'high_entropy' && !ctx.sampler.capabilities.entropy) {
        throw new ConfigError(
          'treepo allocation "high_entropy" needs a sampler that reports entropy',
          'generate.allocation',
        );
      }
      const started = Date.now();
      const stats = emptyStats();
      const maxDepth =
        options.maxDepth > 0 ? options.maxDepth : Math.ceil(ctx.maxResponseTokens / options.segmentLength);
      const rc: RoundContext = { options, ctx, maxDepth };
      const states = inputs.map((input, i) => promptState(input, i, options, ctx.rng, ctx.treeIdPrefix));
      if (states.some((s) => s.G < 1)) throw new ConfigError('treepo: a per-prompt groupSize must be ≥ 1', 'allocate');
      for (let round = 0; ; round++) {
        const jobs: Job[] = [];
        for (const s of states) for (const l of s.live) jobs.push({ state: s, live: l });
        if (!jobs.length) break;
        if (ctx.stopAfterTrees !== undefined && states.filter(isDone).length >= ctx.stopAfterTrees) break;
        if (round > 10_000) throw new Error('treepo: no progress after 10000 rounds');
        const requests = jobs.map((job) => segmentRequest(job, rc));
        const results = await ctx.sampler.sample(requests, { signal: ctx.signal });
        stats.samplerCalls++;
        const outcomes = absorbRound(jobs, results, rc, stats);
        for (const [s, o] of outcomes) {
          prunePaths(s, o, round, ctx);
          s.live = nextLive(s, o, s.G, b, options, ctx);
        }
        // a cancelled sampler: further rounds would only abort again; the trees wait in meta.pending
        if (ctx.signal?.aborted || [...outcomes.values()].some((o) => o.aborted.length)) break;
      }
      for (const s of states) finishState(s, ctx.sampler, maxDepth);
      stats.trajectories = states
        .filter((s) => isDone(s) && !s.completeBefore)
        .reduce((sum, s) => sum + s.finished.length - s.leavesBefore, 0);
      stats.wallMs = Date.now() - started;
      return { trees: states.map((s) => s.tree), stats };
    },
  };
}

/** No live path left: the tree has its G leaves (F = G). */
function isDone(s: PromptState): boolean {
  return s.live.length === 0;
}

/** Response tokens up to `nodeId` (computed from the tree for nodes of an earlier call). */
function lengthOf(s: PromptState, nodeId: string): number {
  let length = s.lengths.get(nodeId);
  if (length === undefined) {
    length = responseTokens(s.tree, nodeId).length;
    s.lengths.set(nodeId, length);
  }
  return length;
}

/** The request extending one live path by a segment (or resuming its aborted segment). */
function segmentRequest({ state, live }: Job, { options, ctx }: RoundContext): SampleRequest {
  const used = lengthOf(state, live.node.id);
  const resumed = live.node.finishReason === 'abort' ? live.node.tokens.length : 0;
  return {
    tokens: prefixTokens(state.tree, live.node.id),
    cacheHandle: state.handles.get(live.node.id),
    n: live.copies,
    maxTokens: Math.max(1, Math.min(options.segmentLength - resumed, ctx.maxResponseTokens - used)),
    temperature: ctx.temperature,
    topP: ctx.topP,
    topK: ctx.topK,
    stopTokens: ctx.stopTokens,
    seed: ctx.rng.nextU32(),
    retain: true,
    distinctFirstTokens: options.distinct && live.copies > 1 ? true : undefined,
    returnEntropy: options.allocation === 'high_entropy' || !!ctx.quality?.wants?.entropy,
    ...(ctx.quality?.wants?.hidden ? { returnHidden: true } : {}),
    affinityKey: state.tree.id,
  };
}

/** Add every completion of a round to its tree and classify it: finished, continuing or aborted. */
function absorbRound(
  jobs: Job[],
  results: SampleResult[],
  rc: RoundContext,
  stats: GenerateStats,
): Map<PromptState, RoundOutcome> {
  // prompts in input order (jobs are), only those that took part in the round
  const outcomes = new Map<PromptState, RoundOutcome>(
    jobs.map((job) => [job.state, { finished: 0, continuing: [], aborted: [] }]),
  );
  results.forEach((result, j) => {
    addUsage(stats, result.usage);
    const { state, live } = jobs[j];
    const outcome = outcomes.get(state)!;
    for (const c of result.completions) {
      const node = growNode(state, live.node, c, result.weightVersion, rc.ctx.sampler);
      const reason = segmentFinish(state, node, c, rc);
      if (reason === 'abort') {
        node.finishReason = 'abort';
        outcome.aborted.push(node);
      } else if (reason) {
        node.finishReason = reason;
        state.finished.push(node);
        outcome.finished++;
      } else {
        outcome.continuing.push(node);
      }
    }
  });
  return outcomes;
}

/** A new child of `from`, or `from` itself continued in place when its segment had been aborted. */
function growNode(
  state: PromptState,
  from: TreeNode,
  c: SampleCompletion,
  weightVersion: number,
  sampler: Sampler,
): TreeNode {
  const segment = { tokens: c.tokens, logprobs: c.logprobs, entropies: c.entropies, hidden: c.hidden, weightVersion };
  const length = lengthOf(state, from.id) + c.tokens.length;
  const node =
    from.finishReason === 'abort' ? appendToNode(state.tree, from.id, segment) : addNode(state.tree, from.id, segment);
  state.lengths.set(node.id, length);
  if (c.cacheHandle) {
    const old = state.handles.get(node.id);
    if (old) sampler.release([old]);
    state.handles.set(node.id, c.cacheHandle);
  }
  return node;
}

/** Why a grown segment ends its path (null = it continues). */
function segmentFinish(
  state: PromptState,
  node: TreeNode,
  c: SampleCompletion,
  { options, ctx, maxDepth }: RoundContext,
): FinishReason | null {
  if (c.finishReason === 'stop') return 'stop';
  if (c.finishReason === 'abort') return 'abort';
  if (state.lengths.get(node.id)! >= ctx.maxResponseTokens) return 'length';
  if (node.depth >= maxDepth) return 'depth';
  return repeats(state.tree, node.id, options) ? 'repetition' : null;
}

/** The next round's live paths: budget transfer among survivors, or fallback; aborted segments resume. */
function nextLive(
  s: PromptState,
  o: RoundOutcome,
  G: number,
  b: number,
  options: TreepoOptions,
  ctx: GenerateContext,
): Live[] {
  const rng = ctx.rng;
  const paths = o.continuing;
  // an aborted segment still holds the slot of one future leaf
  const open = G - s.finished.length - o.aborted.length;
  let live: Live[] = [];
  if (paths.length) {
    const T = Math.max(paths.length, Math.min(open, b * o.finished + b * paths.length));
    const values =
      options.allocation === 'value'
        ? ctx.quality?.predict(
            s.tree,
            paths.map((p) => p.id),
          )
        : undefined;
    values?.forEach((v, i) => (paths[i].value = v));
    const counts = allocate(
      paths,
      T,
      values ? options : { ...options, allocation: options.allocation === 'value' ? 'fixed_avg' : options.allocation },
      values,
    );
    live = paths.map((node, i) => ({ node, copies: counts[i] }));
  } else if (open > 0 && !o.aborted.length) {
    live = fallback(s, open, b, rng);
  }
  return o.aborted.length ? live.concat(o.aborted.map((node) => ({ node, copies: 1 }))) : live;
}

/**
 * Online pruning (control/prune.ts through ctx.quality): continuing paths the hook prunes are removed
 * from the tree (their tokens stay counted as decoded; `meta.pruned` keeps the count), and their leaf
 * slots are freed: the group's target G shrinks by the pruned paths' share of the open slots.
 */
function prunePaths(s: PromptState, o: RoundOutcome, round: number, ctx: GenerateContext): void {
  const paths = o.continuing;
  if (!ctx.quality?.prune || paths.length < 2) return;
  const drop = ctx.quality.prune(
    s.tree,
    paths.map((p) => p.id),
    round,
  );
  if (!drop?.some(Boolean)) return;
  const open = s.G - s.finished.length - o.aborted.length;
  const pruned = paths.filter((_, i) => drop[i]);
  const meta = (s.tree.meta?.pruned as { paths: number; tokens: number } | undefined) ?? { paths: 0, tokens: 0 };
  for (const node of pruned) {
    const handle = s.handles.get(node.id);
    if (handle) ctx.sampler.release([handle]);
    s.handles.delete(node.id);
    removeLeaf(s.tree, node.id);
    meta.paths++;
    meta.tokens += node.tokens.length;
    // an internal node left without children would be an unfinished leaf: it goes too
    for (
      let up = s.tree.nodes[node.parent!];
      up.parent !== null && !up.children.length && up.finishReason === null;
      up = s.tree.nodes[up.parent]
    ) {
      removeLeaf(s.tree, up.id);
      meta.tokens += up.tokens.length;
    }
  }
  s.tree.meta = { ...s.tree.meta, pruned: meta };
  o.continuing = paths.filter((_, i) => !drop[i]);
  s.G -= Math.min(open - o.continuing.length, Math.floor((pruned.length * open) / paths.length));
}

/** Release the call's KV handles; save or clear the pending state. */
function finishState(s: PromptState, sampler: Sampler, maxDepth: number): void {
  sampler.release([...s.handles.values()]);
  const meta: Record<string, unknown> = { ...s.tree.meta, maxDepth };
  if (s.live.length)
    meta.pending = {
      live: s.live.map((l) => ({ node: l.node.id, copies: l.copies })),
      finished: s.finished.map((n) => n.id),
    } satisfies TreepoPending;
  else delete meta.pending;
  s.tree.meta = meta;
}

/**
 * A prompt's state: a fresh tree (draws its first-step copies), or an earlier call's tree restored
 * from `meta.pending`. A given tree without pending state is taken as it is (complete), unless
 * nothing was grown in it yet (then it starts like a fresh one, keeping its id).
 */
function promptState(
  input: GenerateInput,
  i: number,
  options: TreepoOptions,
  rng: Rng,
  treeIdPrefix: string,
): PromptState {
  const given = input.tree;
  const G = input.groupSize ?? options.groupSize;
  if (given?.meta?.pending !== undefined) return restoreState(given, given.meta.pending, G);
  if (given && given.nodes[ROOT_ID].children.length) {
    const finished = leaves(given);
    const state: PromptState = {
      tree: given,
      live: [],
      finished,
      handles: new Map(),
      lengths: new Map(),
      completeBefore: true,
      G,
      leavesBefore: finished.length,
    };
    // grown on (per-prompt allocation): the missing leaves come from the fallback's truncated copies
    if (finished.length < G)
      Object.assign(state, {
        completeBefore: false,
        live: fallback(state, G - finished.length, options.branchingFactor, rng),
      });
    return state;
  }
  const tree = given ?? createTree(`${treeIdPrefix}${i}`, input.item.id, input.promptTokens, { generator: 'treepo' });
  const d0 = initialCopies(options.initialDivergence, G, rng);
  return {
    tree,
    live: [{ node: tree.nodes[ROOT_ID], copies: d0 }],
    finished: [],
    handles: new Map(),
    lengths: new Map([[ROOT_ID, 0]]),
    completeBefore: false,
    G,
    leavesBefore: 0,
  };
}

/** Rebuild a prompt's state from an unfinished tree's `meta.pending`. */
function restoreState(tree: RolloutTree, raw: unknown, G: number): PromptState {
  const pending = raw as TreepoPending;
  const fail = (what: string) => new DataError(`treepo: tree ${tree.id}: meta.pending ${what}`);
  if (!pending || !Array.isArray(pending.live) || !Array.isArray(pending.finished))
    throw fail('must be {live: [{node, copies}], finished: [ids]}');
  const node = (id: string) => {
    const n = tree.nodes[id];
    if (!n) throw fail(`names node ${id}, which the tree does not have`);
    return n;
  };
  const live = pending.live.map((l) => {
    if (!(Number.isInteger(l.copies) && l.copies >= 1)) throw fail(`gives node ${l.node} ${l.copies} copies`);
    return { node: node(l.node), copies: l.copies };
  });
  return {
    tree,
    live,
    finished: pending.finished.map(node),
    handles: new Map(),
    lengths: new Map(),
    completeBefore: false,
    G,
    leavesBefore: 0,
  };
}

function initialCopies(spec: TreepoOptions['initialDivergence'], G: number, rng: Rng): number {
  if (typeof spec === 'number') return Math.max(1, Math.min(G, spec));
  const hi = Math.min(G, spec.max);
  const lo = Math.max(1, Math.min(hi, spec.min));
  return rng.intRange(lo, hi);
}

/** Split T ≥ n_c children among continuing paths; every path gets at least one. */
export function allocate(
  paths: TreeNode[],
  T: number,
  options: Pick<TreepoOptions, 'allocation' | 'allocationTemperature'>,
  values?: number[],
): number[] {
  const n = paths.length;
  if (options.allocation === 'value') {
    // value-driven: prefer paths whose predicted success is near 0.5 (mixed outcomes below them)
    if (!values || values.length !== n) throw new Error('treepo: value allocation needs one prediction per path');
    const w = values.map((v) => Math.exp(-Math.abs(v - 0.5) / options.allocationTemperature));
    const sum = w.reduce((a, c) => a + c, 0);
    return largestRemainder(
      w.map((v) => 1 + (v / sum) * (T - n)),
      T,
    );
  }
  if (options.allocation === 'fixed_avg') {
    const counts = new Array(n).fill(Math.floor(T / n));
    counts[n - 1] += T % n;
    return counts;
  }
  const x = paths.map((p) => {
    const values = options.allocation === 'high_entropy' ? (p.entropies ?? []) : p.logprobs;
    return values.length ? values.reduce((a, c) => a + c, 0) / values.length : 0;
  });
  const sign = options.allocation === 'low_prob' ? -1 : 1;
  const min = Math.min(...x);
  const z = x.map((v) => (sign * (v - min)) / options.allocationTemperature);
  const mx = Math.max(...z);
  const w = z.map((v) => Math.exp(v - mx));
  const sum = w.reduce((a, c) => a + c, 0);
  return largestRemainder(
    w.map((v) => 1 + (v / sum) * (T - n)),
    T,
  );
}

/** Fallback: new siblings grown from a random earlier segment boundary of naturally finished leaves. */
function fallback(s: PromptState, remaining: number, b: number, rng: Rng): Live[] {
  const candidates = rng.shuffle(s.finished.filter((n) => n.finishReason === 'stop'));
  const byNode = new Map<string, Live>();
  const add = (node: TreeNode, copies: number) => {
    const cur = byNode.get(node.id);
    if (cur) cur.copies += copies;
    else byNode.set(node.id, { node, copies });
  };
  if (!candidates.length) {
    add(s.tree.nodes['0'], remaining);
    return [...byNode.values()];
  }
  for (let i = 0; remaining > 0; i++) {
    const leaf = candidates[i % candidates.length];
    // ancestors at depth 0..D-1: the boundary strictly before the leaf's end (0 = the prompt)
    const k = rng.int(leaf.depth);
    let node = leaf;
    while (node.depth > k) node = s.tree.nodes[node.parent!];
    const copies = Math.min(b, remaining);
    add(node, copies);
    remaining -= copies;
  }
  return [...byNode.values()];
}

/** Degenerate repetition: some n-gram of the response occurs ≥ repetitionCount times. */
function repeats(tree: RolloutTree, nodeId: string, o: TreepoOptions): boolean {
  if (o.repetitionNgram <= 0 || o.repetitionCount <= 1) return false;
  const tokens = responseTokens(tree, nodeId);
  const counts = new Map<string, number>();
  const n = o.repetitionNgram;
  for (let i = 0; i + n <= tokens.length; i++) {
    const key = tokens.slice(i, i + n).join(',');
    const c = (counts.get(key) ?? 0) + 1;
    if (c >= o.repetitionCount) return true;
    counts.set(key, c);
  }
  return false;
}
