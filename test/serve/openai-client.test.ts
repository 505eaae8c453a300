/**
 * Issue 25 item 6: `arbor serve` on a Hugging Face model answers the official `openai` npm client (v4,
 * written by OpenAI, not here) as vLLM does: text prompts through the tokenizer, SSE streaming, chat
 * completions through the chat template (+ stream), echo + logprobs with the first entry null and the
 * values of the trainer's log-probs, stop strings and stop tokens, /tokenize and /detokenize with the
 * tokenizer's ids, vLLM's error envelope, and generation_config.json's defaults. The server is a live
 * one on loopback over a tiny random Qwen3 with the real Qwen3 tokenizer.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import OpenAI from 'openai';
import { loadHfModel } from '../../src/engine/hf/model.js';
import { NanoSampler } from '../../src/engine/embedded/sampler.js';
import { NanoTrainer } from '../../src/engine/embedded/trainer.js';
import { HFTokenizer } from '../../src/engine/tokenizer/hf.js';
import type { ChatMessage } from '../../src/engine/types.js';
import { post, serveHf, tinyQwen3 } from '../../testkit/serve/hf-fixture.js';

let dir: string;
let served: Awaited<ReturnType<typeof serveHf>>;
let client: OpenAI;
let tokenizer: HFTokenizer;

before(async () => {
  dir = tinyQwen3();
  served = await serveHf({ checkpoint: dir, name: 'tiny' });
  client = new OpenAI({ baseURL: `${served.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  tokenizer = HFTokenizer.fromDirectory(dir);
});
after(() => served.close());

/** vLLM's extra request fields, which the openai client sends as given. */
type Extra = Record<string, unknown>;
/** The vLLM fields of a choice the openai types do not declare. */
type VllmChoice = {
  token_ids?: number[] | null;
  prompt_token_ids?: number[] | null;
  stop_reason?: number | string | null;
};

test('completions.create({prompt: "12+34="}): text through the tokenizer, exactly what the engine samples for those ids', async () => {
  const r = await client.completions.create({
    model: 'tiny',
    prompt: '12+34=',
    seed: 7,
    return_token_ids: true,
  } as OpenAI.CompletionCreateParamsNonStreaming & Extra);
  const choice = r.choices[0] as OpenAI.CompletionChoice & VllmChoice;
  const ids = tokenizer.encode('12+34=', { addSpecialTokens: true });
  assert.deepEqual(choice.prompt_token_ids, ids);
  assert.equal(choice.token_ids!.length, 16, 'max_tokens defaults to 16');
  assert.equal(choice.text, tokenizer.decode(choice.token_ids!));
  assert.equal(r.model, 'tiny');
  assert.equal(r.object, 'text_completion');
  assert.deepEqual(
    [r.usage!.prompt_tokens, r.usage!.completion_tokens, r.usage!.total_tokens],
    [ids.length, 16, ids.length + 16],
  );
  // the same ids through an in-process sampler of the same model, same seed: the same tokens
  const { model } = await loadHfModel(dir);
  const [direct] = await new NanoSampler(model).sample([
    { tokens: ids, maxTokens: 16, seed: 7, stopTokens: tokenizer.eosIds.slice() },
  ]);
  assert.deepEqual(choice.token_ids, direct.completions[0].tokens);
  // a list of prompts × n: choices indexed prompt-major
  const many = await client.completions.create({
    model: 'tiny',
    prompt: ['1+1=', '2+2='],
    n: 2,
    max_tokens: 3,
    seed: 1,
  });
  assert.deepEqual(
    many.choices.map((c) => c.index),
    [0, 1, 2, 3],
  );
  // token ids and lists of them are prompts too
  const byIds = await client.completions.create({ model: 'tiny', prompt: ids, max_tokens: 16, seed: 7 });
  assert.equal(byIds.choices[0].text, choice.text);
  const lists = await client.completions.create({
    model: 'tiny',
    prompt: [ids, ids.slice(0, 3)],
    max_tokens: 2,
    seed: 7,
  });
  assert.equal(lists.choices.length, 2);
});

