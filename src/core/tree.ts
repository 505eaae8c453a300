/**
 * The rollout tree: one per prompt. The root holds the prompt tokens (mask 0); every other node holds
 * one segment the policy (or the environment, mask 0) appended. A trajectory is a root-to-leaf path.
 * Trees are plain JSON-serialisable data; helpers here build, walk, and (de)serialise them. This
 * module does no sampling and no scoring.
 */
import type { EpisodeToolCall } from './episode.js';
import { DataError } from './errors.js';

/**
 * Why a node stopped growing.
 * - `stop`: a stop/EOS token was produced.
 * - `length`: the response hit its maximum length.
 * - `depth`: the tree's depth limit was reached.
 * - `repetition`: degenerate repetition was detected.
 * - `abort`: cancelled (partial rollout, shutdown).
 * - `error`: the engine or environment failed for this node (see `error`).
 */
export type FinishReason = 'stop' | 'length' | 'depth' | 'repetition' | 'abort' | 'error';

export interface TreeNode {
  /** Unique within its tree; the root is `"0"`, children are `<parent>.<k>`. */
  id: string;
  /** Parent id; null for the root. */
  parent: string | null;
  /** Number of segments from the root (root = 0). */
  depth: number;
  /** Token ids appended by this node (the prompt, for the root). */
  tokens: number[];
  /** Sampling log-probability of each token (0 where not sampled, e.g. prompt/environment). */
  logprobs: number[];
  /** Per-token entropy of the sampling distribution, when the engine reported it. */
  entropies?: number[];
  /** 1 = produced by the policy and trainable, 0 = prompt / environment observation. */
  mask: number[];
  /** Null while still growing. */
  finishReason: FinishReason | null;
  /** Version of the policy weights that produced this segment (its first token, when `versions` is set). */
  weightVersion: number;
  /**
   * Per-token weight versions, set only when a segment was continued under newer weights (a partial
   * rollout aborted in one step and resumed in a later one); shape [T]. Absent = all `weightVersion`.
   */
  versions?: number[];
  /** Child ids in creation order. */
  children: string[];
  /** Reward of the trajectory ending here (leaves only, after Filter). */
  reward?: number;
  /** Per-component rewards and notes from the Filter stage. */
  rewardInfo?: { components: Record<string, number>; info?: Record<string, unknown> };
  /** Value estimate (e.g. mean reward of the subtree, or a learned prediction). */
  value?: number;
  /**
   * The sampler's last hidden state at this node's end (the activation its last token was sampled
   * from), when a generator asked for it (`SampleRequest.returnHidden`; the quality head's feature on
   * the embedded engine). Not written to `trees/step-N.jsonl` (see `treeForLog`).
   */
  hidden?: number[];
  /** Human-readable reason when finishReason is `error`. */
  error?: string;
  /** Multi-turn episodes (agent generator): what the episode ending at this leaf did. */
  episode?: EpisodeInfo;
}

/**
 * A finished agent episode, recorded on its leaf (generate/agent.ts, generate/episode-tree.ts) and read by
 * the Filter stage. Every leaf of one gateway episode carries the same values (they are scored alike).
 */
export interface EpisodeInfo {
  /** The final answer the format extracted from the last policy turn ('' when the episode ended without one). */
  finalAnswer: string;
  /** Sum of the rewards the environment gave along the path (absent when it gave none). */
  envReward?: number;
  /** Policy turns on the path (gateway episodes: calls the agent made). */
  turns: number;
  /** Tool calls the policy made (gateway episodes: tool calls returned over the whole episode). */
  toolCalls: number;
  /** Tool calls that failed to parse or run (gateway episodes: choices whose tool-call markup did not parse). */
  toolErrors: number;
  /** Why the episode ended: the policy answered, the environment ended it, or a limit was hit. */
  end: 'answer' | 'env_done' | 'max_turns' | 'max_tokens' | 'timeout';
  /** Gateway episodes: the episode's id (`EpisodeRecord.episodeId`). */
  episodeId?: string;
  /** Gateway episodes: calls whose prompt extended no earlier call's prompt and output (forks of the episode). */
  forks?: number;
  /** Gateway episodes: the conversation as the gateway last saw it (last request's messages + its reply). */
  messages?: Array<Record<string, unknown>>;
  /** Gateway episodes: every tool call returned during the episode, in call and choice order. */
  calls?: EpisodeToolCall[];
  /** Gateway episodes: what the agent returned besides its answer (`EpisodeRecord.info`). */
  info?: Record<string, unknown>;
}

