/**
 * The held-out scores an evaluation adds (src/run/evaluate.ts): the greedy answers' mean reward, and with a
 * step judge the share of correct answers with a wrong step (FAPO's flawed positives), on real scratchpads
 * judged by the scratchpad task's own `firstWrongStep`.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { flawedShare, heldOutScores } from '../../src/run/evaluate.js';
import { firstWrongStep, scratchpadLines } from '../../src/tasks/index.js';

const item = { id: '347*86=', prompt: '347*86=', answer: '29842' };
const text = (lines: string[]) => lines.join('\n');
const right = text(scratchpadLines(347, 86));
const flawed = text(scratchpadLines(347, 86, { kind: 'flawed_correct', step: 5 }));
const wrong = text(scratchpadLines(347, 86, { kind: 'dropped_carry', step: 1 }));

test('flawed share: flawed positives among correct answers only; wrong answers and a judge-less task do not count', () => {
  const inputs = [right, flawed, flawed, wrong].map((response) => ({ item, response }));
  const rewards = [1, 1, 1, 0];
  assert.equal(firstWrongStep(item, flawed), 5, 'the fixture is a flawed positive');
  assert.equal(flawedShare(inputs, rewards, firstWrongStep), 2 / 3);
  assert.equal(flawedShare(inputs, rewards), undefined, 'no judge');
  assert.equal(flawedShare(inputs, [0, 0, 0, 0], firstWrongStep), undefined, 'no correct answer');
  // a correct answer that is no scratchpad cannot be shown right: flawed
  assert.equal(flawedShare([{ item, response: ';29842' }], [1], firstWrongStep), 1);
});

test('held-out scores: mean greedy reward always, the flawed rate only with a judge', () => {
  const inputs = [right, flawed, wrong, wrong].map((response) => ({ item, response }));
  const rewards = [1, 1, 0, 0.5];
  assert.deepEqual(heldOutScores(inputs, rewards), { eval_greedy_score: 0.625 });
  assert.deepEqual(heldOutScores(inputs, rewards, firstWrongStep), {
    eval_greedy_score: 0.625,
    eval_flawed_positive_rate: 0.5,
  });
});
