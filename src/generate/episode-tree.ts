/**
 * Gateway episodes → one RolloutTree per prompt, from ids
 * alone. The root is the longest common prompt prefix of the group; each episode is a private subtree below it.
 * A call's prompt follows the episode's existing path as far as its ids agree (through earlier prompts and
 * samples alike, the merge rule), splitting a node where it diverges inside one; the rest of the prompt
 * (mask 0) and the sampled ids (mask 1) become one new node, so sampled ids never merge. Trees are marked
 * `trainOnce` (core/tree.ts trajectory): a node shared by a fork trains on its owner leaf's path only.
 * This module renders nothing, decodes nothing and scores nothing; `checkEpisodeTree` verifies the result.
 */
import { callSequence, type EpisodeCall, type EpisodeRecord, type EpisodeToolCall } from '../core/episode.js';
import { DataError } from '../core/errors.js';
import {
  addNode,
  createTree,
  ROOT_ID,
  trajectories,
  type EpisodeInfo,
  type FinishReason,
  type RolloutTree,
} from '../core/tree.js';

/** Counters of one assembled group, written to `tree.meta.gateway`. */
export interface GatewayTreeStats {
  episodes: number;
  calls: number;
  /** Calls that extended no earlier call of their episode (see countForks), summed over episodes. */
  forks: number;
  /** Choices the client abandoned mid-stream (recorded as finish `length`). */
  aborted: number;
  /** Episodes that failed or made no call (each ends in an `error` node). */
  errors: number;
}

/** What checkEpisodeTree found. */
export interface EpisodeTreeCheck {
  /** Sampled ids recorded over all calls and choices. */
  sampled: number;
  /** Sampled ids trainable exactly once, after exactly their call's prompt and earlier samples, with their log-prob. */
  exact: number;
  /** One line per violation (empty for a token-exact tree); at most 100 lines, the last one counting the rest. */
  problems: string[];
}

/** A node under construction: mutable, children as objects, ids assigned when the tree is materialised. */
interface Draft {
  tokens: number[];
  logprobs: number[];
  mask: number[];
  finishReason: FinishReason | null;
  weightVersion: number;
  error?: string;
  children: Draft[];
  /** Creation order (a split's tail keeps its node's): equally long matches go to the newest node. */
  stamp: number;
}

/** Where a prompt's longest match along an episode's path ends: `at` tokens into `node`, `length` ids in all. */
interface Match {
  node: Draft;
  at: number;
  length: number;
}

/**
 * Assemble the G episode records of one prompt into one tree. Returns the tree and the number of forks.
 * Throws DataError naming the episode and call on a malformed record.
 */
export function assembleEpisodeTree(
  treeId: string,
  itemId: string,
  episodes: EpisodeRecord[],
  meta?: Record<string, unknown>,
): { tree: RolloutTree; forks: number } {
  const calls_E = episodes.map((record, e) => validateEpisode(record, e, episodes));
  const rootTokens = commonPrefix(calls_E.flat().map((c) => c.promptIds));
  const stats: GatewayTreeStats = { episodes: episodes.length, calls: 0, forks: 0, aborted: 0, errors: 0 };
  const clock = { stamp: 0 };
  const tops_E = episodes.map((record, e) => growEpisode(record, calls_E[e], rootTokens.length, clock, stats));
  const forks_E = calls_E.map((calls) => countForks(calls));
  stats.forks = forks_E.reduce((a, b) => a + b, 0);
  const tree = createTree(treeId, itemId, rootTokens, {
    generator: 'gateway',
    trainOnce: true,
    gateway: stats,
    ...meta,
  });
  episodes.forEach((record, e) => {
    const json = episodeInfoJSON(record, calls_E[e], forks_E[e]);
    materialise(tree, ROOT_ID, tops_E[e].children, () => JSON.parse(json) as EpisodeInfo);
  });
  return { tree, forks: stats.forks };
}

/**
 * An episode's private subtree: a node with no tokens standing for the root's end (its children hang
 * under the root), every call's choices inserted in order, and an error node if the episode failed.
 */
