/**
 * stopAfterGroups through real HTTP (arbor serve in front of a slow engine) for both remote clients,
 * plus the stop rule's edge cases: count ≤ 0, a group whose reply came back `abort`, and a server that
 * never answers after /abort_request.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ArborServer } from '../../src/serve/server.js';
import { OpenAICompletionsSampler } from '../../src/engine/remote/openai-completions.js';
import { SGLangSampler } from '../../src/engine/remote/sglang.js';
import { sampleWithStopRule } from '../../src/engine/remote/stop-rule.js';
import type { SampleOptions, SampleRequest, SampleResult, Sampler } from '../../src/engine/types.js';
import { ScriptedSampler } from './scripted-sampler.js';

/** An engine that answers requests of ≥ 10 max tokens only after 20 s, or, when aborted, with its first 2 tokens. */
class SlowEngine implements Sampler {
  readonly specificationVersion = 'arbor.sampler.v1' as const;
  readonly capabilities = new ScriptedSampler().capabilities;
  private readonly inner = new ScriptedSampler(50);
  weightVersion(): number {
    return 3;
  }
  release(): void {}
  async sample(requests: SampleRequest[], options: SampleOptions = {}): Promise<SampleResult[]> {
    const results = await this.inner.sample(requests);
    if (requests.every((r) => r.maxTokens < 10)) return results;
    const aborted = await new Promise<boolean>((resolve) => {
      setTimeout(() => resolve(false), 20_000).unref();
      options.signal?.addEventListener('abort', () => resolve(true), { once: true });
    });
    if (!aborted) return results;
    return results.map((r) => ({
      ...r,
      completions: r.completions.map((c) => ({
        ...c,
        tokens: c.tokens.slice(0, 2),
        logprobs: c.logprobs.slice(0, 2),
        topLogprobs: c.topLogprobs?.slice(0, 2),
        finishReason: 'abort' as const,
      })),
    }));
  }
}

const fast: SampleRequest = { tokens: [1, 2, 3], n: 2, maxTokens: 3, seed: 1 };
const slow: SampleRequest = { tokens: [1, 4], n: 1, maxTokens: 20, seed: 2 };
const stopAfterGroups = { groupOf: [0, 1], count: 1 };

test('openai-completions: once the fast group is done the slow request is cancelled and comes back empty', async () => {
  const server = new ArborServer({ sampler: new SlowEngine(), modelName: 'm' });
  const url = await server.listen();
  try {
    const client = new OpenAICompletionsSampler({ servers: [url], model: 'm' });
    const started = Date.now();
    const [a, b] = await client.sample([fast, slow], { stopAfterGroups });
    assert.ok(Date.now() - started < 10_000, 'did not wait for the slow request');
    assert.deepEqual(
      a.completions.map((c) => [c.finishReason, c.tokens.length]),
      [
        ['length', 3],
        ['length', 3],
      ],
    );
    assert.deepEqual(b.completions, [{ tokens: [], logprobs: [], finishReason: 'abort' }]);
    assert.equal(b.usage.tokensDecoded, 0);
  } finally {
    await server.close();
  }
});

test('sglang: once the fast group is done the slow request is aborted by rid and its partial output kept', async () => {
  const server = new ArborServer({ sampler: new SlowEngine(), modelName: 'm' });
  const url = await server.listen();
  try {
    const client = new SGLangSampler({ servers: [url] });
    const started = Date.now();
    const [a, b] = await client.sample([fast, slow], { stopAfterGroups });
    assert.ok(Date.now() - started < 10_000, 'did not wait for the slow request');
    assert.deepEqual(
      a.completions.map((c) => c.finishReason),
      ['length', 'length'],
    );
    assert.equal(b.completions[0].finishReason, 'abort');
    assert.equal(b.completions[0].tokens.length, 2, 'the tokens decoded before the abort are returned');
    assert.equal(server.counters['/abort_request'], 1, "one /abort_request: the slow request's single rid");
  } finally {
    await server.close();
  }
});

const reply = (finishReason: 'stop' | 'abort'): SampleResult => ({
  completions: [{ tokens: [5, 2], logprobs: [-1, -1], finishReason }],
  usage: { promptTokensComputed: 1, prefixTokensReused: 0, tokensDecoded: 2 },
  weightVersion: 1,
});
/** A fake request that answers after `ms` (never when ms < 0) unless its signal aborts first. */
const after =
  (ms: number, finishReason: 'stop' | 'abort' = 'stop') =>
  (signal: AbortSignal | undefined) =>
    new Promise<SampleResult>((resolve, reject) => {
      if (signal?.aborted) return reject(new Error('cancelled'));
      const timer = ms >= 0 ? setTimeout(() => resolve(reply(finishReason)), ms) : undefined;
      signal?.addEventListener('abort', () => (clearTimeout(timer), reject(new Error('cancelled'))), { once: true });
    });

test('stop rule: count 0 stops at once; a group answered with abort is not finished; groupOf must match', async () => {
  const reqs: SampleRequest[] = [
    { tokens: [1], maxTokens: 4 },
    { tokens: [1], maxTokens: 4 },
    { tokens: [1], maxTokens: 4 },
  ];
  let started = 0;
  const none = await sampleWithStopRule(
    reqs,
    { stopAfterGroups: { groupOf: [0, 1, 2], count: 0 } },
    (_r, _i, signal) => (started++, after(-1)(signal)),
    1,
  );
  assert.deepEqual(
    none.map((r) => r.completions[0].finishReason),
    ['abort', 'abort', 'abort'],
  );
  assert.equal(started, 0, 'no request is sent');
  // group 0 comes back `abort` from the server first: it does not count, so the stop waits for group 1
  const plan = [after(5, 'abort'), after(30), after(-1)];
  const out = await sampleWithStopRule(
    reqs,
    { stopAfterGroups: { groupOf: [0, 1, 2], count: 1 } },
    (_r, i, signal) => plan[i](signal),
    1,
  );
  assert.deepEqual(
    out.map((r) => [r.completions[0].finishReason, r.completions[0].tokens.length]),
    [
      ['abort', 2],
      ['stop', 2],
      ['abort', 0],
    ],
  );
  await assert.rejects(
    sampleWithStopRule(reqs, { stopAfterGroups: { groupOf: [0], count: 1 } }, (_r, _i, signal) => after(1)(signal), 1),
    /groupOf/,
  );
});

test('stop rule: a server that never answers its /abort_request is cancelled after graceMs', async () => {
  const reqs: SampleRequest[] = [
    { tokens: [1], maxTokens: 4 },
    { tokens: [1], n: 2, maxTokens: 4 },
  ];
  const hooked: number[] = [];
  const out = await sampleWithStopRule(
    reqs,
    { stopAfterGroups: { groupOf: [0, 1], count: 1 } },
    (_r, i, signal) => after(i === 0 ? 1 : -1)(signal),
    1,
    { abort: (i) => hooked.push(i), graceMs: 20 },
  );
  assert.deepEqual(hooked, [1]);
  assert.deepEqual(out[1].completions, [
    { tokens: [], logprobs: [], finishReason: 'abort' },
    { tokens: [], logprobs: [], finishReason: 'abort' },
  ]);
  // the caller's own signal still makes the call throw
  const controller = new AbortController();
  setTimeout(() => controller.abort(new Error('shutdown')), 5);
  await assert.rejects(
    sampleWithStopRule(
      reqs,
      { signal: controller.signal, stopAfterGroups: { groupOf: [0, 1], count: 2 } },
      (_r, _i, signal) => after(-1)(signal),
      1,
    ),
    /cancelled|shutdown/,
  );
});
