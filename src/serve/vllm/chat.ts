/**
 * `/v1/chat/completions` of `arbor serve` and the agent gateway (vllm-project/vllm@5e91864
 * openai/chat_completion/serving.py): the messages rendered with the model's chat template (tools,
 * add_generation_prompt, continue_final_message, chat_template_kwargs; add_special_tokens default
 * false), then sampled like a completion; `max_completion_tokens` wins over `max_tokens`; logprobs as
 * `{content: [...]}`. Streamed: a role chunk per choice, content deltas (`chat.completion.chunk`), the
 * finish reason on each choice's last delta, an optional usage chunk, `[DONE]`.
 *
 * Tool calls (serve/tool-calls.ts), as vLLM with `--enable-auto-tool-choice --tool-call-parser`: with
 * `tool_choice` auto the sampled text is parsed in the model's own format into OpenAI `tool_calls`
 * (`finish_reason: "tool_calls"`); text that fails to parse is returned as content and counted. For
 * `required` and a named function, the start of a call in the model's native format is appended to the
 * prompt (`<tool_call>\n{"name": "` ...) instead of vLLM's structured outputs, so the model writes its
 * own format (the gateway records that prefix as prompt, never as a sampled token). A streamed choice
 * sends its content as it is sampled until call markup begins, then buffers, and sends each call as
 * one complete delta at the end: streamed and unstreamed replies are the same by construction.
 */
import type { EpisodeChoice } from '../../core/episode.js';
import type { ChatMessage, Sampler } from '../../engine/types.js';
import type { GenerationDefaults } from '../../engine/open.js';
import { generate, generateStream, type ChoiceDelta, type ChoiceOutput, type Generation } from './generation.js';
import type { CallHooks } from '../hooks.js';
import type { SampleGuard } from '../limits.js';
import { chatLogprobs } from '../text.js';
import {
  parseToolCalls,
  resolveToolChoice,
  ToolCallStream,
  toolFinishReason,
  type ParsedToolCall,
  type ToolCallParserName,
  type ToolChoice,
} from '../tool-calls.js';
import { BadRequest, boundedInt, optBool, type ServeReply } from '../validate.js';
import { chatMessages, maxTokensField, samplingFields, templateFields, type SamplingFields } from './params.js';
import { addUsage, now, sse, sseStream, uid, wireUsage } from './wire.js';

/** The server's tool-call settings (vLLM's --enable-auto-tool-choice and --tool-call-parser). */
export interface ToolCallSettings {
  autoToolChoice: boolean;
  parser?: ToolCallParserName;
}

/** What the chat route needs of the vLLM routes (serve/vllm/routes.ts). */
export interface ChatHost {
  readonly guard: SampleGuard;
  readonly generationDefaults: GenerationDefaults;
  readonly toolCalls: ToolCallSettings;
  /** Replies whose tool-call markup did not parse (returned as content). */
  toolParseFailures: number;
  target(model: unknown): { name: string; sampler: Sampler };
  /** The prompt ids of a chat (its template rendered, then encoded); refused past `limit` tokens (default the guard's). */
  renderChat(b: Record<string, unknown>, messages: ChatMessage[], limit?: number): Promise<number[]>;
  /** Token ids of text a template writes (special tokens parsed): a forced tool-call prefix. */
  encodeTemplateText(text: string): number[];
  generation(ids: number[], s: SamplingFields, maxTokens: number, k: number, fields: GenerationFields): Generation;
  admit(gens: Generation[], what: string): () => void;
  tokenName(asIds: boolean): (id: number) => string;
}

/** Field names of one request, for the 400 messages. */
interface GenerationFields {
  prompt: string;
  maxTokens: string;
}

/** How the choices of one reply are read for tool calls (absent: not at all). */
interface ToolReading {
  choice: ToolChoice;
  parser: ToolCallParserName;
  /** Text appended to the prompt that the model continues (required / named); '' for auto. */
  forced: string;
}

/** What the choices and chunks of one chat reply share. */
interface ChatShape {
  id: string;
  created: number;
  model: string;
  role: string;
  ids: number[];
  /** vLLM's chat echo: the last message's content when it has the reply's role. */
  echoed: string;
  returnIds: boolean;
  /** Token names for logprobs (undefined: logprobs not asked). */
  name: ((id: number) => string) | undefined;
  topK: number;
  tools: ToolReading | undefined;
  messages: ChatMessage[];
}

/** A choice's message: its text read for tool calls. */
interface AssistantReply {
  content: string | null;
  toolCalls: ParsedToolCall[];
  failed: boolean;
}

/** vLLM's tool call ids (chat_utils.py make_tool_call_id: `chatcmpl-tool-<random>`). */
const toolCallId = (): string => `chatcmpl-tool-${uid()}`;

