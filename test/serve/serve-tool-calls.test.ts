/**
 * Tool calls in `arbor serve`'s `/v1/chat/completions` at the HTTP level, through the official `openai` v4
 * client (spec agent-gateway §6 tests 1-5, 8-11 and 16): the server runs with vLLM's
 * `--enable-auto-tool-choice --tool-call-parser hermes` over a tiny random Qwen3 (the real Qwen3 tokenizer
 * and chat template) whose replies come from a script (testkit/gateway/scripted-policy.ts), so the model
 * "writes" Qwen3's native `<tool_call>` blocks and the ids the server sampled are known. A second server over
 * the same model runs without the flags, as vLLM does by default. The flags' start-up checks run the CLI's command.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import type { NanoSampler } from '../../src/engine/embedded/sampler.js';
import { HFTokenizer } from '../../src/engine/tokenizer/hf.js';
import { serveCommand, toolCallSettings } from '../../src/cli/serve.js';
import { loadServeEngine } from '../../src/serve/engine.js';
import { ArborServer } from '../../src/serve/server.js';
import { ScriptedPolicy } from '../../testkit/gateway/scripted-policy.js';
import { tinyQwen3 } from '../../testkit/serve/hf-fixture.js';

type Json = Record<string, any>;
/** vLLM's extra request fields, which the openai client sends as given. */
type Extra = Record<string, unknown>;
type Params = OpenAI.ChatCompletionCreateParamsNonStreaming & Extra;
/** A chat reply with vLLM's token ids (return_token_ids). */
type Reply = Omit<OpenAI.ChatCompletion, 'choices'> & {
  choices: Array<OpenAI.ChatCompletion.Choice & { token_ids: number[] }>;
  prompt_token_ids: number[];
};

const call = (city: string, unit?: string) =>
  `<tool_call>\n{"name": "get_weather", "arguments": {"city": "${city}"${unit ? `, "unit": "${unit}"` : ''}}}\n</tool_call>`;
const PARIS = call('Paris');
const LONDON = call('London', 'celsius');
const BROKEN = '<tool_call>\n{"name": "get_weather", "arguments": {"city": }\n</tool_call>';
/** The native start of a call that `required` and a named function append to the prompt. */
const REQUIRED_PREFIX = '<tool_call>\n{"name": "';
const NAMED_PREFIX = '<tool_call>\n{"name": "get_weather", "arguments": ';

/** The model's reply to each user message (the last user turn of the prompt); others are sampled. */
const REPLIES: Record<string, string> = {
  'Weather in Paris?': PARIS,
  'Weather in Paris and London?': `I'll check both.\n${PARIS}\nand then\n${LONDON}\nDone.`,
  'Say something, then check Paris.': `Let me check.\n${PARIS}`,
  'Break a call.': `Checking.\n${PARIS}\n${BROKEN}`,
  'Just say hello.': 'Hello there.',
};

function script(prompt: string): string | undefined {
  if (prompt.endsWith(NAMED_PREFIX)) return '{"city": "Paris"}}\n</tool_call>';
  if (prompt.endsWith(REQUIRED_PREFIX)) return 'get_weather", "arguments": {"city": "Paris"}}\n</tool_call>';
  const users = [...prompt.matchAll(/<\|im_start\|>user\n([\s\S]*?)<\|im_end\|>/g)];
  return REPLIES[users.at(-1)?.[1] ?? ''];
}

const TOOLS: OpenAI.ChatCompletionTool[] = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'current weather',
      parameters: {
        type: 'object',
        properties: { city: { type: 'string' }, unit: { type: 'string' } },
        required: ['city'],
      },
    },
  },
];

let dir: string;
let tokenizer: HFTokenizer;
let policy: ScriptedPolicy;
let withTools: ArborServer;
let plain: ArborServer;
let client: OpenAI;
let plainClient: OpenAI;
let url: string;
let plainUrl: string;

