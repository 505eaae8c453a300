import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  allocatorFromConfig,
  allocateOptionsSchema,
  darsExtra,
  knapsackValue,
  solveKnapsack,
  studentTQuantile,
  usefulRollouts,
  xrpoPriority,
  type AllocationPrompt,
} from '../../src/control/allocate/index.js';

const close = (a: number, b: number, tol = 1e-9) => assert.ok(Math.abs(a - b) <= tol, `${a} vs ${b}`);
const prompt = (recent: number[], mean = 0.5, firstRound = recent): AllocationPrompt => ({
  firstRound,
  recent,
  posterior: { a: 1, b: 1, mean, variance: 0 },
});
const build = (o: Record<string, unknown>, G = 8) => allocatorFromConfig(allocateOptionsSchema.parse(o), G);

test('knapsack value V(n,p) = (1 - p^n - (1-p)^n) p (1-p)^2 and the useful-rollout cap', () => {
  close(knapsackValue(2, 0.5), 0.0625);
  close(knapsackValue(4, 0.5), 0.109375);
  close(knapsackValue(3, 0.25), (1 - 0.25 ** 3 - 0.75 ** 3) * 0.25 * 0.75 ** 2);
  assert.equal(knapsackValue(5, 0), 0);
  assert.equal(knapsackValue(5, 1), 0);
  assert.equal(usefulRollouts(0.5), 4); // ln 0.1 / ln 0.5 = 3.32
  assert.equal(usefulRollouts(0.9), 22); // 21.85
  assert.equal(usefulRollouts(0.1), 22);
  assert.equal(usefulRollouts(0), 0);
});

test('solveKnapsack: the multiple-choice DP picks the best split under the budget', () => {
  const table = [
    [0, 5, 6],
    [0, 4, 8],
  ];
  const value = (i: number, k: number) => table[i][k];
  assert.deepEqual(solveKnapsack([2, 2], value, 2), [1, 1]); // 9 beats 6 (2,0) and 8 (0,2)
  assert.deepEqual(solveKnapsack([2, 2], value, 3), [1, 2]); // 13 beats 10
  assert.deepEqual(solveKnapsack([2, 2], value, 0), [0, 0]);
  assert.deepEqual(solveKnapsack([2, 0], value, 5), [2, 0], 'caps bound each prompt');
});

test('knapsack allocator: capped DP over informative prompts, surplus to p=0 prompts, then evenly', () => {
  const a = build({ kind: 'knapsack', firstRound: 2, maxPerPrompt: 8 });
  // p = 0.5 (cap 4 total → 2 extra), p = 1 (no extra), p = 0 (surplus goes here, room 6)
  assert.deepEqual(a.extra([prompt([1, 0]), prompt([1, 1]), prompt([0, 0])], 6), [2, 0, 4]);
  // budget beyond every p=0 prompt's room spreads evenly over all prompts (round-robin)
  assert.deepEqual(a.extra([prompt([1, 0]), prompt([1, 1]), prompt([0, 0])], 14), [5, 3, 6]); // [2,0,6] then 6 round-robin over prompts with room
  // the history window counts: 1 of 8 recent rewards correct → p = 1/8, cap ceil(ln .1 / ln .875) = 18 → bounded by maxPerPrompt
  assert.deepEqual(a.extra([prompt([0, 0, 0, 0, 0, 0, 1, 0]), prompt([1, 1])], 5), [5, 0]);
});

test('Student t quantiles match the tables', () => {
  close(studentTQuantile(0.975, 1), 12.7062, 1e-4);
  close(studentTQuantile(0.975, 2), 4.3027, 1e-4);
  close(studentTQuantile(0.975, 10), 2.2281, 1e-4);
  close(studentTQuantile(0.975, 1000), 1.9623, 1e-4);
  close(studentTQuantile(0.025, 5), -2.5706, 1e-4);
  assert.throws(() => studentTQuantile(1, 3), /0 < q < 1/);
});

test('xrpo: each extra rollout goes to the largest half-width reduction (hand-computed order)', () => {
  // g(n) = t(n-1)/√n − t(n)/√(n+1): g(2) = 6.501, g(3) = 0.893; priorities s·g(n) with λ = 0
  const half = (n: number, s: number) => (studentTQuantile(0.975, n - 1) * s) / Math.sqrt(n);
  close(xrpoPriority(2, 0.5, 4, 0, half), 0.5 * (12.7062 / Math.SQRT2 - 4.3027 / Math.sqrt(3)), 1e-3);
  const a = build({ kind: 'xrpo', firstRound: 2, maxPerPrompt: 8, lambda: 0 });
  // s_A = 0.5, s_B = 0.3: A (3.25), then B (1.95), then A (0.447 > 0.268)
  assert.deepEqual(a.extra([prompt([1, 0], 0.5), prompt([1, 0], 0.1)], 3), [2, 1]);
  // maxPerPrompt caps: both full after 6 extra each; the rest of the budget is not spent
  assert.deepEqual(a.extra([prompt([1, 0], 0.5), prompt([1, 0], 0.1)], 20), [6, 6]);
  // the exploration bonus favours the least-sampled prompt when uncertainties are equal
  assert.ok(xrpoPriority(2, 0.3, 10, 1, half) > xrpoPriority(3, 0.3, 10, 1, half));
});

test('dars: extra rollouts for low first-round accuracy, equal-treatment and hardness-weighted', () => {
  assert.equal(darsExtra(0, 4, 'equal', 32), 6); // a := 0.125, S = 0.21875, (2 − 0.875) / S = 5.14
  assert.equal(darsExtra(0, 4, 'hardness', 32), 12); // (2·0.875·2 − 0.875) / S = 12
  assert.equal(darsExtra(0.25, 4, 'equal', 32), 2); // S = 0.375, (2 − 1.5) / S = 1.33
  assert.equal(darsExtra(0.25, 4, 'hardness', 32), 4); // (3 − 1.5) / S = 4
  assert.equal(darsExtra(0.5, 4, 'hardness', 32), 0);
  assert.equal(darsExtra(0, 4, 'hardness', 10), 6, 'capped at nMax − n');
  const a = build({ kind: 'dars', firstRound: 4, maxPerPrompt: 32, schedule: 'hardness' });
  const acc = (k: number) => prompt([...Array(k).fill(1), ...Array(4 - k).fill(0)]);
  assert.deepEqual(a.extra([acc(0), acc(1), acc(2)], 100), [12, 4, 0], 'within budget: what DARS asks');
  assert.deepEqual(a.extra([acc(0), acc(1), acc(2)], 8), [6, 2, 0], 'over budget: scaled');
  assert.deepEqual(a.extra([acc(0), acc(1), acc(2)], 7), [5, 2, 0], 'largest remainders first');
});

test('uniform: one round of G, nothing extra', () => {
  const a = build({ kind: 'uniform' }, 6);
  assert.equal(a.firstRound, 6);
  assert.deepEqual(a.extra([prompt([1]), prompt([0])], 10), [0, 0]);
});

test('largestRemainder: floors, then the largest fractions (earlier first on ties), summing to the total', async () => {
  const { largestRemainder } = await import('../../src/core/apportion.js');
  assert.deepEqual(largestRemainder([5.25, 1.75, 0], 7), [5, 2, 0]);
  assert.deepEqual(largestRemainder([1.5, 1.5, 1], 4), [2, 1, 1]);
  assert.deepEqual(largestRemainder([0.2, 0.2, 0.2, 0.2, 0.2], 1), [1, 0, 0, 0, 0]);
});
