import { test } from 'node:test';
import assert from 'node:assert/strict';
import { addNode, createTree, type RolloutTree } from '../../src/core/tree.js';
import {
  advantagesFromConfig,
  computeAdvantages,
  forkAdvantages,
  grpoAdvantages,
  leafMeanValues,
} from '../../src/optimize/index.js';
import { ConfigError } from '../../src/core/errors.js';

const near = (a: number, b: number, eps = 1e-9) => assert.ok(Math.abs(a - b) < eps, `${a} vs ${b}`);

/** A turn: 2 policy tokens (mask 1) then 1 observation token (mask 0). */
const turn = (t: RolloutTree, parent: string, reward?: number) => {
  const n = addNode(t, parent, {
    tokens: [5, 6, 7],
    mask: [1, 1, 0],
    finishReason: reward === undefined ? null : 'stop',
  });
  if (reward !== undefined) n.reward = reward;
  return n.id;
};

/**
 * Two-level fork: root → A (fork: A1 → leaves 1, 0; A2 = leaf 0) and B = leaf 1.
 * Leaves: A1a=1, A1b=0, A2=0, B=1. v(A1)=0.5, v(A2)=0, v(A)=1/3, v(B)=1, v(root)=0.5.
 */
function twoLevel(): RolloutTree {
  const t = createTree('t', 'item', [1, 2]);
  const a = turn(t, '0');
  const b = turn(t, '0', 1);
  const a1 = turn(t, a);
  const a2 = turn(t, a, 0);
  turn(t, a1, 1);
  turn(t, a1, 0);
  void b;
  void a2;
  return t;
}

/** Per-turn values of a trajectory's token advantages (3 tokens per turn). */
const perTurn = (tok: number[]) => tok.filter((_, i) => i % 3 === 0);

test('leaf-mean values on a two-level fork', () => {
  const v = leafMeanValues(twoLevel());
  near(v.get('0.0')!, 1 / 3);
  near(v.get('0.1')!, 1);
  near(v.get('0.0.0')!, 0.5);
  near(v.get('0.0.1')!, 0);
  near(v.get('0')!, 0.5, 1e-12);
});

test('fork (PORTool): hand-computed two-level fork, default w = 0.5', () => {
  const t = twoLevel();
  const f = forkAdvantages(t, false, 'inherit');
  // root fork: A vs B, mean 2/3 → A −1/3, B +1/3; fork at A: A1 vs A2, mean 1/4 → +1/4, −1/4
  near(f.get('0.0')!, -1 / 3);
  near(f.get('0.1')!, 1 / 3);
  near(f.get('0.0.0')!, 0.25);
  near(f.get('0.0.1')!, -0.25);
  // fork at A1: leaves 1 vs 0 → ±0.5
  near(f.get('0.0.0.0')!, 0.5);
  near(f.get('0.0.0.1')!, -0.5);
  const out = computeAdvantages([t], { kind: 'fork' });
  const byLeaf = new Map(out.map((a) => [a.trajectory.leafId, a]));
  const leafIds = Object.values(t.nodes)
    .filter((n) => n.parent !== null && n.children.length === 0)
    .map((n) => n.id);
  const g = grpoAdvantages(leafIds.map((id) => t.nodes[id].reward!));
  const trajAdv = new Map(leafIds.map((id, i) => [id, g[i]]));
  // leaf 0.0.0.0 (reward 1): turns A, A1, leaf
  const a = byLeaf.get('0.0.0.0')!;
  assert.equal(a.advantage, 0);
  assert.equal(a.tokenAdvantages!.length, 9);
  const ta = trajAdv.get('0.0.0.0')!;
  near(ta, 0.5 / (Math.sqrt(1 / 3) + 1e-6));
  assert.deepEqual(
    perTurn(a.tokenAdvantages!).map((x) => +x.toFixed(9)),
    [0.5 * (-1 / 3) + 0.5 * ta, 0.5 * 0.25 + 0.5 * ta, 0.5 * 0.5 + 0.5 * ta].map((x) => +x.toFixed(9)),
  );
  // every token of a turn (policy and observation) carries the turn's value
  assert.equal(a.tokenAdvantages![0], a.tokenAdvantages![2]);
  // B: one turn, fork +1/3
  const b = byLeaf.get('0.1')!;
  near(b.tokenAdvantages![0], 0.5 * (1 / 3) + 0.5 * trajAdv.get('0.1')!);
  // forkWeight 1: pure fork advantage; 0: pure trajectory GRPO
  const pure = computeAdvantages([t], { kind: 'fork', forkWeight: 1 });
  near(pure.find((x) => x.trajectory.leafId === '0.0.1')!.tokenAdvantages![0], -1 / 3);
  near(pure.find((x) => x.trajectory.leafId === '0.0.1')!.tokenAdvantages![3], -0.25);
  const flat = computeAdvantages([t], { kind: 'fork', forkWeight: 0 });
  for (const x of flat) for (const v of x.tokenAdvantages!) near(v, trajAdv.get(x.trajectory.leafId)!);
});

test('fork: forkStd divides a fork by its std; ties at a fork give 0', () => {
  const t = createTree('t', 'i', [1]);
  const a = turn(t, '0');
  turn(t, a, 1);
  turn(t, a, 1); // tie under A
  turn(t, '0', 0);
  turn(t, '0', 1);
  const f = forkAdvantages(t, true, 'inherit');
  near(f.get('0.0.0')!, 0);
  near(f.get('0.0.1')!, 0);
  // root fork values [1, 0, 1]: mean 2/3, unbiased std sqrt(1/3)
  const s = Math.sqrt(1 / 3) + 1e-6;
  near(f.get('0.0')!, 1 / 3 / s);
  near(f.get('0.1')!, -2 / 3 / s);
  const plain = forkAdvantages(t, false, 'inherit');
  near(plain.get('0.1')!, -2 / 3);
});