export interface RolloutTree {
  /** Unique id of this tree (e.g. `step3/p17`). */
  id: string;
  /** Id of the task item (prompt) this tree was grown from. */
  itemId: string;
  /** All nodes by id; `nodes["0"]` is the root. */
  nodes: Record<string, TreeNode>;
  /**
   * Free-form metadata (generator name, usage counters...). `trainOnce: true` (gateway trees) changes
   * what a trajectory trains on: each node's policy tokens count only on its owner leaf's path (see trajectory).
   */
  meta?: Record<string, unknown>;
}

/** A root-to-leaf path flattened into token arrays (prompt first). */
export interface Trajectory {
  treeId: string;
  itemId: string;
  leafId: string;
  /** Node ids from the root to the leaf. */
  nodeIds: string[];
  /** Prompt tokens (root). */
  promptTokens: number[];
  /** Response tokens (all non-root segments concatenated); shape [T]. */
  tokens: number[];
  /** Sampling log-probs of `tokens` (0 where the mask is 0); shape [T]. */
  logprobs: number[];
  /** Trainable mask of `tokens` (a node's mask, or 0 off its owner leaf's path in a trainOnce tree); shape [T]. */
  mask: number[];
  /** Weight version per response token; shape [T]. */
  weightVersions: number[];
  finishReason: FinishReason | null;
  reward: number | undefined;
}

export const ROOT_ID = '0';

export function createTree(
  id: string,
  itemId: string,
  promptTokens: number[],
  meta?: Record<string, unknown>,
): RolloutTree {
  const root: TreeNode = {
    id: ROOT_ID,
    parent: null,
    depth: 0,
    tokens: promptTokens.slice(),
    logprobs: promptTokens.map(() => 0),
    mask: promptTokens.map(() => 0),
    finishReason: null,
    weightVersion: 0,
    children: [],
  };
  return { id, itemId, nodes: { [ROOT_ID]: root }, meta: meta ?? {} };
}

export interface SegmentInput {
  tokens: number[];
  logprobs?: number[];
  entropies?: number[];
  mask?: number[];
  finishReason?: FinishReason | null;
  weightVersion?: number;
  error?: string;
  hidden?: number[];
}

/** Append a child segment under `parentId`; returns the new node. */
export function addNode(tree: RolloutTree, parentId: string, segment: SegmentInput): TreeNode {
  const parent = tree.nodes[parentId];
  if (!parent) throw new DataError(`tree ${tree.id}: no node ${parentId}`);
  const T = segment.tokens.length;
  const logprobs = segment.logprobs ?? new Array(T).fill(0);
  const mask = segment.mask ?? new Array(T).fill(1);
  if (logprobs.length !== T || mask.length !== T || (segment.entropies && segment.entropies.length !== T)) {
    throw new DataError(`tree ${tree.id}: segment arrays must all have length ${T}`);
  }
  let k = parent.children.length;
  while (tree.nodes[`${parentId}.${k}`]) k++;
  const node: TreeNode = {
    id: `${parentId}.${k}`,
    parent: parentId,
    depth: parent.depth + 1,
    tokens: segment.tokens.slice(),
    logprobs: logprobs.slice(),
    mask: mask.slice(),
    finishReason: segment.finishReason ?? null,
    weightVersion: segment.weightVersion ?? 0,
    children: [],
  };
  if (segment.entropies) node.entropies = segment.entropies.slice();
  if (segment.error !== undefined) node.error = segment.error;
  if (segment.hidden) node.hidden = segment.hidden.slice();
  tree.nodes[node.id] = node;
  parent.children.push(node.id);
  return node;
}

/**
 * Continue an unfinished node in place (partial rollouts): append tokens produced under
 * `segment.weightVersion`, keeping per-token versions when they differ from the node's, and set the
 * node's new finish reason. The node keeps its id, so the tree's shape equals an uninterrupted run's.
 */
