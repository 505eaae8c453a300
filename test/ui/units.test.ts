/** Pure parts of the dashboard: tick labels, smoothing, tree layout, the tree view model, the run tokenizer. */
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { formatTicks, formatValue, niceTicks } from '../../src/ui/client/ticks.js';
import { smooth } from '../../src/ui/client/smooth.js';
import { layoutTree } from '../../src/ui/client/tree-layout.js';
import { treeView } from '../../src/ui/server/tree-model.js';
import { branchLabel } from '../../src/ui/client/tree-svg.js';
import { runTokenizer } from '../../src/ui/server/tokenizer.js';
import { syntheticTree, tempRuns, tok } from '../../testkit/ui/helpers.js';

test('ticks: round positions, and labels never repeat for a narrow range (0.95, 0.95, 0.95)', () => {
  assert.deepEqual(niceTicks(0, 1, 5), [0, 0.25, 0.5, 0.75, 1]);
  const narrow = niceTicks(0.951, 0.954, 5);
  assert.ok(narrow.length >= 3);
  const labels = formatTicks(narrow);
  assert.equal(new Set(labels).size, labels.length, labels.join(', '));
  assert.deepEqual(formatTicks([0.95, 0.9505, 0.951]), ['0.9500', '0.9505', '0.9510']);
  assert.deepEqual(formatTicks([0, 20000, 40000]), ['0k', '20k', '40k']);
  assert.deepEqual(formatTicks([-0.5, -0.25, 0, 0.25, 0.5]), ['-0.50', '-0.25', '0.00', '0.25', '0.50']);
  assert.deepEqual(formatTicks([0, 12500, 25000]), ['0.0k', '12.5k', '25.0k']);
  assert.deepEqual(formatTicks([0, 1e-13, 2e-13]), ['0', '1e-13', '2e-13']);
  assert.equal(formatValue(0.123456), '0.1235');
  assert.equal(formatValue(null), '–');
});

test('smoothing: weight 0 is the identity, EMA is debiased, gaps stay gaps', () => {
  assert.deepEqual(smooth([1, null, 3], 0), [1, null, 3]);
  const s = smooth([1, 1, null, 1], 0.9);
  assert.deepEqual(
    s.map((v) => (v === null ? null : Number(v.toFixed(9)))),
    [1, 1, null, 1],
  );
  const step = smooth([0, 0, 10], 0.5);
  assert.ok(step[2]! > 0 && step[2]! < 10);
});

test('tree layout: leaves on consecutive rows, parents between their children, collapse hides leaves', () => {
  const view = treeView(syntheticTree(), tok);
  const full = layoutTree(view.nodes, new Set(), { dx: 100, dy: 10 });
  const leaves = view.nodes.filter((n) => !n.children.length);
  assert.deepEqual(
    leaves.map((n) => full.placed.get(n.id)!.y).sort((a, b) => a - b),
    leaves.map((_, i) => i * 10),
  );
  const a = full.placed.get('0.0')!;
  assert.equal(a.x, 100);
  assert.equal(a.y, (full.placed.get('0.0.0')!.y + full.placed.get('0.0.1')!.y) / 2);
  const folded = layoutTree(view.nodes, new Set(['0.0']), { dx: 100, dy: 10 });
  assert.equal(folded.placed.get('0.0')!.hidden, 2);
  assert.equal(folded.placed.has('0.0.0'), false);
  assert.equal(folded.height, full.height - 10);
});

test('tree view model: decoded text, rewards, components, advantage, decision, subtree means; unknown fields dropped', () => {
  const tree = syntheticTree();
  (tree.nodes['0.0.0'] as unknown as Record<string, unknown>).hidden = new Array(64).fill(0.5);
  const view = treeView(tree, tok);
  const byId = new Map(view.nodes.map((n) => [n.id, n]));
  assert.equal(byId.get('0')!.text, '<bos>3+4=');
  assert.equal(byId.get('0.0.0')!.text, '=07;7<eos>');
  assert.deepEqual(byId.get('0.0.0')!.components, { correct: 1, format: 1 });
  assert.equal(byId.get('0.0.0')!.advantage, 0.75);
  assert.equal(byId.get('0.0')!.decision, 'entropy 0.91');
  assert.equal(byId.get('0.0')!.subtreeReward, 0.5);
  assert.equal(byId.get('0.2.0')!.envTokens, 7);
  assert.equal(byId.get('0.2.1')!.error, 'reward timed out');
  assert.deepEqual(view.pruned, { paths: 2, tokens: 9 });
  assert.equal(JSON.stringify(view).includes('hidden'), false);
  assert.equal(branchLabel(byId.get('0.0')!, byId), 'entropy 0.91');
  assert.equal(branchLabel(byId.get('0.0.0')!, byId), undefined);
  const root = { ...byId.get('0')!, value: 0.4 };
  byId.get('0.0')!.firstEntropy = 0.5;
  byId.get('0.1')!.firstEntropy = 0.3;
  assert.equal(branchLabel(root, byId), '×3 v 0.4 H 0.4');
});

test("run tokenizer: the newest checkpoint's tokenizer.json, not the default char tokenizer", () => {
  const { root, cleanup } = tempRuns();
  try {
    const run = join(root, 'tiny-treepo');
    assert.match(runTokenizer(run).source, /checkpoints\/step-30\/engine\/tokenizer\.json$/);
    const ck = join(run, 'checkpoints/step-99/engine');
    mkdirSync(ck, { recursive: true });
    writeFileSync(
      join(ck, 'tokenizer.json'),
      JSON.stringify({ kind: 'char', specials: ['<pad>', '<bos>', '<eos>', '<sep>', '<unk>'], charset: 'zyx' }),
    );
    const t = runTokenizer(run);
    assert.match(t.source, /step-99/);
    assert.equal(t.decoder.decode([5, 6, 7]), 'zyx');
    assert.equal(runTokenizer(join(root, 'nowhere')).source, 'default char tokenizer');
  } finally {
    cleanup();
  }
});
