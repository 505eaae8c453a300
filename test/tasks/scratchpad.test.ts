/**
 * The scratchpad task: the exact step layout, the first-wrong-step checker on hand-made scratchpads
 * (correct, a dropped carry at step k, a flawed-correct line, garbage), the teacher shares counted over
 * 1000 items, and the option checks.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError } from '../../src/core/errors.js';
import { firstWrongStep, getTask, scratchpadLines } from '../../src/tasks/index.js';

const item = { id: '347*86=', prompt: '347*86=', answer: '29842' };
// 347 × 86 worked by hand: row 6 (347·6 = 2082), row 8 shifted (27760), then the column sum
const correct = [
  '7*6+0=42',
  '4*6+4=28',
  '3*6+2=20',
  '2082',
  '7*8+0=56',
  '4*8+5=37',
  '3*8+3=27',
  '27760',
  '2+0+0=02',
  '8+6+0=14',
  '0+7+1=08',
  '2+7+0=09',
  '0+2+0=02',
  ';29842',
];

test('a correct scratchpad has the hand-worked layout and no wrong step', async () => {
  assert.deepEqual(scratchpadLines(347, 86), correct);
  assert.equal(firstWrongStep(item, correct.join('\n')), null);
  assert.equal(firstWrongStep(item, correct.join('\n') + '\n'), null);
  const task = getTask('scratchpad');
  assert.equal((await task.reward.score({ response: correct.join('\n'), item })).reward, 1);
});

test('a dropped carry at step 1 is found at 1 even though later lines follow from it', async () => {
  // 4*6 without the carry 4: 24, so the row is 2042, the sum 29802 (wrong answer, consistent later lines)
  const slipped = [...correct.slice(0, 1), '4*6+0=24', '3*6+2=20', '2042', ...correct.slice(4, 8)];
  slipped.push('2+0+0=02', '4+6+0=10', '0+7+1=08', '2+7+0=09', '0+2+0=02', ';29802');
  assert.deepEqual(scratchpadLines(347, 86, { kind: 'dropped_carry', step: 1 }), slipped);
  assert.equal(firstWrongStep(item, slipped.join('\n')), 1);
  const task = getTask('scratchpad');
  assert.equal((await task.reward.score({ response: slipped.join('\n'), item })).reward, 0);
});

test('a flawed-correct line (wrong carry, right result) is found while the answer verifies', async () => {
  const flawed = [...correct];
  flawed[5] = '4*8+0=37';
  assert.deepEqual(scratchpadLines(347, 86, { kind: 'flawed_correct', step: 5 }), flawed);
  assert.equal(firstWrongStep(item, flawed.join('\n')), 5);
  const task = getTask('scratchpad');
  assert.equal((await task.reward.score({ response: flawed.join('\n'), item })).reward, 1);
  // a wrong answer line after correct steps is the last step
  assert.equal(firstWrongStep(item, [...correct.slice(0, 13), ';29843'].join('\n')), 13);
  // a missing step: the answer line stands where a column was expected
  assert.equal(firstWrongStep(item, [...correct.slice(0, 12), ';29842'].join('\n')), 12);
});

test('garbage, a missing answer line or a line outside the grammar is unparseable (−1)', () => {
  assert.equal(firstWrongStep(item, 'the answer is 29842'), -1);
  assert.equal(firstWrongStep(item, correct.slice(0, 13).join('\n')), -1);
  assert.equal(firstWrongStep(item, [...correct.slice(0, 2), '4*6=28', ...correct.slice(3)].join('\n')), -1);
  assert.equal(firstWrongStep(item, ''), -1);
  assert.throws(
    () => firstWrongStep({ id: 'x', prompt: '3+4=', answer: '7' }, ';7'),
    (e: Error) => /item "x": prompt is not "a\*b="/.test(e.message),
  );
});

test("the teachers' shares over 1000 items are the options' and each kind reads as it should", async () => {
  const task = getTask('scratchpad', { teacherErrorRate: 0.3, flawedCorrectRate: 0.2 });
  const items = task.makeItems('train', 1000, 7);
  assert.equal(items.length, 1000);
  const counts = { correct: 0, dropped_carry: 0, flawed_correct: 0 };
  const lengths: number[] = [];
  for (const it of items) {
    const demo = task.demonstration(it);
    lengths.push(demo.length);
    const right = (await task.reward.score({ response: demo, item: it })).reward === 1;
    const wrong = firstWrongStep(it, demo);
    const kind = it.meta?.teacher as keyof typeof counts;
    counts[kind]++;
    if (kind === 'correct') assert.ok(right && wrong === null, `${it.id}: ${demo}`);
    if (kind === 'dropped_carry') assert.ok(!right && wrong !== null && wrong > 0, `${it.id}: ${demo}`);
    if (kind === 'flawed_correct') assert.ok(right && wrong !== null && wrong > 0, `${it.id}: ${demo}`);
  }
  // binomial sd at n = 1000 is ≤ 0.016: ±0.05 is more than 3 sd
  assert.ok(Math.abs(counts.dropped_carry / 1000 - 0.3) < 0.05, JSON.stringify(counts));
  assert.ok(Math.abs(counts.flawed_correct / 1000 - 0.2) < 0.05, JSON.stringify(counts));
  // the defaults (2..3 × 2 digits) write 60–200 characters
  const [shortest, longest] = [Math.min(...lengths), Math.max(...lengths)];
  assert.ok(shortest >= 60 && longest <= 200, `${shortest}..${longest}`);
  const testItems = task.makeItems('test', 200, 7);
  assert.equal(testItems.filter((t) => items.some((i) => i.id === t.id)).length, 0);
});

test('option errors name the key', () => {
  const named = (key: string) => (e: unknown) => e instanceof ConfigError && e.path === key;
  assert.throws(
    () => getTask('scratchpad', { teacherErrorRate: 0.7, flawedCorrectRate: 0.4 }),
    named('task.options.flawedCorrectRate'),
  );
  assert.throws(() => getTask('scratchpad', { minDigits: 4, digits: 3 }), named('task.options.minDigits'));
  assert.throws(() => getTask('scratchpad', { multiplierDigits: 4 }), named('task.options.multiplierDigits'));
});
