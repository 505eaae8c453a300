/**
 * Gateway episodes → one rollout tree (generate/episode-tree.ts; specs/agent-gateway.md §5, §6 tests 18-26).
 * Hand-built records with ids 1..30: each test states the exact tree as one row per node
 * (`<id> <tokens> m<mask> <finish>`) and the exact masks of the trajectories, with trainOnce applied. A
 * sampled id `t` carries log-prob -t/10 unless a test says otherwise, so a shifted log-prob shows.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import type { EpisodeCall, EpisodeChoice, EpisodeRecord } from '../../src/core/episode.js';
import { DataError } from '../../src/core/errors.js';
import {
  addNode,
  createTree,
  hasError,
  isComplete,
  leaves,
  ownerLeaf,
  trajectories,
  trajectory,
  treeFromJSON,
  treeToJSON,
  type RolloutTree,
} from '../../src/core/tree.js';
import { assembleEpisodeTree, checkEpisodeTree, countForks } from '../../src/generate/episode-tree.js';

function choice(tokens: number[], extra: Partial<EpisodeChoice> = {}): EpisodeChoice {
  return {
    tokens,
    logprobs: tokens.map((t) => -t / 10),
    finishReason: 'stop',
    toolCalls: [],
    toolParseFailed: false,
    ...extra,
  };
}

function call(index: number, promptIds: number[], choices: EpisodeChoice[], extra: Partial<EpisodeCall> = {}) {
  const usage = { promptTokensComputed: promptIds.length, prefixTokensReused: 0, tokensDecoded: 0 };
  const result: EpisodeCall = {
    ...{ index, route: 'chat', promptIds, choices, weightVersion: 3, retry: 0, startedMs: index, wallMs: 1, usage },
    ...extra,
  };
  return result;
}

function episode(episodeId: string, calls: EpisodeCall[], extra: Partial<EpisodeRecord> = {}): EpisodeRecord {
  return { episodeId, calls, response: `answer ${episodeId}`, wallMs: 10, ...extra };
}

/** One row per node in id order: `<id> <tokens> m<mask> <finish>`. */
function rows(tree: RolloutTree): string[] {
  return Object.values(tree.nodes).map((n) => `${n.id} ${n.tokens.join(',')} m${n.mask.join('')} ${n.finishReason}`);
}

/** Trajectory masks by leaf id (response tokens only; the root is the prompt). */
function masks(tree: RolloutTree): Record<string, string> {
  return Object.fromEntries(trajectories(tree).map((t) => [t.leafId, t.mask.join('')]));
}

/** Test 25 and the verifier, on every assembled tree: equal arrays, mask-1 count = sampled ids, all exact. */
function assertExact(tree: RolloutTree, episodes: EpisodeRecord[]): void {
  const sampled = episodes.flatMap((e) => e.calls.flatMap((c) => c.choices)).reduce((s, c) => s + c.tokens.length, 0);
  let maskOnes = 0;
  for (const n of Object.values(tree.nodes)) {
    assert.equal(n.logprobs.length, n.tokens.length, `node ${n.id} log-probs`);
    assert.equal(n.mask.length, n.tokens.length, `node ${n.id} mask`);
    maskOnes += n.mask.reduce((s, m) => s + m, 0);
  }
  assert.equal(maskOnes, sampled);
  const trainable = trajectories(tree).reduce((s, t) => s + t.mask.reduce((a, m) => a + m, 0), 0);
  assert.equal(trainable, sampled, 'each sampled id trains once');
  assert.deepEqual(checkEpisodeTree(tree, episodes), { sampled, exact: sampled, problems: [] });
  assert.deepEqual(treeFromJSON(treeToJSON(tree)), tree, 'round-trips through JSON unchanged');
}

