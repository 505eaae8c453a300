/**
 * The agent gateway (src/serve/gateway.ts) over HTTP, on a tiny random Qwen3 with the real Qwen3 tokenizer:
 * calls are attributed by their bearer key (401 in OpenAI's shape otherwise), every answered call is recorded
 * token-exact (the chat template's ids, the ids and log-probs the engine sampled, the message sent back), the
 * episode's policy replaces the request's sampling, a seed gives the same tokens streamed or not and batched
 * or not, and a call that is cancelled (the client leaves, the episode or the gateway closes) ends `abort` with
 * what was sampled. Spec agent-gateway §4-§6 (tests 17, 24, 25). One model and one gateway for the file.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import OpenAI from 'openai';
import type { EpisodeCall } from '../../src/core/episode.js';
import { loadHfModel } from '../../src/engine/hf/model.js';
import { NanoSampler } from '../../src/engine/embedded/sampler.js';
import { HFTokenizer } from '../../src/engine/tokenizer/hf.js';
import type { ChatMessage, SampleOptions, SampleRequest, SampleResult, Sampler } from '../../src/engine/types.js';
import { hfServeTokenizer } from '../../src/serve/engine.js';
import { AgentGateway, GATEWAY_MODEL, type EpisodePolicy } from '../../src/serve/gateway.js';
import { derivedSeed } from '../../src/serve/limits.js';
import { ScriptedPolicy } from '../../testkit/gateway/scripted-policy.js';
import { tinyQwen3 } from '../../testkit/serve/hf-fixture.js';

type Json = Record<string, any>;

const MAX_BODY = 64 * 1024;
const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'weather',
      description: 'temperature of a city',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    },
  },
];

let tokenizer: HFTokenizer;
let nano: NanoSampler;
let gateway: AgentGateway;
let base: string;

/** The run's policy with `seed` (temperature 1, no truncation: sampling log-probs are the model's). */
const policy = (seed: number, maxTokens = 48): EpisodePolicy => ({ temperature: 1, topP: 1, topK: 0, maxTokens, seed });

function options(): ConstructorParameters<typeof AgentGateway>[0] {
  return {
    sampler: nano,
    tokenizer: hfServeTokenizer(tokenizer),
    eosIds: [...tokenizer.eosIds],
    toolCallParser: 'hermes',
    maxRequestBytes: MAX_BODY,
  };
}

before(async () => {
  const dir = tinyQwen3();
  nano = new NanoSampler((await loadHfModel(dir)).model);
  tokenizer = HFTokenizer.fromDirectory(dir);
  gateway = new AgentGateway(options());
  base = await gateway.listen();
});
after(() => gateway.close());

/** POST a JSON body (or raw text) to a gateway route with `key`; the status and the JSON reply. */
async function call(
  key: string | undefined,
  path: string,
  body: unknown,
  url = base,
): Promise<{ status: number; json: Json }> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (key !== undefined) headers.authorization = `Bearer ${key}`;
  const res = await fetch(`${url}${path}`, {
    method: 'POST',
    headers,
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as Json };
}

/** The SSE events of a stream, parsed ('[DONE]' kept as the string). */
async function events(res: Response): Promise<Array<Json | '[DONE]'>> {
  const text = await res.text();
  return text
    .split('\n\n')
    .filter(Boolean)
    .map((e) => (e === 'data: [DONE]' ? '[DONE]' : (JSON.parse(e.slice('data: '.length)) as Json)));
}

