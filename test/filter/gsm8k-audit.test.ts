/**
 * Tests for the GSM8K audit (src/filter/math/gsm8k-audit.ts) on hand-made rows: the last stated
 * number (with currency sign and unit word), text self-verification without the `#### N` line, and
 * answer mutants (N+1, N·10, sign flipped, each also with another unit word) that must score 0.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  auditGsm8k,
  auditScore,
  lastStatedNumber,
  mutateSolution,
  mutatedValues,
  stripFinalAnswerLine,
  textSelfVerify,
} from '../../src/filter/math/index.js';

const ROWS = [
  {
    answer:
      'Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\nShe makes 9 * 2 = $<<9*2=18>>18 every day.\n#### 18',
  },
  {
    answer:
      'So the new value is 120,000+80,000=$<<120000+80000=200000>>200,000\nSo he made a profit of $70,000\n#### 70000',
  },
  { answer: 'He sprints 3*3=<<3*3=9>>9 times\nSo he runs 9*60=<<9*60=540>>540 meters\n#### 540' },
  { answer: 'The temperature fell by 3+4=<<3+4=7>>7 degrees, so it is now 0-7 = -7 degrees.\n#### -7' },
  { answer: 'Each razor costs $2.00/8 = $<<2/8=0.25>>0.25\n#### 0.25' },
  { answer: 'So 12 + 13 = 25% of the class passed.\n#### 25' },
];

test('stripFinalAnswerLine drops the #### line and calculator annotations', () => {
  assert.equal(
    stripFinalAnswerLine(ROWS[0].answer),
    'Janet sells 16 - 3 - 4 = 9 duck eggs a day.\nShe makes 9 * 2 = $18 every day.',
  );
  assert.ok(!stripFinalAnswerLine(ROWS[3].answer).includes('####'));
});

test('lastStatedNumber: currency sign, thousands, unit word, sign, percent', () => {
  const s = (i: number) => lastStatedNumber(stripFinalAnswerLine(ROWS[i].answer));
  assert.deepEqual([s(0)?.text, s(0)?.unit], ['$18', null]); // "every" is not a unit word
  assert.equal(s(1)?.text, '$70,000');
  assert.deepEqual([s(2)?.text, s(2)?.unit], ['540 meters', 'meters']);
  assert.deepEqual([s(3)?.text, s(3)?.number], ['-7 degrees', '-7']);
  assert.equal(s(4)?.text, '$0.25');
  assert.equal(s(5)?.text, '25%');
  assert.equal(lastStatedNumber('no numbers here'), null);
  assert.equal(lastStatedNumber('5-2=3')?.number, '3');
});

test('text self-verify: every hand-made row verifies without its #### line', () => {
  const golds = ['18', '70000', '540', '-7', '0.25', '25'];
  ROWS.forEach((row, i) => assert.equal(textSelfVerify(row.answer, golds[i]).ok, true, row.answer));
  assert.equal(textSelfVerify(ROWS[0].answer, '19').ok, false);
  assert.equal(textSelfVerify('He had some apples.\n#### 4', '4').ok, false); // no stated number
});

test('mutatedValues: N+1, N·10, sign flip (none of the last two for 0)', () => {
  assert.deepEqual(mutatedValues('18'), [
    { kind: 'plus_one', value: 19 },
    { kind: 'times_ten', value: 180 },
    { kind: 'sign_flip', value: -18 },
  ]);
  assert.deepEqual(
    mutatedValues('-7').map((m) => m.value),
    [-6, -70, 7],
  );
  assert.deepEqual(
    mutatedValues('0.25').map((m) => m.value),
    [1.25, 2.5, -0.25],
  );
  assert.deepEqual(
    mutatedValues('0').map((m) => m.kind),
    ['plus_one'],
  );
});

test('mutants rewrite the #### line and the last stated number, with and without another unit word', () => {
  const ms = mutateSolution(ROWS[2].answer, '540');
  assert.equal(ms.length, 6);
  const plain = ms.find((m) => m.kind === 'plus_one' && !m.otherUnit)!;
  assert.ok(plain.solution.endsWith('So he runs 9*60=541 meters\n#### 541'), plain.solution);
  const unit = ms.find((m) => m.kind === 'sign_flip' && m.otherUnit)!;
  assert.ok(unit.solution.endsWith('So he runs 9*60=-540 apples\n#### -540 apples'), unit.solution);
  const commas = mutateSolution(ROWS[1].answer, '70000').find((m) => m.kind === 'times_ten' && !m.otherUnit)!;
  assert.ok(commas.solution.endsWith('profit of $700,000\n#### 700000'), commas.solution);
  for (const m of ms) assert.equal(auditScore(m.solution, '540'), 0, m.solution);
  assert.equal(auditScore(ROWS[2].answer, '540'), 1);
});

test('auditGsm8k on the hand-made rows: all text-verified, all mutants rejected, other unit accepted', () => {
  const r = auditGsm8k(ROWS);
  assert.equal(r.rows, 6);
  assert.equal(r.textSelfVerify, 1);
  assert.equal(r.mutants, 36);
  assert.equal(r.mutantsRejected, 1, JSON.stringify(r.failures.mutants));
  assert.equal(r.otherUnitAccepted, 1);
  assert.deepEqual(r.mutantsByKind.plus_one, { rejected: 6, total: 6 });
});
