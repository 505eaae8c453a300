/**
 * Tree packing of a training batch: the datums' input sequences merged into a token trie (a token is
 * shared when every token before it is equal: its computation is then the same function of the
 * weights), laid out in DFS preorder with each token's position equal to its depth, and the attention
 * layout of kernels/tree.ts. A row predicts one target per distinct next token among the datums that
 * pass through it: a branch row predicts each child, so the loss sees (row, target) *entries*; copies
 * of one entry (datums sharing the prefix and the target) keep their own weights, advantages and
 * behaviour log-probs in the loss, and their gradients add up there (losses.ts). The flattened batch's
 * loss and gradients are therefore reproduced exactly (up to float rounding).
 */
import { NumericsError } from '../../core/errors.js';
import { encodeTreeLayout, treeVisible, type TreeSegment } from '../kernels/tree.js';
import type { Kernels } from '../kernels/types.js';

export interface TreePack {
  /** Unique tokens (rows). */
  N: number;
  tokens: Int32Array;
  /** Depth of each row (its position). */
  positions: Int32Array;
  /** Attention layout (kernels/tree.ts). */
  layout: Int32Array;
  /** Prediction entries (row, target). */
  E: number;
  entryRow: Int32Array;
  entryTarget: Int32Array;
  /** The entry of datum d's position t. */
  entryOf: Int32Array[];
  /** Trees (distinct first tokens). */
  trees: number;
}

/** Builds a forest datum by datum; `added(seq)` says how many rows a sequence would add. */
export class ForestBuilder {
  private readonly token: number[] = [];
  private readonly parent: number[] = [];
  private readonly children: Array<Map<number, number> | undefined> = [];
  private readonly roots = new Map<number, number>();
  private readonly paths: Int32Array[] = [];
  private readonly targets: Array<readonly number[]> = [];

  /** Rows so far. */
  get rows(): number {
    return this.token.length;
  }

  /** Sequences added. */
  get size(): number {
    return this.paths.length;
  }

  /** Attention probabilities per head so far: Σ over rows of (position + 1). */
  visible = 0;

  /** How many new rows `seq` would add, and the attention probabilities (per head) they bring. */
  added(seq: readonly number[]): { rows: number; visible: number } {
    let node = this.roots.get(seq[0]);
    let t = 0;
    while (node !== undefined) {
      t++;
      if (t === seq.length) return { rows: 0, visible: 0 };
      node = this.children[node]?.get(seq[t]);
    }
    // positions t..n−1 are new: Σ (p + 1)
    const n = seq.length;
    return { rows: n - t, visible: (n * (n + 1) - t * (t + 1)) / 2 };
  }

  add(seq: readonly number[], targets: readonly number[]): void {
    this.visible += this.added(seq).visible;
    const path = new Int32Array(seq.length);
    let node = -1;
    for (let t = 0; t < seq.length; t++) {
      const map = node < 0 ? this.roots : (this.children[node] ??= new Map());
      let next = map.get(seq[t]);
      if (next === undefined) {
        next = this.token.length;
        this.token.push(seq[t]);
        this.parent.push(node);
        this.children.push(undefined);
        map.set(seq[t], next);
      }
      path[t] = next;
      node = next;
    }
    this.paths.push(path);
    this.targets.push(targets);
  }