/** Start a streamed call and read until at least one sampled token has arrived; the ids so far and the rest. */
async function startStream(
  key: string,
  body: Json,
  signal?: AbortSignal,
): Promise<{ ids: number[]; rest: () => Promise<string> }> {
  const res = await fetch(`${base}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ ...body, stream: true, return_token_ids: true }),
    signal,
  });
  assert.equal(res.status, 200);
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  const ids: number[] = [];
  while (ids.length === 0) {
    const { value, done } = await reader.read();
    assert.ok(!done, 'the stream ended before any token');
    text += decoder.decode(value, { stream: true });
    const complete = text.slice(0, text.lastIndexOf('\n\n') + 2);
    text = text.slice(complete.length);
    for (const e of complete.split('\n\n').filter(Boolean)) {
      const chunk = JSON.parse(e.slice('data: '.length)) as Json;
      ids.push(...(chunk.choices[0]?.token_ids ?? []));
    }
  }
  const rest = async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return text;
      text += decoder.decode(value, { stream: true });
    }
  };
  return { ids, rest };
}

/** What the engine samples for call `index` of an episode with policy `p`, asked directly (no HTTP, no batching). */
async function direct(promptIds: number[], p: EpisodePolicy, index: number, maxTokens: number, stop = true) {
  const r: SampleRequest = {
    tokens: promptIds,
    maxTokens,
    temperature: p.temperature,
    topP: p.topP,
    topK: p.topK,
    seed: derivedSeed(p.seed >>> 0, index + 1),
    stopTokens: stop ? [...tokenizer.eosIds] : undefined,
  };
  return (await nano.sample([r]))[0].completions[0];
}

const user = (content: string): ChatMessage[] => [{ role: 'user', content }];

async function until(condition: () => boolean, what: string): Promise<void> {
  const started = Date.now();
  while (!condition()) {
    if (Date.now() - started > 20_000) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

test("401 in OpenAI's shape for no key, an unknown key and a finished episode's key; 404 for other routes; /v1/models", async () => {
  const episode = gateway.open('e-auth', policy(1));
  const unauthorizedBefore = gateway.counters.unauthorized;
  const missing = await call(undefined, '/chat/completions', { messages: user('hi') });
  const unknown = await call('arbor-not-a-key', '/chat/completions', { messages: user('hi') });
  for (const r of [missing, unknown]) {
    assert.equal(r.status, 401);
    assert.deepEqual(Object.keys(r.json.error), ['message', 'type', 'param', 'code']);
    assert.deepEqual(
      [r.json.error.type, r.json.error.param, r.json.error.code],
      ['invalid_request_error', null, 'invalid_api_key'],
    );
  }
  assert.match(missing.json.error.message, /did not provide an API key/);
  assert.match(unknown.json.error.message, /Incorrect API key provided/);
  // the openai client shows it as its AuthenticationError
  const client = new OpenAI({ baseURL: base, apiKey: 'arbor-wrong', maxRetries: 0 });
  await assert.rejects(
    client.models.list(),
    (e: unknown) => e instanceof OpenAI.AuthenticationError && e.status === 401,
  );

  const models = (await (
    await fetch(`${base}/models`, { headers: { authorization: `Bearer ${episode.apiKey}` } })
  ).json()) as Json;
  assert.equal(models.object, 'list');
  assert.deepEqual(
    models.data.map((m: Json) => [m.id, m.object, typeof m.created, m.owned_by]),
    [[GATEWAY_MODEL, 'model', 'number', 'arbor']],
  );
  const listed = await new OpenAI({ baseURL: base, apiKey: episode.apiKey, maxRetries: 0 }).models.list();
  assert.deepEqual(
    listed.data.map((m) => m.id),
    [GATEWAY_MODEL],
  );
  // a valid key on a route the gateway does not serve: 404 in vLLM's envelope
  for (const [method, path] of [
    ['POST', '/embeddings'],
    ['GET', '/chat/completions'],
    ['POST', '/models'],
    ['POST', '/../tokenize'],
  ]) {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${episode.apiKey}` },
      ...(method === 'POST' ? { body: '{}' } : {}),
    });
    assert.equal(res.status, 404, `${method} ${path}`);
    assert.equal(((await res.json()) as Json).error.code, 404);
  }
  assert.deepEqual(await episode.close(), [], 'no call was answered');
  const finished = await call(episode.apiKey, '/chat/completions', { messages: user('hi') });
  assert.equal(finished.status, 401);
  assert.equal(finished.json.error.code, 'invalid_api_key');
  assert.match(finished.json.error.message, /episode has ended/);
  assert.equal(gateway.counters.unauthorized - unauthorizedBefore, 4);
});

