import { test } from 'node:test';
import assert from 'node:assert/strict';
import { addNode, createTree, type RolloutTree } from '../../src/core/tree.js';
import { dynamicSampling, isInformative } from '../../src/control/dynamic-sampling.js';

/** A star group whose leaves carry the given rewards. */
function group(id: string, rewards: number[]): RolloutTree {
  const t = createTree(id, id, [1]);
  for (const r of rewards) addNode(t, '0', { tokens: [2], finishReason: 'stop' }).reward = r;
  return t;
}

test('isInformative: all-equal rewards carry no signal', () => {
  assert.equal(isInformative(group('a', [1, 1, 1])), false);
  assert.equal(isInformative(group('b', [0, 0])), false);
  assert.equal(isInformative(group('c', [0, 1, 0])), true);
  assert.equal(isInformative(group('d', [5])), true);
});

test('dynamicSampling refills until the target and asks only for what is missing', async () => {
  // round 0: 2 of 4 informative; round 1 asked for 2, returns 1 informative + 1 flat; round 2 asked for 1
  const script = [
    [group('r0a', [0, 1]), group('r0b', [1, 1]), group('r0c', [0, 0]), group('r0d', [1, 0])],
    [group('r1a', [1, 1]), group('r1b', [0, 1])],
    [group('r2a', [0, 1]), group('r2b', [1, 0])],
  ];
  const asked: Array<[number, number]> = [];
  const out = await dynamicSampling({ targetGroups: 4, maxRounds: 5 }, async (needed, round) => {
    asked.push([needed, round]);
    return script[round];
  });
  assert.deepEqual(asked, [
    [4, 0],
    [2, 1],
    [1, 2],
  ]);
  assert.equal(out.rounds, 3);
  assert.equal(out.dropped, 3);
  assert.deepEqual(
    out.trees.map((t) => t.id),
    ['r0a', 'r0d', 'r1b', 'r2a'],
  );
});

test('dynamicSampling stops after maxRounds with a short batch', async () => {
  let calls = 0;
  const out = await dynamicSampling({ targetGroups: 3, maxRounds: 2 }, async () => {
    calls++;
    return [group(`x${calls}`, [1, 1]), group(`y${calls}`, [0, 1])];
  });
  assert.equal(calls, 2);
  assert.equal(out.rounds, 2);
  assert.equal(out.dropped, 2);
  assert.deepEqual(
    out.trees.map((t) => t.id),
    ['y1', 'y2'],
  );
});
