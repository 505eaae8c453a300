import { test } from 'node:test';
import assert from 'node:assert/strict';
import { z } from 'zod';
import {
  arithSolution,
  extractArithAnswer,
  getTask,
  checkCountdown,
  evaluateExpression,
  knownTasks,
  registerTask,
} from '../../src/tasks/index.js';
import { ConfigError } from '../../src/core/errors.js';

test('arith scratchpad: hand-computed columns with fixed-width records', () => {
  assert.deepEqual(arithSolution(347, '+', 85), { scratch: '7+5+0=12,4+8+1=13,3+0+1=04', answer: 432 });
  assert.deepEqual(arithSolution(52, '-', 25), { scratch: '2-5-0=71,5-2-1=20', answer: 27 });
  assert.deepEqual(arithSolution(47, '*', 3), { scratch: '7*3+0=21,4*3+2=14', answer: 141 });
  assert.equal(extractArithAnswer('7+5+0=12;432'), '432');
  assert.equal(extractArithAnswer('1;2;007'), '7');
  assert.equal(extractArithAnswer('no answer'), null);
  assert.equal(extractArithAnswer('x;abc'), null);
});

test('arith careless teacher: drops carries and borrows in demonstrations only', async () => {
  assert.deepEqual(arithSolution(47, '+', 85, { dropCarries: true }), { scratch: '7+5+0=12,4+8+0=12', answer: 122 });
  assert.deepEqual(arithSolution(52, '-', 48, { dropCarries: true }), { scratch: '2-8-0=41,5-4-0=10', answer: 14 });
  assert.deepEqual(arithSolution(347, '*', 7, { dropCarries: true }), {
    scratch: '7*7+0=49,4*7+0=28,3*7+0=21',
    answer: 2189,
  });
  assert.deepEqual(arithSolution(99, '+', 1, { dropCarries: true }), { scratch: '9+1+0=10,9+0+0=09', answer: 90 });
  // no carry anywhere: the careless teacher is right
  assert.deepEqual(arithSolution(41, '+', 38, { dropCarries: true }), arithSolution(41, '+', 38));
  const clean = getTask('arith', { digits: 2, ops: ['+', '-'] }).makeItems('train', 2000, 3);
  const noisyTask = getTask('arith', { digits: 2, ops: ['+', '-'], teacherErrorRate: 0.75 });
  const noisy = noisyTask.makeItems('train', 2000, 3);
  assert.deepEqual(
    noisy.map((x) => [x.prompt, x.answer]),
    clean.map((x) => [x.prompt, x.answer]),
    'same problems and true answers',
  );
  let wrong = 0,
    carries = 0;
  for (let i = 0; i < noisy.length; i++) {
    const careless = arithSolution(...parse(clean[i].prompt), { dropCarries: true });
    const needsCarry = clean[i].demonstration !== `${careless.scratch};${careless.answer}`;
    if (needsCarry) carries++;
    if (noisy[i].demonstration !== clean[i].demonstration) {
      wrong++;
      assert.ok(needsCarry, `${noisy[i].prompt}: only problems with a carry or borrow can differ`);
      assert.equal(
        (await noisyTask.reward.score({ response: noisy[i].demonstration!, item: noisy[i] })).reward,
        0,
        'the verifier still checks the true answer',
      );
    }
  }
  assert.ok(Math.abs(wrong / carries - 0.75) < 0.05, `careless share of carry problems ${wrong}/${carries}`);
  assert.throws(
    () => getTask('arith', { teacherErrorRate: 2 }),
    (e: unknown) =>
      e instanceof ConfigError &&
      e.path === 'task.options.teacherErrorRate' &&
      /less than or equal to 1/.test(e.message),
  );
});

function parse(prompt: string): [number, string, number] {
  const m = /^(\d+)([+*-])(\d+)=$/.exec(prompt)!;
  return [Number(m[1]), m[2], Number(m[3])];
}

