/**
 * Request fields of `arbor serve`'s vLLM routes, read as vLLM reads them (vllm-project/vllm@d5dba2d
 * openai/completion/protocol.py CompletionRequest, openai/chat_completion/protocol.py
 * ChatCompletionRequest): sampling fields with generation_config.json's defaults (vLLM
 * `--generation-config auto`, then temperature 1, top_p 1, top_k off), `stop` strings,
 * `stop_token_ids`, `max_tokens`, prompts in their four shapes, chat messages and tools. A field the
 * embedded sampler cannot honour (min_p, penalties, logit_bias, beam search, structured output, ...)
 * is a 400 naming it, never silently ignored. Every error names the field. The JSON types and the
 * protocol's rules of a completions request are its wire schemas (wire/openai-completions.ts), read
 * field by field (in the order vLLM checks them) with the bounds this server sets.
 */
import type { ChatMessage, ChatTool, ChatToolCall } from '../../engine/types.js';
import type { GenerationDefaults } from '../../engine/open.js';
import { completionFields, promptField, promptShapes } from '../../wire/openai-completions.js';
import { BadRequest, boundedInt, boundedNum, field, optBool, tokenList } from '../validate.js';

/** The sampling part of a completions or chat request. */
export interface SamplingFields {
  n: number;
  temperature: number;
  topP: number;
  /** -1 (or 0) = off. */
  topK: number;
  seed: number | undefined;
  /** Stop strings (vLLM `stop`). */
  stop: string[];
  /** vLLM `stop_token_ids`. */
  stopTokenIds: number[];
  ignoreEos: boolean;
  includeStop: boolean;
  skipSpecial: boolean;
}

/** Fields vLLM accepts that change sampling in ways this engine does not compute, with their neutral values. */
const UNSUPPORTED: Array<[string, (v: unknown) => boolean]> = [
  ['min_p', (v) => v !== 0],
  ['repetition_penalty', (v) => v !== 1],
  ['presence_penalty', (v) => v !== 0],
  ['frequency_penalty', (v) => v !== 0],
  ['logit_bias', (v) => typeof v !== 'object' || Object.keys(v as object).length > 0],
  ['min_tokens', (v) => v !== 0],
  ['use_beam_search', (v) => v !== false],
  ['prompt_logprobs', () => true],
  ['allowed_token_ids', () => true],
  ['truncate_prompt_tokens', () => true],
  ['prompt_embeds', () => true],
  ['structured_outputs', () => true],
  ['guided_json', () => true],
  ['guided_regex', () => true],
  ['guided_choice', () => true],
  ['response_format', (v) => (v as { type?: unknown } | null)?.type !== 'text'],
  ['best_of', (v) => v !== 1],
];

/** 400 for a field set to something the embedded sampler cannot do. */
export function refuseUnsupported(b: Record<string, unknown>): void {
  if (b.suffix !== undefined && b.suffix !== null) {
    throw new BadRequest('field "suffix": suffix is not currently supported');
  }
  for (const [field, changes] of UNSUPPORTED) {
    const v = b[field];
    if (v === undefined || v === null || !changes(v)) continue;
    const why = 'the embedded sampler applies temperature, top_p, top_k, seed, stop and stop_token_ids';
    throw new BadRequest(`field "${field}": not supported by arbor serve (${why})`);
  }
}

/** top_p in (0, 1]. */
export function topP(value: unknown, field: string, fallback = 1): number {
  const v = boundedNum(value, field, fallback, 0, 1);
  if (v <= 0) throw new BadRequest(`field "${field}" must be a number in (0, 1], got ${v}`);
  return v;
}

/** Stop token ids: at most 1024 non-negative integers. */
export function stopList(value: unknown, field: string): number[] {
  const list = tokenList(value, field);
  if (list.length > 1024) throw new BadRequest(`field "${field}": ${list.length} stop tokens, at most 1024`);
  return list;
}

/** `stop`: a string or a list of at most 64 non-empty strings (vLLM refuses an empty one). */
function stopStrings(value: unknown): string[] {
  return field(completionFields.stop, value, 'stop') ?? [];
}