// Test 18: turn k+1's prompt = turn k's prompt + output + observation (7, 11) + generation prompt (8, 12).
const chain = [
  episode(
    'c',
    [
      call(0, [1, 2, 3], [choice([4, 5, 6], { toolCalls: [{ name: 'search', arguments: '{"q":"a"}' }] })], {
        messages: [{ role: 'user', content: 'q' }],
      }),
      call(1, [1, 2, 3, 4, 5, 6, 7, 8], [choice([9, 10], { toolParseFailed: true })]),
      call(2, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], [choice([13, 14], { message: { role: 'assistant' } })], {
        messages: [{ role: 'user', content: 'q' }, { role: 'tool' }],
      }),
    ],
    { info: { steps: 3 } },
  ),
];

test('three chained calls: one chain, one leaf, the next prompts extra ids at mask 0 (test 18)', () => {
  const { tree, forks } = assembleEpisodeTree('t/p0', 'item-0', chain, { step: 4 });
  assert.deepEqual(rows(tree), [
    '0 1,2,3 m000 null',
    '0.0 4,5,6 m111 stop',
    '0.0.0 7,8,9,10 m0011 stop',
    '0.0.0.0 11,12,13,14 m0011 stop',
  ]);
  assert.equal(forks, 0);
  assert.deepEqual(masks(tree), { '0.0.0.0': '11100110011' });
  assert.deepEqual(tree.nodes['0.0.0'].logprobs, [0, 0, -0.9, -1]);
  assert.equal(tree.nodes['0.0.0'].weightVersion, 3);
  assert.deepEqual(tree.meta, {
    generator: 'gateway',
    trainOnce: true,
    gateway: { episodes: 1, calls: 3, forks: 0, aborted: 0, errors: 0 },
    step: 4,
  });
  assert.deepEqual(tree.nodes['0.0.0.0'].episode, {
    finalAnswer: 'answer c',
    turns: 3,
    toolCalls: 1,
    toolErrors: 1,
    end: 'answer',
    episodeId: 'c',
    forks: 0,
    calls: [{ name: 'search', arguments: '{"q":"a"}' }],
    messages: [{ role: 'user', content: 'q' }, { role: 'tool' }, { role: 'assistant' }],
    info: { steps: 3 },
  });
  assertExact(tree, chain);
  // calls are taken in index order, not array order
  const shuffled = [{ ...chain[0], calls: [...chain[0].calls].reverse() }];
  assert.deepEqual(assembleEpisodeTree('t/p0', 'item-0', shuffled, { step: 4 }).tree, tree);
});

test('G = 3 episodes with one first prompt: the root is the prompt, 3 private subtrees even for equal samples', () => {
  const group = [
    episode('a', [call(0, [1, 2, 3, 4], [choice([5, 6])])]),
    episode('b', [call(0, [1, 2, 3, 4], [choice([5, 6])])]),
    episode('c', [call(0, [1, 2, 3, 4], [choice([7, 8])]), call(1, [1, 2, 3, 4, 7, 8, 9], [choice([10])])]),
  ];
  const { tree, forks } = assembleEpisodeTree('t/p1', 'item-1', group);
  assert.deepEqual(rows(tree), [
    '0 1,2,3,4 m0000 null',
    '0.0 5,6 m11 stop',
    '0.1 5,6 m11 stop',
    '0.2 7,8 m11 stop',
    '0.2.0 9,10 m01 stop',
  ]);
  assert.equal(forks, 0);
  assert.deepEqual(
    leaves(tree).map((l) => [l.id, l.episode?.episodeId, l.episode?.turns]),
    [
      ['0.0', 'a', 1],
      ['0.1', 'b', 1],
      ['0.2.0', 'c', 2],
    ],
  );
  assert.deepEqual(masks(tree), { '0.0': '11', '0.1': '11', '0.2.0': '1101' });
  assertExact(tree, group);
  // different user prompts after a shared system prefix: the root is the common prefix only
  const split = [episode('a', [call(0, [1, 2, 3], [choice([5])])]), episode('b', [call(0, [1, 2, 4], [choice([5])])])];
  const other = assembleEpisodeTree('t/p2', 'item-2', split).tree;
  assert.deepEqual(rows(other), ['0 1,2 m00 null', '0.0 3,5 m01 stop', '0.1 4,5 m01 stop']);
  assertExact(other, split);
});