test('tasks: deterministic, disjoint splits, every demonstration verifies', async () => {
  for (const name of ['arith', 'countdown']) {
    const task = getTask(name, name === 'arith' ? { digits: 3 } : {});
    const a = task.makeItems('train', 200, 7);
    const b = task.makeItems('train', 200, 7);
    const c = task.makeItems('train', 200, 8);
    const t = task.makeItems('test', 100, 7);
    assert.deepEqual(a, b, `${name}: same seed same items`);
    assert.notDeepEqual(
      a.map((x) => x.id),
      c.map((x) => x.id),
      `${name}: different seeds differ`,
    );
    const trainIds = new Set(task.makeItems('train', 1000, 7).map((x) => x.id));
    assert.ok(
      t.every((x) => !trainIds.has(x.id)),
      `${name}: test items never appear in train`,
    );
    for (const item of [...a, ...t]) {
      const r = await task.reward.score({ response: task.demonstration(item), item });
      assert.equal(r.reward, 1, `${name}: demonstration of ${item.prompt} → ${task.demonstration(item)} should verify`);
      assert.ok((item.prompt + task.demonstration(item)).length < 120, 'fits the default context');
    }
    const wrong = await task.reward.score({ response: 'garbage', item: a[0] });
    assert.equal(wrong.reward, 0);
  }
});

test('countdown verifier: safe parsing, number usage, exact division', () => {
  assert.equal(checkCountdown('3*5+7', [3, 5, 7], 22).correct, true);
  assert.equal(checkCountdown('(3+5)*2', [3, 5, 2], 16).correct, true);
  assert.equal(checkCountdown('3*5', [3, 5, 7], 15).correct, true, 'at most once by default');
  assert.equal(checkCountdown('3*5', [3, 5, 7], 15, true).correct, false, 'exactly once when useAll');
  assert.equal(checkCountdown('3*3', [3, 5, 7], 9).correct, false, 'number reused');
  assert.equal(checkCountdown('7/2', [7, 2], 3).correct, false, 'non-integer result');
  assert.equal(checkCountdown('8/0', [8, 0], 1).wellFormed, false, 'division by zero');
  for (const hostile of ['process.exit()', '1;2', 'require("fs")', '2**3', '(((', '', '9'.repeat(300)]) {
    const r = evaluateExpression(hostile);
    assert.equal(r.ok, false, `${hostile} must be rejected`);
  }
  const e = evaluateExpression('-(2+3)*4/2');
  assert.ok(e.ok && e.num === -10n && e.den === 1n);
});

test('task registry: unknown names and options are errors naming the key', () => {
  assert.ok(knownTasks().includes('arith'));
  assert.throws(
    () => getTask('nope'),
    (e: unknown) => e instanceof ConfigError && /known: .*arith/.test(e.message),
  );
  assert.throws(
    () => getTask('arith', { digitz: 2 }),
    (e: unknown) =>
      e instanceof ConfigError &&
      e.path === 'task.options.digitz' &&
      /^task\.options\.digitz: .*'digitz'/.test(e.message),
  );
});

test('registerTask returns its undo: a new name is removed again, a replaced task comes back', () => {
  const before = knownTasks();
  const arith = getTask('arith', { digits: 1, ops: ['+'] });
  const undoNew = registerTask('registry-probe', z.object({}).strict(), () => ({ ...arith, name: 'registry-probe' }));
  assert.deepEqual(knownTasks(), [...before, 'registry-probe'].sort());
  assert.equal(getTask('registry-probe').name, 'registry-probe');
  undoNew();
  assert.deepEqual(knownTasks(), before);
  const undoReplace = registerTask('arith', z.object({}).strict(), () => ({ ...arith, name: 'replaced' }));
  assert.equal(getTask('arith').name, 'replaced');
  undoReplace();
  assert.equal(getTask('arith', { digits: 1, ops: ['+'] }).name, arith.name);
  assert.deepEqual(knownTasks(), before);
});