test("attribution: two episodes with identical prompts stay apart; each key's calls are in its episode only", async () => {
  const a = gateway.open('e-a', policy(11));
  const b = gateway.open('e-b', policy(12));
  const body = { messages: user('What is 2+2?'), max_tokens: 12, ignore_eos: true, return_token_ids: true };
  const [a0, b0, a1] = await Promise.all([
    call(a.apiKey, '/chat/completions', body),
    call(b.apiKey, '/chat/completions', body),
    call(a.apiKey, '/chat/completions', body),
  ]);
  const callsA = await a.close();
  const callsB = await b.close();
  assert.deepEqual(
    callsA.map((c) => c.index),
    [0, 1],
  );
  assert.equal(callsB.length, 1);
  const sampled = (c: EpisodeCall) => c.choices[0].tokens;
  const returned = (r: { json: Json }) => r.json.choices[0].token_ids as number[];
  // every reply is recorded under the key that asked for it, and nowhere else
  const inA = callsA.map(sampled).map((t) => JSON.stringify(t));
  assert.ok(inA.includes(JSON.stringify(returned(a0))) && inA.includes(JSON.stringify(returned(a1))));
  assert.deepEqual(sampled(callsB[0]), returned(b0));
  assert.ok(!inA.includes(JSON.stringify(returned(b0))), "B's reply is not in A");
  // identical prompts, different episodes (seeds): different samples, each kept apart
  assert.notDeepEqual(returned(a0), returned(b0));
  assert.notDeepEqual(returned(a0), returned(a1), 'two calls of one episode get their own seeds');
  for (const c of [...callsA, ...callsB]) assert.deepEqual(c.messages, body.messages);
});

test("the record is token-exact: the chat template's ids, the ids returned, the model's log-probs, the message sent", async () => {
  const episode = gateway.open('e-exact', policy(21, 16));
  const messages: ChatMessage[] = [
    { role: 'system', content: 'You answer briefly.' },
    { role: 'user', content: 'Weather in Oslo?' },
  ];
  const r = await call(episode.apiKey, '/chat/completions', {
    model: 'anything',
    messages,
    tools: TOOLS,
    max_tokens: 16,
    return_token_ids: true,
  });
  assert.equal(r.status, 200);
  const [record] = await episode.close();
  const expected = tokenizer.encodeChat(messages, { tools: TOOLS as never, addGenerationPrompt: true });
  assert.ok(tokenizer.decode(expected, true).includes('"name": "weather"'), 'the template saw the tools');
  assert.deepEqual(record.promptIds, expected);
  assert.deepEqual(r.json.prompt_token_ids, expected);
  const choice = record.choices[0];
  assert.deepEqual(choice.tokens, r.json.choices[0].token_ids);
  assert.equal(choice.tokens.length, choice.logprobs.length);
  assert.deepEqual(choice.message, r.json.choices[0].message, 'the message as sent');
  assert.equal(choice.finishReason, r.json.choices[0].finish_reason);
  assert.deepEqual([record.route, record.retry], ['chat', 0]);
  assert.deepEqual(
    [record.usage.promptTokensComputed + record.usage.prefixTokensReused, record.usage.tokensDecoded],
    [r.json.usage.prompt_tokens, r.json.usage.completion_tokens],
  );
  // the sampling log-probs are the model's log-probabilities of those ids (temperature 1, no truncation)
  const scored = nano.scorePrompt(record.promptIds.concat(choice.tokens)).logprobs.slice(record.promptIds.length);
  const diff = Math.max(...scored.map((x, t) => Math.abs((x as number) - choice.logprobs[t])));
  assert.ok(diff < 1e-5, `recorded log-probs differ from the model's by ${diff}`);
  // and the comparison can fail: the same ids scored after another prompt differ
  const other = nano.scorePrompt(expected.slice(0, 3).concat(choice.tokens)).logprobs.slice(3);
  assert.ok(Math.max(...other.map((x, t) => Math.abs((x as number) - choice.logprobs[t]))) > 1e-3);
});