test('stream: true is SSE as vLLM sends it: text deltas, the finish reason last, the usage chunk, [DONE]; greedy equals unstreamed', async () => {
  const stream = await client.completions.create({
    model: 'tiny',
    prompt: '12+34=',
    max_tokens: 20,
    temperature: 0,
    stream: true,
    stream_options: { include_usage: true },
    return_token_ids: true,
  } as OpenAI.CompletionCreateParamsStreaming & Extra);
  const chunks: OpenAI.Completion[] = [];
  for await (const chunk of stream) chunks.push(chunk);
  const usageChunk = chunks.pop()!;
  assert.deepEqual(usageChunk.choices, []);
  assert.equal(usageChunk.usage!.completion_tokens, 20);
  assert.ok(chunks.length >= 4, `${chunks.length} chunks: the text arrives in pieces`);
  assert.ok(chunks.slice(0, -1).every((c) => c.choices[0].finish_reason === null));
  assert.equal(chunks.at(-1)!.choices[0].finish_reason, 'length');
  const text = chunks.map((c) => c.choices[0].text).join('');
  const ids = chunks.flatMap((c) => (c.choices[0] as VllmChoice).token_ids!);
  assert.equal(ids.length, 20);
  const whole = await client.completions.create({
    model: 'tiny',
    prompt: '12+34=',
    max_tokens: 20,
    temperature: 0,
    return_token_ids: true,
  } as OpenAI.CompletionCreateParamsNonStreaming & Extra);
  assert.equal(text, whole.choices[0].text);
  assert.deepEqual(ids, (whole.choices[0] as VllmChoice).token_ids);
  // the raw wire: data: lines, nulls included, [DONE] last
  const raw = await fetch(`${served.url}/v1/completions`, {
    method: 'POST',
    body: JSON.stringify({ prompt: '1+1=', max_tokens: 3, stream: true }),
  });
  assert.match(raw.headers.get('content-type') ?? '', /text\/event-stream/);
  const events = (await raw.text()).split('\n\n').filter(Boolean);
  assert.equal(events.at(-1), 'data: [DONE]');
  assert.ok(
    events
      .slice(0, -1)
      .every(
        (e) =>
          e.startsWith('data: {') &&
          JSON.parse(e.slice(6)).usage === null &&
          JSON.parse(e.slice(6)).choices[0].stop_reason === null,
      ),
  );
  // a client that leaves mid-stream cancels the generation and frees its slot
  const totals = (served.server.options.sampler as NanoSampler).totals;
  const decodedBefore = totals.tokensDecoded;
  const controller = new AbortController();
  const long = await fetch(`${served.url}/v1/completions`, {
    method: 'POST',
    body: JSON.stringify({ prompt: '1+1=', max_tokens: 200, ignore_eos: true, stream: true }),
    signal: controller.signal,
  });
  const reader = long.body!.getReader();
  await reader.read();
  assert.equal(served.server.guard.running, 1);
  controller.abort();
  const started = Date.now();
  while (served.server.guard.running > 0 && Date.now() - started < 5000) await new Promise((r) => setTimeout(r, 20));
  assert.equal(served.server.guard.running, 0, 'the slot was released');
  const decoded = totals.tokensDecoded - decodedBefore;
  assert.ok(decoded < 100, `${decoded} of 200 tokens were decoded before the generation stopped`);
});