export function appendToNode(tree: RolloutTree, nodeId: string, segment: SegmentInput): TreeNode {
  const node = tree.nodes[nodeId];
  if (!node) throw new DataError(`tree ${tree.id}: no node ${nodeId}`);
  if (node.parent === null) throw new DataError(`tree ${tree.id}: cannot append to the root`);
  const T = segment.tokens.length;
  const logprobs = segment.logprobs ?? new Array(T).fill(0);
  const mask = segment.mask ?? new Array(T).fill(1);
  if (logprobs.length !== T || mask.length !== T || (segment.entropies && segment.entropies.length !== T)) {
    throw new DataError(`tree ${tree.id}: segment arrays must all have length ${T}`);
  }
  const version = segment.weightVersion ?? node.weightVersion;
  if (node.tokens.length === 0 && !node.versions) node.weightVersion = version;
  if (node.versions || version !== node.weightVersion) {
    node.versions = node.versions ?? node.tokens.map(() => node.weightVersion);
    for (let i = 0; i < T; i++) node.versions.push(version);
  }
  node.tokens.push(...segment.tokens);
  node.logprobs.push(...logprobs);
  node.mask.push(...mask);
  if (node.entropies || segment.entropies) {
    node.entropies = node.entropies ?? [];
    node.entropies.push(...(segment.entropies ?? new Array(T).fill(0)));
  }
  node.finishReason = segment.finishReason ?? null;
  if (segment.error !== undefined) node.error = segment.error;
  // the state at the node's new end (a continued segment's old one no longer describes it)
  if (segment.hidden) node.hidden = segment.hidden.slice();
  else delete node.hidden;
  return node;
}

/**
 * Split a childless node at token `at` (0 < at < length): the node keeps tokens [0, at) and becomes
 * internal; a new child holds the rest with its log-probs, entropies, mask, versions and finish
 * reason. Lets a generator branch in the middle of a decoded segment (LATR) while shared prefixes stay
 * shared nodes. Returns the new child.
 */
export function splitLeaf(tree: RolloutTree, nodeId: string, at: number): TreeNode {
  const node = tree.nodes[nodeId];
  if (!node || node.parent === null) throw new DataError(`tree ${tree.id}: cannot split ${nodeId}`);
  if (node.children.length)
    throw new DataError(`tree ${tree.id}: node ${nodeId} has children; only a leaf can be split`);
  if (!(Number.isInteger(at) && at > 0 && at < node.tokens.length))
    throw new DataError(`tree ${tree.id}: split of ${nodeId} at ${at} outside (0, ${node.tokens.length})`);
  const tail = addNode(tree, nodeId, {
    tokens: node.tokens.slice(at),
    logprobs: node.logprobs.slice(at),
    entropies: node.entropies?.slice(at),
    mask: node.mask.slice(at),
    finishReason: node.finishReason,
    weightVersion: node.versions ? node.versions[at] : node.weightVersion,
    error: node.error,
    hidden: node.hidden,
  });
  if (node.versions) tail.versions = node.versions.slice(at);
  node.tokens = node.tokens.slice(0, at);
  node.logprobs = node.logprobs.slice(0, at);
  node.mask = node.mask.slice(0, at);
  if (node.entropies) node.entropies = node.entropies.slice(0, at);
  if (node.versions) node.versions = node.versions.slice(0, at);
  node.finishReason = null;
  delete node.error;
  delete node.hidden; // the state at the split point was never returned
  return tail;
}

/** Remove a childless non-root node (online pruning); returns it. */
export function removeLeaf(tree: RolloutTree, nodeId: string): TreeNode {
  const node = tree.nodes[nodeId];
  if (!node || node.parent === null || node.children.length)
    throw new DataError(`tree ${tree.id}: cannot remove ${nodeId} (absent, the root, or not a leaf)`);
  const parent = tree.nodes[node.parent];
  parent.children = parent.children.filter((c) => c !== nodeId);
  delete tree.nodes[nodeId];
  return node;
}

/** Weight version of every policy token of the tree (each node's tokens counted once). */
export function tokenVersions(tree: RolloutTree): number[] {
  const out: number[] = [];
  for (const n of Object.values(tree.nodes)) {
    if (n.parent === null) continue;
    for (let i = 0; i < n.tokens.length; i++) if (n.mask[i]) out.push(n.versions ? n.versions[i] : n.weightVersion);
  }
  return out;
}

/**
 * A tree is complete when it has at least one leaf, every leaf has a final finish reason (not null,
 * not `abort`), and no generator state is pending (`meta.pending`). Incomplete trees are partial
 * rollouts to be continued; `error` leaves count as final (the tree is then unusable, see hasError).
 */