test("rewritten history: a dropped <think> block forks at call 0's output, trained once (tests 20, 21)", () => {
  // call 0 samples <think>=5 6 </think>=7 answer 8 <|im_end|>=9; the template re-renders it as 8 9 only
  const group = [
    episode('a', [
      call(0, [1, 2, 3, 4], [choice([5, 6, 7, 8, 9])]),
      call(1, [1, 2, 3, 4, 8, 9, 10, 11, 12], [choice([13, 14])]),
    ]),
    episode('b', [call(0, [1, 2, 3, 20], [choice([21])])]),
  ];
  const { tree, forks } = assembleEpisodeTree('t/p3', 'item-3', group);
  assert.deepEqual(rows(tree), [
    '0 1,2,3 m000 null',
    '0.0 4 m0 null',
    '0.0.0 5,6,7,8,9 m11111 stop',
    '0.0.1 8,9,10,11,12,13,14 m0000011 stop',
    '0.1 20,21 m01 stop',
  ]);
  assert.equal(forks, 1);
  assert.equal(tree.nodes['0.0.1'].episode?.forks, 1);
  assert.equal(tree.nodes['0.0.0'].episode?.forks, 1, 'every leaf of a forked episode carries the same info');
  assert.deepEqual(tree.nodes['0.0.0'].episode, tree.nodes['0.0.1'].episode);
  assert.equal(tree.nodes['0.1'].episode?.forks, 0);
  assert.deepEqual(masks(tree), { '0.0.0': '011111', '0.0.1': '00000011', '0.1': '01' });
  assertExact(tree, group);
});

test('the client edits its last assistant message: a split inside sampled ids, the head trains once (test 22)', () => {
  const edited = [
    episode('a', [call(0, [1, 2], [choice([3, 4, 5, 6])]), call(1, [1, 2, 3, 4, 20, 21], [choice([22, 23])])]),
  ];
  const { tree, forks } = assembleEpisodeTree('t/p4', 'item-4', edited);
  assert.deepEqual(rows(tree), [
    '0 1,2 m00 null',
    '0.0 3,4 m11 null',
    '0.0.0 5,6 m11 stop',
    '0.0.1 20,21,22,23 m0011 stop',
  ]);
  assert.equal(forks, 1);
  assert.equal(ownerLeaf(tree, '0.0').id, '0.0.0');
  assert.deepEqual(masks(tree), { '0.0.0': '1111', '0.0.1': '000011' });
  assert.deepEqual(trajectory(tree, '0.0.1').logprobs, [0, 0, 0, 0, -2.2, -2.3]);
  assertExact(tree, edited);
});

const rollback = [
  episode('r', [
    call(0, [1, 2], [choice([3, 4])]),
    call(1, [1, 2, 3, 4, 5], [choice([6, 7])]),
    call(2, [1, 2, 3, 4, 8], [choice([9, 10])]),
  ]),
];

test('a rollback (call 2 extends call 0, not call 1): call 0 trains on exactly one trajectory (test 22)', () => {
  const { tree, forks } = assembleEpisodeTree('t/p5', 'item-5', rollback);
  assert.deepEqual(rows(tree), [
    '0 1,2 m00 null',
    '0.0 3,4 m11 stop',
    '0.0.0 5,6,7 m011 stop',
    '0.0.1 8,9,10 m011 stop',
  ]);
  assert.equal(forks, 0, 'call 2 extends call 0: a branch, not a fork');
  assert.deepEqual(masks(tree), { '0.0.0': '11011', '0.0.1': '00011' });
  assert.deepEqual(trajectory(tree, '0.0.1').logprobs, [0, 0, 0, -0.9, -1]);
  assert.deepEqual(trajectory(tree, '0.0.0').logprobs, [-0.3, -0.4, 0, -0.6, -0.7]);
  assertExact(tree, rollback);
});

