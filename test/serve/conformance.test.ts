/**
 * `arbor serve` against vLLM where the embedded engine once differed: usage counts each prompt once
 * however many choices (vLLM's `len(prompt_token_ids)`), a non-streamed request with stop strings stops
 * decoding at the stop string (same tokens and text as decoding to max_tokens and cutting), and a
 * seeded request samples the same ids streamed or not: segments continue one random stream, and a
 * sampler without cache handles is sampled once and streamed out. Live server over the tiny Qwen3.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { NanoSampler } from '../../src/engine/embedded/sampler.js';
import { usageFromWire } from '../../src/wire/usage.js';
import { HFTokenizer } from '../../src/engine/tokenizer/hf.js';
import type { SampleRequest, SampleResult, Sampler, SamplerCapabilities } from '../../src/engine/types.js';
import { generate, generateStream, type Generation } from '../../src/serve/vllm/generation.js';
import { DEFAULT_LIMITS, SampleGuard } from '../../src/serve/limits.js';
import { ArborServer } from '../../src/serve/server.js';
import { post, serveHf, tinyQwen3 } from '../../testkit/serve/hf-fixture.js';

type Json = Record<string, any>;

let served: Awaited<ReturnType<typeof serveHf>>;
let sampler: NanoSampler;
let tokenizer: HFTokenizer;
/** The same model behind a sampler that reports no cache handles, served by a second server. */
let plain: { url: string; server: ArborServer; sampler: NoHandles };

/** A NanoSampler that says it has no cache handles (as the remote samplers), counting its calls. */
class NoHandles implements Sampler {
  readonly specificationVersion = 'arbor.sampler.v1' as const;
  readonly capabilities: SamplerCapabilities;
  calls = 0;
  last: SampleResult[] = [];
  constructor(readonly inner: NanoSampler) {
    this.capabilities = { ...inner.capabilities, cacheHandles: false };
  }
  get model() {
    return this.inner.model;
  }
  async sample(requests: SampleRequest[]): Promise<SampleResult[]> {
    this.calls++;
    this.last = await this.inner.sample(requests.map((r) => ({ ...r, retain: false })));
    return this.last;
  }
  release(): void {}
  weightVersion(): number {
    return this.inner.weightVersion();
  }
}

before(async () => {
  const dir = tinyQwen3();
  served = await serveHf({ checkpoint: dir, name: 'tiny' });
  tokenizer = HFTokenizer.fromDirectory(dir);
  sampler = served.server.options.sampler as NanoSampler;
  const noHandles = new NoHandles(new NanoSampler(sampler.model));
  const server = new ArborServer({ ...served.server.options, sampler: noHandles, futureWaitMs: 100 });
  plain = { url: await server.listen(), server, sampler: noHandles };
});
after(async () => {
  await plain.server.close();
  await served.close();
});

async function body(url: string, b: Json): Promise<Json> {
  const r = await post(url, b);
  assert.equal(r.status, 200, r.text);
  return r.json as Json;
}

/** The JSON events of an SSE reply, [DONE] checked and dropped. */
async function events(url: string, b: Json): Promise<Json[]> {
  const res = await fetch(url, { method: 'POST', body: JSON.stringify({ ...b, stream: true }) });
  const raw = (await res.text()).split('\n\n').filter(Boolean);
  assert.equal(raw.pop(), 'data: [DONE]');
  return raw.map((e) => JSON.parse(e.slice(6)) as Json);
}

/** Token ids per choice index of streamed chunks (completions or chat). */
function streamedIds(chunks: Json[]): number[][] {
  const ids: number[][] = [];
  for (const c of chunks)
    for (const choice of c.choices as Json[])
      (ids[choice.index] ??= []).push(...((choice.token_ids as number[]) ?? []));
  return ids;
}

