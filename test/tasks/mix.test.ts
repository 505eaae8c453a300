/**
 * Task mixtures (`task.mix`, src/tasks/mix.ts): ids prefixed by the component and unique, weights
 * apportion the splits, the verifier and the demonstrations dispatch to the component's own, held-out
 * evaluation reports each component, and the config errors name `task.mix…` / `control.select.kind`.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError } from '../../src/core/errors.js';
import { Rng } from '../../src/core/rng.js';
import type { TaskItem } from '../../src/core/types.js';
import { parseConfig } from '../../src/run/config.js';
import { componentEvalMetrics, evaluate } from '../../src/run/evaluate.js';
import { Producer } from '../../src/run/producer.js';
import { getTask, knownTasks } from '../../src/tasks/index.js';
import { componentOfId } from '../../src/tasks/mix.js';

const mix = [
  { name: 'arith', options: { digits: 1, ops: ['+'] }, label: 'add1' },
  { name: 'arith', options: { digits: 3, minDigits: 3, ops: ['*'] }, label: 'mul3', weight: 3 },
];
const mixed = () => {
  const c = parseConfig({ task: { mix } });
  return getTask(c.task.name, c.task.options);
};

const isConfigError = (path: string) => (e: unknown) => e instanceof ConfigError && e.path === path;

test('mixed items: ids prefixed by the component and unique, meta.component set, splits apportioned by weight and reproducible', () => {
  const task = mixed();
  const items = task.makeItems('train', 40, 7);
  assert.equal(items.length, 40);
  assert.equal(new Set(items.map((i) => i.id)).size, 40, 'ids unique');
  const add = items.filter((i) => i.meta?.component === 'add1');
  const mul = items.filter((i) => i.meta?.component === 'mul3');
  assert.equal(add.length, 10, 'weight 1 of 4');
  assert.equal(mul.length, 30, 'weight 3 of 4');
  for (const i of items) assert.equal(componentOfId(i.id), i.meta?.component);
  assert.ok(
    add.every((i) => /^add1\/\d\+\d=$/.test(i.id)),
    add[0].id,
  );
  assert.ok(mul.every((i) => i.prompt.includes('*')));
  assert.deepEqual(task.makeItems('train', 40, 7), items, 'same (split, count, seed), same items');
  const test = new Set(task.makeItems('test', 40, 7).map((i) => i.id));
  assert.ok(!mul.some((i) => test.has(i.id)), 'train and test stay disjoint within a component');
});

test('two components of one task without labels are arith and arith_2; the same prompt in both stays two items', () => {
  const c = parseConfig({
    task: {
      mix: [
        { name: 'arith', options: { digits: 1, ops: ['+'] } },
        { name: 'arith', options: { digits: 1, ops: ['+'] } },
      ],
    },
  });
  const items = getTask(c.task.name, c.task.options).makeItems('train', 20, 1);
  assert.deepEqual([...new Set(items.map((i) => i.meta?.component))], ['arith', 'arith_2']);
  assert.equal(new Set(items.map((i) => i.id)).size, 20);
  assert.ok(knownTasks().includes('mix'));
});

test('the verifier and the demonstrations dispatch to the component task (which sees its own id)', async () => {
  const task = mixed();
  const items = task.makeItems('train', 8, 3);
  for (const item of items) {
    const demo = task.demonstration(item);
    assert.ok(demo.endsWith(`;${item.answer}`), `${item.id}: ${demo}`);
    assert.equal((await task.reward.score({ item, response: demo })).reward, 1, item.id);
    assert.equal((await task.reward.score({ item, response: `;${Number(item.answer) + 1}` })).reward, 0, item.id);
  }
  const stray: TaskItem = { id: 'other/1+1=', prompt: '1+1=', answer: '2', meta: { component: 'other' } };
  await assert.rejects(task.reward.score({ item: stray, response: ';2' }), isConfigError('task.mix'));
  assert.equal(typeof task.extractAnswer, 'function', 'one task family: its answer extractor');
});

test('held-out evaluation reports each component', async () => {
  const task = mixed();
  const items = task.makeItems('test', 8, 5);
  // a fake sampler: greedy answers the add1 items right (the demonstration) and the mul3 items wrong
  const encode = (item: TaskItem) => [items.indexOf(item)];
  const sampler = {
    sample: async (reqs: Array<{ tokens: number[]; n: number }>) =>
      reqs.map((r) => ({ completions: Array.from({ length: r.n }, () => ({ tokens: r.tokens })) })),
  };
  const decode = (t: number[]) => (items[t[0]].meta?.component === 'add1' ? task.demonstration(items[t[0]]) : ';-1');
  const r = await evaluate(items, 2, {
    sampler: sampler as never,
    encodePrompt: encode,
    decode,
    stopTokens: [0],
    maxResponseTokens: 8,
    reward: task.reward,
    rng: new Rng(1),
  });
  assert.equal(r.greedyAccuracy, 2 / 8);
  assert.deepEqual(r.components, {
    add1: { greedyAccuracy: 1, sampleAccuracy: 1, count: 2 },
    mul3: { greedyAccuracy: 0, sampleAccuracy: 0, count: 6 },
  });
  assert.deepEqual(componentEvalMetrics(r), {
    'eval_greedy_acc/add1': 1,
    'eval_sample_acc/add1': 1,
    'eval_greedy_acc/mul3': 0,
    'eval_sample_acc/mul3': 0,
  });
  // with the greedy answers' mean reward (2 of 8 right, exact verifier)
  assert.deepEqual(
    r.extra,
    { ...componentEvalMetrics(r), eval_greedy_score: 0.25 },
    'the loop logs them with the evaluation',
  );
  const plain = getTask('arith', { digits: 1 });
  const p = await evaluate(plain.makeItems('test', 2, 1), 0, {
    sampler: sampler as never,
    encodePrompt: () => [0],
    decode: () => ';0',
    stopTokens: [0],
    maxResponseTokens: 8,
    reward: plain.reward,
    rng: new Rng(1),
  });
  assert.equal(p.components, undefined, 'a plain task has no components');
});

test('config errors: mix with name/options, a bad component option, duplicate labels, a nested mix, ucb without a mix', async () => {
  assert.throws(() => parseConfig({ task: { name: 'arith', mix } }), isConfigError('task.mix'));
  assert.throws(() => parseConfig({ task: { options: { digits: 2 }, mix } }), isConfigError('task.mix'));
  assert.throws(() => parseConfig({ task: { mix: [] } }), isConfigError('task.mix'));
  assert.throws(
    () => parseConfig({ task: { mix: [{ name: 'arith', weight: 0 }] } }),
    isConfigError('task.mix.0.weight'),
  );
  const build = (m: unknown) => {
    const c = parseConfig({ task: { mix: m } });
    return getTask(c.task.name, c.task.options);
  };
  assert.throws(
    () => build([{ name: 'arith' }, { name: 'arith', options: { digits: 0 } }]),
    isConfigError('task.mix.1.options.digits'),
  );
  assert.throws(() => build([{ name: 'nope' }]), isConfigError('task.mix.0.name'));
  assert.throws(
    () =>
      build([
        { name: 'arith', label: 'a' },
        { name: 'countdown', label: 'a' },
      ]),
    isConfigError('task.mix.1.label'),
  );
  assert.throws(
    () => build([{ name: 'mix', options: { components: [{ name: 'arith' }] } }]),
    isConfigError('task.mix.0.name'),
  );
  // the resolved config (written to the run directory) parses back to the same task
  const c = parseConfig({ task: { mix } });
  assert.deepEqual(parseConfig(JSON.parse(JSON.stringify({ task: c.task }))).task, c.task);
  const tokenizer = { encode: () => [1], decode: () => '', eos: 2, vocabSize: 10 };
  const make = (raw: Record<string, unknown>) =>
    Producer.create(parseConfig({ run: { trainItems: 8 }, ...raw }), undefined as never, tokenizer as never);
  await assert.rejects(make({ control: { select: { kind: 'ucb' } } }), isConfigError('control.select.kind'));
  const p = await make({ task: { mix }, control: { select: { kind: 'ucb' } } });
  assert.equal(p.groupSize > 0, true);
});
