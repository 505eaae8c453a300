import { test } from 'node:test';
import assert from 'node:assert/strict';
import { codeReward, extractCode, normalizeOutput } from '../../src/filter/code.js';
import { scoreSafely } from '../../src/filter/reward.js';
import { DataError } from '../../src/core/errors.js';
import type { TaskItem } from '../../src/core/types.js';

const limits = { wallMs: 3000, cpuSeconds: 2, memoryMB: 128 };
const item: TaskItem = {
  id: 'add-1',
  prompt: 'Read two integers and print their sum.',
  answer: '',
  meta: {
    tests: [
      { input: '1 2\n', expected: '3' },
      { input: '10 20\n', expected: '30\n' },
      { input: '-5 5', expected: '0' },
    ],
  },
};

test('correct, partially correct and crashing solutions score 1, 2/3, 0', async () => {
  const reward = codeReward({ limits });
  const correct = await reward.score({
    response: 'Here:\n```python\na, b = map(int, input().split())\nprint(a + b)   \n```\n',
    item,
  });
  assert.equal(correct.reward, 1, JSON.stringify(correct.info));
  assert.equal(correct.components.code, 1);
  assert.ok((correct.info as { isolation: unknown }).isolation);

  const partial = await reward.score({
    response: '```python\na, b = map(int, input().split())\nprint(a + b if a >= 0 else 99)\n```',
    item,
  });
  assert.ok(Math.abs(partial.reward - 2 / 3) < 1e-9);
  const tests = (partial.info as { tests: Array<{ status: string }> }).tests;
  assert.deepEqual(
    tests.map((t) => t.status),
    ['passed', 'passed', 'wrong_answer'],
  );

  const crash = await reward.score({ response: '```python\nraise SystemExit(1 / 0)\n```', item });
  assert.equal(crash.reward, 0);
  assert.deepEqual(
    (crash.info as { tests: Array<{ status: string }> }).tests.map((t) => t.status),
    ['runtime_error', 'runtime_error', 'runtime_error'],
  );
});

test('javascript solutions, testCode asserts, timeouts', async () => {
  const js = await codeReward({ limits }).score({
    response:
      'Solution:\n```js\nconst [a, b] = require("fs").readFileSync(0, "utf8").trim().split(/\\s+/).map(Number);\nconsole.log(a + b);\n```',
    item,
  });
  assert.equal(js.reward, 1, JSON.stringify(js.info));
  assert.equal((js.info as { language: string }).language, 'javascript');

  const asserts: TaskItem = {
    id: 'sq',
    prompt: '',
    answer: '',
    meta: { testCode: 'assert square(3) == 9\nassert square(-2) == 4\n' },
  };
  assert.equal(
    (
      await codeReward({ limits }).score({
        response: '```python\ndef square(x):\n    return x * x\n```',
        item: asserts,
      })
    ).reward,
    1,
  );
  assert.equal(
    (
      await codeReward({ limits }).score({
        response: '```python\ndef square(x):\n    return x + x\n```',
        item: asserts,
      })
    ).reward,
    0,
  );

  const one: TaskItem = { ...item, meta: { tests: [{ input: '1 2', expected: '3' }] } };
  const slow = await codeReward({ limits: { ...limits, cpuSeconds: 1, wallMs: 1500 } }).score({
    response: '```python\nwhile True: pass\n```',
    item: one,
  });
  assert.equal(slow.reward, 0);
  assert.equal((slow.info as { tests: Array<{ status: string }> }).tests[0].status, 'timeout');
});

test('fenced block extraction and output normalization', () => {
  assert.deepEqual(extractCode('text\n```python\nprint(1)\n```\nmore\n```py\nprint(2)\n```\n'), {
    code: 'print(2)\n',
    language: 'python',
  });
  assert.deepEqual(extractCode('```\nprint(3)\n```'), { code: 'print(3)\n' });
  assert.deepEqual(extractCode('```js\nconsole.log(1)\n```\n```text\nnot code\n```'), {
    code: 'console.log(1)\n',
    language: 'javascript',
  });
  assert.deepEqual(extractCode('print(4)'), { code: 'print(4)' });
  assert.equal(normalizeOutput('a  \r\nb\t\n\n'), 'a\nb');
});

test('bad item.meta → DataError naming the item and field', async () => {
  const reward = codeReward({ limits });
  await assert.rejects(
    reward.score({ response: 'print(1)', item: { id: 'x1', prompt: '', answer: '' } }),
    (e: unknown) => e instanceof DataError && /x1/.test(e.message) && e.field === 'meta.tests',
  );
  await assert.rejects(
    reward.score({
      response: 'print(1)',
      item: { id: 'x2', prompt: '', answer: '', meta: { tests: [{ input: '1' }] } },
    }),
    (e: unknown) => e instanceof DataError && /x2/.test(e.message) && e.field === 'meta.tests[0].expected',
  );
  await assert.rejects(
    reward.score({ response: 'print(1)', item: { id: 'x3', prompt: '', answer: '', meta: { tests: 'nope' } } }),
    (e: unknown) => e instanceof DataError && /x3/.test(e.message) && e.field === 'meta.tests',
  );
  // Through scoreSafely a DataError becomes the failure reward with the message in info.error.
  const safe = await scoreSafely(reward, {
    response: 'print(1)',
    item: { id: 'x4', prompt: '', answer: '', meta: {} },
  });
  assert.equal(safe.reward, 0);
  assert.match(String(safe.info.error), /x4/);
});