test('without meta.trainOnce every path trains every mask-1 token it holds (trees of other generators)', () => {
  const { tree } = assembleEpisodeTree('t/p5', 'item-5', rollback);
  delete tree.meta!.trainOnce;
  assert.deepEqual(masks(tree), { '0.0.0': '11011', '0.0.1': '11011' });
  assert.deepEqual(trajectory(tree, '0.0.1').logprobs, [-0.3, -0.4, 0, -0.9, -1]);
  // a hand-built TreePO-like tree: both leaves train the shared segment
  const plain = createTree('t/x', 'item-x', [1, 2]);
  const shared = addNode(plain, '0', { tokens: [3, 4], logprobs: [-1, -2] });
  addNode(plain, shared.id, { tokens: [5], logprobs: [-3] });
  addNode(plain, shared.id, { tokens: [6], logprobs: [-4], mask: [0] });
  assert.deepEqual(masks(plain), { '0.0.0': '111', '0.0.1': '110' });
  assert.deepEqual(trajectory(plain, '0.0.1').logprobs, [-1, -2, -4]);
});

test('a retry with an identical prompt is a sibling, not a fork; equal matches extend the newest (test 23)', () => {
  const retried = [
    episode('a', [
      call(0, [1, 2, 3], [choice([4, 5])]),
      call(1, [1, 2, 3], [choice([4, 5])], { retry: 1 }),
      call(2, [1, 2, 3, 4, 5, 6], [choice([7])]),
    ]),
  ];
  const { tree, forks } = assembleEpisodeTree('t/p6', 'item-6', retried);
  assert.deepEqual(rows(tree), ['0 1,2,3 m000 null', '0.0 4,5 m11 stop', '0.1 4,5 m11 stop', '0.1.0 6,7 m01 stop']);
  assert.equal(forks, 0);
  assert.deepEqual(masks(tree), { '0.0': '11', '0.1.0': '1101' });
  assertExact(tree, retried);
  assert.equal(countForks(retried[0].calls), 0);
});

test('a stream the client aborted: a final leaf (length), its ids trainable and counted (test 24)', () => {
  const aborted = [episode('a', [call(0, [1, 2], [choice([3, 4, 5], { finishReason: 'abort' })])])];
  const { tree } = assembleEpisodeTree('t/p7', 'item-7', aborted);
  assert.deepEqual(rows(tree), ['0 1,2 m00 null', '0.0 3,4,5 m111 length']);
  assert.deepEqual(tree.nodes['0.0'].logprobs, [-0.3, -0.4, -0.5]);
  assert.deepEqual(tree.meta?.gateway, { episodes: 1, calls: 1, forks: 0, aborted: 1, errors: 0 });
  assert.equal(isComplete(tree), true);
  assert.equal(hasError(tree), false);
  assertExact(tree, aborted);
});

test('n = 2 choices: two sibling leaves under the call prompt, neither a fork', () => {
  const group = [
    episode('a', [call(0, [1, 2, 3], [choice([4, 5]), choice([6, 7], { finishReason: 'length' })])]),
    episode('b', [call(0, [1, 2, 8], [choice([9])])]),
  ];
  const { tree, forks } = assembleEpisodeTree('t/p8', 'item-8', group);
  assert.deepEqual(rows(tree), [
    '0 1,2 m00 null',
    '0.0 3 m0 null',
    '0.0.0 4,5 m11 stop',
    '0.0.1 6,7 m11 length',
    '0.1 8,9 m01 stop',
  ]);
  assert.equal(forks, 0);
  assert.deepEqual(masks(tree), { '0.0.0': '011', '0.0.1': '011', '0.1': '01' });
  assertExact(tree, group);
});

