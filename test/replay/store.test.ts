import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { addNode, appendToNode, createTree, type RolloutTree } from '../../src/core/tree.js';
import { DataError } from '../../src/core/errors.js';
import { RolloutStore, storeOptionsSchema, type EntryStatus, type StoreEntry } from '../../src/replay/index.js';

const tmp = () => mkdtempSync(join(tmpdir(), 'arbor-store-'));

function entry(i: number, status: EntryStatus = 'ready', batchStep: number | null = null, version = 0): StoreEntry {
  const tree = createTree(`t${i}`, `p${i}`, [1, 2, 3]);
  addNode(tree, '0', { tokens: [10 + i, 11], logprobs: [-0.5, -0.25], finishReason: 'stop', weightVersion: version });
  tree.nodes['0.0'].reward = i / 2;
  return { tree, item: { id: `p${i}`, prompt: `q${i}`, answer: `${i}` }, status, batchStep };
}
const ids = (es: StoreEntry[]) => es.map((e) => e.tree.id);

/** Root prompt [1,2] + node 0.0 (v1: 2 policy tokens + 1 env token) + node 0.0.0 (v3, continued at v5: 2 + 3 tokens). */
function versionedTree(): RolloutTree {
  const t = createTree('v', 'pv', [1, 2]);
  addNode(t, '0', { tokens: [5, 6, 7], mask: [1, 1, 0], finishReason: 'stop', weightVersion: 1 });
  addNode(t, '0.0', { tokens: [8, 9], finishReason: 'abort', weightVersion: 3 });
  appendToNode(t, '0.0.0', { tokens: [10, 11, 12], finishReason: 'stop', weightVersion: 5 });
  return t;
}

test('store: take/peek are FIFO, honour status/batchStep filters and limit', () => {
  const s = new RolloutStore({ maxInMemory: 100 });
  s.put([
    entry(0, 'partial'),
    entry(1, 'ready', 2),
    entry(2, 'ready', null),
    entry(3, 'partial'),
    entry(4, 'ready', 2),
    entry(5, 'ready', 3),
  ]);
  assert.equal(s.count(), 6);
  assert.equal(s.count({ status: 'ready' }), 4);
  assert.equal(s.count({ batchStep: null }), 3);
  assert.deepEqual(ids(s.peek({ status: 'partial' })), ['t0', 't3']);
  assert.deepEqual(ids(s.peek({ status: 'ready', batchStep: null })), ['t2']);
  assert.deepEqual(ids(s.peek({ limit: 2 })), ['t0', 't1']);
  assert.equal(s.count(), 6, 'peek does not remove');
  assert.deepEqual(ids(s.take({ batchStep: 2, limit: 1 })), ['t1']);
  assert.deepEqual(ids(s.take({ batchStep: 2 })), ['t4']);
  assert.deepEqual(ids(s.take({ batchStep: 2 })), []);
  s.put([entry(6, 'partial')]);
  assert.deepEqual(ids(s.take({ status: 'partial' })), ['t0', 't3', 't6']);
  assert.deepEqual(ids(s.take({})), ['t2', 't5']);
  assert.equal(s.count(), 0);
});

test('store: staleness is currentVersion minus the oldest policy-token version; stale() keeps entries', () => {
  const t = versionedTree();
  assert.deepEqual(t.nodes['0.0.0'].versions, [3, 3, 5, 5, 5]);
  const s = new RolloutStore({ maxInMemory: 10 });
  const e: StoreEntry = { tree: t, item: { id: 'pv', prompt: 'q', answer: 'a' }, status: 'partial', batchStep: null };
  const empty: StoreEntry = {
    tree: createTree('e', 'pe', [1]),
    item: { id: 'pe', prompt: 'q', answer: 'a' },
    status: 'partial',
    batchStep: null,
  };
  const fresh = entry(9, 'ready', null, 6);
  s.put([e, empty, fresh]);
  assert.equal(s.staleness(e, 6), 5);
  assert.equal(s.staleness(e, 1), 0);
  assert.equal(s.staleness(empty, 6), 0);
  assert.equal(s.staleness(fresh, 8), 2);
  assert.deepEqual(ids(s.stale(6, 4)), ['v']);
  assert.deepEqual(ids(s.stale(6, 5)), []);
  assert.deepEqual(ids(s.stale(8, 1)), ['v', 't9']);
  assert.equal(s.count(), 3);
  const big = createTree('big', 'pb', [1]); // too many tokens for Math.min(...spread)
  addNode(big, '0', { tokens: new Array(300_000).fill(7), finishReason: 'stop', weightVersion: 4 });
  appendToNode(big, '0.0', { tokens: [8], finishReason: 'stop', weightVersion: 9 });
  assert.equal(s.staleness({ ...fresh, tree: big }, 10), 6);
});

test('store: staleness histogram counts each policy token at its own version', () => {
  const t = versionedTree(); // policy tokens: v1 ×2, v3 ×2, v5 ×3 (env token and prompt excluded)
  assert.deepEqual(RolloutStore.stalenessHistogram([t], 6), { 5: 2, 3: 2, 1: 3 });
  assert.deepEqual(RolloutStore.stalenessHistogram([t, entry(0, 'ready', null, 6).tree], 6), {
    0: 2,
    1: 3,
    3: 2,
    5: 2,
  });
  assert.deepEqual(RolloutStore.stalenessHistogram([], 6), {});
});

