/**
 * Rollout trees → the explorer's view model (types.ts TreeView): each node's segment decoded with the
 * run's tokenizer, its reward, value, components, advantage and branching decision when present, and
 * the mean reward below it. Fields the explorer does not show (logprobs per token, `hidden` vectors and
 * anything else other work adds) are left out, so a step's trees stay small on the wire.
 */
import type { RolloutTree, TreeNode } from '../../core/tree.js';
import type { NodeView, TreeView } from '../types.js';

export interface Decoder {
  decode(tokens: number[], keepSpecial?: boolean): string;
}

const MAX_TEXT = 4000;
const MAX_INFO_CHARS = 2000;

function finite(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
}

function boundedInfo(info: unknown): Record<string, unknown> | undefined {
  if (!info || typeof info !== 'object') return undefined;
  const text = JSON.stringify(info);
  return text.length <= MAX_INFO_CHARS
    ? (info as Record<string, unknown>)
    : { truncated: text.slice(0, MAX_INFO_CHARS) + '…' };
}

function advantageOf(node: TreeNode): number | number[] | undefined {
  const raw = node as unknown as Record<string, unknown>;
  for (const key of ['advantage', 'advantages']) {
    const v = raw[key];
    if (finite(v) !== undefined) return v as number;
    if (Array.isArray(v) && v.length && v.every((x) => finite(x) !== undefined)) return v as number[];
  }
  return undefined;
}

function decisionOf(node: TreeNode): string | undefined {
  const raw = node as unknown as Record<string, unknown>;
  for (const key of ['decision', 'branch', 'branchReason']) {
    const v = raw[key];
    if (typeof v === 'string') return v.slice(0, 200);
    if (v && typeof v === 'object') return JSON.stringify(v).slice(0, 200);
  }
  return undefined;
}

function decodeSafe(decoder: Decoder, tokens: number[]): string {
  let text: string;
  try {
    text = decoder.decode(tokens, true);
  } catch {
    text = `[${tokens.length} tokens: ${tokens.slice(0, 32).join(' ')}]`;
  }
  return text.length > MAX_TEXT ? text.slice(0, MAX_TEXT) + '…' : text;
}

function nodeView(node: TreeNode, decoder: Decoder): NodeView {
  const sampled = node.logprobs.filter((_, i) => node.mask[i] === 1);
  const view: NodeView = {
    id: node.id,
    parent: node.parent,
    depth: node.depth,
    children: node.children.slice(),
    text: decodeSafe(decoder, node.tokens),
    tokens: node.tokens.length,
    envTokens: node.parent === null ? 0 : node.mask.filter((m) => m === 0).length,
    finishReason: node.finishReason,
    weightVersion: node.weightVersion,
  };
  if (finite(node.reward) !== undefined) view.reward = node.reward;
  if (finite(node.value) !== undefined) view.value = node.value;
  if (node.rewardInfo?.components) view.components = node.rewardInfo.components;
  const info = boundedInfo(node.rewardInfo?.info);
  if (info) view.info = info;
  if (node.error !== undefined) view.error = String(node.error).slice(0, MAX_INFO_CHARS);
  const adv = advantageOf(node);
  if (adv !== undefined) view.advantage = adv;
  if (sampled.length) view.meanLogprob = sampled.reduce((a, b) => a + b, 0) / sampled.length;
  const e0 = node.entropies?.[node.mask.indexOf(1)];
  if (finite(e0) !== undefined) view.firstEntropy = e0;
  const decision = decisionOf(node);
  if (decision) view.decision = decision;
  return view;
}

/** Mean reward of the rewarded leaves below each node (post-order). */
function subtreeRewards(tree: RolloutTree, views: Map<string, NodeView>): void {
  const visit = (id: string): [number, number] => {
    const n = tree.nodes[id];
    const v = views.get(id)!;
    if (!n.children.length) return v.reward === undefined ? [0, 0] : [v.reward, 1];
    let [sum, count] = [0, 0];
    for (const c of n.children) {
      const [s, k] = visit(c);
      sum += s;
      count += k;
    }
    if (count) v.subtreeReward = sum / count;
    return [sum, count];
  };
  visit('0');
}

export function treeView(tree: RolloutTree, decoder: Decoder): TreeView {
  const views = new Map<string, NodeView>();
  for (const node of Object.values(tree.nodes)) views.set(node.id, nodeView(node, decoder));
  subtreeRewards(tree, views);
  const meta = tree.meta ?? {};
  const pruned = meta.pruned as { paths?: unknown; tokens?: unknown } | undefined;
  const view: TreeView = {
    id: tree.id,
    itemId: tree.itemId,
    partial: meta.pending !== undefined,
    leaves: Object.values(tree.nodes).filter((n) => n.parent !== null && n.children.length === 0).length,
    nodes: [...views.values()],
  };
  if (typeof meta.generator === 'string') view.generator = meta.generator;
  if (pruned && finite(pruned.paths) !== undefined)
    view.pruned = { paths: pruned.paths as number, tokens: finite(pruned.tokens) ?? 0 };
  if (finite(meta.carries) !== undefined) view.carries = meta.carries as number;
  return view;
}
