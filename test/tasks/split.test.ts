/**
 * drawSplit (src/tasks/split.ts), the one train/test split every generated task draws from: disjoint,
 * deterministic, duplicates and skipped draws left out, the hash key chosen by the task.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { hashString } from '../../src/core/rng.js';
import type { TaskItem } from '../../src/core/types.js';
import { drawSplit } from '../../src/tasks/split.js';

const numbers = (rng: { int(n: number): number }): TaskItem => {
  const n = rng.int(1000);
  return { id: `n${n}`, prompt: `${n}?`, answer: String(n) };
};

test('drawSplit: disjoint, deterministic, distinct, bucket 0 of 5 is the test split', () => {
  const train = drawSplit('t', 'train', 200, 3, numbers);
  const test_ = drawSplit('t', 'test', 50, 3, numbers);
  assert.equal(train.length, 200);
  assert.equal(test_.length, 50);
  assert.deepEqual(drawSplit('t', 'train', 200, 3, numbers), train);
  assert.notDeepEqual(drawSplit('t', 'train', 200, 4, numbers), train);
  assert.equal(new Set(train.map((i) => i.id)).size, 200);
  assert.ok(test_.every((i) => hashString(i.prompt) % 5 === 0));
  assert.ok(train.every((i) => hashString(i.prompt) % 5 !== 0));
});

test('drawSplit: skipped draws, the key function, and a space too small for the count', () => {
  let calls = 0;
  const skipEveryOther = (rng: { int(n: number): number }) => (calls++ % 2 ? numbers(rng) : null);
  assert.equal(drawSplit('t', 'train', 20, 1, skipEveryOther).length, 20);
  const byId = drawSplit('t', 'test', 30, 1, numbers, (i) => i.id);
  assert.ok(byId.every((i) => hashString(i.id) % 5 === 0));
  assert.ok(
    byId.some((i) => hashString(i.prompt) % 5 !== 0),
    'the prompt is not what was hashed',
  );
  // 10 distinct values: exactly the training ones among them come back, then the draw gives up
  const tiny = drawSplit('t', 'train', 50, 1, (rng) => numbers({ int: () => rng.int(10) }));
  const trainable = [...Array(10).keys()].filter((n) => hashString(`${n}?`) % 5 !== 0);
  assert.deepEqual(
    tiny.map((i) => Number(i.answer)).sort((a, b) => a - b),
    trainable,
  );
});