/** The sampling fields of a request; fields left out take the model's generation defaults. */
export function samplingFields(b: Record<string, unknown>, d: GenerationDefaults, maxN: number): SamplingFields {
  refuseUnsupported(b);
  const ids = b.stop_token_ids;
  return {
    n: boundedInt(b.n, 'n', 1, 1, maxN, ' (--max-n)'),
    temperature: boundedNum(b.temperature, 'temperature', d.temperature ?? 1, 0, 1e4),
    topP: topP(b.top_p, 'top_p', d.topP ?? 1),
    topK: boundedInt(b.top_k, 'top_k', d.topK ?? -1, -1, Number.MAX_SAFE_INTEGER),
    seed: b.seed === undefined || b.seed === null ? undefined : boundedInt(b.seed, 'seed', 0, 1 - 2 ** 53, 2 ** 53 - 1),
    stop: stopStrings(b.stop),
    stopTokenIds: ids === undefined || ids === null ? [] : stopList(ids, 'stop_token_ids'),
    ignoreEos: optBool(b.ignore_eos, 'ignore_eos', false),
    includeStop: optBool(b.include_stop_str_in_output, 'include_stop_str_in_output', false),
    skipSpecial: optBool(b.skip_special_tokens, 'skip_special_tokens', true),
  };
}

/**
 * A max-tokens field: absent → `absent`; null → generation_config's max_new_tokens, else as many as
 * the context leaves (vLLM's get_max_tokens); else an integer ≥ `min`.
 */
export function maxTokensField(
  value: unknown,
  field: string,
  absent: number | undefined,
  d: GenerationDefaults,
  min = 1,
): number {
  if (value === undefined && absent !== undefined) return absent;
  if (value === undefined || value === null) return d.maxNewTokens ?? Number.MAX_SAFE_INTEGER;
  return boundedInt(value, field, 0, min, Number.MAX_SAFE_INTEGER);
}

/** One prompt of /v1/completions: its ids and, for a text prompt, the text (echoed as given). */
export interface PromptInput {
  ids: number[];
  text?: string;
}

/**
 * `prompt`: a string, a list of strings, a list of token ids or a list of token-id lists. Text goes
 * through `encode` (undefined: no tokenizer, a 400 with `noTokenizer`).
 */
export async function promptInputs(
  value: unknown,
  encode: ((text: string, field: string) => Promise<number[]>) | undefined,
  noTokenizer: string,
  tooLong?: (length: number, field: string) => string | undefined,
): Promise<PromptInput[]> {
  // a token-id prompt over the limit is refused by its length, before its ids are checked one by one
  const ids = (p: unknown, field: string): number[] => {
    const why = Array.isArray(p) ? tooLong?.(p.length, field) : undefined;
    if (why) throw new BadRequest(why);
    return tokenList(p, field);
  };
  const text = async (t: string, field: string): Promise<PromptInput> => {
    if (!encode) throw new BadRequest(noTokenizer);
    if (t === '') throw new BadRequest(`field "${field}" must not be empty (give at least one token)`);
    return { ids: await encode(t, field), text: t };
  };
  const texts = promptShapes.texts.safeParse(value);
  if (typeof value === 'string') return [await text(value, 'prompt')];
  if (texts.success) {
    // in order, one at a time: a list of long prompts never holds more than one encoding in flight
    const out: PromptInput[] = [];
    for (const [i, p] of texts.data.entries()) out.push(await text(p, `prompt[${i}]`));
    return out;
  }
  // a list of lists: each list's ids are checked under its own name (prompt[i])
  if (Array.isArray(value) && value.length > 0 && value.every((p) => Array.isArray(p))) {
    return value.map((p, i) => ({ ids: ids(p, `prompt[${i}]`) }));
  }
  // anything else that is not a list is none of the four shapes: the schema's 400
  if (!Array.isArray(value) && value !== undefined && value !== null) field(promptField, value, 'prompt');
  return [{ ids: ids(value, 'prompt') }];
}

/**
 * A message's content: a string, null, or OpenAI content parts of type text (joined by newlines, as vLLM
 * does). Absent or null content is the empty string, as vLLM gives templates of the string content
 * format (chat_utils.py `_parse_chat_message_content`: None → no parts → ""), so an assistant turn that
 * only calls tools renders in templates that test `'</think>' in content` (Qwen3).
 */
function messageContent(value: unknown, field: string): string {
  if (value === undefined || value === null) return '';
  if (typeof value === 'string') return value;
  if (!Array.isArray(value)) throw new BadRequest(`field "${field}" must be a string, null or a list of content parts`);
  return value
    .map((part, j) => {
      const p = (part ?? {}) as { type?: unknown; text?: unknown };
      if (p.type !== 'text' || typeof p.text !== 'string') {
        throw new BadRequest(`field "${field}[${j}]": only {"type": "text", "text": ...} parts are supported`);
      }
      return p.text;
    })
    .join('\n');
}

/**
 * One tool call of a message. In assistant messages a JSON-string `arguments` is parsed into its value
 * and an empty one becomes `{}` (vllm-project/vllm vllm/entrypoints/chat_utils.py `_postprocess_messages`,
 * read in the code index: templates expect objects), so a template renders the arguments with its own
 * `tojson` whatever spacing the client re-serialised them with.
 */
