/**
 * The wire schemas both sides share (src/wire/): what the clients send parses under them, what
 * `arbor serve` answers and what vLLM answers parse under them, and a bad request is refused with the
 * field named, by the schema alone and by the server that reads its fields with it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { ArborServer } from '../../src/serve/server.js';
import { OpenAICompletionsSampler, parseCompletionsReply } from '../../src/engine/remote/openai-completions.js';
import { TinkerSampler } from '../../src/engine/remote/tinker-sampler.js';
import type { TinkerSession } from '../../src/engine/remote/tinker-session.js';
import { datumToTinker } from '../../src/engine/remote/tinker.js';
import { readField, readRequest } from '../../src/wire/fields.js';
import { completionRequestSchema, completionResponseSchema, stopField } from '../../src/wire/openai-completions.js';
import { chunksField, datumSchema, sampleRequestSchema } from '../../src/wire/tinker.js';
import { ScriptedSampler } from '../remote/scripted-sampler.js';

const invalid = (message: string) => new Error(message);
const request = { tokens: [1, 2, 3, 4], n: 2, maxTokens: 5, seed: 3, stopTokens: [7], topLogprobs: 2 };

test('completions: the client request parses; a bad request is refused naming the field', () => {
  const client = new OpenAICompletionsSampler({ servers: ['http://127.0.0.1:1'], model: 'm' });
  try {
    const body = client.requestBody(request);
    const parsed = readRequest(completionRequestSchema, body, invalid);
    assert.deepEqual(parsed.prompt, [1, 2, 3, 4]);
    assert.deepEqual(parsed.stop_token_ids, [7]);
    const bad: Array<[Record<string, unknown>, string]> = [
      [
        { ...body, stop_token_ids: [7, -1] },
        'field "stop_token_ids" must be an array of token ids (non-negative integers)',
      ],
      [{ ...body, n: 1.5 }, 'field "n" must be an integer'],
      [{ ...body, temperature: 'hot' }, 'field "temperature" must be a number'],
      [{ ...body, echo: 'yes' }, 'field "echo" must be a boolean'],
      [{ ...body, stop: [''] }, 'field "stop": stop cannot contain an empty string.'],
      [{ ...body, stop: 3 }, 'field "stop" must be a string or a list of strings'],
      [
        { ...body, prompt: { text: 'hi' } },
        'field "prompt" must be a string, a list of strings, a list of token ids or a list of token-id lists',
      ],
    ];
    for (const [b, message] of bad) assert.throws(() => readRequest(completionRequestSchema, b, invalid), { message });
    assert.deepEqual(readField(stopField, 'x', 'stop', invalid), ['x']);
  } finally {
    void client.close();
  }
});

test('completions: arbor serve reads fields with the schema (same 400s) and answers in the reply schema', async () => {
  const server = new ArborServer({ sampler: new ScriptedSampler(), modelName: 'm' });
  const client = new OpenAICompletionsSampler({ servers: ['http://127.0.0.1:1'], model: 'm' });
  try {
    const body = client.requestBody(request);
    const ok = await server.handleRequest('POST', '/v1/completions', JSON.stringify(body));
    assert.equal(ok.status, 200);
    const reply = completionResponseSchema.parse(ok.body);
    assert.equal(reply.choices.length, 2);
    const result = parseCompletionsReply(ok.body as Record<string, unknown>, request, 'http://x', 0);
    assert.equal(result.completions.length, 2);
    for (const [b, message] of [
      [
        { ...body, stop_token_ids: [7, -1] },
        'field "stop_token_ids" must be an array of token ids (non-negative integers)',
      ],
      [{ ...body, stop: [''] }, 'field "stop": stop cannot contain an empty string.'],
      [{ ...body, echo: 'yes' }, 'field "echo" must be a boolean'],
    ] as const) {
      const r = await server.handleRequest('POST', '/v1/completions', JSON.stringify(b));
      assert.equal(r.status, 400);
      assert.equal((r.body as { error: { message: string } }).error.message, message);
    }
  } finally {
    void client.close();
  }
});

test("completions: vLLM's recorded replies parse under the reply schema", () => {
  const fixtures = JSON.parse(readFileSync('testkit/remote/fixtures/vllm.json', 'utf8')) as Record<
    string,
    { json?: unknown }
  >;
  for (const name of ['completion_with_details', 'completion_without_details']) {
    const parsed = completionResponseSchema.safeParse(fixtures[name].json);
    assert.ok(parsed.success, `${name}: ${parsed.success ? '' : parsed.error.message}`);
  }
});

test('tinker: the client sample request and datums parse; a bad chunk is refused naming the field', async () => {
  const sampler = new TinkerSampler({ session: {} as TinkerSession, baseModel: 'base' });
  const body = sampler.requestBody(request, 'sampling-1', 0);
  const parsed = readRequest(sampleRequestSchema, body, invalid);
  assert.deepEqual(parsed.prompt.chunks[0].tokens, [1, 2, 3, 4]);
  assert.deepEqual(parsed.sampling_params.stop, [7]);
  const datum = datumToTinker(
    { inputTokens: [1, 2], targetTokens: [2, 3], weights: [1, 1] },
    { kind: 'cross_entropy' },
  );
  assert.ok(datumSchema.safeParse(datum).success);
  assert.throws(() => readField(chunksField, [{ type: 'image', tokens: [1] }], 'prompt.chunks', invalid), {
    message: 'field "prompt.chunks[0].type": only encoded_text chunks are supported',
  });
  assert.throws(() => readField(chunksField, [{ tokens: [1, -2] }], 'prompt.chunks', invalid), {
    message: 'field "prompt.chunks[0].tokens" must be an array of token ids (non-negative integers)',
  });
  assert.throws(() => readRequest(sampleRequestSchema, { ...body, sampling_params: { max_tokens: 'x' } }, invalid), {
    message: 'field "sampling_params.max_tokens" must be a number',
  });
});