test('an episode that failed or made no call ends in an error node: the tree is an error tree', () => {
  const group = [
    episode('a', [call(0, [1, 2], [choice([3])]), call(1, [1, 2, 3, 4], [choice([5])])], {
      error: 'timeout',
      response: undefined,
    }),
    episode('b', [], { response: undefined }),
  ];
  const { tree } = assembleEpisodeTree('t/p9', 'item-9', group);
  assert.deepEqual(rows(tree), [
    '0 1,2 m00 null',
    '0.0 3 m1 stop',
    '0.0.0 4,5 m01 stop',
    '0.0.0.0  m error',
    '0.1  m error',
  ]);
  assert.equal(tree.nodes['0.0.0.0'].error, 'agent: timeout');
  assert.equal(tree.nodes['0.1'].error, 'agent: the episode made no call to the gateway');
  assert.deepEqual(
    [
      tree.nodes['0.0.0.0'].episode?.finalAnswer,
      tree.nodes['0.0.0.0'].episode?.turns,
      tree.nodes['0.1'].episode?.turns,
    ],
    ['', 2, 0],
  );
  assert.deepEqual(tree.meta?.gateway, { episodes: 2, calls: 2, forks: 0, aborted: 0, errors: 2 });
  assert.equal(hasError(tree), true);
  assertExact(tree, group);
  // no call in the whole group: an empty root
  const none = assembleEpisodeTree('t/p10', 'item-10', [episode('a', [])]).tree;
  assert.deepEqual(rows(none), ['0  m null', '0.0  m error']);
  assert.equal(hasError(none), true);
});

test('checkEpisodeTree reports a changed id, a context token made trainable and a missing trainOnce', () => {
  const tamper = (change: (tree: RolloutTree) => void) => {
    const { tree } = assembleEpisodeTree('t/p5', 'item-5', rollback);
    change(tree);
    return checkEpisodeTree(tree, rollback);
  };
  const id = tamper((tree) => (tree.nodes['0.0.1'].tokens[1] = 19));
  assert.equal(id.sampled, 6);
  assert.equal(id.exact, 4, 'ids 9 and 10 of call 2 follow the changed id');
  assert.match(id.problems.join('\n'), /call 2 choice 0 token 0: trainable 0 times/);
  const context = tamper((tree) => (tree.nodes['0.0.1'].mask[0] = 1));
  assert.equal(context.exact, 6);
  assert.match(context.problems.join('\n'), /leaf 0\.0\.1 token 2 \(id 8\): trainable but not sampled/);
  const twice = tamper((tree) => delete tree.meta!.trainOnce);
  assert.equal(twice.exact, 4, "call 0's two ids train twice");
  assert.match(twice.problems.join('\n'), /call 0 choice 0 token 0: trainable 2 times \(recorded 1\)/);
  const logprob = tamper((tree) => (tree.nodes['0.0'].logprobs[0] = -0.5));
  assert.equal(logprob.exact, 5);
});

test('malformed records throw a DataError naming the episode and call', () => {
  const bad = (record: EpisodeRecord, pattern: RegExp) =>
    assert.throws(
      () => assembleEpisodeTree('t', 'i', [record]),
      (e: unknown) => e instanceof DataError && pattern.test(e.message),
    );
  const lengths = call(1, [1, 2], [{ ...choice([3, 4]), logprobs: [-1] }]);
  bad(episode('e7', [call(0, [1], [choice([2])]), lengths]), /^episode e7: call 1: choice 0 needs one finite log-prob/);
  bad(episode('e8', [call(0, [1, 2.5], [choice([3])])]), /^episode e8: call 0: "promptIds" must be/);
  bad(episode('e9', [call(0, [1], [choice([3, -1])])]), /^episode e9: call 0: choice 0 "tokens" must be/);
  bad(episode('e10', [call(0, [1], [choice([2])]), call(0, [1], [choice([2])])]), /^episode e10: call 0: "index"/);
  bad(episode('e11', [call(0, [1], [])]), /^episode e11: call 0: no choices/);
  const twice = [episode('e', []), episode('e', [])];
  assert.throws(() => assembleEpisodeTree('t', 'i', twice), /episode e: the episodeId is used twice/);
});

