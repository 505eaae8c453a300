/**
 * The closest task: grading on hand cases (exact best, farther values, invalid and reused numbers, the
 * clip at 1), the exhaustive search on hand cases, every demonstration scoring 1 and evaluating to its
 * item's answer, deterministic disjoint splits, and the registry's option checks.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError } from '../../src/core/errors.js';
import { closestExpression, evaluateExpression, getTask, gradeClosest } from '../../src/tasks/index.js';

// 2 and 3 with target 10: the best reachable is 2*3 = 6, distance 4; width 2 → scores (1 + 2) / (1 + d/2)
const meta = { numbers: [2, 3], target: 10, best: 4 };

test('closest: grades by distance relative to the best reachable', () => {
  assert.equal(gradeClosest('2*3', meta, 2).score, 1);
  assert.equal(gradeClosest(' 3x2 ', meta, 2).score, 1);
  assert.equal(gradeClosest('2+3', meta, 2).score, 3 / 3.5);
  assert.equal(gradeClosest('2', meta, 2).score, 3 / 5);
  assert.equal(gradeClosest('3-2', meta, 2).score, 3 / 5.5);
  assert.equal(gradeClosest('2+3', meta, 2).value, 5);
  // a wider width grades more gently: (1 + 4/8) / (1 + 5/8)
  assert.equal(gradeClosest('2+3', meta, 8).score, 1.5 / 1.625);
});

test('closest: invalid expressions and numbers not given score 0', () => {
  for (const bad of ['2*2', '3+3', '4', '2*3*7', '', 'abc', '2*(3', '2/0']) {
    const grade = gradeClosest(bad, meta, 2);
    assert.equal(grade.score, 0, `${JSON.stringify(bad)}: ${grade.reason}`);
    assert.equal(grade.value, undefined);
  }
});

test('closest: a rational path that beats the search clips at 1', () => {
  // the integer-only search cannot use 3/2; grant it a worse best to reach the clip
  const grade = gradeClosest('3/2', { numbers: [2, 3], target: 2, best: 1 }, 2);
  assert.equal(grade.score, 1);
  assert.equal(grade.value, 1.5);
});

test('closest: the exhaustive search finds the closest value, shortest text first', () => {
  assert.deepEqual(closestExpression([2, 3], 10), { text: '2*3', value: 6 });
  assert.equal(closestExpression([1, 2, 9], 27).value, 27);
  assert.equal(closestExpression([3, 5, 7], 50).value, 50);
  // exact beats short (9-1 over 9), and among exact values the shorter text wins (9 over 4+... forms)
  assert.deepEqual(closestExpression([1, 9], 8), { text: '9-1', value: 8 });
  assert.deepEqual(closestExpression([4, 9], 9), { text: '9', value: 9 });
});

test('closest: every demonstration scores 1 and evaluates to the answer', async () => {
  const task = getTask('closest', { count: 4, maxNumber: 9, maxTarget: 200 });
  const items = task.makeItems('train', 150, 7);
  assert.equal(items.length, 150);
  for (const item of items) {
    const demo = task.demonstration(item);
    const value = evaluateExpression(demo);
    assert.ok(value.ok && value.den === 1n && String(value.num) === item.answer, `${item.prompt} ${demo}`);
    const result = await task.reward.score({ response: demo, item });
    assert.equal(result.reward, 1, `${item.prompt} ${demo}: ${String(result.info?.reason)}`);
  }
  const off = await task.reward.score({ response: '1*1*1*1*1*1', item: items[0] });
  assert.equal(off.reward, 0);
});

test('closest: splits are deterministic and disjoint', () => {
  const task = getTask('closest', {});
  const train = task.makeItems('train', 200, 1);
  const test = task.makeItems('test', 40, 1);
  assert.deepEqual(task.makeItems('train', 200, 1), train);
  assert.notDeepEqual(task.makeItems('train', 200, 2), train);
  const trainIds = new Set(train.map((i) => i.id));
  assert.equal(test.filter((i) => trainIds.has(i.id)).length, 0);
  assert.match(train[0].prompt, /^\d+ \d+ \d+ ~ \d+:$/);
});

test('closest: options are checked', () => {
  assert.throws(
    () => getTask('closest', { count: 5 }),
    (e: unknown) => e instanceof ConfigError && /task\.options\.count/.test(e.message),
  );
  assert.throws(
    () => getTask('closest', { width: 0 }),
    (e: unknown) => e instanceof ConfigError && /task\.options\.width/.test(e.message),
  );
});