before(async () => {
  dir = tinyQwen3();
  const engine = await loadServeEngine({ checkpoint: dir, name: 'tiny' });
  tokenizer = HFTokenizer.fromDirectory(dir);
  policy = new ScriptedPolicy(engine.options.sampler as NanoSampler, tokenizer, script);
  // the model's shape, which the server reads from a NanoSampler but not from the script around it
  const limits = { contextLength: engine.model.config.contextLength, vocabSize: engine.model.config.vocabSize };
  const options = { ...engine.options, sampler: policy, limits };
  withTools = new ArborServer({ ...options, toolCalls: toolCallSettings(true, 'hermes') });
  plain = new ArborServer(options);
  url = await withTools.listen();
  client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0 });
  plainUrl = await plain.listen();
  plainClient = new OpenAI({ baseURL: `${plainUrl}/v1`, apiKey: 'unused', maxRetries: 0 });
});
after(async () => {
  await withTools.close();
  await plain.close();
});

const user = (content: string): OpenAI.ChatCompletionMessageParam[] => [{ role: 'user', content }];

/** A non-streamed chat with the tools and vLLM's token ids. */
async function ask(content: string, extra: Extra = {}): Promise<Reply> {
  const params = { model: 'tiny', messages: user(content), tools: TOOLS, return_token_ids: true, ...extra };
  return (await client.chat.completions.create(params as Params)) as unknown as Reply;
}

/** /health's count of replies whose tool-call markup did not parse. */
async function failures(server = url): Promise<number> {
  return ((await (await fetch(`${server}/health`)).json()) as Json).tool_parse_failures as number;
}

/** The ids the script made the engine return for the last request (its text, then the end token unless cut). */
const sampledIds = () => policy.returned.at(-1)!.tokens;

test('1: one call → tool_calls[0] with string arguments, content null, finish_reason tool_calls', async () => {
  const r = await ask('Weather in Paris?');
  const choice = r.choices[0];
  assert.equal(choice.message.content, null);
  assert.equal(choice.finish_reason, 'tool_calls');
  assert.equal(choice.message.tool_calls!.length, 1);
  const [c] = choice.message.tool_calls!;
  assert.match(c.id, /^chatcmpl-tool-[0-9a-f]{32}$/);
  assert.deepEqual([c.type, c.function], ['function', { name: 'get_weather', arguments: '{"city": "Paris"}' }]);
  assert.deepEqual(JSON.parse(c.function.arguments), { city: 'Paris' });
  assert.deepEqual(choice.token_ids, sampledIds(), 'the ids sampled, tags and end token included');
  assert.ok(choice.token_ids.includes(tokenizer.encode('<tool_call>')[0]));
  assert.equal(tokenizer.encode('<tool_call>').length, 1, 'the tag is one added token in the Qwen3 vocabulary');
});

test('2 and 3: two calls → two entries in order, content the text before the first tag; text then a call keeps the text', async () => {
  const two = await ask('Weather in Paris and London?');
  assert.equal(two.choices[0].message.content, "I'll check both.\n");
  assert.deepEqual(
    two.choices[0].message.tool_calls!.map((c) => c.function),
    [
      { name: 'get_weather', arguments: '{"city": "Paris"}' },
      { name: 'get_weather', arguments: '{"city": "London", "unit": "celsius"}' },
    ],
  );
  assert.notEqual(two.choices[0].message.tool_calls![0].id, two.choices[0].message.tool_calls![1].id);
  assert.equal(two.choices[0].finish_reason, 'tool_calls');
  const one = await ask('Say something, then check Paris.');
  assert.equal(one.choices[0].message.content, 'Let me check.\n', 'vLLM keeps the newline before the tag');
  assert.equal(one.choices[0].message.tool_calls!.length, 1);
  // no tool markup: plain content, finish stop, no calls
  const hello = await ask('Just say hello.');
  assert.deepEqual(
    [hello.choices[0].message.content, hello.choices[0].message.tool_calls, hello.choices[0].finish_reason],
    ['Hello there.', [], 'stop'],
  );
});

test('4 and 5: a malformed call or one cut by max_tokens → the whole text as content, no calls, counted in /health', async () => {
  const before = await failures();
  const broken = await ask('Break a call.');
  assert.equal(broken.choices[0].message.content, `Checking.\n${PARIS}\n${BROKEN}`, 'all or nothing, tags included');
  assert.deepEqual(broken.choices[0].message.tool_calls, []);
  assert.equal(broken.choices[0].finish_reason, 'stop');
  assert.equal(await failures(), before + 1);
  const cut = await ask('Weather in Paris?', { max_tokens: 6 });
  assert.equal(cut.choices[0].finish_reason, 'length');
  assert.deepEqual(cut.choices[0].token_ids, tokenizer.encode(PARIS).slice(0, 6));
  assert.equal(cut.choices[0].message.content, tokenizer.decode(tokenizer.encode(PARIS).slice(0, 6), true));
  assert.ok(cut.choices[0].message.content!.startsWith('<tool_call>'));
  assert.deepEqual(cut.choices[0].message.tool_calls, []);
  assert.equal(await failures(), before + 2);
  // a server without tool parsing counts nothing
  await plainClient.chat.completions.create({ model: 'tiny', messages: user('Break a call.'), max_tokens: 40 });
  assert.equal(await failures(plainUrl), 0);
});

