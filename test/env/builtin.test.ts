import { test } from 'node:test';
import assert from 'node:assert/strict';
import { calculate, calculatorEnvironmentFactory } from '../../src/env/builtin/calculator.js';
import { kvEnvironmentFactory } from '../../src/env/builtin/kv.js';
import { codeEnvironmentFactory } from '../../src/env/builtin/code.js';
import { arborFormat } from '../../src/env/format/arbor.js';
import { kvTask } from '../../src/tasks/kv.js';
import { getTask } from '../../src/tasks/index.js';
import { DataError } from '../../src/core/errors.js';
import type { Environment, StepResult } from '../../src/env/types.js';

const f = arborFormat();
const opts = { timeoutMs: 2000 };
const step = (env: Environment, text: string): Promise<StepResult> =>
  env.step({ text, calls: f.parseCalls(text).calls }, opts);

test('calculator: exact integer arithmetic, fractions, errors as results', async () => {
  assert.equal(calculate('(12+3)*4'), '60');
  assert.equal(calculate('4821*937'), String(4821 * 937));
  assert.equal(calculate('7/2'), '7/2');
  assert.throws(() => calculate('1/0'), /division by zero/);
  const factory = calculatorEnvironmentFactory();
  const env = await factory.create();
  await env.reset({ id: 'a', prompt: '4821*937=', answer: '' }, { seed: 0, timeoutMs: 100 });
  assert.equal(f.renderTools(env.tools), 'tools: calc(expr)\n');
  const r = await step(env, '@calc(4821*937)@calc(2/0)@calc(import os)');
  assert.deepEqual(
    r.results.map((x) => [x.content, x.isError]),
    [
      ['4517277', false],
      ['calc: division by zero', true],
      ['calc: unexpected character "i" at 0', true],
    ],
  );
  assert.deepEqual(r.metrics, { toolCalls: 3, toolErrors: 2, toolTimeouts: 0 });
  assert.equal(r.done, false);
  assert.equal((await step(env, '4517277')).done, true);
});

test('kv: get/set/add on the item store, goal reward on the final state, forks independent, verifier replays', async () => {
  const task = kvTask();
  const [item] = task.makeItems('train', 1, 7);
  const { store, goal } = item.meta as {
    store: Record<string, number>;
    goal: { target: string; left: string; right: string };
  };
  const value = store[goal.left] + store[goal.right];
  assert.equal(item.prompt, `${goal.target}=${goal.left}+${goal.right}\n`);
  assert.equal(item.answer, String(value));
  const env = await kvEnvironmentFactory().create();
  await env.reset(item, { seed: 0, timeoutMs: 100 });
  assert.equal(f.renderTools(env.tools), 'tools: get(key) set(key,value) add(key,n)\n');
  const r1 = await step(env, `@get(${goal.left})@get(${goal.right})@get(zz)`);
  assert.deepEqual(
    r1.results.map((r) => r.content),
    [String(store[goal.left]), String(store[goal.right]), 'get: no key "zz"'],
  );
  assert.equal(r1.reward, 0);
  const wrong = await env.fork();
  const r2 = await step(env, `@set(${goal.target},${value})`);
  assert.deepEqual([r2.results[0].content, r2.reward], ['ok', 1]);
  const w2 = await step(wrong, `@set(${goal.target},${value + 1})`);
  assert.equal(w2.reward, 0, 'the fork does not see the parent set');
  const w3 = await step(wrong, `@add(${goal.target},-1)`);
  assert.deepEqual([w3.results[0].content, w3.reward], [String(value), 1]);
  const end = await step(env, String(value));
  assert.deepEqual([end.done, end.reward ?? 0], [true, 0]);

  // the demonstration is a correct 3-turn transcript: the verifier replays it to a reward of 1
  const turns = task.demonstrationTurns(item);
  assert.deepEqual(
    turns.map((t) => t.role),
    ['policy', 'env', 'policy', 'env', 'policy'],
  );
  assert.equal(turns[1].text, `\n= ${store[goal.left]}\n= ${store[goal.right]}\n`);
  const transcript = task.demonstration(item);
  const good = await task.reward.score({
    response: String(value),
    item,
    episode: { transcript, turns: 3, toolCalls: 3, toolErrors: 0 },
  });
  assert.equal(good.reward, 1);
  const unexecuted = `@get(${goal.left})\n= ${store[goal.left]}\n@set(${goal.target},${value})`;
  assert.equal(
    (
      await task.reward.score({
        response: '',
        item,
        episode: { transcript: unexecuted, turns: 2, toolCalls: 1, toolErrors: 0 },
      })
    ).reward,
    0,
    'calls of the last turn never ran',
  );
  assert.equal(
    (await task.reward.score({ response: String(value), item })).reward,
    0,
    'stating the value does not store it',
  );
  await assert.rejects(
    env.reset({ ...item, meta: { store: { a: 'x' } } }, { seed: 0, timeoutMs: 100 }),
    (e: unknown) => e instanceof DataError && e.field === 'meta.store.a',
  );
  assert.equal(getTask('kv', { storeSize: 3 }).makeItems('test', 2, 1).length, 2);
});

test('code: run_python in the sandbox; output, errors and a violated limit are results', async () => {
  const factory = codeEnvironmentFactory({ wallMs: 1500, cpuSeconds: 1 });
  const env = await factory.create();
  await env.reset({ id: 'c', prompt: '', answer: '' }, { seed: 0, timeoutMs: 100 });
  assert.deepEqual(
    env.tools.map((t) => t.name),
    ['run_python'],
  );
  const ok = await env.step(
    { text: '', calls: [{ name: 'run_python', arguments: { code: 'print(sum(range(10)))' }, raw: '' }] },
    { timeoutMs: 5000 },
  );
  assert.deepEqual([ok.results[0].content, ok.results[0].isError], ['45\n', false]);
  const t0 = Date.now();
  const spin = await env.step(
    {
      text: '',
      calls: [
        { name: 'run_python', arguments: { code: 'while True:\n    pass' }, raw: '' },
        { name: 'run_python', arguments: { code: 'raise ValueError("bad")' }, raw: '' },
      ],
    },
    { timeoutMs: 5000 },
  );
  assert.equal(spin.results[0].isError, true);
  assert.match(spin.results[0].content, /run_python: limit exceeded \((cpu|wall)\)/);
  assert.equal(spin.results[1].isError, true);
  assert.match(spin.results[1].content, /exit code 1: .*ValueError: bad/s);
  assert.ok(Date.now() - t0 < 5000, 'the limit stopped the program');
  assert.deepEqual(spin.metrics, { toolCalls: 2, toolErrors: 2, toolTimeouts: 0 });
  // the per-call timeout of the environment step is shorter than the sandbox's own wall limit
  const timed = await env.step(
    { text: '', calls: [{ name: 'run_python', arguments: { code: 'import time\ntime.sleep(5)' }, raw: '' }] },
    { timeoutMs: 300 },
  );
  assert.deepEqual([timed.results[0].isError, timed.metrics.toolTimeouts], [true, 1]);
});