test('fork: an only-child chain inherits its fork ancestor (or 0 with onlyChild: zero)', () => {
  const t = createTree('t', 'i', [1]);
  const a = turn(t, '0');
  const a1 = turn(t, a); // only child of A
  turn(t, a1, 1); // only child of A1 (the leaf)
  turn(t, '0', 0);
  const inherit = forkAdvantages(t, false, 'inherit');
  near(inherit.get('0.0')!, 0.5);
  near(inherit.get('0.0.0')!, 0.5);
  near(inherit.get('0.0.0.0')!, 0.5);
  const zero = forkAdvantages(t, false, 'zero');
  near(zero.get('0.0')!, 0.5);
  assert.equal(zero.get('0.0.0'), 0);
  assert.equal(zero.get('0.0.0.0'), 0);
  // a plain chain (no fork anywhere): fork term 0, a single leaf's GRPO is 0 → all zeros
  const chain = createTree('c', 'i', [1]);
  turn(chain, turn(chain, turn(chain, '0')), 1);
  const [only] = computeAdvantages([chain], { kind: 'fork' });
  assert.deepEqual(only.tokenAdvantages, new Array(9).fill(0));
});

test('fork and turn_grpo: all-equal rewards give zero advantages', () => {
  const t = twoLevel();
  for (const id of Object.keys(t.nodes)) if (t.nodes[id].reward !== undefined) t.nodes[id].reward = 1;
  for (const kind of ['fork', 'turn_grpo'] as const) {
    for (const a of computeAdvantages([t], { kind })) for (const v of a.tokenAdvantages!) near(v, 0, 1e-12);
  }
});

test('turn_grpo: siblings are the group; only children fall back to trajectory GRPO', () => {
  const t = createTree('t', 'i', [1]);
  const a = turn(t, '0');
  const a1 = turn(t, a); // only child of A
  turn(t, a1, 1);
  turn(t, a1, 0);
  turn(t, '0', 0);
  const out = computeAdvantages([t], { kind: 'turn_grpo' });
  const byLeaf = new Map(out.map((x) => [x.trajectory.leafId, x]));
  // root fork: v(A) = 0.5, v(B) = 0 → GRPO of [0.5, 0]: ±0.25 / (sqrt(0.125) + 1e-6)
  const s = Math.sqrt(0.125) + 1e-6;
  // fork at A1: leaves [1, 0] → ±0.5 / (sqrt(0.5) + 1e-6)
  const s2 = Math.sqrt(0.5) + 1e-6;
  const g = grpoAdvantages([1, 0, 0]); // leaves in creation order: 0.0.0.0, 0.0.0.1, 0.1
  const win = perTurn(byLeaf.get('0.0.0.0')!.tokenAdvantages!);
  near(win[0], 0.25 / s);
  near(win[1], g[0]); // only child A1: the trajectory's GRPO
  near(win[2], 0.5 / s2);
  const lose = perTurn(byLeaf.get('0.0.0.1')!.tokenAdvantages!);
  near(lose[1], g[1]);
  near(lose[2], -0.5 / s2);
  near(perTurn(byLeaf.get('0.1')!.tokenAdvantages!)[0], -0.25 / s);
});

test('single leaf: both estimators give 0; whitening is optional and token-weighted', () => {
  const t = createTree('t', 'i', [1]);
  turn(t, '0', 1);
  for (const kind of ['fork', 'turn_grpo'] as const) {
    const [only] = computeAdvantages([t], { kind });
    assert.deepEqual(only.tokenAdvantages, [0, 0, 0]);
  }
  const white = computeAdvantages([twoLevel()], { kind: 'fork', turnWhiten: true });
  let sum = 0;
  let n = 0;
  for (const a of white) a.tokenAdvantages!.forEach((v, i) => a.trajectory.mask[i] && ((sum += v), n++));
  near(sum / n, 0, 1e-9);
  const raw = computeAdvantages([twoLevel()], { kind: 'fork' });
  assert.notDeepEqual(
    white.map((a) => a.tokenAdvantages),
    raw.map((a) => a.tokenAdvantages),
  );
});

test('fork options are validated, defaulted and bounded', () => {
  const o = advantagesFromConfig({ kind: 'fork' });
  assert.equal(o.forkWeight, 0.5);
  assert.equal(o.forkStd, false);
  assert.equal(o.onlyChild, 'inherit');
  assert.equal(o.turnWhiten, false);
  assert.throws(
    () => advantagesFromConfig({ kind: 'fork', forkWeight: 1.5 }),
    (e: unknown) => e instanceof ConfigError && /forkWeight/.test((e as Error).message),
  );
  assert.throws(
    () => advantagesFromConfig({ kind: 'fork', onlyChild: 'parent' }),
    (e: unknown) => e instanceof ConfigError && /onlyChild/.test((e as Error).message),
  );
});

test('negativeScale applies to turn token advantages', () => {
  const out = computeAdvantages([twoLevel()], { kind: 'fork', negativeScale: 0.5 });
  const ref = computeAdvantages([twoLevel()], { kind: 'fork' });
  out.forEach((a, i) =>
    a.tokenAdvantages!.forEach((v, t) =>
      near(v, ref[i].tokenAdvantages![t] < 0 ? ref[i].tokenAdvantages![t] * 0.5 : ref[i].tokenAdvantages![t]),
    ),
  );
});
