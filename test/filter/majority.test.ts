/**
 * Test-time RL's majority-vote reward: the group's majority answer by the verifier's equivalence
 * (ties: first seen) is the pseudo-label; gold answers are ignored; responses without an answer vote
 * for nothing; through scoreTrees every finished leaf of a tree votes; a whole run trains with it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { addNode, createTree } from '../../src/core/tree.js';
import { ConfigError } from '../../src/core/errors.js';
import { majorityLabel } from '../../src/filter/majority.js';
import { extractAnswer, mathReward } from '../../src/filter/math/index.js';
import { rewardFromConfig } from '../../src/filter/registry.js';
import { scoreTrees } from '../../src/filter/score-trees.js';
import { parseConfig } from '../../src/run/config.js';
import { train } from '../../src/run/loop.js';
import { RunDir } from '../../src/run/rundir.js';
import { getTask } from '../../src/tasks/index.js';
import { tinyRun } from '../../testkit/reliability/tiny-run.js';

const arith = getTask('arith', { digits: 1, ops: ['+'] });
const verifyWith = (reward: typeof arith.reward) => async (response: string, answer: string) =>
  (await reward.score({ response, item: { id: 'q', prompt: 'q', answer } })).reward > 0.5;

test('majority by hand: most votes wins, ties go to the first seen, unanswered responses do not vote', async () => {
  const extract = arith.extractAnswer!.bind(arith);
  const verify = verifyWith(arith.reward);
  assert.deepEqual(await majorityLabel(['1+1=2;12', 'x;7', '1+1=2;12', 'no answer', 'y;7', 'z;12'], extract, verify), {
    label: '12',
    votes: 3,
    answered: 5,
  });
  assert.deepEqual(
    await majorityLabel(['a;7', 'b;12', 'c;12', 'd;7'], extract, verify),
    { label: '7', votes: 2, answered: 4 },
    'a tie: the first seen',
  );
  assert.deepEqual(await majorityLabel(['nothing', 'here'], extract, verify), {
    label: undefined,
    votes: 0,
    answered: 0,
  });
});

test("majority by the verifier's equivalence: 1/2 and 0.5 are one answer under the math verifier", async () => {
  const math = mathReward({ name: 'math' });
  const r = await majorityLabel(
    ['\\boxed{3}', '\\boxed{1/2}', '\\boxed{0.5}', '\\boxed{\\frac{1}{2}}'],
    (x) => extractAnswer(x),
    verifyWith(math),
  );
  assert.equal(r.votes, 3);
  assert.ok(['1/2', '\\frac{1}{2}'].includes(r.label!), `label ${r.label}`);
});

test('scoreTrees with majority_vote: leaves rewarded by agreement with the group, gold ignored, earlier leaves vote too', async () => {
  const reward = rewardFromConfig(
    { parts: [{ kind: 'majority_vote', weight: 1 }] },
    { taskReward: arith.reward, taskExtract: arith.extractAnswer!.bind(arith) },
  );
  const t = createTree('t', 'q', [1]);
  const text = ['s;5', 's;5', 's;4', 'garbled'];
  text.forEach((_, i) => addNode(t, '0', { tokens: [i + 10], finishReason: 'stop' }));
  const early = t.nodes['0.0'];
  early.reward = 1; // scored in an earlier round (allocation): it still votes, and is not rescored
  early.rewardInfo = { components: { majority_vote: 1 } };
  const items = new Map([['q', { id: 'q', prompt: '2+2=', answer: '4' }]]);
  const out = await scoreTrees([t], items, reward, {
    decode: (tok) => text[tok[0] - 10],
    concurrency: 2,
    timeoutMs: 5000,
    failureReward: 0,
  });
  assert.deepEqual(out, { scored: 3, failed: 0 });
  assert.deepEqual(
    ['0.1', '0.2', '0.3'].map((id) => t.nodes[id].reward),
    [1, 0, 0],
    'the majority says 5 (the gold 4 is not used)',
  );
  assert.equal(t.nodes['0.1'].rewardInfo?.info?.pseudoLabel, '5');
  assert.throws(
    () => rewardFromConfig({ parts: [{ kind: 'majority_vote', weight: 1 }] }),
    (e: unknown) => e instanceof ConfigError && e.path === 'reward.parts.0.kind',
  );
});

test(
  'a whole run trains on majority-vote rewards; held-out accuracy still uses the gold answers',
  { timeout: 300_000 },
  async () => {
    const root = mkdtempSync(join(tmpdir(), 'arbor-ttrl-'));
    const summary = await train(
      parseConfig({
        ...tinyRun(root, 'ttrl', { steps: 3, logTreesEvery: 1 }),
        reward: { parts: [{ kind: 'majority_vote' }] },
      }),
      { quiet: true },
    );
    assert.equal(summary.steps, 3);
    const ms = new RunDir(join(root, 'ttrl')).readMetrics().filter((m) => m.step > 0);
    assert.ok(ms.every((m) => typeof m.reward_mean === 'number' && m.reward_mean >= 0 && m.reward_mean <= 1));
    assert.ok(
      ms.some((m) => (m.reward_mean as number) > 0),
      'groups agree on something',
    );
    assert.equal(typeof summary.heldout_acc_end, 'number');
  },
);