function growEpisode(
  record: EpisodeRecord,
  calls: EpisodeCall[],
  rootLength: number,
  clock: { stamp: number },
  stats: GatewayTreeStats,
): Draft {
  const top = draft([], [], [], null, 0, clock.stamp);
  let last = top;
  for (const call of calls) {
    for (const choice of call.choices) {
      const match = longestMatch(top, call.promptIds, rootLength);
      const parent = match.at < match.node.tokens.length ? splitDraft(match.node, match.at) : match.node;
      const context_T = call.promptIds.slice(match.length);
      last = draft(
        context_T.concat(choice.tokens),
        context_T.map(() => 0).concat(choice.logprobs),
        context_T.map(() => 0).concat(choice.tokens.map(() => 1)),
        choice.finishReason === 'stop' ? 'stop' : 'length', // abort: the client left; the tree stays complete
        call.weightVersion,
        ++clock.stamp,
      );
      parent.children.push(last);
      if (choice.finishReason === 'abort') stats.aborted++;
    }
  }
  if (record.error !== undefined || calls.length === 0) {
    const error = draft([], [], [], 'error', last.weightVersion, ++clock.stamp);
    error.error = `agent: ${record.error ?? 'the episode made no call to the gateway'}`;
    last.children.push(error);
    stats.errors++;
  }
  stats.calls += calls.length;
  return top;
}

function draft(
  tokens: number[],
  logprobs: number[],
  mask: number[],
  finishReason: FinishReason | null,
  weightVersion: number,
  stamp: number,
): Draft {
  return { tokens, logprobs, mask, finishReason, weightVersion, children: [], stamp };
}

/**
 * Forks of one episode: its calls, in index order, after the first whose prompt neither extends (as an id
 * prefix) the prompt + output of some choice of an earlier call nor equals an earlier call's prompt (a retry
 * or another sample of the same prompt is not a fork; neither are the extra choices of an `n > 1` call).
 */
export function countForks(calls: readonly EpisodeCall[]): number {
  const ordered = [...calls].sort((a, b) => a.index - b.index);
  let forks = 0;
  ordered.forEach((call, c) => {
    const earlier = ordered.slice(0, c);
    const extends_ = earlier.some(
      (e) =>
        sameIds(e.promptIds, call.promptIds) || e.choices.some((_, j) => isPrefix(callSequence(e, j), call.promptIds)),
    );
    if (c > 0 && !extends_) forks++;
  });
  return forks;
}

/** The longest common prefix of several id sequences ([] for none). */
export function commonPrefix(sequences: readonly number[][]): number[] {
  if (!sequences.length) return [];
  let n = sequences[0].length;
  for (const s of sequences) n = Math.min(n, prefixLength(sequences[0], s, 0, 0));
  return sequences[0].slice(0, n);
}

/** Ids `a[i0:]` and `b[j0:]` agree on this many leading positions. */
function prefixLength(a: readonly number[], b: readonly number[], i0: number, j0: number): number {
  let k = 0;
  while (i0 + k < a.length && j0 + k < b.length && a[i0 + k] === b[j0 + k]) k++;
  return k;
}

function isPrefix(prefix: readonly number[], of: readonly number[]): boolean {
  return prefix.length <= of.length && prefixLength(prefix, of, 0, 0) === prefix.length;
}

function sameIds(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && isPrefix(a, b);
}

/**
 * The longest match of `ids[from:]` along the paths below `node` (whose tokens matched up to `from`);
 * equally long matches: the most recently created node. Empty nodes are never entered.
 */
function longestMatch(node: Draft, ids: readonly number[], from: number): Match {
  let best: Match = { node, at: node.tokens.length, length: from };
  if (from >= ids.length) return best;
  for (const child of node.children) {
    if (child.tokens.length === 0 || child.tokens[0] !== ids[from]) continue;
    const k = prefixLength(child.tokens, ids, 0, from);
    const found =
      k === child.tokens.length ? longestMatch(child, ids, from + k) : { node: child, at: k, length: from + k };
    if (found.length > best.length || (found.length === best.length && found.node.stamp > best.node.stamp))
      best = found;
  }
  return best;
}

/** Split `node` at token `at` in place: it keeps [0, at) and its parent; a tail holds the rest and its children. */
function splitDraft(node: Draft, at: number): Draft {
  const tail: Draft = {
    tokens: node.tokens.slice(at),
    logprobs: node.logprobs.slice(at),
    mask: node.mask.slice(at),
    finishReason: node.finishReason,
    weightVersion: node.weightVersion,
    children: node.children,
    stamp: node.stamp,
  };
  if (node.error !== undefined) tail.error = node.error;
  node.tokens = node.tokens.slice(0, at);
  node.logprobs = node.logprobs.slice(0, at);
  node.mask = node.mask.slice(0, at);
  node.finishReason = null;
  delete node.error;
  node.children = [tail];
  return node;
}