function toolCallOf(value: unknown, field: string, parse: boolean): ChatToolCall {
  const c = (value ?? {}) as { function?: { name?: unknown; arguments?: unknown } };
  const fn = c.function;
  if (typeof fn?.name !== 'string') throw new BadRequest(`field "${field}.function.name" must be a string`);
  const args = fn.arguments;
  if (!parse || (args !== null && typeof args === 'object')) return value as ChatToolCall;
  if (args !== undefined && args !== null && typeof args !== 'string')
    throw new BadRequest(`field "${field}.function.arguments" must be a JSON string or an object`);
  let parsed: unknown = {};
  if (args) {
    try {
      parsed = JSON.parse(args);
    } catch {
      throw new BadRequest(`field "${field}.function.arguments" is not valid JSON`);
    }
  }
  return {
    ...(value as ChatToolCall),
    function: { ...fn, name: fn.name, arguments: parsed as Record<string, unknown> },
  };
}

/** `messages`: a non-empty list of {role, content, tool_calls?, tool_call_id?, name?, reasoning_content?}. */
export function chatMessages(value: unknown): ChatMessage[] {
  if (!Array.isArray(value) || value.length === 0) {
    throw new BadRequest('field "messages" must be a non-empty list of messages');
  }
  return value.map((m, i) => {
    const field = `messages[${i}]`;
    if (!m || typeof m !== 'object' || Array.isArray(m)) throw new BadRequest(`field "${field}" must be an object`);
    const o = m as Record<string, unknown>;
    if (typeof o.role !== 'string' || !o.role) throw new BadRequest(`field "${field}.role" must be a non-empty string`);
    const message: ChatMessage = { role: o.role, content: messageContent(o.content, `${field}.content`) };
    if (o.tool_calls !== undefined && o.tool_calls !== null) {
      if (!Array.isArray(o.tool_calls)) throw new BadRequest(`field "${field}.tool_calls" must be a list`);
      const calls = o.tool_calls.map((c, j) => toolCallOf(c, `${field}.tool_calls[${j}]`, o.role === 'assistant'));
      // vLLM drops an empty list so that templates take the plain assistant path
      if (calls.length || o.role !== 'assistant') message.tool_calls = calls;
    }
    for (const key of ['tool_call_id', 'name', 'reasoning_content'] as const) {
      const v = o[key];
      if (v === undefined || v === null) continue;
      if (typeof v !== 'string') throw new BadRequest(`field "${field}.${key}" must be a string`);
      message[key] = v;
    }
    return message;
  });
}

/** `tools`: [{type: "function", function: {name, description?, parameters?}}]. */
export function chatTools(value: unknown): ChatTool[] | undefined {
  if (value === undefined || value === null) return undefined;
  if (!Array.isArray(value)) {
    throw new BadRequest('field "tools" must be a list of {"type": "function", "function": {...}}');
  }
  value.forEach((t, i) => {
    const o = (t ?? {}) as { type?: unknown; function?: { name?: unknown } };
    if (o.type !== 'function' || typeof o.function?.name !== 'string') {
      throw new BadRequest(`field "tools[${i}]" must be {"type": "function", "function": {"name": ..., ...}}`);
    }
  });
  return value as ChatTool[];
}

/** The chat-template options of a request. */
export interface TemplateFields {
  addGenerationPrompt: boolean;
  continueFinalMessage: boolean;
  kwargs?: Record<string, unknown>;
}

/** The chat-template options shared by chat completions and /tokenize (vLLM's defaults). */
export function templateFields(b: Record<string, unknown>): TemplateFields {
  const addGenerationPrompt = optBool(b.add_generation_prompt, 'add_generation_prompt', true);
  const continueFinalMessage = optBool(b.continue_final_message, 'continue_final_message', false);
  if (addGenerationPrompt && continueFinalMessage) {
    const why = 'Cannot set both `continue_final_message` and `add_generation_prompt` to True.';
    throw new BadRequest(`field "continue_final_message": ${why}`);
  }
  if (b.chat_template !== undefined && b.chat_template !== null) {
    // vLLM refuses a request's own template unless started with --trust-request-chat-template
    const why =
      'Chat template is passed with request, but --trust-request-chat-template is not set. ' +
      'Refused request with untrusted chat template.';
    throw new BadRequest(`field "chat_template": ${why}`);
  }
  const kw = b.chat_template_kwargs;
  if (kw !== undefined && kw !== null && (typeof kw !== 'object' || Array.isArray(kw))) {
    throw new BadRequest('field "chat_template_kwargs" must be an object');
  }
  const kwargs = (kw ?? undefined) as Record<string, unknown> | undefined;
  return { addGenerationPrompt, continueFinalMessage, kwargs };
}
