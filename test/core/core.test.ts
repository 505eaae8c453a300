import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Rng } from '../../src/core/rng.js';
import {
  addNode,
  appendToNode,
  createTree,
  generatedTokenCount,
  leaves,
  ROOT_ID,
  splitLeaf,
  trajectory,
  treeForLog,
  treeFromJSON,
  treeToJSON,
} from '../../src/core/tree.js';
import { DataError, EngineCallError } from '../../src/core/errors.js';

test('rng: same seed same stream, different seeds differ, state round-trips', () => {
  const a = new Rng(42),
    b = new Rng(42),
    c = new Rng(43);
  const xa = Array.from({ length: 8 }, () => a.nextU32());
  const xb = Array.from({ length: 8 }, () => b.nextU32());
  const xc = Array.from({ length: 8 }, () => c.nextU32());
  assert.deepEqual(xa, xb);
  assert.notDeepEqual(xa, xc);
  const st = a.getState();
  const next = a.next();
  const d = new Rng(st);
  assert.equal(d.next(), next);
  const f1 = new Rng(1).fork('p0').next(),
    f2 = new Rng(1).fork('p1').next();
  assert.notEqual(f1, f2);
  assert.equal(new Rng(1).fork('p0').next(), f1);
});

test('rng: uniform mean and int range', () => {
  const r = new Rng(7);
  let s = 0;
  const counts = [0, 0, 0];
  for (let i = 0; i < 30000; i++) {
    s += r.next();
    counts[r.int(3)]++;
  }
  assert.ok(Math.abs(s / 30000 - 0.5) < 0.01);
  for (const c of counts) assert.ok(Math.abs(c / 30000 - 1 / 3) < 0.02);
});

test('tree: build, trajectories, token count, JSON round-trip', () => {
  const t = createTree('t1', 'item1', [1, 2]);
  const a = addNode(t, '0', { tokens: [3, 4], logprobs: [-0.1, -0.2] });
  const b = addNode(t, a.id, { tokens: [5], logprobs: [-0.3], finishReason: 'stop' });
  const c = addNode(t, a.id, { tokens: [1, 2], logprobs: [-0.4, -0.5], finishReason: 'length', weightVersion: 2 });
  assert.equal(b.id, '0.0.0');
  assert.deepEqual(
    leaves(t).map((n) => n.id),
    [b.id, c.id],
  );
  const tr = trajectory(t, c.id);
  assert.deepEqual(tr.promptTokens, [1, 2]);
  assert.deepEqual(tr.tokens, [3, 4, 1, 2]);
  assert.deepEqual(tr.logprobs, [-0.1, -0.2, -0.4, -0.5]);
  assert.deepEqual(tr.weightVersions, [0, 0, 2, 2]);
  assert.equal(tr.finishReason, 'length');
  assert.equal(generatedTokenCount(t), 5);
  assert.deepEqual(treeFromJSON(treeToJSON(t)), t);
  assert.throws(
    () => treeFromJSON('{"id":"x"}', 'f.jsonl:3'),
    (e: unknown) => e instanceof DataError && /^f\.jsonl:3: field "itemId"/.test(e.message),
  );
  assert.throws(
    () => addNode(t, '0', { tokens: [1], logprobs: [] }),
    (e: unknown) => e instanceof DataError && /^tree t1: segment arrays/.test(e.message),
  );
});

test('errors: retryable derived from status', () => {
  assert.equal(new EngineCallError('x', { status: 500 }).isRetryable, true);
  assert.equal(new EngineCallError('x', { status: 429 }).isRetryable, true);
  assert.equal(new EngineCallError('x', { status: 400 }).isRetryable, false);
});

test('writeFileAtomic replaces a file whole and leaves no temporary file', async () => {
  const { mkdtempSync, readFileSync, readdirSync, writeFileSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const { writeFileAtomic } = await import('../../src/core/files.js');
  const dir = mkdtempSync(join(tmpdir(), 'arbor-atomic-'));
  const file = join(dir, 'state.json');
  writeFileSync(file, 'old');
  writeFileAtomic(file, 'new contents');
  assert.equal(readFileSync(file, 'utf8'), 'new contents');
  assert.deepEqual(readdirSync(dir), ['state.json']);
});

test("tree: hidden states follow the node's end (add, continue, split) and stay out of logs", () => {
  const t = createTree('h', 'q', [1]);
  const a = addNode(t, ROOT_ID, { tokens: [2, 3], hidden: [0.5, 1] });
  assert.deepEqual(a.hidden, [0.5, 1]);
  appendToNode(t, a.id, { tokens: [4], hidden: [2, 3] });
  assert.deepEqual(a.hidden, [2, 3], 'a continued segment holds the state at its new end');
  appendToNode(t, a.id, { tokens: [5] });
  assert.equal(a.hidden, undefined, 'continued without a state: the old one no longer describes the end');
  a.hidden = [7, 8];
  const tail = splitLeaf(t, a.id, 2);
  assert.deepEqual(tail.hidden, [7, 8], 'the tail keeps the end state');
  assert.equal(a.hidden, undefined, 'the head part ends where no state was returned');
  const logged = JSON.parse(treeToJSON(treeForLog(t)));
  assert.ok(
    Object.values(logged.nodes as Record<string, object>).every((n) => !('hidden' in n)),
    'no hidden field in the log',
  );
  assert.deepEqual(t.nodes[tail.id].hidden, [7, 8], 'the tree itself is unchanged');
  assert.equal(treeForLog(createTree('x', 'q', [1])).id, 'x');
});