test("the episode policy replaces the request's temperature, top_p, top_k and seed, and caps max_tokens", async () => {
  const p = policy(31, 10);
  const episode = gateway.open('e-policy', p);
  const messages = user('Count to three.');
  const asked = { temperature: 0, top_p: 0.05, top_k: 1, seed: 999, return_token_ids: true, ignore_eos: true };
  const capped = await call(episode.apiKey, '/chat/completions', { messages, ...asked, max_tokens: 100 });
  const below = await call(episode.apiKey, '/chat/completions', { messages, ...asked, max_tokens: 3 });
  const [first, second] = await episode.close();
  const ids = tokenizer.encodeChat(messages, { addGenerationPrompt: true });
  // call k samples as the engine does with the policy's fields and the seed derived from (episode seed, k)
  const expected = await direct(ids, p, 0, 10, false);
  assert.deepEqual(capped.json.choices[0].token_ids, expected.tokens);
  assert.deepEqual(first.choices[0].tokens, expected.tokens);
  assert.equal(capped.json.choices[0].finish_reason, 'length');
  assert.equal(first.choices[0].finishReason, 'length');
  const greedy = (await nano.sample([{ tokens: ids, maxTokens: 10, temperature: 0 }]))[0].completions[0].tokens;
  assert.notDeepEqual(expected.tokens, greedy, "the request's temperature 0 was not applied");
  // a max_tokens below the cap stands; the second call draws from its own seed
  assert.deepEqual(second.choices[0].tokens, (await direct(ids, p, 1, 3, false)).tokens);
  assert.equal(below.json.choices[0].token_ids.length, 3);
});

test('a seed gives the same tokens: same episode seed → same call; streamed → the same tokens as unstreamed', async () => {
  const body = { messages: user('Name a colour.'), max_tokens: 24, ignore_eos: true, return_token_ids: true };
  const plain = gateway.open('e-seed-1', policy(41));
  const again = gateway.open('e-seed-2', policy(41));
  const streamed = gateway.open('e-seed-3', policy(41));
  const other = gateway.open('e-seed-4', policy(42));
  const r1 = await call(plain.apiKey, '/chat/completions', body);
  const r2 = await call(again.apiKey, '/chat/completions', body);
  const r4 = await call(other.apiKey, '/chat/completions', body);
  const res = await fetch(`${base}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${streamed.apiKey}` },
    body: JSON.stringify({ ...body, stream: true }),
  });
  const chunks = (await events(res)).filter((e): e is Json => e !== '[DONE]');
  const streamedIds = chunks.flatMap((c) => c.choices[0]?.token_ids ?? []);
  const streamedText = chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('');
  assert.deepEqual(r2.json.choices[0].token_ids, r1.json.choices[0].token_ids);
  assert.notDeepEqual(r4.json.choices[0].token_ids, r1.json.choices[0].token_ids, 'another seed samples otherwise');
  assert.equal(streamedIds.length, 24);
  assert.deepEqual(streamedIds, r1.json.choices[0].token_ids);
  assert.equal(streamedText, r1.json.choices[0].message.content);
  const [recordPlain] = await plain.close();
  const [recordStreamed] = await streamed.close();
  await Promise.all([again.close(), other.close()]);
  assert.deepEqual(recordStreamed.choices[0].tokens, recordPlain.choices[0].tokens);
  assert.equal(recordStreamed.choices[0].finishReason, 'length');
  const diff = Math.max(
    ...recordPlain.choices[0].logprobs.map((x, t) => Math.abs(x - recordStreamed.choices[0].logprobs[t])),
  );
  assert.ok(diff < 1e-5, `streamed log-probs differ by ${diff}`);
});

