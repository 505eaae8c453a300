import { test } from 'node:test';
import assert from 'node:assert/strict';
import { NanoModel } from '../../src/engine/model/model.js';
import { NanoSampler } from '../../src/engine/embedded/sampler.js';
import { referenceKernels } from '../../src/engine/kernels/reference.js';
import { EngineCallError } from '../../src/core/errors.js';
import type { NanoConfig } from '../../src/engine/model/config.js';
import type { SampleRequest } from '../../src/engine/types.js';

const config: NanoConfig = {
  vocabSize: 23,
  dModel: 16,
  nLayers: 2,
  nHeads: 2,
  dFF: 24,
  contextLength: 96,
  tieEmbeddings: true,
  ropeTheta: 10000,
  normEps: 1e-5,
};

function model(seed = 1): NanoModel {
  return NanoModel.createSync(config, referenceKernels, seed);
}

// Groups end at known decode steps through maxTokens (no stop tokens), so the stop step is hand-checkable:
// group 0 = requests 0, 1 (done after step 6), group 1 = request 2 (done after step 4), group 2 = request 3 (40).
const requests: SampleRequest[] = [
  { tokens: [1, 2, 3], n: 2, maxTokens: 3, seed: 1 },
  { tokens: [1, 4], n: 1, maxTokens: 6, seed: 2 },
  { tokens: [1, 5, 6, 7], n: 3, maxTokens: 4, seed: 3 },
  { tokens: [1, 8], n: 2, maxTokens: 40, seed: 4 },
];
const groupOf = [0, 0, 1, 2];

test('stopAfterGroups: stops right after the step where the count-th group finished; the rest end abort', async () => {
  const s = new NanoSampler(model());
  // count 1: group 1 finishes at step 4; group 0's request 0 finished at step 3, request 1 is cut at 4 tokens
  const one = await s.sample(requests, { stopAfterGroups: { groupOf, count: 1 } });
  assert.deepEqual(
    one.map((r) => r.completions.map((c) => c.finishReason)),
    [['length', 'length'], ['abort'], ['length', 'length', 'length'], ['abort', 'abort']],
  );
  assert.deepEqual(
    one.map((r) => r.completions.map((c) => c.tokens.length)),
    [[3, 3], [4], [4, 4, 4], [4, 4]],
  );
  // count 2: group 0 finishes at step 6, so group 2 is cut at 6 tokens (fewer than its maxTokens 40)
  const two = await s.sample(requests, { stopAfterGroups: { groupOf, count: 2 } });
  assert.deepEqual(
    two.map((r) => r.completions.map((c) => c.finishReason)),
    [['length', 'length'], ['length'], ['length', 'length', 'length'], ['abort', 'abort']],
  );
  assert.deepEqual(
    two[3].completions.map((c) => c.tokens.length),
    [6, 6],
  );
  for (const r of two) for (const c of r.completions) assert.equal(c.logprobs.length, c.tokens.length);
  assert.equal(two[3].usage.tokensDecoded, 12, 'usage counts only the tokens decoded before the stop');
  // count ≥ number of groups: nothing is cut
  const all = await s.sample(requests, { stopAfterGroups: { groupOf, count: 3 } });
  assert.deepEqual(
    all[3].completions.map((c) => [c.finishReason, c.tokens.length]),
    [
      ['length', 40],
      ['length', 40],
    ],
  );
  assert.equal(s.cache.sequenceCount, 0, 'aborted continuations free their KV pages');
});

test('stopAfterGroups: a stop token finishes a group; count 0 aborts before the first token', async () => {
  const s = new NanoSampler(model(2));
  // group 0 is forced to emit its stop token first: after step 1 everything else is cut at 1 token
  const reqs: SampleRequest[] = [
    { tokens: [1, 2], n: 2, maxTokens: 10, forcedTokens: [6, 6], stopTokens: [6], seed: 1 },
    { tokens: [1, 3], n: 2, maxTokens: 10, seed: 2 },
  ];
  const [a, b] = await s.sample(reqs, { stopAfterGroups: { groupOf: [0, 1], count: 1 } });
  assert.deepEqual(
    a.completions.map((c) => [c.finishReason, c.tokens]),
    [
      ['stop', [6]],
      ['stop', [6]],
    ],
  );
  assert.deepEqual(
    b.completions.map((c) => [c.finishReason, c.tokens.length]),
    [
      ['abort', 1],
      ['abort', 1],
    ],
  );
  const [z] = await s.sample([reqs[1]], { stopAfterGroups: { groupOf: [0], count: 0 } });
  assert.deepEqual(
    z.completions.map((c) => [c.finishReason, c.tokens.length]),
    [
      ['abort', 0],
      ['abort', 0],
    ],
  );
  await assert.rejects(
    s.sample(reqs, { stopAfterGroups: { groupOf: [0], count: 1 } }),
    (e: unknown) =>
      e instanceof EngineCallError &&
      /stopAfterGroups\.groupOf has 1 entries for 2 requests/.test(e.message) &&
      !e.isRetryable,
  );
});

test('stopAfterGroups is deterministic and an aborted continuation is a prefix of the uncut one', async () => {
  const m = model(3);
  const stopped1 = await new NanoSampler(m).sample(requests, { stopAfterGroups: { groupOf, count: 2 } });
  const stopped2 = await new NanoSampler(m).sample(requests, { stopAfterGroups: { groupOf, count: 2 } });
  assert.deepEqual(stopped2, stopped1);
  const full = await new NanoSampler(m).sample(requests);
  let cut = 0;
  stopped1.forEach((r, i) =>
    r.completions.forEach((c, k) => {
      const whole = full[i].completions[k];
      assert.deepEqual(c.tokens, whole.tokens.slice(0, c.tokens.length), `request ${i} continuation ${k}`);
      assert.deepEqual(c.logprobs, whole.logprobs.slice(0, c.tokens.length));
      if (c.finishReason === 'abort') {
        cut++;
        assert.ok(c.tokens.length < whole.tokens.length);
      } else assert.deepEqual(c, whole, 'a finished continuation is unchanged');
    }),
  );
  assert.equal(cut, 2);
});

test('abortProbe: true aborts everything; checked before every decode step', async () => {
  const m = model(4);
  const always = new NanoSampler(m, { abortProbe: () => true });
  const [r] = await always.sample([{ tokens: [1, 2], n: 3, maxTokens: 8, seed: 1 }]);
  assert.deepEqual(
    r.completions.map((c) => [c.finishReason, c.tokens.length]),
    [
      ['abort', 0],
      ['abort', 0],
      ['abort', 0],
    ],
  );
  // true from its 4th check on: the checks before steps 1, 2, 3 pass, so 3 tokens each
  let checks = 0;
  const later = new NanoSampler(m, { abortProbe: () => ++checks > 3 });
  const [p] = await later.sample([{ tokens: [1, 2], n: 2, maxTokens: 8, seed: 1 }]);
  assert.deepEqual(
    p.completions.map((c) => [c.finishReason, c.tokens.length]),
    [
      ['abort', 3],
      ['abort', 3],
    ],
  );
  const [free] = await new NanoSampler(m).sample([{ tokens: [1, 2], n: 2, maxTokens: 8, seed: 1 }]);
  assert.deepEqual(
    p.completions.map((c) => c.tokens),
    free.completions.map((c) => c.tokens.slice(0, 3)),
  );
  assert.equal(later.cache.sequenceCount, 0);
});