test('stop strings cut the text where vLLM cuts it (before, or after with include_stop_str_in_output), streamed or not; stop_token_ids', async () => {
  const body = { model: 'tiny', prompt: 'The answer is', max_tokens: 24, temperature: 0 };
  const full = (await client.completions.create(body)).choices[0].text;
  // a stop string from the middle of the greedy text (first occurrence)
  const at = Math.floor(full.length / 2);
  const stop = full.slice(at, at + 2);
  const first = full.indexOf(stop);
  assert.ok(stop.length === 2 && !stop.includes('\ufffd'), JSON.stringify(full));
  const cut = (await client.completions.create({ ...body, stop: [stop] })).choices[0] as OpenAI.CompletionChoice &
    VllmChoice;
  assert.deepEqual([cut.text, cut.finish_reason, cut.stop_reason], [full.slice(0, first), 'stop', stop]);
  const kept = (
    await client.completions.create({
      ...body,
      stop,
      include_stop_str_in_output: true,
    } as OpenAI.CompletionCreateParamsNonStreaming & Extra)
  ).choices[0];
  assert.equal(kept.text, full.slice(0, first + 2));
  let streamed = '';
  for await (const c of await client.completions.create({ ...body, stop: [stop], stream: true }))
    streamed += c.choices[0]?.text ?? '';
  assert.equal(streamed, full.slice(0, first), 'the stream holds back what the stop string removes');
  // a stop token: kept in the ids, not in the text; named as stop_reason
  const ids = (
    await client.completions.create({ ...body, return_token_ids: true } as OpenAI.CompletionCreateParamsNonStreaming &
      Extra)
  ).choices[0] as VllmChoice;
  const third = ids.token_ids![2];
  const byToken = (
    await client.completions.create({
      ...body,
      stop_token_ids: [third],
      return_token_ids: true,
    } as OpenAI.CompletionCreateParamsNonStreaming & Extra)
  ).choices[0] as OpenAI.CompletionChoice & VllmChoice;
  const upTo = ids.token_ids!.indexOf(third) + 1;
  assert.deepEqual(byToken.token_ids, ids.token_ids!.slice(0, upTo));
  assert.deepEqual(
    [byToken.finish_reason, byToken.stop_reason, byToken.text],
    ['stop', third, tokenizer.decode(ids.token_ids!.slice(0, upTo - 1))],
  );
});

test("echo + logprobs: the prompt first, token_logprobs[0] and top_logprobs[0] null, the rest equal to the trainer's log-probs", async () => {
  const ids = tokenizer.encode('Twelve plus thirty-four is forty-six.');
  const r = await client.completions.create({ model: 'tiny', prompt: ids, echo: true, logprobs: 2, max_tokens: 0 });
  const lp = r.choices[0].logprobs!;
  assert.equal(r.choices[0].text, tokenizer.decode(ids, true));
  assert.deepEqual(
    lp.tokens,
    ids.map((id) => tokenizer.decode([id], true)),
  );
  assert.equal(lp.token_logprobs![0], null);
  assert.equal(lp.top_logprobs![0], null);
  assert.ok(
    lp.top_logprobs!.slice(1).every((d) => Object.keys(d!).length >= 2 && Object.keys(d!).length <= 3),
    'at most k + 1 entries',
  );
  assert.deepEqual(
    lp.text_offset,
    ids.map((_, i) => lp.tokens!.slice(0, i).join('').length),
  );
  assert.equal(r.usage!.completion_tokens, 1, 'vLLM counts the hidden token of an echo-only request');
  const { model } = await loadHfModel(dir);
  const trainer = new NanoTrainer(model);
  const maxDiff = async (prompt: number[]) => {
    const [ref] = await trainer.logprobs([
      { inputTokens: prompt.slice(0, -1), targetTokens: prompt.slice(1), weights: prompt.slice(1).map(() => 1) },
    ]);
    return Math.max(...ref.map((x, i) => Math.abs(x - (lp.token_logprobs![i + 1] as number))));
  };
  const diff = await maxDiff(ids);
  assert.ok(diff < 1e-4, `echo log-probs differ from the trainer's by ${diff}`);
  // the comparison rejects another prompt (one token changed)
  const other = ids.slice();
  other[5] = (other[5] + 1) % 1000;
  assert.ok((await maxDiff(other)) > 1e-3, 'the same comparison fails on a perturbed prompt');
  // echo with generation: prompt tokens then new ones
  const more = await client.completions.create({
    model: 'tiny',
    prompt: ids,
    echo: true,
    logprobs: 1,
    max_tokens: 3,
    temperature: 0,
  });
  assert.equal(more.choices[0].logprobs!.tokens!.length, ids.length + 3);
  assert.ok(more.choices[0].text.startsWith(tokenizer.decode(ids, true)));
});