/** Add `drafts` under `parentId` depth-first (ids follow core's `<parent>.<k>`); leaves get `info()`. */
function materialise(tree: RolloutTree, parentId: string, drafts: Draft[], info: () => EpisodeInfo): void {
  for (const draft of drafts) {
    const { children, stamp: _stamp, ...segment } = draft;
    const node = addNode(tree, parentId, segment);
    if (children.length) materialise(tree, node.id, children, info);
    else node.episode = info();
  }
}

/** The EpisodeInfo of every leaf of an episode, as JSON (each leaf parses its own copy: plain data, no aliasing). */
function episodeInfoJSON(record: EpisodeRecord, calls: EpisodeCall[], forks: number): string {
  const choices = calls.flatMap((c) => c.choices);
  const toolCalls: EpisodeToolCall[] = choices.flatMap((c) => c.toolCalls.map((t) => ({ ...t })));
  const last = calls[calls.length - 1];
  const info: EpisodeInfo = {
    finalAnswer: record.response ?? '',
    turns: calls.length,
    toolCalls: toolCalls.length,
    toolErrors: choices.filter((c) => c.toolParseFailed).length,
    end: 'answer',
    episodeId: record.episodeId,
    forks,
    calls: toolCalls,
  };
  if (last?.messages) info.messages = [...last.messages, ...(last.choices[0].message ? [last.choices[0].message] : [])];
  if (record.info !== undefined) info.info = record.info;
  return JSON.stringify(info);
}

const FINISH = new Set(['stop', 'length', 'abort']);

/** Check one record's shape; returns its calls in index order. */
function validateEpisode(record: EpisodeRecord, e: number, all: EpisodeRecord[]): EpisodeCall[] {
  const field = `episodes[${e}]`;
  const fail = (message: string, at = field): never => {
    throw new DataError(`episode ${String(record?.episodeId ?? e)}: ${message}`, undefined, undefined, at);
  };
  if (!record || typeof record.episodeId !== 'string') fail('the record has no string episodeId');
  if (all.findIndex((r) => r?.episodeId === record.episodeId) !== e) fail('the episodeId is used twice in the group');
  if (!Array.isArray(record.calls)) fail('field "calls" must be an array', `${field}.calls`);
  const seen = new Set<number>();
  record.calls.forEach((call, c) => {
    const at = `${field}.calls[${c}]`;
    const where = `call ${String(call?.index ?? c)}`;
    if (!call || !Number.isInteger(call.index) || call.index < 0 || seen.has(call.index))
      fail(`${where}: "index" must be a non-negative integer, unique in the episode`, `${at}.index`);
    seen.add(call.index);
    if (!isIds(call.promptIds)) fail(`${where}: "promptIds" must be an array of token ids`, `${at}.promptIds`);
    if (!Number.isFinite(call.weightVersion)) fail(`${where}: "weightVersion" must be a number`, `${at}.weightVersion`);
    if (!Array.isArray(call.choices) || !call.choices.length) fail(`${where}: no choices`, `${at}.choices`);
    call.choices.forEach((choice, j) => {
      const cat = `${at}.choices[${j}]`;
      if (!choice || !isIds(choice.tokens)) fail(`${where}: choice ${j} "tokens" must be token ids`, `${cat}.tokens`);
      const lp = choice.logprobs;
      if (!Array.isArray(lp) || lp.length !== choice.tokens.length || !lp.every((x) => Number.isFinite(x)))
        fail(`${where}: choice ${j} needs one finite log-prob per token (${choice.tokens.length})`, `${cat}.logprobs`);
      if (!FINISH.has(choice.finishReason))
        fail(`${where}: choice ${j} finishReason must be stop, length or abort`, `${cat}.finishReason`);
      if (!Array.isArray(choice.toolCalls))
        fail(`${where}: choice ${j} "toolCalls" must be an array`, `${cat}.toolCalls`);
    });
  });
  return [...record.calls].sort((a, b) => a.index - b.index);
}

function isIds(ids: unknown): ids is number[] {
  return Array.isArray(ids) && ids.every((t) => Number.isInteger(t) && t >= 0);
}