/**
 * The start of a call in the parser's native format, for `required` (the name follows) and a named
 * function (its arguments follow): Qwen/Hermes `<tool_call>\n{"name": "`, Llama 3.1 `{"name": "`.
 */
export function forcedToolPrefix(parser: ToolCallParserName, choice: ToolChoice): string {
  const open = parser === 'hermes' ? '<tool_call>\n{"name": "' : '{"name": "';
  if (choice.kind === 'required') return open;
  if (choice.kind !== 'named') return '';
  return `${open}${choice.name}", "${parser === 'hermes' ? 'arguments' : 'parameters'}": `;
}

/** The tool reading of a request (undefined when tool calls are not parsed: no tools, or tool_choice none). */
function toolReading(host: ChatHost, b: Record<string, unknown>): ToolReading | undefined {
  const choice = resolveToolChoice(b.tools, b.tool_choice, host.toolCalls);
  if (choice.kind === 'none') return undefined;
  const parser = host.toolCalls.parser;
  if (!parser) {
    const why = 'tool calls need a parser: start the server with --enable-auto-tool-choice --tool-call-parser NAME';
    throw new BadRequest(`field "tool_choice": ${why}`);
  }
  return { choice, parser, forced: forcedToolPrefix(parser, choice) };
}

/** The assistant reply of a choice's text (its tool calls read when the request asks for them). */
function readReply(text: string, tools: ToolReading | undefined): AssistantReply {
  if (!tools) return { content: text, toolCalls: [], failed: false };
  const parsed = parseToolCalls(tools.parser, tools.forced + text, toolCallId);
  // vLLM returns "" as the content of a required or named call
  const forcedCall = tools.choice.kind !== 'auto' && parsed.toolCalls.length > 0;
  return { content: forcedCall ? '' : parsed.content, toolCalls: parsed.toolCalls, failed: parsed.failed };
}

/** The message sent for a choice (vLLM's ChatMessage fields). */
function messageOf(chat: ChatShape, reply: AssistantReply): Record<string, unknown> {
  const content = reply.content === null ? (chat.echoed ? chat.echoed : null) : chat.echoed + reply.content;
  return {
    role: chat.role,
    content,
    refusal: null,
    annotations: null,
    audio: null,
    function_call: null,
    tool_calls: reply.toolCalls,
    reasoning: null,
  };
}

/** The record of a choice for the gateway (core/episode.ts EpisodeChoice). */
function recordedChoice(
  tokens: number[],
  logprobs: number[],
  finishReason: EpisodeChoice['finishReason'],
  message: Record<string, unknown>,
  reply: AssistantReply,
): EpisodeChoice {
  return {
    tokens,
    logprobs,
    finishReason,
    message,
    toolCalls: reply.toolCalls.map((c) => ({ name: c.function.name, arguments: c.function.arguments })),
    toolParseFailed: reply.failed,
  };
}

export async function chatCompletion(
  host: ChatHost,
  b: Record<string, unknown>,
  signal?: AbortSignal,
  hooks?: CallHooks,
): Promise<ServeReply> {
  const target = host.target(b.model);
  const stream = optBool(b.stream, 'stream', false);
  if (b.stream_options !== undefined && b.stream_options !== null && !stream) {
    throw new BadRequest('field "stream_options": Stream options can only be defined when `stream=True`.');
  }
  const messages = chatMessages(b.messages);
  const tools = toolReading(host, b);
  const rendered = await host.renderChat(b, messages);
  const ids = tools?.forced ? rendered.concat(host.encodeTemplateText(tools.forced)) : rendered;
  const logprobs = optBool(b.logprobs, 'logprobs', false);
  const topK =
    b.top_logprobs === undefined || b.top_logprobs === null
      ? 0
      : boundedInt(b.top_logprobs, 'top_logprobs', 0, 0, host.guard.limits.maxLogprobs);
  if (topK > 0 && !logprobs) {
    throw new BadRequest('field "top_logprobs": when using `top_logprobs`, `logprobs` must be set to true.');
  }
  let s = samplingFields(b, host.generationDefaults, host.guard.limits.maxN);
  // vLLM's hermes parser keeps special tokens in the text it reads (tool tags are special in some vocabularies)
  if (tools) s = { ...s, skipSpecial: false };
  const returnIds = optBool(b.return_token_ids, 'return_token_ids', false);
  const asIds = optBool(b.return_tokens_as_token_ids, 'return_tokens_as_token_ids', false);
  const byCompletion = b.max_completion_tokens !== undefined && b.max_completion_tokens !== null;
  const field = byCompletion ? 'max_completion_tokens' : 'max_tokens';
  const given = byCompletion ? b.max_completion_tokens : b.max_tokens;
  let maxTokens = maxTokensField(given, field, undefined, host.generationDefaults);
  if (hooks) ({ sampling: s, maxTokens } = hooks.policy(s, maxTokens));
  const g = host.generation(ids, s, maxTokens, logprobs ? topK : 0, { prompt: 'messages', maxTokens: field });
  const last = messages[messages.length - 1];
  const role = templateFields(b).addGenerationPrompt ? 'assistant' : last.role;
  const echoed = optBool(b.echo, 'echo', false) && last.role === role ? (last.content ?? '') : '';
  const name = logprobs ? host.tokenName(asIds) : undefined;
  const release = host.admit([g], `n × ${field} = ${s.n} × ${g.perContinuation}`);
  const id = `chatcmpl-${uid()}`;
  const chat: ChatShape = {
    id,
    created: now(),
    model: target.name,
    role,
    ids,
    echoed,
    returnIds,
    name,
    topK,
    tools,
    messages,
  };
  if (stream) {
    const options = b.stream_options as { include_usage?: unknown } | null | undefined;
    const includeUsage = optBool(options?.include_usage, 'stream_options.include_usage', false);
    const events = chatEvents(host, target.sampler, g, chat, includeUsage, release, signal, hooks);
    return { status: 200, body: null, events };
  }
  try {
    return { status: 200, body: await chatReply(host, target.sampler, g, chat, signal, hooks) };
  } finally {
    release();
  }
}