test('usage.prompt_tokens counts the prompt once with n = 3: completions and chat, streamed and not', async () => {
  const completions = `${served.url}/v1/completions`;
  const request = { prompt: 'The sum of 12 and 34 is', n: 3, max_tokens: 3, seed: 5, return_token_ids: true };
  const whole = await body(completions, request);
  const P = (whole.choices[0].prompt_token_ids as number[]).length;
  const decoded = (whole.choices as Json[]).reduce((s, c) => s + c.token_ids.length, 0);
  assert.deepEqual(whole.usage, {
    prompt_tokens: P,
    total_tokens: P + decoded,
    completion_tokens: decoded,
    prompt_tokens_details: null,
  });
  const chunks = await events(completions, { ...request, stream_options: { include_usage: true } });
  const usage = chunks.pop()!.usage as Json;
  assert.deepEqual(usage, { prompt_tokens: P, total_tokens: P + decoded, completion_tokens: decoded });
  // two prompts: each counted once (vLLM sums len(prompt_token_ids) over the prompts)
  const two = await body(completions, { ...request, prompt: ['The sum of 12 and 34 is', 'Hello'] });
  const P2 = (two.choices[3].prompt_token_ids as number[]).length;
  assert.equal(two.usage.prompt_tokens, P + P2);
  // a remote client reading the reply adds the n − 1 forks back: the engine's own accounting in-process
  const [direct] = await new NanoSampler(sampler.model).sample([
    { tokens: whole.choices[0].prompt_token_ids, n: 3, maxTokens: 3, seed: 5 },
  ]);
  const read = usageFromWire({ prompt_tokens: whole.usage.prompt_tokens, cached_tokens: 0 }, 9, 3);
  assert.deepEqual(read, { ...direct.usage, tokensDecoded: 9 });

  const chat = `${served.url}/v1/chat/completions`;
  const messages = [{ role: 'user', content: 'What is 12 + 34?' }];
  const chatRequest = { messages, n: 3, max_tokens: 3, seed: 5, return_token_ids: true };
  const reply = await body(chat, chatRequest);
  const C = (reply.prompt_token_ids as number[]).length;
  const chatDecoded = (reply.choices as Json[]).reduce((s, c) => s + c.token_ids.length, 0);
  assert.deepEqual(reply.usage, {
    prompt_tokens: C,
    total_tokens: C + chatDecoded,
    completion_tokens: chatDecoded,
    prompt_tokens_details: null,
  });
  const chatChunks = await events(chat, { ...chatRequest, stream_options: { include_usage: true } });
  assert.deepEqual(chatChunks.pop()!.usage, {
    prompt_tokens: C,
    total_tokens: C + chatDecoded,
    completion_tokens: chatDecoded,
  });
});

const stopTitle =
  'a non-streamed request stops decoding at its stop string, ' +
  'with the text and ids of decoding to max_tokens and cutting';
test(stopTitle, async () => {
  const request = { prompt: 'Once upon a time', max_tokens: 64, seed: 11, ignore_eos: true, return_token_ids: true };
  const full = await body(`${served.url}/v1/completions`, request);
  const text = full.choices[0].text as string;
  const ids = full.choices[0].token_ids as number[];
  assert.equal(ids.length, 64);
  // a stop string that appears within the first four tokens' text
  const early = Math.min(tokenizer.decode(ids.slice(0, 4)).length, text.length);
  const stop = text.slice(early - 2, early);
  assert.ok(stop.length === 2 && !stop.includes('\ufffd'), JSON.stringify(stop));
  const at = text.indexOf(stop);

  const decodedBefore = sampler.totals.tokensDecoded;
  const cut = await body(`${served.url}/v1/completions`, { ...request, stop: [stop] });
  const decoded = sampler.totals.tokensDecoded - decodedBefore;
  // the old way: decode to max_tokens in one engine request, then cut (a sampler without cache handles)
  const plainBefore = plain.sampler.inner.totals.tokensDecoded;
  const oneShot = await body(`${plain.url}/v1/completions`, { ...request, stop: [stop] });
  assert.equal(plain.sampler.inner.totals.tokensDecoded - plainBefore, 64, 'the one-shot request decodes max_tokens');
  assert.ok(decoded <= 15, `${decoded} tokens decoded (segments of 1, 2, 4, 8 reach the stop), not 64`);
  assert.deepEqual(cut.choices, oneShot.choices);
  assert.equal(cut.choices[0].text, text.slice(0, at));
  assert.deepEqual([cut.choices[0].finish_reason, cut.choices[0].stop_reason], ['stop', stop]);
  assert.equal(cut.usage.completion_tokens, (cut.choices[0].token_ids as number[]).length);
  assert.ok(cut.choices[0].token_ids.length <= 5, `${cut.choices[0].token_ids.length} tokens kept`);
});