  /** The packed layout of everything added. */
  build(): TreePack {
    const nodes = this.token.length;
    const row = new Int32Array(nodes);
    const tokens = new Int32Array(nodes);
    const positions = new Int32Array(nodes);
    const segOfRow = new Int32Array(nodes);
    const segments: Array<TreeSegment & { chain: Array<[number, number]> }> = [];
    let next = 0;
    // iterative DFS preorder; children in insertion order
    const stack: number[] = [...this.roots.values()].reverse();
    while (stack.length) {
      const n = stack.pop()!;
      const r = next++;
      row[n] = r;
      tokens[r] = this.token[n];
      const p = this.parent[n];
      positions[r] = p < 0 ? 0 : positions[row[p]] + 1;
      if (p >= 0 && row[p] === r - 1) {
        segOfRow[r] = segments.length - 1;
        segments[segments.length - 1].len++;
      } else {
        let chain: Array<[number, number]> = [];
        if (p >= 0) {
          const s = segments[segOfRow[row[p]]];
          chain = [...s.chain, [s.start, row[p] + 1]];
        }
        segOfRow[r] = segments.length;
        segments.push({ start: r, len: 1, chain });
      }
      const kids = this.children[n];
      if (kids) stack.push(...[...kids.values()].reverse());
    }
    const entryRow: number[] = [];
    const entryTarget: number[] = [];
    const entryAt = new Map<number, number>(); // row · 2^21 + target → entry (targets < 2^21)
    const entryOf = this.paths.map((path, d) => {
      const out = new Int32Array(path.length);
      const targets = this.targets[d];
      for (let t = 0; t < path.length; t++) {
        const r = row[path[t]];
        const key = r * 2097152 + targets[t];
        let e = entryAt.get(key);
        if (e === undefined) {
          e = entryRow.length;
          entryRow.push(r);
          entryTarget.push(targets[t]);
          entryAt.set(key, e);
        }
        out[t] = e;
      }
      return out;
    });
    return {
      N: nodes,
      tokens,
      positions,
      layout: encodeTreeLayout(segments),
      E: entryRow.length,
      entryRow: Int32Array.from(entryRow),
      entryTarget: Int32Array.from(entryTarget),
      entryOf,
      trees: this.roots.size,
    };
  }
}

/** The tree pack of `sequences` with their `targets` (sequence-aligned). */
export function packForest(
  sequences: readonly (readonly number[])[],
  targets: readonly (readonly number[])[],
): TreePack {
  const b = new ForestBuilder();
  sequences.forEach((s, i) => b.add(s, targets[i]));
  return b.build();
}

const checked = new WeakSet<object>();

/**
 * First-use self-check of a kernel backend's tree attention against its flat attention on a tiny
 * forest (two sequences sharing a prefix of 2): a backend whose tree kernel ignored the layout (a plain
 * causal mask, a sibling leak) would train on wrong attention silently; it fails here, closed.
 */
export function checkTreeAttention(kernels: Kernels): void {
  if (checked.has(kernels)) return;
  const [NH, hs] = [2, 4];
  const C = NH * hs;
  const seqs = [
    [0, 1, 2],
    [0, 1, 3, 4],
  ];
  const pack = packForest(seqs, seqs);
  const value = (row: number, c: number) => Math.sin(1.7 * (pack.tokens[row] + 1) * (c + 1) + c);
  const fill = (rows: number[], shift: number) => {
    const a = kernels.alloc(rows.length * C);
    rows.forEach((r, i) => {
      for (let c = 0; c < C; c++) a[i * C + c] = value(r, c + shift);
    });
    return a;
  };
  const packedRows = [...pack.tokens.keys()];
  const flatRows = [0, 1, 2, 0, 1, 3, 4]; // the pack's rows of each flat position
  const run = (
    rows: number[],
    attend: (o: Float32Array, q: Float32Array, k: Float32Array, v: Float32Array) => void,
  ) => {
    const out = kernels.alloc(rows.length * C);
    attend(out, fill(rows, 0), fill(rows, 3), fill(rows, 7));
    return out;
  };
  const tree = run(packedRows, (o, q, k, v) =>
    kernels.treeAttentionForward(o, kernels.alloc(NH * treeVisible(pack.layout)), q, k, v, pack.layout, C, NH),
  );
  const flat = run(flatRows, (o, q, k, v) =>
    kernels.attentionForward(o, kernels.alloc(NH * 25), q, k, v, [3, 4], C, NH),
  );
  flatRows.forEach((r, i) => {
    for (let c = 0; c < C; c++) {
      const [a, b] = [tree[r * C + c], flat[i * C + c]];
      if (!(Math.abs(a - b) <= 1e-5 * (1 + Math.abs(b))))
        throw new NumericsError(
          `${kernels.name} kernels: tree attention differs from flat attention at row ${r} (${a} vs ${b}); use trainer.packing: flat`,
        );
    }
  });
  checked.add(kernels);
}
