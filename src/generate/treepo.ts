/**
 * `treepo` (TreePO segment trees; see specs/treepo-reference.md §1.4). Every round, each live path of
 * every prompt is extended by one segment of L tokens, all in ONE sampler call; a path with k queued
 * copies is one request with n = k from the path's cached KV (cacheHandle), so shared prefixes are
 * computed once. After a round, finished paths (stop token, max length, depth, repetition) give their
 * branching budget to survivors: T = max(n_c, min(G − F, b·f_s + b·n_c)), split by `allocation`.
 * When a prompt has no live path but F < G, fallback truncates copies of naturally finished leaves at
 * a random earlier segment boundary (0 = the prompt) and grows new siblings from the TRUNCATED prefix
 * (the reference's stale-context bug is not reproduced), so every prompt ends with exactly G leaves.
 * Partial rollouts: with `stopAfterTrees`, the call stops BETWEEN rounds once that many trees are
 * complete; each unfinished tree keeps its live paths in `meta.pending` ({live: [{node, copies}],
 * finished: [ids]}) and a later call continues it from there (its prefix is re-sent: KV handles do not
 * outlive the call, and the weights may have changed).
 */
import { addNode, createTree, prefixTokens, type RolloutTree, type TreeNode } from '../core/tree.js';
import { DataError } from '../core/errors.js';
import type { Rng } from '../core/rng.js';
import { ConfigError } from '../core/errors.js';
import type { SampleRequest } from '../engine/types.js';
import { addUsage, emptyStats, type GenerateContext, type GenerateInput, type Generator } from './types.js';

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
  allocation: 'fixed_avg' | 'low_prob' | 'high_prob' | 'high_entropy';
  /** Softmax temperature τ of the probability/entropy-driven allocations. */
  allocationTemperature: number;
  /** Repetition stop: an n-gram of this many tokens occurring `repetitionCount` times in the response (0 = off). */
  repetitionNgram: number;
  repetitionCount: number;
}

interface Live {
  node: TreeNode;
  copies: number;
}

interface PromptState {
  tree: RolloutTree;
  prompt: number[];
  live: Live[];
  finished: TreeNode[];
  /** KV handle of each node's state after its segment. */
  handles: Map<string, string>;
  /** Response tokens up to each node. */
  lengths: Map<string, number>;
}

export function treepoGenerator(options: TreepoOptions): Generator {
  const G = options.groupSize;
  const b = options.branchingFactor;
  if (!(G >= 1 && b >= 1 && options.segmentLength >= 1)) throw new ConfigError('treepo: groupSize, branchingFactor and segmentLength must be ≥ 1', 'generate');
  return {
    kind: 'treepo',
    groupSize: G,
    async grow(inputs: GenerateInput[], ctx: GenerateContext) {
      if (options.allocation === 'high_entropy' && !ctx.sampler.capabilities.entropy) {
        throw new ConfigError('treepo allocation "high_entropy" needs a sampler that reports entropy', 'generate.allocation');
      }
      const started = Date.now();
      const stats = emptyStats();
      const maxDepth = options.maxDepth > 0 ? options.maxDepth : Math.ceil(ctx.maxResponseTokens / options.segmentLength);
      const states: PromptState[] = inputs.map((input, i) => {
        if (input.tree) return restoreState(input.tree, input.promptTokens);
        const tree = createTree(`${ctx.treeIdPrefix}${i}`, input.item.id, input.promptTokens, { generator: 'treepo' });
        const d0 = initialCopies(options.initialDivergence, G, ctx.rng);
        return { tree, prompt: input.promptTokens, live: [{ node: tree.nodes['0'], copies: d0 }], finished: [], handles: new Map(), lengths: new Map([['0', 0]]) };
      });
      for (let round = 0; ; round++) {
        if (ctx.stopAfterTrees !== undefined && states.filter((s) => !s.live.length).length >= ctx.stopAfterTrees) break;
        const jobs: Array<{ state: PromptState; live: Live }> = [];
        for (const s of states) for (const l of s.live) jobs.push({ state: s, live: l });
        if (!jobs.length) break;
        if (round > 10_000) throw new Error('treepo: no progress after 10000 rounds');
        const requests: SampleRequest[] = jobs.map(({ state, live }) => {
          const used = state.lengths.get(live.node.id)!;
          return {
            tokens: prefixTokens(state.tree, live.node.id),
            cacheHandle: state.handles.get(live.node.id),
            n: live.copies,
            maxTokens: Math.min(options.segmentLength, ctx.maxResponseTokens - used),
            temperature: ctx.temperature,
            topP: ctx.topP,
            topK: ctx.topK,
            stopTokens: ctx.stopTokens,
            seed: ctx.rng.nextU32(),
            retain: true,
            returnEntropy: options.allocation === 'high_entropy',
            affinityKey: state.tree.id,
          };
        });
        const results = await ctx.sampler.sample(requests, { signal: ctx.signal });
        stats.samplerCalls++;
        const roundFinished = new Map<PromptState, number>();
        const continuing = new Map<PromptState, TreeNode[]>();
        for (const s of states) {
          s.live = [];
          roundFinished.set(s, 0);
          continuing.set(s, []);
        }
        results.forEach((result, j) => {
          addUsage(stats, result.usage);
          const { state, live } = jobs[j];
          for (const c of result.completions) {
            const node = addNode(state.tree, live.node.id, { tokens: c.tokens, logprobs: c.logprobs, entropies: c.entropies, weightVersion: result.weightVersion });
            if (c.cacheHandle) state.handles.set(node.id, c.cacheHandle);
            const length = state.lengths.get(live.node.id)! + c.tokens.length;
            state.lengths.set(node.id, length);
            const reason = c.finishReason === 'stop' ? 'stop' : c.finishReason === 'abort' ? 'abort'
              : length >= ctx.maxResponseTokens ? 'length'
              : node.depth >= maxDepth ? 'depth'
              : repeats(state.tree, node.id, options) ? 'repetition' : null;
            if (reason) {
              node.finishReason = reason;
              state.finished.push(node);
              roundFinished.set(state, roundFinished.get(state)! + 1);
            } else {
              continuing.get(state)!.push(node);
            }
          }
        });
        for (const s of states) {
          const paths = continuing.get(s)!;
          const F = s.finished.length;
          if (paths.length) {
            const T = Math.max(paths.length, Math.min(G - F, b * roundFinished.get(s)! + b * paths.length));
            const counts = allocate(paths, T, options);
            s.live = paths.map((node, i) => ({ node, copies: counts[i] }));
          } else if (F < G) {
            s.live = fallback(s, G - F, b, ctx.rng);
          }
        }
      }
      for (const s of states) {
        ctx.sampler.release([...s.handles.values()]);
        const { pending: _, ...meta } = s.tree.meta ?? {};
        s.tree.meta = s.live.length ? { ...meta, maxDepth, pending: { live: s.live.map((l) => ({ node: l.node.id, copies: l.copies })), finished: s.finished.map((n) => n.id) } } : { ...meta, maxDepth };
      }
      stats.trajectories = states.filter((s) => !s.live.length).reduce((sum, s) => sum + s.finished.length, 0);
      stats.wallMs = Date.now() - started;
      return { trees: states.map((s) => s.tree), stats };
    },
  };
}

