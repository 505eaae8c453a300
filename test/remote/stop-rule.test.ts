/**
 * stopAfterGroups on remote samplers: once enough groups have all their requests answered, the
 * requests still in flight are stopped: through the server's abort hook when it has one (SGLang
 * answers with the partial output) or by cancelling the HTTP call (vLLM), which comes back as empty
 * `abort` completions. Replies are timed with loopback-free fakes so the order is certain.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { SampleRequest, SampleResult } from '../../src/engine/types.js';
import { sampleWithStopRule } from '../../src/engine/remote/stop-rule.js';

const req = (n = 2): SampleRequest => ({ tokens: [1, 2], n, maxTokens: 8 });
const result = (tokens: number[], finishReason: 'stop' | 'abort'): SampleResult => ({
  completions: [{ tokens, logprobs: tokens.map(() => -1), finishReason }],
  usage: { promptTokensComputed: 2, prefixTokensReused: 0, tokensDecoded: tokens.length },
  weightVersion: 4,
});

test('cancelling servers: requests still in flight when the groups are done come back as empty abort completions', async () => {
  const delays = [5, 10, 200, 300];
  const cancelled: number[] = [];
  const out = await sampleWithStopRule(
    [req(1), req(1), req(1), req(1)],
    { stopAfterGroups: { groupOf: [0, 0, 1, 2], count: 1 } },
    (_r, i, signal) =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(() => resolve(result([5, 6, 2], 'stop')), delays[i]);
        signal?.addEventListener('abort', () => {
          clearTimeout(timer);
          cancelled.push(i);
          reject(new Error('cancelled'));
        });
      }),
    4,
  );
  assert.deepEqual(cancelled.sort(), [2, 3], 'group 0 (requests 0 and 1) finished first; the others were cancelled');
  assert.equal(out[0].completions[0].finishReason, 'stop');
  assert.deepEqual(out[2].completions, [{ tokens: [], logprobs: [], finishReason: 'abort' }]);
  assert.equal(out[3].weightVersion, 4);
});

test('servers with an abort endpoint: the hook is called and the partial reply is kept', async () => {
  const resolvers: Array<(r: SampleResult) => void> = [];
  const aborted: number[] = [];
  const promise = sampleWithStopRule(
    [req(1), req(1), req(1)],
    { stopAfterGroups: { groupOf: [0, 1, 2], count: 2 } },
    (_r, i) =>
      new Promise<SampleResult>((resolve) => {
        resolvers[i] = resolve;
        if (i < 2) setTimeout(() => resolve(result([7, 2], 'stop')), 5 * (i + 1));
      }),
    0,
    {
      abort: (i) => {
        aborted.push(i);
        resolvers[i](result([9, 9, 9], 'abort')); // the server answers the pending call with what it had
      },
    },
  );
  const out = await promise;
  assert.deepEqual(aborted, [2]);
  assert.deepEqual(out[2].completions[0].tokens, [9, 9, 9], 'partial tokens from the server are kept');
  assert.equal(out[2].completions[0].finishReason, 'abort');
});

test('errors that are not the stop rule still fail the call', async () => {
  await assert.rejects(
    sampleWithStopRule(
      [req(1), req(1)],
      { stopAfterGroups: { groupOf: [0, 1], count: 2 } },
      async (_r, i) => {
        if (i === 1) throw new Error('server exploded');
        return result([2], 'stop');
      },
      0,
    ),
    /server exploded/,
  );
});