/** The body of a non-streamed reply (recorded for the gateway once it is complete). */
async function chatReply(
  host: ChatHost,
  sampler: Sampler,
  g: Generation,
  chat: ChatShape,
  signal: AbortSignal | undefined,
  hooks: CallHooks | undefined,
): Promise<unknown> {
  const out = await generate(sampler, host.guard, g, signal);
  const recorded: EpisodeChoice[] = [];
  const choices = out.choices.map((o, index) => {
    const reply = readReply(o.text, chat.tools);
    if (reply.failed) host.toolParseFailures++;
    const message = messageOf(chat, reply);
    recorded.push(recordedChoice(o.tokens, o.logprobs, o.finishReason, message, reply));
    return {
      index,
      message,
      logprobs: logprobsOf(chat, o),
      finish_reason: finishOf(chat, o.finishReason, reply),
      stop_reason: o.stopReason,
      token_ids: chat.returnIds ? o.tokens : null,
    };
  });
  hooks?.record({
    route: 'chat',
    promptIds: chat.ids,
    choices: recorded,
    usage: out.usage,
    weightVersion: sampler.weightVersion(),
    messages: chat.messages,
  });
  return {
    id: chat.id,
    object: 'chat.completion',
    created: chat.created,
    model: chat.model,
    choices,
    service_tier: null,
    system_fingerprint: null,
    usage: wireUsage(out.usage, true),
    prompt_logprobs: null,
    prompt_token_ids: chat.returnIds ? chat.ids : null,
    kv_transfer_params: null,
  };
}

/** A choice's finish_reason: the engine's, or vLLM's tool-call reasons when calls were read. */
function finishOf(chat: ChatShape, engine: ChoiceOutput['finishReason'], reply: AssistantReply): string {
  return chat.tools ? toolFinishReason(chat.tools.choice, engine, reply.toolCalls.length) : engine;
}

function logprobsOf(chat: ChatShape, o: ChoiceOutput | ChoiceDelta): { content: unknown[] } | null {
  if (!chat.name) return null;
  const entries = o.tokens.map((id, t) => ({ id, logprob: o.logprobs[t], top: o.top?.[t] ?? [] }));
  return { content: chatLogprobs(entries, chat.topK, chat.name) };
}

/** One streamed choice while it is sampled: what was sent and what the gateway records. */
class StreamedChoice {
  tokens: number[] = [];
  logprobs: number[] = [];
  text = '';
  finish: ChoiceOutput['finishReason'] | undefined;
  readonly reader: ToolCallStream | undefined;

  constructor(tools: ToolReading | undefined) {
    if (!tools) return;
    this.reader = new ToolCallStream(tools.parser, toolCallId);
    // the forced prefix is the start of the call: it is read, never sent as content
    if (tools.forced) this.reader.push(tools.forced);
  }
}

