import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { leaves, trajectories } from '../../src/core/tree.js';
import { setWriteFaultHook } from '../../src/core/files.js';
import { parseConfig } from '../../src/run/config.js';
import { train } from '../../src/run/loop.js';
import { RunDir } from '../../src/run/rundir.js';
import { shareFileName, ShareDir, shareOptionsSchema } from '../../src/run/share.js';
import { item, ownTree, shareFor } from '../../testkit/share.js';

const temp = () => mkdtempSync(join(tmpdir(), 'arbor-share-'));
const transport = (dir: string, learner: string, extra: Record<string, unknown> = {}) =>
  new ShareDir(shareOptionsSchema.parse({ dir, learner, ...extra }));
const group = (n: number, texts: string[]) => ({
  item: item(n),
  responses: texts.map((text) => ({ text, finishReason: 'stop' as const })),
});

test('publish/read round trip: a peer reads exactly what was published; a learner never reads its own', () => {
  const dir = temp();
  const groups = [group(1, ['2', '3']), group(4, ['5', 'x'])];
  transport(dir, 'a').publish(3, groups);
  const read = transport(dir, 'b').read(3);
  assert.deepEqual(
    read.groups,
    groups.map((g, i) => ({ ...g, key: `a/3/${i}`, learner: 'a', step: 3 })),
  );
  assert.equal(read.skippedFiles, 0);
  assert.deepEqual(transport(dir, 'a').read(3).groups, []);
  // age window [t − maxAge, t]: step 3 is too old at step 6 (maxAge 2) and not yet eligible at step 2
  assert.equal(transport(dir, 'b').read(6).groups.length, 0);
  assert.equal(transport(dir, 'b').read(5).groups.length, 2);
  assert.equal(transport(dir, 'b').read(2).groups.length, 0);
});

test('atomicity: a half-written, failed, corrupt or oversized file is never read, only counted', () => {
  const dir = temp();
  const b = transport(dir, 'b', { maxFileBytes: 1024 });
  // a publish that dies before the rename leaves no file a reader could see
  setWriteFaultHook(() => {
    throw new Error('disk full');
  });
  try {
    assert.throws(() => transport(dir, 'a').publish(1, [group(1, ['2'])]), /cannot write/);
  } finally {
    setWriteFaultHook(undefined);
  }
  assert.deepEqual(readdirSync(dir), []);
  // a writer still writing: its temporary file is invisible
  const whole = JSON.stringify({ format: 'arbor.share.v1', learner: 'c', step: 1, groups: [group(1, ['2'])] });
  writeFileSync(join(dir, `${shareFileName('c', 1)}.tmp`), whole.slice(0, 20));
  assert.deepEqual(b.read(1), { groups: [], skippedFiles: 0 });
  // the same bytes under a final name (a writer that ignores the protocol), a lie about the learner, a huge file
  writeFileSync(join(dir, shareFileName('c', 1)), whole.slice(0, 20));
  writeFileSync(join(dir, shareFileName('d', 1)), whole);
  writeFileSync(join(dir, shareFileName('e', 1)), whole.replace('"c"', '"e"').padEnd(2000, ' '));
  const read = b.read(1);
  assert.deepEqual(read.groups, []);
  assert.equal(read.skippedFiles, 3);
  transport(dir, 'a').publish(1, [group(1, ['2'])]);
  assert.deepEqual(
    b.read(1).groups.map((g) => g.key),
    ['a/1/0'],
  );
});

test("re-scoring: peer groups are re-encoded, scored by the reader's reward, log-probs from its policy", async () => {
  const dir = temp();
  // the writer pays 1 for a correct answer, the reader 0.25
  const writer = shareFor(dir, 'a', { local: 1, external: 0 }, 1);
  const reader = shareFor(dir, 'b', { local: 0, external: 1 }, 0.25);
  await writer.mix(1, [{ tree: ownTree(1, ['2', '7']), item: item(1) }], 1);
  const mixed = await reader.mix(1, [], 9);
  assert.equal(mixed.trees.length, 1);
  const tree = mixed.trees[0];
  assert.equal(tree.id, 'share/a/1/0');
  assert.deepEqual(
    leaves(tree).map((l) => l.reward),
    [0.25, 0],
  );
  const [first] = trajectories(tree);
  assert.deepEqual(first.tokens, [50, 0]); // '2' then the reader's EOS
  assert.deepEqual(first.logprobs, [-0.05, -0]); // the reader's policy, not the writer's sampler
  assert.deepEqual(first.weightVersions, [9, 9]);
  assert.equal(mixed.metrics.share_external_trained, 1);
});

