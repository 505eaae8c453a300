/**
 * Small pieces of vLLM's reply bodies shared by `arbor serve`'s completions and chat routes: the SSE
 * event line, ids and timestamps, the usage object (wire/usage.ts's accounting over usage
 * that generation.ts counts as vLLM does: each prompt once, however many continuations) and the model
 * card of /v1/models.
 */
import { randomUUID } from 'node:crypto';
import { usageToWire } from '../../wire/usage.js';
import type { SampleUsage } from '../../engine/types.js';
import type { CompletionUsage } from '../../wire/openai-completions.js';
import { vllmError } from '../validate.js';

/** One server-sent event as vLLM writes it. */
export const sse = (value: unknown): string => `data: ${JSON.stringify(value)}\n\n`;

/** The last event of every vLLM stream. */
export const DONE = 'data: [DONE]\n\n';

/** Seconds since the epoch (`created`). */
export const now = (): number => Math.floor(Date.now() / 1000);

/** A request id's random part (vLLM: a uuid4 hex). */
export const uid = (): string => randomUUID().replace(/-/g, '');

/**
 * The frame of a vLLM SSE stream: the events `body` yields (it adds what it samples to `usage`), then
 * the usage chunk when `stream_options.include_usage`, an error event if the body throws, and always
 * [DONE]; `release` runs when the stream ends, whatever happened.
 */
export async function* sseStream(
  head: Record<string, unknown>,
  includeUsage: boolean,
  release: () => void,
  body: (usage: SampleUsage) => AsyncGenerator<string>,
): AsyncGenerator<string> {
  const usage = emptyUsage();
  try {
    yield* body(usage);
    if (includeUsage) yield sse({ ...head, choices: [], usage: dropNulls(wireUsage(usage, true)) });
  } catch (error) {
    yield sse(vllmError(error));
  } finally {
    release();
  }
  yield DONE;
}

export function emptyUsage(): SampleUsage {
  return { promptTokensComputed: 0, prefixTokensReused: 0, tokensDecoded: 0 };
}

export function addUsage(into: SampleUsage, u: SampleUsage): void {
  into.promptTokensComputed += u.promptTokensComputed;
  into.prefixTokensReused += u.prefixTokensReused;
  into.tokensDecoded += u.tokensDecoded;
}

/**
 * vLLM's usage object; `details` adds prompt_tokens_details (vLLM with --enable-prompt-tokens-details):
 * `{cached_tokens}` when some prompt tokens came from cache, else null (vLLM sets it only when
 * num_cached_tokens is nonzero; the final usage chunk of a stream drops the null).
 */
export function wireUsage(u: SampleUsage, details: boolean): CompletionUsage {
  const w = usageToWire(u);
  const total = w.prompt_tokens + w.completion_tokens;
  const usage: CompletionUsage = {
    prompt_tokens: w.prompt_tokens,
    total_tokens: total,
    completion_tokens: w.completion_tokens,
  };
  if (details) usage.prompt_tokens_details = w.cached_tokens > 0 ? { cached_tokens: w.cached_tokens } : null;
  return usage;
}

/** The object without its null fields (pydantic's `exclude_none`, as vLLM writes its usage chunk). */
function dropNulls(o: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== null));
}

/** A /v1/models card (vLLM's ModelCard with one ModelPermission). */
export function modelCard(
  id: string,
  root: string,
  parent: string | null,
  maxModelLen: number | null,
): Record<string, unknown> {
  const permission = {
    id: `modelperm-${uid()}`,
    object: 'model_permission',
    created: now(),
    allow_create_engine: false,
    allow_sampling: true,
    allow_logprobs: true,
    allow_search_indices: false,
    allow_view: true,
    allow_fine_tuning: false,
    organization: '*',
    group: null,
    is_blocking: false,
  };
  const card = { id, object: 'model', created: now(), owned_by: 'arbor', root, parent, max_model_len: maxModelLen };
  return { ...card, permission: [permission] };
}
