/**
 * `/v1/chat/completions` of `arbor serve` (vllm-project/vllm@5e91864 openai/chat_completion/serving.py):
 * the messages rendered with the model's chat template (tools, add_generation_prompt,
 * continue_final_message, chat_template_kwargs; add_special_tokens default false), then sampled like a
 * completion; `max_completion_tokens` wins over `max_tokens`; logprobs as `{content: [...]}`. Streamed:
 * a role chunk per choice, content deltas (`chat.completion.chunk`), the finish reason on each choice's
 * last delta, an optional usage chunk, `[DONE]`. No tool-call or reasoning parsing (vLLM without
 * --enable-auto-tool-choice / --reasoning-parser answers the same way: the text is the content).
 */
import type { ChatMessage, Sampler } from '../engine/types.js';
import { generate, generateStream, type ChoiceDelta, type ChoiceOutput, type Generation } from './generation.js';
import type { SampleGuard } from './limits.js';
import { chatLogprobs } from './text.js';
import { BadRequest, boundedInt, optBool, type ServeReply } from './validate.js';
import { chatMessages, maxTokensField, samplingFields, templateFields, type SamplingFields } from './vllm-params.js';
import { addUsage, now, sse, sseStream, uid, wireUsage } from './vllm-wire.js';
import type { GenerationDefaults } from '../engine/tokenizer/hf.js';

/** What the chat route needs of the vLLM routes (serve/vllm.ts). */
export interface ChatHost {
  readonly guard: SampleGuard;
  readonly generationDefaults: GenerationDefaults;
  target(model: unknown): { name: string; sampler: Sampler };
  renderChat(b: Record<string, unknown>, messages: ChatMessage[]): number[];
  generation(ids: number[], s: SamplingFields, maxTokens: number, k: number, fields: GenerationFields): Generation;
  admit(gens: Generation[], what: string): () => void;
  tokenName(asIds: boolean): (id: number) => string;
}

/** Field names of one request, for the 400 messages. */
interface GenerationFields {
  prompt: string;
  maxTokens: string;
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
}

export async function chatCompletion(
  host: ChatHost,
  b: Record<string, unknown>,
  signal?: AbortSignal,
): Promise<ServeReply> {
  const target = host.target(b.model);
  const stream = optBool(b.stream, 'stream', false);
  if (b.stream_options !== undefined && b.stream_options !== null && !stream) {
    throw new BadRequest('field "stream_options": Stream options can only be defined when `stream=True`.');
  }
  const messages = chatMessages(b.messages);
  const ids = host.renderChat(b, messages);
  const logprobs = optBool(b.logprobs, 'logprobs', false);
  const topK =
    b.top_logprobs === undefined || b.top_logprobs === null
      ? 0
      : boundedInt(b.top_logprobs, 'top_logprobs', 0, 0, host.guard.limits.maxLogprobs);
  if (topK > 0 && !logprobs) {
    throw new BadRequest('field "top_logprobs": when using `top_logprobs`, `logprobs` must be set to true.');
  }
  const s = samplingFields(b, host.generationDefaults, host.guard.limits.maxN);
  const returnIds = optBool(b.return_token_ids, 'return_token_ids', false);
  const asIds = optBool(b.return_tokens_as_token_ids, 'return_tokens_as_token_ids', false);
  const byCompletion = b.max_completion_tokens !== undefined && b.max_completion_tokens !== null;
  const field = byCompletion ? 'max_completion_tokens' : 'max_tokens';
  const given = byCompletion ? b.max_completion_tokens : b.max_tokens;
  const maxTokens = maxTokensField(given, field, undefined, host.generationDefaults);
  const g = host.generation(ids, s, maxTokens, logprobs ? topK : 0, { prompt: 'messages', maxTokens: field });
  const last = messages[messages.length - 1];
  const role = templateFields(b).addGenerationPrompt ? 'assistant' : last.role;
  const echoed = optBool(b.echo, 'echo', false) && last.role === role ? (last.content ?? '') : '';
  const name = logprobs ? host.tokenName(asIds) : undefined;
  const release = host.admit([g], `n × ${field} = ${s.n} × ${g.perContinuation}`);
  const id = `chatcmpl-${uid()}`;
  const chat: ChatShape = { id, created: now(), model: target.name, role, ids, echoed, returnIds, name, topK };
  if (stream) {
    const options = b.stream_options as { include_usage?: unknown } | null | undefined;
    const includeUsage = optBool(options?.include_usage, 'stream_options.include_usage', false);
    const events = chatEvents(host, target.sampler, g, chat, includeUsage, release, signal);
    return { status: 200, body: null, events };
  }
  try {
    const out = await generate(target.sampler, host.guard, g, signal);
    const choices = out.choices.map((o, index) => ({
      index,
      message: {
        role,
        content: echoed + o.text,
        refusal: null,
        annotations: null,
        audio: null,
        function_call: null,
        tool_calls: [],
        reasoning: null,
      },
      logprobs: logprobsOf(chat, o),
      finish_reason: o.finishReason,
      stop_reason: o.stopReason,
      token_ids: returnIds ? o.tokens : null,
    }));
    const body = {
      id: chat.id,
      object: 'chat.completion',
      created: chat.created,
      model: chat.model,
      choices,
      service_tier: null,
      system_fingerprint: null,
      usage: wireUsage(out.usage, true),
      prompt_logprobs: null,
      prompt_token_ids: returnIds ? ids : null,
      kv_transfer_params: null,
    };
    return { status: 200, body };
  } finally {
    release();
  }
}

function logprobsOf(chat: ChatShape, o: ChoiceOutput | ChoiceDelta): { content: unknown[] } | null {
  if (!chat.name) return null;
  const entries = o.tokens.map((id, t) => ({ id, logprob: o.logprobs[t], top: o.top?.[t] ?? [] }));
  return { content: chatLogprobs(entries, chat.topK, chat.name) };
}

/** SSE of a streamed chat completion. */
async function* chatEvents(
  host: ChatHost,
  sampler: Sampler,
  g: Generation,
  chat: ChatShape,
  includeUsage: boolean,
  release: () => void,
  signal?: AbortSignal,
): AsyncGenerator<string> {
  const head = { id: chat.id, object: 'chat.completion.chunk', created: chat.created, model: chat.model };
  yield* sseStream(head, includeUsage, release, async function* (usage) {
    for (let i = 0; i < (g.request.n ?? 1); i++) {
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
        if (!d.text && !d.tokens.length && !d.finishReason) continue;
        const end = d.finishReason
          ? { finish_reason: d.finishReason, stop_reason: d.stopReason }
          : { finish_reason: null };
        const token_ids = chat.returnIds ? d.tokens : null;
        const logprobs = logprobsOf(chat, d);
        const choice = { index: d.choice, delta: { content: d.text }, logprobs, ...end, token_ids };
        yield sse({ ...head, choices: [choice] });
      }
    }
  });
}
