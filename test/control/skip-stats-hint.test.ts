import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Rng } from '../../src/core/rng.js';
import { addNode, createTree, leaves, trajectory, type RolloutTree } from '../../src/core/tree.js';
import type { TaskItem } from '../../src/core/types.js';
import { PromptStats, promptStatsSchema } from '../../src/control/prompt-stats.js';
import { adaptSkip, gresoSchema, keepProbability, selectSkipping, trailingVisits } from '../../src/control/skip.js';
import { hintOptionsSchema, makeHint, rescue } from '../../src/control/hint.js';
import type { ControlIO, GrowEntry } from '../../src/control/types.js';

const close = (a: number, b: number, tol = 1e-12) => assert.ok(Math.abs(a - b) <= tol, `${a} vs ${b}`);

test('prompt stats: Beta posterior with per-step decay, recent window and visit means', () => {
  const s = new PromptStats(promptStatsSchema.parse({ decay: 0.5, window: 4, visits: 2 }));
  assert.deepEqual(s.posterior('a', 1), { a: 1, b: 1, mean: 0.5, variance: 1 / 12 });
  s.observe('a', [1, 0, 1], 1);
  close(s.posterior('a', 1).mean, 3 / 5);
  // two steps later the evidence counts a quarter: Beta(1 + 0.5, 1 + 0.25)
  const p = s.posterior('a', 3);
  close(p.a, 1.5);
  close(p.b, 1.25);
  s.observe('a', [0, 0], 3);
  const r = s.record('a')!;
  close(r.s, 0.5);
  close(r.f, 2.25);
  assert.deepEqual(r.recent, [0, 1, 0, 0], 'latest 4 leaf rewards');
  assert.deepEqual(r.visits, [2 / 3, 0], 'group means of the latest 2 visits');
  close(s.posteriorWith('a', 3, [1]).a, 1 + 0.5 + 1);
  assert.deepEqual(s.recentWith('a', [1]), [1, 0, 0, 1]);
  assert.deepEqual(JSON.parse(JSON.stringify(s.state)), s.state, 'plain JSON state');
});

test('GRESO: keep probability p^k over trailing zero-variance visits, with the floor', () => {
  const o = gresoSchema.parse({ kind: 'greso', floor: 0.2 });
  const rec = (visits: number[]) => ({ s: 0, f: 0, step: 0, recent: [], visits });
  assert.equal(
    trailingVisits([1, 0.5, 1, 1], (m) => m >= 0.98),
    2,
  );
  assert.equal(keepProbability(undefined, o, { pEasy: 0.5, pHard: 0.5 }), 1);
  assert.equal(keepProbability(rec([0.5, 1, 1]), o, { pEasy: 0.5, pHard: 0.9 }), 0.25);
  assert.equal(keepProbability(rec([0, 0, 0]), o, { pEasy: 0.5, pHard: 0.5 }), 0.2, 'max(0.125, floor 0.2)');
  assert.equal(keepProbability(rec([0, 0.5]), o, { pEasy: 0.1, pHard: 0.1 }), 1, 'a mixed latest visit keeps it');
});

test('GRESO: skipped prompts are replaced; after maxDrawFactor draws per slot every prompt is kept', () => {
  const o = gresoSchema.parse({ kind: 'greso', floor: 0, maxDrawFactor: 4 });
  let next = 0;
  const take = (n: number): TaskItem[] =>
    Array.from({ length: n }, () => ({ id: `q${next++}`, prompt: '', answer: '' }));
  // every prompt was solved twice in a row and pEasy = 0: keep probability 0
  const out = selectSkipping(
    take,
    2,
    o,
    { pEasy: 0, pHard: 0.5 },
    () => ({ s: 2, f: 0, step: 1, recent: [], visits: [1, 1] }),
    new Rng(1),
  );
  assert.equal(out.skipped, 8);
  assert.deepEqual(
    out.items.map((i) => i.id),
    ['q8', 'q9'],
  );
  // unseen prompts are always kept
  next = 0;
  const fresh = selectSkipping(take, 3, o, { pEasy: 0, pHard: 0 }, () => undefined, new Rng(1));
  assert.equal(fresh.skipped, 0);
  assert.deepEqual(
    fresh.items.map((i) => i.id),
    ['q0', 'q1', 'q2'],
  );
});