test('/v1/completions: a token-id prompt and a text prompt are recorded with their ids', async () => {
  const episode = gateway.open('e-completions', policy(51));
  const ids = tokenizer.encode('The sky is');
  const byIds = await call(episode.apiKey, '/completions', { prompt: ids, max_tokens: 6, return_token_ids: true });
  const byText = await call(episode.apiKey, '/completions', {
    prompt: '12+34=',
    max_tokens: 5,
    return_token_ids: true,
  });
  assert.equal(byIds.status, 200);
  const [first, second] = await episode.close();
  assert.deepEqual([first.route, first.messages], ['completions', undefined]);
  assert.deepEqual(first.promptIds, ids);
  assert.deepEqual(first.choices[0].tokens, byIds.json.choices[0].token_ids);
  assert.deepEqual(first.choices[0].message, { text: byIds.json.choices[0].text });
  assert.deepEqual(second.promptIds, tokenizer.encode('12+34=', { addSpecialTokens: true }));
  assert.deepEqual(second.promptIds, byText.json.choices[0].prompt_token_ids);
  assert.deepEqual(second.choices[0].tokens, byText.json.choices[0].token_ids);
  assert.equal(second.choices[0].logprobs.length, second.choices[0].tokens.length);
  // the same call samples what the engine samples for those ids under the policy
  assert.deepEqual(first.choices[0].tokens, (await direct(ids, policy(51), 0, 6)).tokens);
});

test('a client that leaves mid-stream: the call is recorded `abort` with the tokens sampled until then', async () => {
  const p = policy(61, 120);
  const episode = gateway.open('e-leave', p);
  const body = { messages: user('Tell a long story.'), max_tokens: 120, ignore_eos: true };
  const controller = new AbortController();
  const { ids: received } = await startStream(episode.apiKey, body, controller.signal);
  controller.abort();
  await until(() => episode.calls().length === 1, 'the record of the aborted stream');
  const [record] = await episode.close();
  const choice = record.choices[0];
  assert.equal(choice.finishReason, 'abort');
  assert.ok(choice.tokens.length < 120, `${choice.tokens.length} tokens: the generation stopped early`);
  assert.deepEqual(choice.tokens.slice(0, received.length), received, 'what the client received comes first');
  assert.equal(choice.logprobs.length, choice.tokens.length);
  // the seed's stream cut where the abort cut it: what the engine samples with max_tokens = the tokens kept
  const cut = await direct(record.promptIds, p, 0, choice.tokens.length, false);
  assert.deepEqual(choice.tokens, cut.tokens, 'sampled by the policy, nothing else');
});

test('concurrent calls are batched into fewer engine calls and sample what one call at a time samples', async () => {
  const seeds = [71, 72, 73, 74, 75];
  const bodies = seeds.map((s) => ({
    messages: user(`Question ${s}: what is ${s} squared?`),
    max_tokens: 10,
    ignore_eos: true,
    return_token_ids: true,
  }));
  const before = gateway.batches;
  const together = seeds.map((s) => gateway.open(`e-batch-${s}`, policy(s)));
  const concurrent = await Promise.all(together.map((e, i) => call(e.apiKey, '/chat/completions', bodies[i])));
  const after = gateway.batches;
  assert.equal(after.calls - before.calls, seeds.length);
  assert.ok(
    after.batches - before.batches < seeds.length,
    `${after.batches - before.batches} engine calls for ${seeds.length} concurrent requests`,
  );
  const sequential: Json[] = [];
  for (const [i, s] of seeds.entries()) {
    const episode = gateway.open(`e-one-${s}`, policy(s));
    sequential.push((await call(episode.apiKey, '/chat/completions', bodies[i])).json);
    await episode.close();
  }
  for (const [i, r] of concurrent.entries())
    assert.deepEqual(r.json.choices[0].token_ids, sequential[i].choices[0].token_ids);
  for (const e of together) await e.close();
});