test('8: tool_choice none → no parsing; tools without tool_choice → auto; "auto" without tools → 400', async () => {
  const none = await ask('Weather in Paris?', { tool_choice: 'none' });
  assert.deepEqual(
    [none.choices[0].message.content, none.choices[0].message.tool_calls, none.choices[0].finish_reason],
    [PARIS, [], 'stop'],
  );
  // the tools stay in the prompt (vLLM without --exclude-tools-when-tool-choice-none)
  const rendered = tokenizer.encodeChat(user('Weather in Paris?') as never, {
    tools: TOOLS as never,
    addGenerationPrompt: true,
  });
  assert.deepEqual(none.prompt_token_ids, rendered);
  const auto = await ask('Weather in Paris?', { tool_choice: 'auto' });
  assert.equal(auto.choices[0].finish_reason, 'tool_calls');
  await assert.rejects(
    client.chat.completions.create({ model: 'tiny', messages: user('Weather in Paris?'), tool_choice: 'auto' }),
    (e: unknown) =>
      e instanceof OpenAI.BadRequestError &&
      /When using `tool_choice`, `tools` must be set\./.test(e.message) &&
      (e.error as Json).param === 'tool_choice',
  );
});

test("8: tools without the flags → vLLM's 400; tool_choice none is answered (the tools in the prompt, nothing parsed)", async () => {
  await assert.rejects(
    plainClient.chat.completions.create({ model: 'tiny', messages: user('Weather in Paris?'), tools: TOOLS }),
    (e: unknown) =>
      e instanceof OpenAI.BadRequestError &&
      e.message.includes('"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'),
  );
  await assert.rejects(
    plainClient.chat.completions.create({
      model: 'tiny',
      messages: user('Weather in Paris?'),
      tools: TOOLS,
      tool_choice: 'required',
    }),
    (e: unknown) => e instanceof OpenAI.BadRequestError && /requires --tool-call-parser to be set/.test(e.message),
  );
  const none = (await plainClient.chat.completions.create({
    model: 'tiny',
    messages: user('Weather in Paris?'),
    tools: TOOLS,
    tool_choice: 'none',
    return_token_ids: true,
  } as Params)) as unknown as Reply;
  assert.deepEqual(
    [none.choices[0].message.content, none.choices[0].message.tool_calls, none.choices[0].finish_reason],
    [PARIS, [], 'stop'],
  );
  const rendered = tokenizer.encodeChat(user('Weather in Paris?') as never, {
    tools: TOOLS as never,
    addGenerationPrompt: true,
  });
  assert.deepEqual(none.prompt_token_ids, rendered, 'the tools are in the prompt');
});

test('9: required and a named function → the native prefix is prompt (prompt_token_ids), the call comes back', async () => {
  const rendered = tokenizer.encodeChat(user('Weather?') as never, {
    tools: TOOLS as never,
    addGenerationPrompt: true,
  });
  const required = await ask('Weather?', { tool_choice: 'required' });
  assert.deepEqual(required.prompt_token_ids, rendered.concat(tokenizer.encode(REQUIRED_PREFIX)));
  assert.deepEqual(required.choices[0].token_ids, sampledIds(), 'only what followed the prefix was sampled');
  assert.equal(
    tokenizer.decode(required.choices[0].token_ids, true),
    'get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>',
  );
  assert.deepEqual(
    required.choices[0].message.tool_calls!.map((c) => c.function),
    [{ name: 'get_weather', arguments: '{"city": "Paris"}' }],
  );
  assert.deepEqual([required.choices[0].message.content, required.choices[0].finish_reason], ['', 'tool_calls']);
  const named = await ask('Weather?', { tool_choice: { type: 'function', function: { name: 'get_weather' } } });
  assert.deepEqual(named.prompt_token_ids, rendered.concat(tokenizer.encode(NAMED_PREFIX)));
  assert.deepEqual(
    named.choices[0].message.tool_calls!.map((c) => c.function),
    [{ name: 'get_weather', arguments: '{"city": "Paris"}' }],
  );
  assert.deepEqual([named.choices[0].message.content, named.choices[0].finish_reason], ['', 'stop'], 'vLLM: stop');
  // a name that is not a tool is vLLM's 400
  await assert.rejects(
    ask('Weather?', { tool_choice: { type: 'function', function: { name: 'other' } } }),
    (e: unknown) =>
      e instanceof OpenAI.BadRequestError && /does not match any of the specified `tools`/.test(e.message),
  );
});

