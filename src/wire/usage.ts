/**
 * Usage accounting between a Sampler's `SampleUsage` and the wire, defined once for every client and
 * for `arbor serve`, so the same engine reports the same prefix reuse in-process and over HTTP:
 * `prompt_tokens` = the request's context tokens, counted once however many continuations (vLLM),
 * `cached_tokens` = those served from cache instead of computed (vLLM
 * `usage.prompt_tokens_details.cached_tokens`, SGLang `meta_info.cached_tokens`), `completion_tokens` =
 * tokens decoded. In-process, the n − 1 forks of a prompt count as reused prefix tokens: a reader of a
 * reply with n continuations adds them back (`usageFromWire`'s n), a writer counts them out first
 * (serve/vllm/generation.ts).
 */
import type { SampleUsage } from './types.js';

export interface WireUsage {
  prompt_tokens: number;
  cached_tokens: number;
}

/** The wire usage a server reports for one engine result (of one continuation, or counted once per prompt). */
export function usageToWire(u: SampleUsage): WireUsage & { completion_tokens: number } {
  return {
    prompt_tokens: u.promptTokensComputed + u.prefixTokensReused,
    cached_tokens: u.prefixTokensReused,
    completion_tokens: u.tokensDecoded,
  };
}

/**
 * A SampleUsage from a reply's counts for n continuations of one prompt (the n − 1 forks of the
 * prompt count as reused, as in-process); cached tokens beyond the prompt (a malformed reply) are clamped.
 */
export function usageFromWire(w: WireUsage, tokensDecoded: number, n = 1): SampleUsage {
  const cached = Math.max(0, Math.min(w.cached_tokens, w.prompt_tokens));
  const forks = (n - 1) * w.prompt_tokens;
  return { promptTokensComputed: w.prompt_tokens - cached, prefixTokensReused: cached + forks, tokensDecoded };
}