test('bounded, validated bodies: over maxRequestBytes → 413, malformed JSON → 400, no messages → 400 naming the field', async () => {
  const episode = gateway.open('e-bodies', policy(81));
  const refusedBefore = gateway.counters.refused;
  const huge = await call(episode.apiKey, '/chat/completions', { messages: user('x'.repeat(MAX_BODY)) });
  assert.equal(huge.status, 413);
  assert.match(huge.json.error.message, new RegExp(`larger than ${MAX_BODY} bytes`));
  const malformed = await call(episode.apiKey, '/chat/completions', '{"messages": [');
  assert.deepEqual([malformed.status, malformed.json.error.message], [400, 'request body is not valid JSON']);
  const notObject = await call(episode.apiKey, '/chat/completions', '[1, 2]');
  assert.equal(notObject.status, 400);
  const noMessages = await call(episode.apiKey, '/chat/completions', { max_tokens: 4 });
  assert.equal(noMessages.status, 400);
  assert.equal(noMessages.json.error.param, 'messages');
  assert.match(noMessages.json.error.message, /field "messages"/);
  const noPrompt = await call(episode.apiKey, '/completions', { max_tokens: 4 });
  assert.deepEqual([noPrompt.status, noPrompt.json.error.param], [400, 'prompt']);
  assert.equal(gateway.counters.refused - refusedBefore, 5);
  assert.deepEqual(await episode.close(), [], 'a refused request is no call');
});

test("an episode's close() cancels its calls in flight: a stream ends `abort`, and the key is refused from then on", async () => {
  const episode = gateway.open('e-close-stream', policy(91, 120));
  const { ids: received, rest } = await startStream(episode.apiKey, {
    messages: user('Tell a long story.'),
    max_tokens: 120,
    ignore_eos: true,
  });
  const [record] = await episode.close();
  assert.equal(record.choices[0].finishReason, 'abort');
  assert.ok(record.choices[0].tokens.length < 120);
  assert.deepEqual(record.choices[0].tokens.slice(0, received.length), received);
  // the client was told: the choice finished `abort`, then [DONE]
  const tail = (await rest()).split('\n\n').filter(Boolean);
  assert.equal(tail.at(-1), 'data: [DONE]');
  assert.equal(JSON.parse(tail.at(-2)!.slice('data: '.length)).choices[0].finish_reason, 'abort');
  assert.equal((await call(episode.apiKey, '/chat/completions', { messages: user('hi') })).status, 401);
});

/** A sampler whose first call waits for `open()`: the engine busy with another batch. */
class HeldSampler implements Sampler {
  readonly specificationVersion = 'arbor.sampler.v1' as const;
  private opened!: () => void;
  private readonly gate = new Promise<void>((resolve) => (this.opened = resolve));
  calls = 0;
  constructor(readonly inner: NanoSampler) {}
  get capabilities() {
    return this.inner.capabilities;
  }
  weightVersion(): number {
    return this.inner.weightVersion();
  }
  release(handles: string[]): void {
    this.inner.release(handles);
  }
  open(): void {
    this.opened();
  }
  async sample(requests: SampleRequest[], options?: SampleOptions): Promise<SampleResult[]> {
    if (this.calls++ === 0) await this.gate;
    return this.inner.sample(requests, options);
  }
}

test('an episode closed while its call waits for the engine: the call is recorded `abort` (nothing sampled) and answered', async () => {
  const held = new HeldSampler(nano);
  const busy = new AgentGateway({ ...options(), sampler: held });
  const url = await busy.listen();
  try {
    const first = busy.open('e-first', policy(101));
    const waiting = busy.open('e-waiting', policy(102));
    const body = { messages: user('hi'), max_tokens: 4, ignore_eos: true };
    const firstReply = call(first.apiKey, '/chat/completions', body, url);
    await until(() => held.calls === 1, 'the first batch');
    const waitingReply = call(waiting.apiKey, '/chat/completions', body, url);
    await until(() => busy.counters.calls === 2, 'the second call');
    const closing = waiting.close();
    held.open();
    const [record] = await closing;
    assert.equal(record.choices[0].finishReason, 'abort');
    assert.deepEqual(record.choices[0].tokens, []);
    const answered = await waitingReply;
    assert.equal(answered.status, 200, JSON.stringify(answered.json));
    assert.equal(answered.json.choices[0].finish_reason, 'abort');
    assert.equal((await firstReply).json.choices[0].finish_reason, 'length');
    assert.equal((await first.close())[0].choices[0].tokens.length, 4);
  } finally {
    await busy.close();
  }
});

