/**
 * The agent gateway's batching (src/engine/batch-sampler.ts) over the embedded sampler: a seed per
 * continuation makes one request for a context sample what separate n = 1 requests with those seeds
 * sample; concurrent callers for the same context are merged into one request (the context computed
 * once) and each gets its own tokens back; a gathering batch waits until its callers are complete.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BatchingSampler } from '../../src/engine/batch-sampler.js';
import { referenceKernels } from '../../src/engine/kernels/reference.js';
import { NanoModel } from '../../src/engine/model/model.js';
import { NanoSampler } from '../../src/engine/embedded/sampler.js';
import type { SampleRequest, SampleResult } from '../../src/engine/types.js';

const model = NanoModel.createSync(
  {
    vocabSize: 40,
    dModel: 16,
    nLayers: 2,
    nHeads: 2,
    dFF: 32,
    contextLength: 64,
    tieEmbeddings: false,
    ropeTheta: 10000,
    normEps: 1e-5,
  },
  referenceKernels,
  3,
);
const context = [1, 5, 7, 9, 11, 3];
const request = (seed: number, tokens = context): SampleRequest => ({ tokens, maxTokens: 12, temperature: 1, seed });
const ids = (r: SampleResult) => r.completions.map((c) => c.tokens);

test('seeds: continuation i samples what a request of its own with n = 1 and seed seeds[i] samples', async () => {
  const sampler = new NanoSampler(model);
  const alone = await Promise.all([11, 22, 33].map(async (s) => (await sampler.sample([request(s)]))[0]));
  const [together] = await sampler.sample([{ ...request(0), n: 3, seeds: [11, 22, 33] }]);
  assert.deepEqual(
    ids(together),
    alone.map((r) => r.completions[0].tokens),
  );
  together.completions.forEach((c, i) =>
    c.logprobs.forEach((lp, t) => assert.ok(Math.abs(lp - alone[i].completions[0].logprobs[t]) < 1e-9)),
  );
  // the seeds differ, so do the samples: the test can tell continuations apart
  assert.notDeepEqual(ids(together)[0], ids(together)[1]);
  await assert.rejects(sampler.sample([{ ...request(0), n: 2, seeds: [1] }]), /one finite seed per continuation/);
});

test('callers for the same context are merged into one request; each gets its own tokens and usage', async () => {
  const inner = new NanoSampler(model);
  const expected = await Promise.all([5, 6, 7].map(async (s) => (await inner.sample([request(s)]))[0]));
  const other = (await inner.sample([request(8, [2, 4, 6])]))[0];
  const batching = new BatchingSampler(new NanoSampler(model));
  const got = await Promise.all(
    [...[5, 6, 7].map((s) => request(s)), request(8, [2, 4, 6])].map((r) => batching.sample([r])),
  );
  assert.deepEqual(
    got.map(([r]) => r.completions[0].tokens),
    [...expected.map((r) => r.completions[0].tokens), other.completions[0].tokens],
  );
  assert.deepEqual(batching.counts, { batches: 1, calls: 4, merged: 2 });
  // the shared context is computed once: by the first, reused by the others
  assert.deepEqual(
    got.slice(0, 3).map(([r]) => [r.usage.promptTokensComputed, r.usage.prefixTokensReused]),
    [
      [context.length, 0],
      [0, context.length],
      [0, context.length],
    ],
  );
  assert.equal(got[0][0].usage.tokensDecoded, got[0][0].completions[0].tokens.length);
});

test('a gathering batch is sent once its callers are complete, not at the first arrival', async () => {
  let waiting = 0;
  const batching = new BatchingSampler(new NanoSampler(model), {
    complete: () => waiting >= 3,
    idleMs: 10_000,
    maxWaitMs: 10_000,
  });
  const first = batching.sample([request(1)]);
  waiting = 1;
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.equal(batching.counts.batches, 0, 'one caller of three: the batch waits');
  const rest = [2, 3].map((s) => batching.sample([request(s)]));
  waiting = 3;
  await Promise.all([first, ...rest]);
  assert.deepEqual(batching.counts, { batches: 1, calls: 3, merged: 2 });
});

test('a gathering batch is sent after its idle gap even when its callers never complete', async () => {
  const batching = new BatchingSampler(new NanoSampler(model), { complete: () => false, idleMs: 5, maxWaitMs: 10_000 });
  const [r] = await batching.sample([request(4)]);
  assert.equal(r.completions.length, 1);
  assert.equal(batching.counts.batches, 1);
});
