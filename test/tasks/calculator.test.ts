import { test } from 'node:test';
import assert from 'node:assert/strict';
import { calculatorTask, countCalls, extractFinalAnswer } from '../../src/tasks/calculator.js';
import { getTask, knownTasks } from '../../src/tasks/index.js';
import { calculatorEnvironmentFactory } from '../../src/env/builtin/calculator.js';
import { arborFormat } from '../../src/env/format/arbor.js';
import { ConfigError } from '../../src/core/errors.js';

test('calculator items: deterministic per seed, digits in range, train/test disjoint', () => {
  const task = calculatorTask();
  const a = task.makeItems('train', 200, 3);
  assert.deepEqual(task.makeItems('train', 200, 3), a);
  assert.notDeepEqual(
    task.makeItems('train', 200, 4).map((i) => i.id),
    a.map((i) => i.id),
  );
  const test = new Set(task.makeItems('test', 100, 3).map((i) => i.id));
  assert.ok(a.every((i) => !test.has(i.id)));
  for (const item of a) {
    const m = /^(\d+)\*(\d+)=$/.exec(item.prompt);
    assert.ok(m, item.prompt);
    assert.ok(m[1].length >= 3 && m[1].length <= 4 && m[2].length >= 1 && m[2].length <= 4, item.prompt);
    assert.equal(item.answer, String(Number(m[1]) * Number(m[2])));
  }
  const withTool = a.filter((i) => (i.meta as { useTool: boolean }).useTool).length;
  assert.ok(withTool > 60 && withTool < 140, `about half call the tool (${withTool}/200)`);
  const none = calculatorTask({ demoToolRate: 0 }).makeItems('train', 50, 3);
  assert.ok(none.every((i) => !calculatorTask({ demoToolRate: 0 }).demonstration(i).includes('@')));
  assert.ok(knownTasks().includes('calculator') && knownTasks().includes('kv'));
  assert.equal(
    getTask('calculator', { minDigitsA: 2, maxDigitsA: 2, maxDigitsB: 1 }).makeItems('train', 5, 1)[0].prompt.length,
    5,
  );
  assert.throws(
    () => getTask('calculator', { minDigitsA: 5, maxDigitsA: 4 }),
    (e: unknown) => e instanceof ConfigError && e.path === 'task.options.minDigitsA',
  );
  assert.throws(
    () => getTask('calculator', { demoToolRate: 2 }),
    (e: unknown) => e instanceof ConfigError && e.path === 'task.options.demoToolRate',
  );
});

test('calculator verifier: the final answer of the last policy turn, tool cost per call', async () => {
  const task = calculatorTask({ toolCost: 0.1 });
  const item = {
    id: '1234*56=',
    prompt: '1234*56=',
    answer: String(1234 * 56),
    meta: { a: 1234, b: 56, useTool: true },
  };
  const score = async (response: string, transcript?: string) =>
    (
      await task.reward.score({
        response,
        item,
        ...(transcript ? { episode: { transcript, turns: 2, toolCalls: countCalls(transcript), toolErrors: 0 } } : {}),
      })
    ).reward;
  assert.equal(await score('69104'), 1);
  assert.equal(await score('69105'), 0);
  assert.equal(await score('69104x'), 0);
  assert.equal(await score('@calc(1234*56)\n= 69104\n69104'), 0.9);
  assert.equal(await score('69104', '@calc(1234*56)\n= 69104\n69104'), 0.9);
  assert.equal(await score('@calc(1234*56)\n= 69104\n'), -0.1, 'ended on an observation: no answer');
  assert.equal(extractFinalAnswer('@calc(1*2)\n= 2\n @calc(2*2) 2 '), '2');
  assert.equal(task.extractAnswer?.(''), null);
});

test('calculator demonstrations verify, and match what the environment answers', async () => {
  const task = calculatorTask();
  const f = arborFormat();
  const env = await calculatorEnvironmentFactory().create();
  let tooled = 0;
  for (const item of task.makeItems('train', 40, 11)) {
    const turns = task.demonstrationTurns(item);
    const text = task.demonstration(item);
    assert.equal(text, turns.map((t) => t.text).join(''));
    assert.equal((await task.reward.score({ response: text, item })).reward, 1, text);
    if (turns.length === 1) {
      assert.deepEqual(turns, [{ text: item.answer, role: 'policy' }]);
      continue;
    }
    tooled++;
    assert.deepEqual(
      turns.map((t) => t.role),
      ['policy', 'env', 'policy'],
    );
    await env.reset(item, { seed: 0, timeoutMs: 100 });
    const r = await env.step({ text: turns[0].text, calls: f.parseCalls(turns[0].text).calls }, { timeoutMs: 1000 });
    assert.equal(
      turns[1].text,
      f
        .renderObservation(r.results)
        .map((p) => p.text)
        .join(''),
      'the demo shows exactly what the environment answers',
    );
    assert.equal(f.finalAnswer(turns[2].text), item.answer);
  }
  assert.ok(tooled > 5 && tooled < 35);
});