test('composition: I own groups and J peer groups, drawn by the seed; zero-variance peer groups dropped', async () => {
  const dir = temp();
  const peer = shareFor(dir, 'a', { local: 0, external: 0 });
  // groups 0..5: even n mixed (one right answer), odd n all wrong (zero variance)
  const published = Array.from({ length: 6 }, (_, n) => ({
    tree: ownTree(n, n % 2 === 0 ? [String(n + 1), 'x'] : ['x', 'y']),
    item: item(n),
  }));
  await peer.mix(2, published, 1);
  const own = Array.from({ length: 5 }, (_, n) => ({ tree: ownTree(10 + n, ['z'], `mine/${n}`), item: item(10 + n) }));
  const run = () => shareFor(dir, 'b', { local: 2, external: 2 }).mix(2, own, 3);
  const mixed = await run();
  const ids = mixed.trees.map((t) => t.id);
  assert.equal(ids.length, 4);
  assert.ok(
    ids.slice(0, 2).every((id) => id.startsWith('mine/')),
    ids.join(),
  );
  const external = ids.slice(2);
  assert.ok(
    external.every((id) => ['share/a/2/0', 'share/a/2/2', 'share/a/2/4'].includes(id)),
    external.join(),
  );
  assert.equal(mixed.metrics.share_local_trained, 2);
  assert.equal(mixed.metrics.share_external_trained, 2);
  assert.equal(mixed.metrics.share_published, 5);
  // the same seed and files give the same batch
  assert.deepEqual(
    (await run()).trees.map((t) => t.id),
    ids,
  );
  // without the filter every group is eligible (a's 6 and b's 5), and none is trained on twice by one learner
  const keep = shareFor(dir, 'c', { local: 0, external: 20, dropZeroVariance: false });
  assert.equal((await keep.mix(2, [], 3)).trees.length, 11);
  assert.equal((await keep.mix(2, [], 3)).trees.length, 0);
});

test('config: share is off by default and share.dir needs share.learner', () => {
  assert.equal(parseConfig({}).share.dir, undefined);
  assert.throws(() => parseConfig({ share: { dir: '/tmp/x' } }), /share\.learner.*unique id/);
  assert.throws(() => parseConfig({ share: { dir: '/tmp/x', learner: 'a', external: -1 } }), /share\.external/);
});

const learnerConfig = (root: string, name: string, seed: number) =>
  parseConfig({
    run: {
      name,
      outDir: join(root, name),
      seed,
      steps: 2,
      promptsPerStep: 4,
      evalEvery: 0,
      evalCount: 8,
      evalPassK: 0,
      checkpointEvery: 0,
      logTreesEvery: 0,
      trainItems: 50,
    },
    task: { name: 'arith', options: { digits: 1, ops: ['+'] } },
    model: { dModel: 16, nLayers: 1, nHeads: 2, dFF: 32, contextLength: 32, tieEmbeddings: false },
    sft: { steps: 20, batchSize: 16, learningRate: 0.01, examples: 100, checkpoint: join(root, `sft-${name}`) },
    sampling: { maxResponseTokens: 8 },
    generate: { kind: 'iid', groupSize: 4 },
    optimize: { advantage: { kind: 'grpo' } },
    trainer: { learningRate: 0.003 },
    share: {
      dir: join(root, 'swarm'),
      learner: name,
      local: 3,
      external: 2,
      dropZeroVariance: false,
      waitMs: 120_000,
    },
  });

test(
  "two train() runs sharing a directory each train on their own and their peer's groups",
  { timeout: 300_000 },
  async () => {
    const root = temp();
    await Promise.all([
      train(learnerConfig(root, 'a', 7), { quiet: true }),
      train(learnerConfig(root, 'b', 8), { quiet: true }),
    ]);
    for (const name of ['a', 'b']) {
      const steps = new RunDir(join(root, name)).readMetrics().filter((m) => m.step > 0);
      assert.equal(steps.length, 2);
      for (const m of steps) {
        assert.equal(m.share_local_trained, 3, `${name} step ${m.step}`);
        assert.equal(m.share_external_trained, 2, `${name} step ${m.step}`);
        // from the peer, never from itself
        assert.equal(m[`share_external_from_${name === 'a' ? 'b' : 'a'}`], 2, `${name} step ${m.step}`);
        assert.equal(m[`share_external_from_${name}`], undefined, `${name} step ${m.step}`);
        assert.equal(m.share_published, 4, `${name} step ${m.step}`);
        assert.equal(m.trees_trained, 5, `${name} step ${m.step}`);
      }
    }
    assert.deepEqual(readdirSync(join(root, 'swarm')).sort(), [
      shareFileName('a', 1),
      shareFileName('a', 2),
      shareFileName('b', 1),
      shareFileName('b', 2),
    ]);
  },
);