test('seeded streamed requests sample the unstreamed ids (n = 2, temperature 1, with top_p and top_k)', async () => {
  const url = `${served.url}/v1/completions`;
  const cases = [
    { temperature: 1, seeds: [1, 2, 3, 4] },
    { temperature: 1, top_p: 0.9, top_k: 20, seeds: [5, 6, 7] },
  ];
  for (const { seeds, ...sampling } of cases)
    for (const seed of seeds) {
      // 20 tokens: segments of 1, 2, 4, 8 and 5, four boundaries
      const request = { prompt: 'Hello', n: 2, max_tokens: 20, ignore_eos: true, seed, ...sampling };
      const whole = await body(url, { ...request, return_token_ids: true });
      const ids = (whole.choices as Json[]).map((c) => c.token_ids as number[]);
      assert.equal(ids[0].length, 20);
      assert.notDeepEqual(ids[0], ids[1]);
      const streamed = streamedIds(await events(url, { ...request, return_token_ids: true }));
      assert.deepEqual(streamed, ids, `seed ${seed} ${JSON.stringify(sampling)}`);
    }
});

const groupsTitle =
  'slice groups: a large n split as the unstreamed request splits it samples the same ids streamed, ' +
  'and with stop strings';
test(groupsTitle, async () => {
  const guard = new SampleGuard(sampler, { ...DEFAULT_LIMITS, sliceTokens: 6, contextLength: 256 });
  const g: Generation = {
    request: { tokens: [9707, 11, 1879], n: 3, maxTokens: 6, temperature: 1, seed: 9 },
    perContinuation: 6,
    stopTokenIds: [],
  };
  assert.equal(guard.sliceGroups(g.request, 6).length, 3, 'one continuation per group');
  const whole = await generate(sampler, guard, g);
  const ids: number[][] = [[], [], []];
  const run = generateStream(sampler, guard, g);
  for (let step = await run.next(); !step.done; step = await run.next())
    for (const d of step.value) ids[d.choice].push(...d.tokens);
  assert.deepEqual(
    ids,
    whole.choices.map((c) => c.tokens),
  );
  assert.equal(new Set(ids.map((t) => t.join())).size, 3);
  // stop strings: segmented, still the one-shot's tokens (a decoder that never matches keeps them all)
  const segmented = await generate(sampler, guard, {
    ...g,
    text: { decode: (t) => t.map((id) => `<${id}>`).join(''), stop: ['never'], includeStop: false },
  });
  assert.deepEqual(
    segmented.choices.map((c) => c.tokens),
    ids,
  );
  assert.equal(sampler.retainedCount, 0);
});

test('a sampler without cache handles streams what one engine request sampled', async () => {
  const url = `${plain.url}/v1/completions`;
  const request = { prompt: 'Hello', n: 2, max_tokens: 9, ignore_eos: true, seed: 3, temperature: 1 };
  const whole = await body(url, { ...request, return_token_ids: true });
  const calls = plain.sampler.calls;
  const chunks = await events(url, { ...request, return_token_ids: true });
  assert.equal(plain.sampler.calls - calls, 1, 'one engine request');
  const sampled = plain.sampler.last[0].completions.map((c) => c.tokens);
  assert.deepEqual(streamedIds(chunks), sampled);
  assert.deepEqual(
    sampled,
    (whole.choices as Json[]).map((c) => c.token_ids),
  );
  assert.equal(chunks.length, 8, 'two continuations streamed out in pieces of 1, 2, 4 and 2 tokens');
  // and the embedded sampler's stream (segments) samples the same ids for the same seed
  assert.deepEqual(
    streamedIds(await events(`${served.url}/v1/completions`, { ...request, return_token_ids: true })),
    sampled,
  );
});

const continueTitle =
  'continueRandom: a retained continuation draws on from its own generator (a copy: the handle replays), ' +
  'and needs a live handle with n = 1';
test(continueTitle, async () => {
  const request = { tokens: [9707, 11, 1879], maxTokens: 6, temperature: 1, seed: 21 };
  const [whole] = await sampler.sample([request]);
  const [head] = await sampler.sample([{ ...request, maxTokens: 2, retain: true }]);
  const handle = head.completions[0].cacheHandle!;
  const next = { tokens: request.tokens.concat(head.completions[0].tokens), cacheHandle: handle, maxTokens: 4 };
  const [tail] = await sampler.sample([{ ...next, continueRandom: true }]);
  const [again] = await sampler.sample([{ ...next, continueRandom: true, seed: 99 }]);
  assert.deepEqual(head.completions[0].tokens.concat(tail.completions[0].tokens), whole.completions[0].tokens);
  assert.deepEqual(again.completions[0].tokens, tail.completions[0].tokens, 'seed is ignored, the copy replays');
  await assert.rejects(sampler.sample([{ ...next, n: 2, continueRandom: true }]), /n must be 1, got 2/);
  sampler.release([handle]);
  await assert.rejects(sampler.sample([{ ...next, continueRandom: true }]), /needs the live cacheHandle/);
  assert.equal(sampler.retainedCount, 0);
});