/** The SSE events of a raw streamed request ('[DONE]' kept as the string). */
async function rawStream(body: Json): Promise<Array<Json | '[DONE]'>> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'tiny', tools: TOOLS, stream: true, ...body }),
  });
  assert.match(res.headers.get('content-type') ?? '', /text\/event-stream/);
  return (await res.text())
    .split('\n\n')
    .filter(Boolean)
    .map((e) => (e === 'data: [DONE]' ? '[DONE]' : (JSON.parse(e.slice('data: '.length)) as Json)));
}

test('10: streamed: role chunk first, each call one delta (index, id, type, function), the finish, usage only when asked, [DONE]', async () => {
  const events = await rawStream({ messages: user('Say something, then check Paris.') });
  assert.equal(events.at(-1), '[DONE]');
  const chunks = events.slice(0, -1) as Json[];
  assert.ok(chunks.every((c) => c.object === 'chat.completion.chunk' && c.choices.length === 1 && !c.usage));
  assert.deepEqual(chunks[0].choices[0].delta, { role: 'assistant', content: '' });
  const withCalls = chunks.filter((c) => c.choices[0].delta.tool_calls);
  assert.equal(withCalls.length, 1, 'the call arrives whole, in one delta');
  const [delta] = withCalls[0].choices[0].delta.tool_calls;
  assert.deepEqual(Object.keys(delta).sort(), ['function', 'id', 'index', 'type']);
  assert.deepEqual(
    [delta.index, delta.type, delta.function],
    [0, 'function', { name: 'get_weather', arguments: '{"city": "Paris"}' }],
  );
  assert.match(delta.id, /^chatcmpl-tool-/);
  const text = chunks.map((c) => c.choices[0].delta.content ?? '').join('');
  assert.equal(text, 'Let me check.\n', 'content streams until the markup, none of the markup is sent');
  const last = chunks.at(-1)!;
  assert.deepEqual([last.choices[0].delta, last.choices[0].finish_reason], [{}, 'tool_calls']);
  assert.ok(chunks.slice(0, -1).every((c) => c.choices[0].finish_reason === null));
  // with include_usage: one more chunk, no choices, the usage of what was sampled
  const usage = await rawStream({
    messages: user('Weather in Paris and London?'),
    stream_options: { include_usage: true },
  });
  const usageChunk = usage.at(-2) as Json;
  assert.deepEqual(usageChunk.choices, []);
  assert.equal(usageChunk.usage.completion_tokens, sampledIds().length);
  assert.equal(usage.at(-1), '[DONE]');
  const calls = (usage.slice(0, -2) as Json[]).flatMap((c) => c.choices[0].delta.tool_calls ?? []);
  assert.deepEqual(
    calls.map((c: Json) => [c.index, c.function.arguments]),
    [
      [0, '{"city": "Paris"}'],
      [1, '{"city": "London", "unit": "celsius"}'],
    ],
  );
});

/** A streamed reply assembled as a client does: content joined, calls merged by index, the finish, the ids. */
async function streamed(content: string, extra: Extra = {}) {
  const stream = await client.chat.completions.create({
    model: 'tiny',
    messages: user(content),
    tools: TOOLS,
    stream: true,
    return_token_ids: true,
    ...extra,
  } as OpenAI.ChatCompletionCreateParamsStreaming & Extra);
  let text = '';
  let finish: string | null = null;
  const ids: number[] = [];
  const calls: Array<{ name: string; arguments: string }> = [];
  for await (const chunk of stream) {
    const choice = chunk.choices[0] as OpenAI.ChatCompletionChunk.Choice & Json;
    text += choice.delta.content ?? '';
    ids.push(...(choice.token_ids ?? []));
    for (const c of choice.delta.tool_calls ?? []) {
      calls[c.index] ??= { name: '', arguments: '' };
      calls[c.index].name += c.function?.name ?? '';
      calls[c.index].arguments += c.function?.arguments ?? '';
    }
    finish = choice.finish_reason ?? finish;
  }
  return { text, finish, ids, calls };
}

