/**
 * DUMP's UCB curriculum over task-mixture components (src/replay/ucb.ts): the arithmetic on
 * hand-computed counts, the window, a component that stops giving signal losing its share, exact
 * state round trips, and a tiny end-to-end run on a mix of two arith components that logs the
 * per-component shares and resumes exactly.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Rng } from '../../src/core/rng.js';
import type { TaskItem } from '../../src/core/types.js';
import {
  componentPools,
  groupAdvantages,
  UcbCurriculum,
  ucbScores,
  ucbSelectSchema,
  type UcbState,
} from '../../src/replay/ucb.js';

const close = (a: number, b: number, msg?: string) => assert.ok(Math.abs(a - b) < 1e-9, `${msg ?? ''} ${a} vs ${b}`);
const options = ucbSelectSchema.parse({ kind: 'ucb' });
const comp = (n: number, recent: number[]) => ({ n, recent, data: { epoch: 0, cursor: 0 } });
const pool = (label: string, n: number): TaskItem[] =>
  Array.from({ length: n }, (_, i) => ({
    id: `${label}/${i}`,
    prompt: `${i}`,
    answer: `${i}`,
    meta: { component: label },
  }));

test("defaults are the authors' (c 1, window 300, softmax temperature 0.1)", () => {
  assert.deepEqual(options, { kind: 'ucb', c: 1, window: 300, temperature: 0.1, allocation: 'sample' });
  assert.throws(() => ucbSelectSchema.parse({ kind: 'ucb', window: 0 }));
});

test('UCB arithmetic on hand-computed counts', () => {
  // a: n 6, |A| [1, 0.5]; b: n 2, |A| [0.2]; N = 8
  const state: UcbState = { components: { a: comp(6, [1, 0.5]), b: comp(2, [0.2]) } };
  const s = ucbScores(state, ['a', 'b', 'c'], { c: 1, temperature: 0.1 });
  close(s[0].mean, 0.75);
  close(s[0].bonus, Math.sqrt((2 * Math.log(9)) / 7), 'a: √(2 ln 9 / 7)');
  close(s[1].bonus, Math.sqrt((2 * Math.log(9)) / 3), 'b: √(2 ln 9 / 3)');
  close(s[2].mean, 0, 'an unseen component has no signal yet');
  close(s[2].bonus, Math.sqrt(2 * Math.log(9)), 'c: √(2 ln 9 / 1)');
  close(s[0].ucb, 0.75 + 0.7923247128971123, 'a: 0.75 + √(2 ln 9 / 7) = 0.75 + 0.79232…');
  const z = s.map((x) => Math.exp(x.ucb / 0.1));
  s.forEach((x, i) => close(x.weight, z[i] / (z[0] + z[1] + z[2]), `softmax weight ${x.label}`));
  const c2 = ucbScores(state, ['a', 'b'], { c: 2, temperature: 1 });
  close(c2[1].ucb, 0.2 + 2 * Math.sqrt((2 * Math.log(9)) / 3), 'c scales the bonus');
  // empty state: every bonus √(2 ln 1 / 1) = 0, equal weights
  const e = ucbScores({ components: {} }, ['a', 'b'], options);
  assert.deepEqual(
    e.map((x) => x.weight),
    [0.5, 0.5],
  );
});

test('GRPO advantages of a group, and the sliding window of |A|', () => {
  const a = groupAdvantages([1, 0, 0, 1]);
  const std = Math.sqrt(1 / 3);
  a.forEach((v, i) => close(v, (i === 0 || i === 3 ? 0.5 : -0.5) / (std + 1e-6)));
  assert.deepEqual(groupAdvantages([1, 1, 1]), [0, 0, 0], 'a solved group gives no signal');
  assert.deepEqual(groupAdvantages([1]), [0]);
  const u = new UcbCurriculum(
    { ...options, window: 3 },
    componentPools([...pool('a', 4), ...pool('b', 4)], ['a', 'b']),
    0,
  );
  u.observe('a', [1, 0]);
  u.observe('a', [0, 0]);
  assert.equal(u.state.components.a.n, 4);
  assert.equal(u.state.components.a.recent.length, 3, 'the window keeps the latest 3');
  close(u.state.components.a.recent[0], 0.5 / (Math.SQRT1_2 + 1e-6), '|A| of [1, 0]: 0.5 / std, std = √(1/2) unbiased');
  assert.deepEqual(u.state.components.a.recent.slice(1), [0, 0]);
  assert.equal(u.state.components.b.n, 0);
});

test('a component that stops giving signal loses its share to one that still does', () => {
  const pools = componentPools([...pool('solved', 50), ...pool('learnable', 50)], ['solved', 'learnable']);
  let state: UcbState | undefined;
  const shares: number[] = [];
  const weights: number[] = [];
  for (let step = 1; step <= 12; step++) {
    const u = new UcbCurriculum(options, pools, 0, state);
    const items = u.take(16, new Rng(1).fork(`s${step}`));
    assert.equal(items.length, 16);
    // every group of 4 of "solved" is all correct; "learnable" groups are half right
    for (const item of items)
      u.observe(item.meta!.component as string, item.meta!.component === 'solved' ? [1, 1, 1, 1] : [1, 0, 1, 0]);
    shares.push(u.info()['select/share/learnable']);
    weights.push(u.info()['select/weight/learnable']);
    state = u.state;
  }
  assert.equal(weights[0], 0.5, 'equal weights at the start');
  assert.ok(weights[11] > 0.95, `the learnable weight at the end: ${weights}`);
  assert.ok(
    shares.slice(-4).every((s) => s > 0.9),
    `learnable share late: ${shares}`,
  );
  const last = new UcbCurriculum(options, pools, 0, state).scores;
  assert.ok(last[1].ucb > last[0].ucb && last[0].mean === 0);
});

test("items come from each component's own data order; the state round-trips through JSON exactly", () => {
  const pools = componentPools(
    [...pool('a', 5), ...pool('b', 7), { id: 'x/0', prompt: '', answer: '' }],
    ['a', 'b', 'empty'],
  );
  assert.deepEqual([...pools.keys()], ['a', 'b'], 'a component without items is left out');
  const u = new UcbCurriculum({ ...options, allocation: 'apportion' }, pools, 3);
  const first = u.take(12, new Rng(0));
  assert.equal(first.filter((i) => i.meta?.component === 'a').length, 6, 'apportioned 6/6 at equal weights');
  assert.equal(
    new Set(first.filter((i) => i.meta?.component === 'a').map((i) => i.id)).size,
    5,
    'a (5 items) crosses into its second epoch once',
  );
  assert.deepEqual(u.state.components.a.data, { epoch: 1, cursor: 1 });
  assert.deepEqual(u.state.components.b.data, { epoch: 0, cursor: 6 });
  u.observe('b', [1, 0]);
  const restored = new UcbCurriculum(
    { ...options, allocation: 'apportion' },
    pools,
    3,
    JSON.parse(JSON.stringify(u.state)),
  );
  const again = new UcbCurriculum({ ...options, allocation: 'apportion' }, pools, 3, u.state);
  assert.deepEqual(restored.take(10, new Rng(5)), again.take(10, new Rng(5)));
  assert.deepEqual(restored.info(), again.info());
});

// ---- end to end: a mix of two arith components on a tiny warm-started model ----

test(
  'end to end: per-component shares and UCB scores logged, state checkpointed, resume exact',
  { timeout: 300_000 },
  async () => {
    const { parseConfig } = await import('../../src/run/config.js');
    const { train } = await import('../../src/run/loop.js');
    const { RunDir } = await import('../../src/run/rundir.js');
    const root = mkdtempSync(join(tmpdir(), 'arbor-ucb-'));
    const config = (name: string) =>
      parseConfig({
        run: {
          name,
          outDir: join(root, name),
          seed: 2,
          steps: 4,
          promptsPerStep: 6,
          evalEvery: 0,
          evalCount: 12,
          evalPassK: 0,
          checkpointEvery: 2,
          logTreesEvery: 0,
          trainItems: 24,
        },
        task: {
          mix: [
            { name: 'arith', options: { digits: 1, ops: ['+'] }, label: 'add' },
            { name: 'arith', options: { digits: 3, minDigits: 3, ops: ['*'] }, label: 'mul' },
          ],
        },
        model: { dModel: 32, nLayers: 2, nHeads: 2, dFF: 64, contextLength: 64, tieEmbeddings: false },
        sft: { steps: 60, batchSize: 32, learningRate: 0.01, examples: 200, checkpoint: join(root, 'sft') },
        sampling: { maxResponseTokens: 24 },
        generate: { kind: 'iid', groupSize: 4 },
        control: { select: { kind: 'ucb' } },
        trainer: { learningRate: 0.0003 },
      });
    const KEYS = [
      'reward_mean',
      'loss',
      'tokens_decoded',
      'select/share/add',
      'select/share/mul',
      'select/ucb/add',
      'select/ucb/mul',
      'select/adv/add',
    ];
    const pick = (dir: string) =>
      new RunDir(dir)
        .readMetrics()
        .filter((m) => m.step > 0)
        .map((m) => Object.fromEntries(KEYS.map((k) => [k, m[k]])));
    await train(config('full'), { quiet: true });
    const ms = pick(join(root, 'full'));
    assert.equal(ms.length, 4);
    for (const m of ms) {
      close((m['select/share/add'] as number) + (m['select/share/mul'] as number), 1, 'shares sum to 1');
      assert.equal(typeof m['select/ucb/mul'], 'number');
    }
    assert.equal(ms[0]['select/ucb/add'], 0, 'no samples yet: every score is 0');
    assert.ok((ms[1]['select/ucb/add'] as number) > 0, 'scores once samples are in');
    const state = JSON.parse(readFileSync(join(root, 'full', 'checkpoints', 'step-4', 'state.json'), 'utf8'));
    const ucb = state.pipeline.control.ucb.components;
    assert.equal(ucb.add.n + ucb.mul.n, 4 * 6 * 4, 'every response of 4 steps × 6 prompts × G 4 counted');
    assert.equal(
      ucb.add.data.epoch * 12 + ucb.add.data.cursor,
      ucb.add.n / 4,
      "one prompt taken from add's own order per add group",
    );
    await train(config('parts'), { quiet: true, steps: 2 });
    await train(undefined, { quiet: true, resume: join(root, 'parts'), steps: 4 });
    assert.deepEqual(pick(join(root, 'parts')), ms);
  },
);