/**
 * Verify a gateway tree against the records it was assembled from. Every recorded sampled id must be
 * trainable (mask 1 in `trajectories(tree)`, trainOnce applied) exactly once, on a leaf of its own episode,
 * right after exactly its call's prompt and the choice's earlier ids, with its recorded log-prob; nothing
 * else may be trainable. Also checks each node's array lengths and log-prob 0 at mask 0, and that no
 * subtree below the root mixes episodes.
 */
export function checkEpisodeTree(tree: RolloutTree, episodes: EpisodeRecord[]): EpisodeTreeCheck {
  const problems: string[] = [];
  const tries = new Map<string, Trie>();
  // key `<trie node>:<log-prob>` → [times recorded, times trainable, where it was recorded]
  const counts = new Map<string, [number, number, string]>();
  let sampled = 0;
  for (const record of episodes) {
    const trie = new Trie();
    tries.set(record.episodeId, trie);
    for (const call of record.calls) {
      call.choices.forEach((choice, j) => {
        let at = trie.walk(0, call.promptIds, true);
        choice.tokens.forEach((t, i) => {
          at = trie.step(at, t, true);
          const key = `${record.episodeId}/${at}:${choice.logprobs[i]}`;
          const count = counts.get(key) ?? [
            0,
            0,
            `episode ${record.episodeId} call ${call.index} choice ${j} token ${i}`,
          ];
          count[0]++;
          counts.set(key, count);
          sampled++;
        });
      });
    }
  }
  for (const n of Object.values(tree.nodes)) {
    if (n.logprobs.length !== n.tokens.length || n.mask.length !== n.tokens.length)
      problems.push(`node ${n.id}: ${n.tokens.length} tokens, ${n.logprobs.length} log-probs, ${n.mask.length} mask`);
    else if (n.mask.some((m, i) => m === 0 && n.logprobs[i] !== 0))
      problems.push(`node ${n.id}: log-prob ≠ 0 at mask 0`);
  }
  const episodeOf = new Map<string, string | undefined>();
  for (const tr of trajectories(tree)) {
    const id = tree.nodes[tr.leafId].episode?.episodeId;
    const top = tr.nodeIds[1];
    if (episodeOf.has(top) && episodeOf.get(top) !== id) problems.push(`subtree ${top} holds several episodes`);
    episodeOf.set(top, id);
    const trie = id === undefined ? undefined : tries.get(id);
    let at: number | undefined = trie ? trie.walk(0, tr.promptTokens, false) : undefined;
    tr.tokens.forEach((t, i) => {
      at = at === undefined ? undefined : trie!.step(at, t, false);
      if (tr.mask[i] !== 1) return;
      const count = at === undefined ? undefined : counts.get(`${id}/${at}:${tr.logprobs[i]}`);
      if (count) count[1]++;
      else
        problems.push(`leaf ${tr.leafId} token ${i} (id ${t}): trainable but not sampled there (or another log-prob)`);
    });
  }
  let exact = 0;
  for (const [recorded, trainable, where] of counts.values()) {
    exact += trainable <= recorded ? trainable : 0;
    if (trainable !== recorded) problems.push(`${where}: trainable ${trainable} times (recorded ${recorded})`);
  }
  if (problems.length > 100) problems.splice(99, problems.length, `... and ${problems.length - 99} more`);
  return { sampled, exact, problems };
}

/** A trie over id sequences (node 0 = the empty prefix): a node id names one exact prefix. */
class Trie {
  private readonly next: Array<Map<number, number>> = [new Map()];

  /** The node after `id` from `at`; created when `create`, else undefined when absent. */
  step(at: number, id: number, create: true): number;
  step(at: number, id: number, create: boolean): number | undefined;
  step(at: number, id: number, create: boolean): number | undefined {
    const found = this.next[at].get(id);
    if (found !== undefined || !create) return found;
    this.next.push(new Map());
    this.next[at].set(id, this.next.length - 1);
    return this.next.length - 1;
  }

  /** The node after `ids` from `at` (see step). */
  walk(at: number, ids: readonly number[], create: true): number;
  walk(at: number, ids: readonly number[], create: boolean): number | undefined;
  walk(at: number, ids: readonly number[], create: boolean): number | undefined {
    let cur: number | undefined = at;
    for (const id of ids) if (cur !== undefined) cur = this.step(cur, id, create);
    return cur;
  }
}