test('11: streamed and unstreamed replies are equal after assembly (content, calls, finish, ids)', async () => {
  const cases: Array<[string, Extra]> = [
    ['Weather in Paris?', {}],
    ['Weather in Paris and London?', {}],
    ['Break a call.', {}],
    ['Weather in Paris?', { max_tokens: 6 }],
    ['Weather?', { tool_choice: 'required' }],
    ['Weather in Paris?', { tool_choice: 'none' }],
  ];
  const before = await failures();
  for (const [content, extra] of cases) {
    const whole = await ask(content, extra);
    const parts = await streamed(content, extra);
    const message = whole.choices[0].message;
    const what = `${content} ${JSON.stringify(extra)}`;
    assert.equal(parts.text, message.content ?? '', what);
    assert.deepEqual(
      parts.calls,
      message.tool_calls!.map((c) => c.function),
      what,
    );
    assert.equal(parts.finish, whole.choices[0].finish_reason, what);
    assert.deepEqual(parts.ids, whole.choices[0].token_ids, what);
  }
  assert.equal(await failures(), before + 4, 'two failed parses, each counted streamed and not');
});

test("11: the openai client's .stream() helper assembles the final message: the call, its id and the finish", async () => {
  const stream = client.beta.chat.completions.stream({
    model: 'tiny',
    messages: user('Weather in Paris and London?'),
    tools: TOOLS,
  });
  const final = await stream.finalChatCompletion();
  const message = final.choices[0].message;
  assert.equal(final.choices[0].finish_reason, 'tool_calls');
  assert.equal(message.role, 'assistant');
  assert.equal(message.content, "I'll check both.\n");
  assert.deepEqual(
    message.tool_calls!.map((c) => [c.type, c.function.name, c.function.arguments]),
    [
      ['function', 'get_weather', '{"city": "Paris"}'],
      ['function', 'get_weather', '{"city": "London", "unit": "celsius"}'],
    ],
  );
  assert.ok(
    message.tool_calls!.every((c) => /^chatcmpl-tool-[0-9a-f]{32}$/.test(c.id)),
    'the ids sent, not made up',
  );
});

test('16: fields other clients send are accepted (parallel_tool_calls, prompt_cache_key, metadata, verbosity, strict); stream_options needs stream', async () => {
  const strict = TOOLS.map((t) => ({ ...t, function: { ...t.function, strict: true } }));
  const r = await ask('Weather in Paris?', {
    tools: strict,
    parallel_tool_calls: false,
    prompt_cache_key: 'episode-1',
    metadata: { run: 'test' },
    verbosity: 'low',
    store: false,
    user: 'someone',
  });
  assert.equal(r.choices[0].finish_reason, 'tool_calls');
  assert.equal(r.choices[0].message.tool_calls![0].function.arguments, '{"city": "Paris"}');
  await assert.rejects(
    ask('Weather in Paris?', { stream_options: { include_usage: true } }),
    (e: unknown) =>
      e instanceof OpenAI.BadRequestError &&
      e.message.includes('Stream options can only be defined when `stream=True`.') &&
      (e.error as Json).param === 'stream_options',
  );
});

test('start-up: --enable-auto-tool-choice without --tool-call-parser, and an unknown parser, are refused', async () => {
  const serve = (flags: string[]) => serveCommand(['--checkpoint', dir, '--port', '0', ...flags]);
  await assert.rejects(serve(['--enable-auto-tool-choice']), {
    name: 'ArborError',
    message: 'serve: --enable-auto-tool-choice needs --tool-call-parser (hermes or llama3_json)',
  });
  await assert.rejects(serve(['--enable-auto-tool-choice', '--tool-call-parser', 'pythonic']), {
    name: 'ArborError',
    message: 'serve: --tool-call-parser pythonic: known parsers are hermes, llama3_json',
  });
  assert.deepEqual(toolCallSettings(true, 'llama3_json'), { autoToolChoice: true, parser: 'llama3_json' });
  assert.deepEqual(toolCallSettings(false, undefined), { autoToolChoice: false, parser: undefined });
});