/** SSE of a streamed chat completion. */
async function* chatEvents(
  host: ChatHost,
  sampler: Sampler,
  g: Generation,
  chat: ChatShape,
  includeUsage: boolean,
  release: () => void,
  signal: AbortSignal | undefined,
  hooks: CallHooks | undefined,
): AsyncGenerator<string> {
  const head = { id: chat.id, object: 'chat.completion.chunk', created: chat.created, model: chat.model };
  const n = g.request.n ?? 1;
  const states = Array.from({ length: n }, () => new StreamedChoice(chat.tools));
  const replies: Array<AssistantReply | undefined> = states.map(() => undefined);
  let total = { promptTokensComputed: 0, prefixTokensReused: 0, tokensDecoded: 0 };
  try {
    yield* sseStream(head, includeUsage, release, async function* (usage) {
      total = usage;
      for (let i = 0; i < n; i++) {
        const choice = { index: i, delta: { role: chat.role, content: '' }, logprobs: null, finish_reason: null };
        yield sse({ ...head, choices: [choice], prompt_token_ids: chat.returnIds ? chat.ids : null });
        if (!chat.echoed) continue;
        const echo = { index: i, delta: { content: chat.echoed }, logprobs: null, finish_reason: null };
        yield sse({ ...head, choices: [echo] });
      }
      const run = generateStream(sampler, host.guard, g, signal);
      for (let step = await run.next(); ; step = await run.next()) {
        if (step.done) {
          addUsage(usage, step.value);
          break;
        }
        for (const d of step.value) {
          const { content, reply } = streamDelta(states[d.choice], d);
          if (reply) replies[d.choice] = reply;
          yield* deltaEvents(host, chat, head, states[d.choice], d, content, reply);
        }
      }
    });
  } finally {
    // also when the client left mid-stream: the gateway records what was sampled, finish `abort`
    if (hooks) recordStream(chat, sampler, states, replies, total, hooks);
  }
}

/** Add a delta to its choice: the content to send now, and the choice's reply when this delta finished it. */
function streamDelta(state: StreamedChoice, d: ChoiceDelta): { content: string; reply?: AssistantReply } {
  state.tokens.push(...d.tokens);
  state.logprobs.push(...d.logprobs);
  state.text += d.text;
  const sendable = state.reader ? state.reader.push(d.text) : d.text;
  if (!d.finishReason) return { content: sendable };
  state.finish = d.finishReason;
  if (!state.reader) return { content: sendable, reply: { content: state.text, toolCalls: [], failed: false } };
  const end = state.reader.end();
  return { content: sendable + end.content, reply: end };
}

/** The chunks of one delta: its content (and logprobs), then for a finished choice its calls and finish. */
function* deltaEvents(
  host: ChatHost,
  chat: ChatShape,
  head: Record<string, unknown>,
  state: StreamedChoice,
  d: ChoiceDelta,
  content: string,
  reply: AssistantReply | undefined,
): Generator<string> {
  const token_ids = chat.returnIds ? d.tokens : null;
  const logprobs = logprobsOf(chat, d);
  if (!state.reader) {
    if (!d.text && !d.tokens.length && !d.finishReason) return;
    const end = d.finishReason ? { finish_reason: d.finishReason, stop_reason: d.stopReason } : { finish_reason: null };
    yield sse({ ...head, choices: [{ index: d.choice, delta: { content: d.text }, logprobs, ...end, token_ids }] });
    return;
  }
  if (content || d.tokens.length) {
    const delta = { content };
    yield sse({ ...head, choices: [{ index: d.choice, delta, logprobs, finish_reason: null, token_ids }] });
  }
  if (!reply || !d.finishReason) return;
  if (reply.failed) host.toolParseFailures++;
  if (reply.toolCalls.length) {
    const tool_calls = reply.toolCalls.map((c, index) => ({ index, ...c }));
    yield sse({ ...head, choices: [{ index: d.choice, delta: { tool_calls }, logprobs: null, finish_reason: null }] });
  }
  const finish = { finish_reason: finishOf(chat, d.finishReason, reply), stop_reason: d.stopReason };
  yield sse({ ...head, choices: [{ index: d.choice, delta: {}, logprobs: null, ...finish }] });
}

/** The gateway's record of a streamed reply (a choice the client did not wait for ends `abort`). */
function recordStream(
  chat: ChatShape,
  sampler: Sampler,
  states: StreamedChoice[],
  replies: Array<AssistantReply | undefined>,
  usage: { promptTokensComputed: number; prefixTokensReused: number; tokensDecoded: number },
  hooks: CallHooks,
): void {
  const choices = states.map((state, i) => {
    const reply = replies[i] ?? readReply(state.text, chat.tools);
    const finish = state.finish ?? 'abort';
    return recordedChoice(state.tokens, state.logprobs, finish, messageOf(chat, reply), reply);
  });
  const decoded = states.reduce((a, c) => a + c.tokens.length, 0);
  hooks.record({
    route: 'chat',
    promptIds: chat.ids,
    choices,
    usage: { ...usage, tokensDecoded: Math.max(usage.tokensDecoded, decoded) },
    weightVersion: sampler.weightVersion(),
    messages: chat.messages,
  });
}