/** A random episode: each call extends, retries, forks from, or restarts an earlier call (ids 1..4 collide often). */
const callScript = fc.record({
  kind: fc.constantFrom('extend', 'extend', 'retry', 'fork', 'fresh'),
  pick: fc.nat(),
  cut: fc.nat(),
  extra: fc.array(fc.integer({ min: 1, max: 4 }), { maxLength: 3 }),
  samples: fc.array(fc.array(fc.integer({ min: 1, max: 4 }), { maxLength: 4 }), { minLength: 1, maxLength: 2 }),
  finish: fc.constantFrom('stop' as const, 'length' as const, 'abort' as const),
});
const groupScript = fc.record({
  system: fc.array(fc.integer({ min: 1, max: 4 }), { maxLength: 3 }),
  episodes: fc.array(fc.record({ calls: fc.array(callScript, { maxLength: 5 }), failed: fc.boolean() }), {
    minLength: 1,
    maxLength: 4,
  }),
});

type GroupScript = typeof groupScript extends fc.Arbitrary<infer S> ? S : never;

function buildGroup(script: GroupScript): EpisodeRecord[] {
  let logprob = 0;
  return script.episodes.map((e, k) => {
    const prompts: number[][] = [];
    const sequences: number[][] = [];
    const calls = e.calls.map((s, c) => {
      let prompt: number[];
      if (c === 0 || s.kind === 'fresh') prompt = script.system.concat(s.extra);
      else if (s.kind === 'extend') prompt = sequences[s.pick % sequences.length].concat(s.extra);
      else if (s.kind === 'retry') prompt = prompts[s.pick % prompts.length].slice();
      else {
        const from = sequences[s.pick % sequences.length];
        prompt = from.slice(0, s.cut % (from.length + 1)).concat(s.extra);
      }
      // distinct log-probs: a token trained at the wrong place shows
      const choices = s.samples.map((t) => ({
        ...choice(t, { finishReason: s.finish }),
        logprobs: t.map(() => --logprob / 64),
      }));
      prompts.push(prompt);
      for (const ch of choices) sequences.push(prompt.concat(ch.tokens));
      return call(c, prompt, choices);
    });
    return episode(`e${k}`, calls, e.failed ? { error: 'failed' } : {});
  });
}

test('property: every sampled id of random episode groups trains exactly once, in place, with its log-prob', () => {
  // what the runs covered: forks, split nodes, trajectories where trainOnce demoted a shared node's ids
  const seen = { forks: 0, splits: 0, demoted: 0, errors: 0 };
  fc.assert(
    fc.property(groupScript, (script) => {
      const group = buildGroup(script);
      const { tree, forks } = assembleEpisodeTree('t/prop', 'item', group);
      assertExact(tree, group);
      const errors = leaves(tree).filter((l) => l.finishReason === 'error').length;
      assert.equal(errors, script.episodes.filter((e) => e.failed || !e.calls.length).length);
      seen.forks += forks;
      seen.errors += errors;
      seen.splits += Object.values(tree.nodes).filter((n) => n.parent !== null && n.finishReason === null).length;
      for (const t of trajectories(tree)) {
        const own = t.nodeIds.slice(1).reduce((s, id) => s + tree.nodes[id].mask.reduce((a, m) => a + m, 0), 0);
        if (t.mask.reduce((a, m) => a + m, 0) < own) seen.demoted++;
      }
    }),
    { numRuns: 300, seed: 20261126 },
  );
  assert.ok(
    Object.values(seen).every((n) => n > 20),
    JSON.stringify(seen),
  );
});
