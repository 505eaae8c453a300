/** The Optimize stage's learning-rate schedule: linear warm-up, then constant or cosine to a floor. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { learningRateAt } from '../../src/optimize/index.js';

const close = (a: number, b: number, tol = 1e-12) => assert.ok(Math.abs(a - b) <= tol, `${a} vs ${b}`);

test('learning-rate schedule: linear warm-up, constant, cosine to the floor', () => {
  const s = { kind: 'cosine' as const, learningRate: 1, warmupSteps: 4, totalSteps: 14, minRatio: 0.1 };
  assert.deepEqual(
    [0, 1, 2, 3].map((i) => learningRateAt(i, s)),
    [0.25, 0.5, 0.75, 1],
  );
  close(learningRateAt(4, s), 1);
  close(learningRateAt(9, s), 0.1 + 0.9 * 0.5); // half-way through the decay
  close(learningRateAt(14, s), 0.1);
  close(learningRateAt(100, s), 0.1);
  assert.equal(learningRateAt(50, { ...s, kind: 'constant' }), 1);
  // no warm-up: the cosine starts at the peak
  close(learningRateAt(0, { ...s, warmupSteps: 0 }), 1);
});
