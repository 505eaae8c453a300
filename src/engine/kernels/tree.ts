/**
 * The attention layout of a packed forest (kernels/types.ts, treeAttentionForward): N unique tokens in
 * DFS preorder, trees back to back. A segment is a run of rows each of whose parent is the row before
 * it; its `chain` lists the key ranges [from, to) of its ancestors outside the segment, root first. A
 * row at offset t of a segment sees the chain's keys, then the segment's rows up to itself: A + t + 1
 * keys (A = the chain's length), which is its position (depth) + 1. Keys are visited in depth order,
 * as a flattened sequence visits them.
 *
 * Encoded as one Int32Array (the WASM kernels read it in place):
 *   [S, visible, N, then S records of SEG_WORDS (start, len, visOffset, chainAt, chainCount),
 *    then the chains' (from, to) pairs]
 * `visible` = Σ over rows of (position + 1): the probabilities of one head; head h's lie at h·visible,
 * and a segment's rows at visOffset + t·A + t(t+1)/2.
 */

export const TREE_HEADER = 3;
export const SEG_WORDS = 5;

export interface TreeSegment {
  start: number;
  len: number;
  /** Ancestor key ranges [from, to), root first. */
  chain: ReadonlyArray<readonly [number, number]>;
}

/** Encode segments (in row order, covering rows 0..N−1) as a layout. */
export function encodeTreeLayout(segments: readonly TreeSegment[]): Int32Array {
  const pairs = segments.reduce((s, g) => s + g.chain.length, 0);
  const out = new Int32Array(TREE_HEADER + segments.length * SEG_WORDS + 2 * pairs);
  let at = TREE_HEADER + segments.length * SEG_WORDS;
  let visible = 0;
  let rows = 0;
  segments.forEach((g, s) => {
    if (g.start !== rows) throw new Error(`tree layout: segment ${s} starts at row ${g.start}, expected ${rows}`);
    let A = 0;
    for (const [from, to] of g.chain) {
      if (!(from >= 0 && to > from && to <= g.start)) throw new Error(`tree layout: bad chain range [${from}, ${to})`);
      A += to - from;
    }
    const r = TREE_HEADER + s * SEG_WORDS;
    out.set([g.start, g.len, visible, at, g.chain.length], r);
    for (const [from, to] of g.chain) {
      out[at++] = from;
      out[at++] = to;
    }
    visible += g.len * A + (g.len * (g.len + 1)) / 2;
    rows += g.len;
  });
  out[0] = segments.length;
  out[1] = visible;
  out[2] = rows;
  return out;
}

/** Rows (unique tokens) of a layout. */
export const treeRows = (layout: Int32Array): number => layout[2];
/** Probabilities per head of a layout. */
export const treeVisible = (layout: Int32Array): number => layout[1];

/** Segment s of a layout: its rows, probability offset and chain (A = keys before its first row). */
export function treeSegment(
  layout: Int32Array,
  s: number,
): { start: number; len: number; visOffset: number; chain: Array<[number, number]>; A: number } {
  const r = TREE_HEADER + s * SEG_WORDS;
  const chain: Array<[number, number]> = [];
  let A = 0;
  for (let c = 0; c < layout[r + 4]; c++) {
    const from = layout[layout[r + 3] + 2 * c];
    const to = layout[layout[r + 3] + 2 * c + 1];
    chain.push([from, to]);
    A += to - from;
  }
  return { start: layout[r], len: layout[r + 1], visOffset: layout[r + 2], chain, A };
}

/** The most keys any row sees (its depth + 1). */
export function treeMaxKeys(layout: Int32Array): number {
  let m = 0;
  for (let s = 0; s < layout[0]; s++) {
    const g = treeSegment(layout, s);
    m = Math.max(m, g.A + g.len);
  }
  return m;
}

/** The keys row t of segment `g` sees, in order (chain, then the segment up to the row). */
export function segmentKeys(g: {
  start: number;
  len: number;
  chain: ReadonlyArray<readonly [number, number]>;
}): Int32Array {
  const keys: number[] = [];
  for (const [from, to] of g.chain) for (let j = from; j < to; j++) keys.push(j);
  for (let j = g.start; j < g.start + g.len; j++) keys.push(j);
  return Int32Array.from(keys);
}