test('store: spills beyond maxInMemory and returns every entry in FIFO order, equal to the originals', () => {
  const dir = tmp();
  const spillFile = join(dir, 'spill.jsonl');
  writeFileSync(spillFile, 'stale scratch from an earlier run\n');
  const s = new RolloutStore({ maxInMemory: 2, spillFile });
  assert.equal(readFileSync(spillFile, 'utf8'), '', 'spill file truncated on construction');
  const originals = Array.from({ length: 7 }, (_, i) => entry(i, i % 2 ? 'ready' : 'partial', i % 3 ? null : 1));
  const copies = structuredClone(originals);
  for (const e of originals.slice(0, 3)) s.put([e]);
  s.put(originals.slice(3));
  assert.equal(s.inMemory, 2);
  assert.equal(s.spilled, 5);
  assert.equal(readFileSync(spillFile, 'utf8').trim().split('\n').length, 5);
  assert.deepEqual(
    s.peek({ status: 'partial' }),
    copies.filter((e) => e.status === 'partial'),
  );
  assert.deepEqual(s.peek({ batchStep: 1, limit: 2 }), [copies[0], copies[3]]);
  const taken = s.take({});
  assert.deepEqual(taken, copies);
  assert.equal(s.inMemory, 0);
  assert.equal(s.spilled, 0);
  assert.equal(readFileSync(spillFile, 'utf8'), '', 'scratch restarts once nothing is spilled');
  s.put(originals.slice(0, 4));
  assert.equal(s.inMemory, 2);
  assert.equal(s.spilled, 2);
  assert.deepEqual(s.take({ limit: 3 }), copies.slice(0, 3));
  assert.deepEqual(s.take({}), [copies[3]]);
  s.close();
});

test('store: without a spill file, maxInMemory is not enforced', () => {
  const s = new RolloutStore({ maxInMemory: 2 });
  s.put(Array.from({ length: 5 }, (_, i) => entry(i)));
  assert.equal(s.inMemory, 5);
  assert.equal(s.spilled, 0);
});

test('store: save/load round trip includes spilled entries, in order, and leaves no .tmp', () => {
  const dir = tmp();
  const s = new RolloutStore({ maxInMemory: 2, spillFile: join(dir, 'spill.jsonl') });
  const versioned: StoreEntry = {
    tree: versionedTree(),
    item: { id: 'pv', prompt: 'q', answer: 'a', meta: { n: [1, 2] } },
    status: 'partial',
    batchStep: null,
  };
  const originals = [entry(0, 'ready', 4), versioned, entry(2), entry(3, 'partial'), entry(4, 'ready', 5)];
  const copies = structuredClone(originals);
  s.put(originals);
  assert.equal(s.spilled, 3);
  const file = join(dir, 'store.jsonl');
  s.save(file);
  assert.equal(existsSync(`${file}.tmp`), false);
  assert.deepEqual(readdirSync(dir).sort(), ['spill.jsonl', 'store.jsonl']);
  assert.equal(readFileSync(file, 'utf8').trim().split('\n').length, 5);
  assert.equal(s.count(), 5, 'save does not remove');
  const loaded = RolloutStore.load(file, { maxInMemory: 3, spillFile: join(dir, 'spill2.jsonl') });
  assert.equal(loaded.inMemory, 3);
  assert.equal(loaded.spilled, 2);
  assert.deepEqual(loaded.peek({}), copies);
  assert.deepEqual(loaded.take({ status: 'partial' }), [copies[1], copies[3]]);
  const mem = RolloutStore.load(file, { maxInMemory: 10 });
  assert.deepEqual(mem.take({}), copies);
  s.close();
  loaded.close();
});

test('store: load reports the file and 1-based line of a bad entry', () => {
  const dir = tmp();
  const file = join(dir, 'store.jsonl');
  const good = JSON.stringify(entry(0));
  const cases: Array<[string, RegExp]> = [
    ['{not json', /invalid JSON/],
    [JSON.stringify({ ...entry(1), status: 'done' }), /field "status"/],
    [JSON.stringify({ ...entry(1), batchStep: 1.5 }), /field "batchStep"/],
    [JSON.stringify({ ...entry(1), item: { id: 'p1' } }), /field "item"/],
    [JSON.stringify({ ...entry(1), tree: { id: 't', itemId: 'p', nodes: {} } }), /root "0"/],
  ];
  for (const [bad, why] of cases) {
    writeFileSync(file, `${good}\n\n${bad}\n${good}\n`);
    assert.throws(
      () => RolloutStore.load(file, { maxInMemory: 10 }),
      (e: unknown) =>
        e instanceof DataError &&
        e.line === 3 &&
        e.file === file &&
        new RegExp(`${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:line 3\\b`).test(e.message) &&
        why.test(e.message),
    );
  }
  assert.throws(
    () => RolloutStore.load(join(dir, 'missing.jsonl'), { maxInMemory: 10 }),
    (e: unknown) => e instanceof DataError && /missing\.jsonl/.test(e.message),
  );
});

test('store: options schema defaults and validates maxInMemory', () => {
  assert.deepEqual(storeOptionsSchema.parse({}), { maxInMemory: 1024 });
  assert.deepEqual(storeOptionsSchema.parse({ maxInMemory: 7 }), { maxInMemory: 7 });
  assert.equal(storeOptionsSchema.safeParse({ maxInMemory: 0 }).success, false);
  assert.equal(storeOptionsSchema.safeParse({ maxInMemory: 2.5 }).success, false);
  assert.equal(storeOptionsSchema.safeParse({ maxInMemory: 4, extra: 1 }).success, false);
});