/** Rebuild a prompt's state from an unfinished tree's `meta.pending` (lengths recomputed from its tokens). */
function restoreState(tree: RolloutTree, prompt: number[]): PromptState {
  const pending = tree.meta?.pending as { live: Array<{ node: string; copies: number }>; finished: string[] } | undefined;
  if (!pending || !Array.isArray(pending.live) || !Array.isArray(pending.finished)) throw new DataError(`treepo: tree ${tree.id} has no pending state to continue (meta.pending)`);
  const lengths = new Map<string, number>();
  for (const n of Object.values(tree.nodes)) lengths.set(n.id, n.parent === null ? 0 : lengths.get(n.parent)! + n.tokens.length);
  const node = (id: string) => {
    const n = tree.nodes[id];
    if (!n) throw new DataError(`treepo: tree ${tree.id}: pending node ${id} does not exist`);
    return n;
  };
  return { tree, prompt, live: pending.live.map((l) => ({ node: node(l.node), copies: l.copies })), finished: pending.finished.map(node), handles: new Map(), lengths };
}

function initialCopies(spec: TreepoOptions['initialDivergence'], G: number, rng: Rng): number {
  if (typeof spec === 'number') return Math.max(1, Math.min(G, spec));
  const hi = Math.min(G, spec.max);
  const lo = Math.max(1, Math.min(hi, spec.min));
  return rng.intRange(lo, hi);
}

/** Split T ≥ n_c children among continuing paths; every path gets at least one. */
export function allocate(paths: TreeNode[], T: number, options: Pick<TreepoOptions, 'allocation' | 'allocationTemperature'>): number[] {
  const n = paths.length;
  if (options.allocation === 'fixed_avg') {
    const counts = new Array(n).fill(Math.floor(T / n));
    counts[n - 1] += T % n;
    return counts;
  }
  const x = paths.map((p) => {
    const values = options.allocation === 'high_entropy' ? p.entropies ?? [] : p.logprobs;
    return values.length ? values.reduce((a, c) => a + c, 0) / values.length : 0;
  });
  const sign = options.allocation === 'low_prob' ? -1 : 1;
  const min = Math.min(...x);
  const z = x.map((v) => (sign * (v - min)) / options.allocationTemperature);
  const mx = Math.max(...z);
  const w = z.map((v) => Math.exp(v - mx));
  const sum = w.reduce((a, c) => a + c, 0);
  const extra = T - n;
  const exact = w.map((v) => (v / sum) * extra);
  const counts = exact.map((v) => 1 + Math.floor(v));
  let left = T - counts.reduce((a, c) => a + c, 0);
  const order = exact.map((v, i) => [v - Math.floor(v), i] as const).sort((a, c) => c[0] - a[0] || a[1] - c[1]);
  for (const [, i] of order) {
    if (left <= 0) break;
    counts[i]++;
    left--;
  }
  return counts;
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
  const tokens: number[] = [];
  let cur: TreeNode | undefined = tree.nodes[nodeId];
  const chain: TreeNode[] = [];
  while (cur && cur.parent !== null) {
    chain.push(cur);
    cur = tree.nodes[cur.parent];
  }
  for (let i = chain.length - 1; i >= 0; i--) tokens.push(...chain[i].tokens);
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