test('an episode closed while a request body is still arriving: that request is refused (401), no record appears', async () => {
  const episode = gateway.open('e-late', policy(111));
  const { port } = new URL(base);
  const body = JSON.stringify({ messages: user('hi'), max_tokens: 4 });
  const status = new Promise<number>((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/v1/chat/completions',
        headers: { authorization: `Bearer ${episode.apiKey}`, 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        res.resume();
        resolve(res.statusCode!);
      },
    );
    req.on('error', reject);
    req.write(body.slice(0, 10));
    setTimeout(() => {
      void episode.close().then(() => req.end(body.slice(10)));
    }, 100);
  });
  assert.equal(await status, 401);
  assert.deepEqual(episode.calls(), []);
});

test('close() ends the gateway: the port is closed (a new connection is refused)', async () => {
  const closing = new AgentGateway(options());
  const url = await closing.listen();
  const episode = closing.open('e-end', policy(121));
  assert.equal(
    (await call(episode.apiKey, '/chat/completions', { messages: user('hi'), max_tokens: 2 }, url)).status,
    200,
  );
  await closing.close();
  await assert.rejects(
    fetch(`${url}/models`, { headers: { authorization: `Bearer ${episode.apiKey}` } }),
    (e: Error) => (e.cause as NodeJS.ErrnoException | undefined)?.code === 'ECONNREFUSED',
  );
});

test('tool calls are recorded as returned; a forced tool-call prefix is prompt, never a sampled token', async () => {
  const forced = '<tool_call>\n{"name": "';
  const weatherCall = `${forced}weather", "arguments": {"city": "Oslo"}}\n</tool_call>`;
  const scripted = new ScriptedPolicy(nano, tokenizer, (prompt) => {
    if (prompt.endsWith(forced)) return weatherCall.slice(forced.length);
    return prompt.includes('Weather in Oslo?') ? weatherCall : undefined;
  });
  const tools = new AgentGateway({ ...options(), sampler: scripted });
  const url = await tools.listen();
  try {
    const episode = tools.open('e-tools', policy(131));
    const messages = user('Weather in Oslo?');
    const auto = await call(episode.apiKey, '/chat/completions', { messages, tools: TOOLS }, url);
    const required = await call(
      episode.apiKey,
      '/chat/completions',
      { messages, tools: TOOLS, tool_choice: 'required' },
      url,
    );
    const [first, second] = await episode.close();
    assert.deepEqual(first.choices[0].toolCalls, [{ name: 'weather', arguments: '{"city": "Oslo"}' }]);
    assert.deepEqual(first.choices[0].message, auto.json.choices[0].message);
    assert.equal(auto.json.choices[0].finish_reason, 'tool_calls');
    assert.deepEqual(first.choices[0].tokens, scripted.returned[0].tokens, 'the ids the engine sampled');
    assert.equal(first.choices[0].toolParseFailed, false);
    // required: the template's ids, then the forced prefix as prompt; the sampled ids are only what followed
    const rendered = tokenizer.encodeChat(messages, { tools: TOOLS as never, addGenerationPrompt: true });
    const prefix = tokenizer.encode(forced);
    assert.deepEqual(second.promptIds, rendered.concat(prefix));
    assert.deepEqual(second.choices[0].tokens, scripted.returned[1].tokens);
    assert.equal(tokenizer.decode(second.choices[0].tokens, true), weatherCall.slice(forced.length) + '<|im_end|>');
    assert.deepEqual(second.choices[0].toolCalls, first.choices[0].toolCalls);
    assert.equal(required.json.choices[0].message.content, '');
    assert.equal(tools.toolParseFailures, 0);
  } finally {
    await tools.close();
  }
});