export function isComplete(tree: RolloutTree): boolean {
  if (tree.meta?.pending !== undefined) return false;
  const ls = leaves(tree);
  return ls.length > 0 && ls.every((l) => l.finishReason !== null && l.finishReason !== 'abort');
}

/** True when some node of the tree failed (engine or reward error): the tree is not trained on. */
export function hasError(tree: RolloutTree): boolean {
  return Object.values(tree.nodes).some((n) => n.finishReason === 'error');
}

/** Response tokens (all non-root segments) from the root to `nodeId`. */
export function responseTokens(tree: RolloutTree, nodeId: string): number[] {
  const out: number[] = [];
  for (const n of pathTo(tree, nodeId)) if (n.parent !== null) for (const t of n.tokens) out.push(t);
  return out;
}

export function root(tree: RolloutTree): TreeNode {
  return tree.nodes[ROOT_ID];
}

/** Leaves (nodes without children, excluding a childless root), in id-creation order. */
export function leaves(tree: RolloutTree): TreeNode[] {
  return Object.values(tree.nodes).filter((n) => n.parent !== null && n.children.length === 0);
}

/** Nodes from the root to `nodeId`, inclusive. */
export function pathTo(tree: RolloutTree, nodeId: string): TreeNode[] {
  const out: TreeNode[] = [];
  let cur: TreeNode | undefined = tree.nodes[nodeId];
  if (!cur) throw new DataError(`tree ${tree.id}: no node ${nodeId}`);
  while (cur) {
    out.push(cur);
    cur = cur.parent === null ? undefined : tree.nodes[cur.parent];
  }
  return out.reverse();
}

/** All tokens (prompt + response) from the root to `nodeId`. */
export function prefixTokens(tree: RolloutTree, nodeId: string): number[] {
  const out: number[] = [];
  for (const n of pathTo(tree, nodeId)) for (const t of n.tokens) out.push(t);
  return out;
}

/**
 * Hint rescue (control/hint.ts) marks a tree grown with a hint in `meta.hint`. A `response` hint is
 * the start of the response, placed at the end of the root's context: it is scored as part of the
 * response and stays in the training context (never trained on). A `context` hint (a solved example
 * before the prompt) is dropped for training: `meta.trainPrompt` holds the hint-free prompt tokens,
 * which become the trajectory's prompt, so the loss's ratio is π_θ(o|q) / π_behaviour(o|q,h).
 */
export interface TreeHint {
  kind: 'response' | 'context';
  text: string;
  /** Tokens the hint added to the root's context. */
  tokens: number;
}

export function treeHint(tree: RolloutTree): TreeHint | undefined {
  const h = tree.meta?.hint as TreeHint | undefined;
  return h && (h.kind === 'response' || h.kind === 'context') && typeof h.text === 'string' ? h : undefined;
}

/** The hint-free prompt a context-hinted tree trains on (undefined: train on the root's tokens). */
export function trainPrompt(tree: RolloutTree): number[] | undefined {
  const p = tree.meta?.trainPrompt;
  return Array.isArray(p) && p.every((t) => Number.isInteger(t)) ? (p as number[]).slice() : undefined;
}

/** True when the tree trains each policy token once (`meta.trainOnce === true`, gateway trees; see trajectory). */
export function trainsOnce(tree: RolloutTree): boolean {
  return tree.meta?.trainOnce === true;
}

/** The owner leaf of a node: the leaf reached from it by always following `children[0]` (a leaf owns itself). */
export function ownerLeaf(tree: RolloutTree, nodeId: string): TreeNode {
  let node = tree.nodes[nodeId];
  if (!node) throw new DataError(`tree ${tree.id}: no node ${nodeId}`);
  while (node.children.length) node = tree.nodes[node.children[0]];
  return node;
}

/**
 * Flatten the path to `leafId` into a trajectory (its prompt: the training context, see TreeHint).
 * In a trainOnce tree (`meta.trainOnce === true`) a node shared by several leaves trains its policy
 * tokens on one path only, its owner leaf's (see ownerLeaf): on every other path through it they are
 * context, mask 0 and log-prob 0. Without the flag every path trains every mask-1 token it holds.
 */