test('chat completions through the chat template (tools, chat_template_kwargs), and streamed as chat.completion.chunk deltas', async () => {
  const messages: ChatMessage[] = [
    { role: 'system', content: 'You add numbers.' },
    { role: 'user', content: 'What is 12+34?' },
  ];
  const tools = [
    {
      type: 'function' as const,
      function: {
        name: 'add',
        description: 'Add two numbers',
        parameters: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } } },
      },
    },
  ];
  const params = {
    model: 'tiny',
    messages: messages as OpenAI.ChatCompletionMessageParam[],
    max_tokens: 12,
    temperature: 0,
    tools,
    // this server parses no tool calls (no --tool-call-parser): vLLM answers tools with the default "auto" 400
    tool_choice: 'none' as const,
    chat_template_kwargs: { enable_thinking: false },
    return_token_ids: true,
  };
  const r = await client.chat.completions.create(params as OpenAI.ChatCompletionCreateParamsNonStreaming & Extra);
  const expected = tokenizer.encodeChat(messages, {
    tools,
    addGenerationPrompt: true,
    kwargs: { enable_thinking: false },
  });
  assert.ok(
    tokenizer.decode(expected, true).includes('"name": "add"') &&
      tokenizer.decode(expected, true).endsWith('<think>\n\n</think>\n\n'),
    'the template saw the tools and the kwargs',
  );
  assert.deepEqual((r as unknown as VllmChoice).prompt_token_ids, expected);
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices[0].message.role, 'assistant');
  const outIds = (r.choices[0] as unknown as VllmChoice).token_ids!;
  assert.equal(r.choices[0].message.content, tokenizer.decode(outIds));
  assert.equal(r.usage!.prompt_tokens, expected.length);
  const stream = await client.chat.completions.create({
    ...params,
    stream: true,
  } as OpenAI.ChatCompletionCreateParamsStreaming & Extra);
  const chunks: OpenAI.ChatCompletionChunk[] = [];
  for await (const c of stream) chunks.push(c);
  assert.equal(chunks[0].object, 'chat.completion.chunk');
  assert.deepEqual(chunks[0].choices[0].delta, { role: 'assistant', content: '' });
  assert.equal(chunks.map((c) => c.choices[0].delta.content ?? '').join(''), r.choices[0].message.content);
  assert.equal(chunks.at(-1)!.choices[0].finish_reason, r.choices[0].finish_reason);
  // max_completion_tokens wins over max_tokens; chat logprobs carry the top entries
  const lp = await client.chat.completions.create({
    model: 'tiny',
    messages: messages as OpenAI.ChatCompletionMessageParam[],
    max_completion_tokens: 3,
    max_tokens: 9,
    logprobs: true,
    top_logprobs: 2,
  });
  assert.equal(lp.choices[0].logprobs!.content!.length, 3);
  assert.ok(lp.choices[0].logprobs!.content!.every((t) => t.top_logprobs.length === 2 && t.bytes!.length > 0));
});

