import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Rng } from '../../src/core/rng.js';
import { addNode, createTree, splitLeaf, type FinishReason, type RolloutTree } from '../../src/core/tree.js';
import { sameContinuation, siblingStats, wholeNodeSiblingStats } from '../../src/generate/siblings.js';

/** The shape LATR leaves behind: a segment path with one fork, plus whole-response fill samples. */
function latrLikeTree(): RolloutTree {
  const t = createTree('latr', 'q', [1]);
  // the path's first segment (8 tokens), split at 3 by a fork: head [5 6 7] → tail [8 9 9 9 9], branch [8 9 9]
  const seg = addNode(t, '0', { tokens: [5, 6, 7, 8, 9, 9, 9, 9] });
  const tail = splitLeaf(t, seg.id, 3);
  addNode(t, tail.id, { tokens: [4, 2], finishReason: 'stop' });
  const branch = addNode(t, seg.id, { tokens: [8, 9, 9] });
  addNode(t, branch.id, { tokens: [3, 2], finishReason: 'stop' });
  // fill samples from the prompt: one starts like the path's first 3 tokens, one does not, one repeats another
  addNode(t, '0', { tokens: [5, 6, 7, 8, 9, 9, 4, 2], finishReason: 'stop' });
  addNode(t, '0', { tokens: [5, 5, 7, 2], finishReason: 'stop' });
  addNode(t, '0', { tokens: [5, 6, 7, 8, 9, 9, 4, 2], finishReason: 'stop' });
  return t;
}

test('LATR-shaped tree: pairs the old metric calls distinct are identical like-for-like', () => {
  const t = latrLikeTree();
  // root: 4 children = 6 pairs. Whole nodes: only the two equal fills match (1).
  // Like-for-like: head [5 6 7] equals both [5 6 7 8 …] fills on its 3 tokens (2 more), plus the equal fills.
  // head: tail [8 9 9 9 9] vs branch [8 9 9]: the same on the branch's 3 tokens (whole: different lengths).
  assert.deepEqual(wholeNodeSiblingStats([t]), { pairs: 7, identical: 1 });
  assert.deepEqual(siblingStats([t]), { pairs: 7, identical: 4 });
});

test('like-for-like: a response that ENDS inside the other window differs; an aborted one may go on', () => {
  const node = (tokens: number[], finishReason: FinishReason | null = null) => {
    const t = createTree('x', 'x', [1]);
    return addNode(t, '0', { tokens, finishReason });
  };
  assert.equal(sameContinuation(node([5, 6]), node([5, 6, 7], 'stop')), true, 'an unfinished segment');
  assert.equal(sameContinuation(node([5, 6], 'stop'), node([5, 6, 7], 'stop')), false, 'stopped at 2, went on');
  assert.equal(sameContinuation(node([5, 6], 'length'), node([5, 6, 7])), false);
  assert.equal(sameContinuation(node([5, 6], 'abort'), node([5, 6, 7])), true, 'aborted: it may continue');
  assert.equal(sameContinuation(node([5, 6]), node([5, 7, 7])), false, 'different inside the window');
  assert.equal(sameContinuation(node([]), node([5])), false, 'an empty node has nothing to compare');
  assert.equal(sameContinuation(node([], 'stop'), node([], 'stop')), true);
});

test('i.i.d. trees (whole responses from the prompt) give exactly the old figure', () => {
  const rng = new Rng(27);
  const trees = Array.from({ length: 20 }, (_, k) => {
    const t = createTree(`iid${k}`, 'q', [1]);
    for (let g = 0; g < 8; g++) {
      // short responses over two tokens, so some repeat; every one ends (stop or length)
      const length = 1 + Math.floor(rng.next() * 3);
      const tokens = Array.from({ length }, () => 5 + Math.floor(rng.next() * 2));
      addNode(t, '0', { tokens, finishReason: length === 3 ? 'length' : 'stop' });
    }
    return t;
  });
  const old = wholeNodeSiblingStats(trees);
  assert.deepEqual(siblingStats(trees), old);
  // 20 trees × C(8, 2) pairs; a like-for-like rule that matched a response with a longer one it prefixes
  // (e.g. [5] and [5 6], both ended) would count more than these 42
  assert.deepEqual(old, { pairs: 20 * 28, identical: 42 });
});

test('TreePO-shaped trees (one segment length per level) give exactly the old figure', () => {
  const t = createTree('treepo', 'q', [1]);
  const a = addNode(t, '0', { tokens: [5, 6, 7, 8] });
  const b = addNode(t, '0', { tokens: [5, 6, 7, 8] });
  addNode(t, '0', { tokens: [5, 6, 7, 9] });
  addNode(t, a.id, { tokens: [2, 3, 3, 2], finishReason: 'stop' });
  addNode(t, a.id, { tokens: [2, 3], finishReason: 'stop' });
  addNode(t, b.id, { tokens: [4, 4, 4, 4], finishReason: 'length' });
  addNode(t, b.id, { tokens: [4, 4, 4, 4], finishReason: 'length' });
  // root: 3 pairs, 1 identical; a: [2 3 3 2] vs [2 3] stopped → different; b: identical
  assert.deepEqual(siblingStats([t]), { pairs: 5, identical: 2 });
  assert.deepEqual(wholeNodeSiblingStats([t]), { pairs: 5, identical: 2 });
});