export function trajectory(tree: RolloutTree, leafId: string): Trajectory {
  const path = pathTo(tree, leafId);
  const [rootNode, ...segments] = path;
  // owned[k]: the leaf is segments[k]'s owner, i.e. the path follows children[0] from segments[k] down
  const owned = segments.map(() => true);
  if (trainsOnce(tree))
    for (let k = segments.length - 2; k >= 0; k--)
      owned[k] = owned[k + 1] && segments[k].children[0] === segments[k + 1].id;
  const tokens: number[] = [];
  const logprobs: number[] = [];
  const mask: number[] = [];
  const weightVersions: number[] = [];
  segments.forEach((n, k) => {
    for (let i = 0; i < n.tokens.length; i++) {
      const keep = owned[k] || n.mask[i] === 0; // else a policy token another path trains: context here
      tokens.push(n.tokens[i]);
      logprobs.push(keep ? n.logprobs[i] : 0);
      mask.push(keep ? n.mask[i] : 0);
      weightVersions.push(n.versions ? n.versions[i] : n.weightVersion);
    }
  });
  const leaf = path[path.length - 1];
  return {
    treeId: tree.id,
    itemId: tree.itemId,
    leafId,
    nodeIds: path.map((n) => n.id),
    promptTokens: trainPrompt(tree) ?? rootNode.tokens.slice(),
    tokens,
    logprobs,
    mask,
    weightVersions,
    finishReason: leaf.finishReason,
    reward: leaf.reward,
  };
}

/** Every leaf's trajectory. */
export function trajectories(tree: RolloutTree): Trajectory[] {
  return leaves(tree).map((l) => trajectory(tree, l.id));
}

/** Tokens generated in this tree (non-root segments, each counted once even if shared by leaves). */
export function generatedTokenCount(tree: RolloutTree): number {
  let total = 0;
  for (const n of Object.values(tree.nodes)) if (n.parent !== null) total += n.tokens.length;
  return total;
}

/** Serialise to one JSON line. */
export function treeToJSON(tree: RolloutTree): string {
  return JSON.stringify(tree);
}

/** The tree without its nodes' `hidden` vectors (features, not something a person reads): for logs. */
export function treeForLog(tree: RolloutTree): RolloutTree {
  if (!Object.values(tree.nodes).some((n) => n.hidden)) return tree;
  const nodes = Object.fromEntries(
    Object.entries(tree.nodes).map(([id, n]) => {
      const { hidden: _hidden, ...rest } = n;
      return [id, rest];
    }),
  );
  return { ...tree, nodes };
}

/** Parse and validate a tree from JSON; errors name `source` (file:line) when given. */
export function treeFromJSON(text: string, source?: string): RolloutTree {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (cause) {
    throw new DataError(`${source ?? 'tree'}: invalid JSON`, source, undefined, undefined, { cause });
  }
  const t = raw as RolloutTree;
  const where = source ?? 'tree';
  if (!t || typeof t !== 'object') throw new DataError(`${where}: not an object`);
  if (typeof t.id !== 'string') throw new DataError(`${where}: field "id" must be a string`, source, undefined, 'id');
  if (typeof t.itemId !== 'string')
    throw new DataError(`${where}: field "itemId" must be a string`, source, undefined, 'itemId');
  if (!t.nodes || typeof t.nodes !== 'object' || !t.nodes[ROOT_ID]) {
    throw new DataError(`${where}: field "nodes" must contain a root "0"`, source, undefined, 'nodes');
  }
  for (const [id, n] of Object.entries(t.nodes)) {
    if (n.id !== id)
      throw new DataError(`${where}: node key ${id} has id ${n.id}`, source, undefined, `nodes.${id}.id`);
    if (
      !Array.isArray(n.tokens) ||
      n.logprobs.length !== n.tokens.length ||
      n.mask.length !== n.tokens.length ||
      (n.versions !== undefined && n.versions.length !== n.tokens.length)
    ) {
      throw new DataError(`${where}: node ${id} has mismatched tokens/logprobs/mask`, source, undefined, `nodes.${id}`);
    }
    if (n.parent !== null && !t.nodes[n.parent]) {
      throw new DataError(
        `${where}: node ${id} has unknown parent ${n.parent}`,
        source,
        undefined,
        `nodes.${id}.parent`,
      );
    }
  }
  return t;
}