test("/tokenize and /detokenize (no /v1): the tokenizer's ids, the chat variant, token strings; errors in vLLM's envelope", async () => {
  const text = 'Hello world, 12+34=46';
  const t = await post(`${served.url}/tokenize`, { prompt: text, return_token_strs: true });
  const ids = tokenizer.encode(text, { addSpecialTokens: true });
  assert.deepEqual(t.json, {
    count: ids.length,
    max_model_len: 256,
    tokens: ids,
    token_strs: tokenizer.convertIdsToTokens(ids),
  });
  assert.ok((t.json!.token_strs as string[]).includes('Ġworld'), 'raw vocabulary strings');
  const messages: ChatMessage[] = [{ role: 'user', content: 'hi' }];
  const chat = await post(`${served.url}/tokenize`, { messages });
  assert.deepEqual(chat.json!.tokens, tokenizer.encodeChat(messages, { addGenerationPrompt: true }));
  assert.equal(chat.json!.token_strs, null);
  const noPrompt = await post(`${served.url}/tokenize`, { messages, add_generation_prompt: false });
  assert.deepEqual(noPrompt.json!.tokens, tokenizer.encodeChat(messages, { addGenerationPrompt: false }));
  assert.deepEqual((await post(`${served.url}/detokenize`, { tokens: ids })).json, { prompt: text });
  const both = await post(`${served.url}/tokenize`, { messages, continue_final_message: true });
  assert.equal(both.status, 400);
  assert.deepEqual(Object.keys(both.json!.error as object), ['message', 'type', 'param', 'code']);
  const unknown = await post(`${served.url}/tokenize`, { model: 'other', prompt: 'x' });
  assert.deepEqual(unknown.json, {
    error: { message: 'The model `other` does not exist.', type: 'NotFoundError', param: null, code: 404 },
  });
  // through the openai client: the same 404 as an APIError
  await assert.rejects(
    client.completions.create({ model: 'other', prompt: 'x' }),
    (e: InstanceType<typeof OpenAI.APIError>) =>
      e.status === 404 && /The model `other` does not exist\./.test(e.message),
  );
  await assert.rejects(
    client.completions.create({ model: 'tiny', prompt: 'x', min_p: 0.1 } as OpenAI.CompletionCreateParamsNonStreaming &
      Extra),
    (e: InstanceType<typeof OpenAI.APIError>) => e.status === 400 && (e.error as { param?: string }).param === 'min_p',
  );
  const models = await client.models.list();
  assert.deepEqual(
    models.data.map((m) => [m.id, (m as unknown as { root: string }).root]),
    [['tiny', dir]],
  );
});

test('generation_config.json: its sampling defaults apply to fields a request leaves out, and every eos_token_id stops', async () => {
  const other = tinyQwen3(undefined, 2);
  const probe = await serveHf({ checkpoint: other, name: 'g' });
  let greedyText: string;
  let ids: number[];
  try {
    const r = await post(`${probe.url}/v1/completions`, {
      prompt: 'abc',
      max_tokens: 8,
      temperature: 0,
      return_token_ids: true,
    });
    ids = (r.json!.choices as Array<{ token_ids: number[]; text: string }>)[0].token_ids;
    greedyText = (r.json!.choices as Array<{ text: string }>)[0].text;
  } finally {
    await probe.close();
  }
  // greedy by default, and a token of the greedy run (its first new one after the start) made an end id
  const j = Math.max(
    0,
    ids.findIndex((id, i) => i > 0 && !ids.slice(0, i).includes(id)),
  );
  writeFileSync(`${other}/generation_config.json`, JSON.stringify({ temperature: 0, eos_token_id: [151645, ids[j]] }));
  const s = await serveHf({ checkpoint: other, name: 'g' });
  try {
    const a = await post(`${s.url}/v1/completions`, { prompt: 'abc', max_tokens: 8, seed: 1, return_token_ids: true });
    const choice = (
      a.json!.choices as Array<{ token_ids: number[]; finish_reason: string; stop_reason: unknown; text: string }>
    )[0];
    assert.deepEqual(
      choice.token_ids,
      ids.slice(0, j + 1),
      'greedy (temperature 0 from generation_config), stopped at the second eos id',
    );
    assert.deepEqual([choice.finish_reason, choice.stop_reason], ['stop', null], 'an end id is no stop_reason');
    assert.ok(greedyText.startsWith(choice.text));
    const ignoring = await post(`${s.url}/v1/completions`, {
      prompt: 'abc',
      max_tokens: 8,
      ignore_eos: true,
      return_token_ids: true,
    });
    assert.deepEqual((ignoring.json!.choices as Array<{ token_ids: number[] }>)[0].token_ids, ids);
    const sampled = await post(`${s.url}/v1/completions`, {
      prompt: 'abc',
      max_tokens: 8,
      temperature: 1,
      seed: 3,
      ignore_eos: true,
      return_token_ids: true,
    });
    assert.notDeepEqual(
      (sampled.json!.choices as Array<{ token_ids: number[] }>)[0].token_ids,
      ids,
      'an explicit temperature wins',
    );
  } finally {
    await s.close();
  }
});
