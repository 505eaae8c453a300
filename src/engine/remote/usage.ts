/**
 * Usage accounting between a Sampler's `SampleUsage` and the wire, defined once for every client and
 * for `arbor serve`, so the same engine reports the same prefix reuse in-process and over HTTP:
 * `prompt_tokens` = context tokens the engine processed for the request (computed + served from
 * cache; with n continuations forked from one prefix, the forks count as cached), `cached_tokens` =
 * those served from cache (vLLM `usage.prompt_tokens_details.cached_tokens`, SGLang
 * `meta_info.cached_tokens`), `completion_tokens` = tokens decoded.
 */
import type { SampleUsage } from '../types.js';

export interface WireUsage {
  prompt_tokens: number;
  cached_tokens: number;
}

/** The wire usage a server reports for one engine result. */
export function usageToWire(u: SampleUsage): WireUsage & { completion_tokens: number } {
  return {
    prompt_tokens: u.promptTokensComputed + u.prefixTokensReused,
    cached_tokens: u.prefixTokensReused,
    completion_tokens: u.tokensDecoded,
  };
}

/** A SampleUsage from a reply's counts; cached tokens beyond the prompt (a malformed reply) are clamped. */
export function usageFromWire(w: WireUsage, tokensDecoded: number): SampleUsage {
  const cached = Math.max(0, Math.min(w.cached_tokens, w.prompt_tokens));
  return { promptTokensComputed: w.prompt_tokens - cached, prefixTokensReused: cached, tokensDecoded };
}