test('GRESO: p moves by ±adjust toward the zero-variance targets, within bounds', () => {
  const o = gresoSchema.parse({ kind: 'greso' });
  // easy share 2/4 ≥ 0.25/3 and hard share 1/4 ≥ 0.25·2/3 → skip more (p down)
  const a = adaptSkip({ pEasy: 0.5, pHard: 0.5 }, [1, 1, 0, 0.5], o);
  close(a.pEasy, 0.49);
  close(a.pHard, 0.49);
  const b = adaptSkip({ pEasy: 0.95, pHard: 0.05 }, [0.5, 0.5], o);
  assert.equal(b.pEasy, 0.95, 'no zero-variance groups → skip less, clamped at pMax');
  close(b.pHard, 0.06);
});

test('hints: a prefix of the gold demonstration, or a solved example of the batch', () => {
  const item: TaskItem = { id: 'x', prompt: '12+34=', answer: '46', demonstration: '4+2+0=06,3+1+0=04;46' };
  assert.deepEqual(
    makeHint(item, hintOptionsSchema.parse({ kind: 'gold_prefix', fraction: 0.5 }) as never, undefined),
    { kind: 'response', text: '4+2+0=06,3' },
  );
  assert.equal(
    makeHint(
      { ...item, demonstration: undefined },
      hintOptionsSchema.parse({ kind: 'gold_prefix' }) as never,
      undefined,
    ),
    undefined,
  );
  const solved: TaskItem = { id: 'y', prompt: '1+1=', answer: '2', demonstration: '1+1+0=02;2' };
  assert.deepEqual(makeHint(item, hintOptionsSchema.parse({ kind: 'example' }) as never, solved), {
    kind: 'context',
    text: '1+1=1+1+0=02;2\n',
  });
  assert.equal(makeHint(item, hintOptionsSchema.parse({ kind: 'example' }) as never, undefined), undefined);
});

/** A scored star tree: one leaf per reward. */
function star(id: string, rewards: number[], meta?: Record<string, unknown>): RolloutTree {
  const t = createTree(id, id, [1, 2], meta);
  for (const r of rewards) addNode(t, '0', { tokens: [5], logprobs: [-1], finishReason: 'stop' }).reward = r;
  return t;
}

test('hint rescue regrows exactly the all-fail groups (up to maxPerStep) and swaps them into the batch', async () => {
  const items: TaskItem[] = ['a', 'b', 'c', 'd'].map((id) => ({
    id,
    prompt: `${id}?`,
    answer: '1',
    demonstration: 'abcd;1',
  }));
  const batch = [star('a', [0, 0]), star('b', [1, 0]), star('c', [0, 0]), star('d', [0, 0])].map((tree, i) => ({
    tree,
    item: items[i],
  }));
  const hintedIds: string[] = [];
  const io = {
    select: () => [],
    hinted: (item: TaskItem, hint: { text: string }, index: number) => {
      hintedIds.push(`${item.id}:${hint.text}:${index}`);
      return createTree(`h${index}`, item.id, [1, 2, 9], { hint: { kind: 'response', text: hint.text, tokens: 1 } });
    },
    grow: async (entries: GrowEntry[]) =>
      entries.map((e, i) => star(e.tree!.id, i === 0 ? [1, 0] : [0, 0], e.tree!.meta)),
  } as unknown as ControlIO;
  const out = await rescue(
    batch,
    io,
    hintOptionsSchema.parse({ kind: 'gold_prefix', fraction: 0.5, maxPerStep: 2 }),
    1,
  );
  assert.deepEqual(
    hintedIds,
    ['a:abc:0', 'c:abc:1'],
    'the first two all-fail prompts, hinted with half the demonstration',
  );
  assert.deepEqual(
    out.batch.map((b) => b.tree.id),
    ['h0', 'b', 'h1', 'd'],
  );
  assert.deepEqual(out.info, { hint_candidates: 3, hint_trees: 2, hint_rescued: 1, hint_replaced_leaves: 4 });
  const none = await rescue(batch, io, hintOptionsSchema.parse({ kind: 'none' }), 1);
  assert.equal(none.batch, batch);
});

test('a context-hinted tree trains on the hint-free prompt (meta.trainPrompt)', () => {
  const t = star('t', [1], { hint: { kind: 'context', text: 'ex\n', tokens: 3 }, trainPrompt: [1] });
  t.nodes['0'].tokens = [7, 8, 9, 1];
  const tr = trajectory(t, leaves(t)[0].id);
  assert.deepEqual(tr.promptTokens, [1]);
  assert.deepEqual(tr.tokens, [5]);
});
