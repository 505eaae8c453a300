/**
 * Generating one prompt's n continuations for the vLLM routes of `arbor serve`, with text and stop
 * strings (text.ts) on top of a Sampler:
 * - `generate` (not streamed) is one engine request sampled exactly as the engine samples it
 *   (SampleGuard.sample), then each continuation is cut at its first stop string, which is the same
 *   result as stopping there: later tokens never change earlier ones;
 * - `generateStream` samples in growing segments (1, 2, 4, … 16 tokens) that continue each
 *   continuation's retained KV state, and yields what every segment added. A seeded streamed request
 *   is reproducible, but its segments use derived seeds: it samples another stream than the same
 *   request unstreamed. The weights stay shared (no weight change) for the whole stream.
 * A continuation ended by a stop token (a `stop_token_ids` entry or an end id) keeps the token in its
 * ids, not in its text (unless `include_stop_str_in_output`), and reports it as `stop_reason` only when
 * the request named it (an end id reports null), as vLLM does.
 */
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import type { SampleCompletion, SampleRequest, SampleUsage, Sampler } from '../engine/types.js';
import { derivedSeed, type SampleGuard } from './limits.js';
import { StopText } from './text.js';

/** One prompt's generation. */
export interface Generation {
  /** The engine request: prompt ids, n, max tokens, sampling, stop tokens (with the end ids), top-k. */
  request: SampleRequest;
  /** Tokens a continuation may decode (SampleGuard.check: max tokens within the context). */
  perContinuation: number;
  /** The request's own stop_token_ids (reported as stop_reason). */
  stopTokenIds: readonly number[];
  /** Output text (absent with --skip-tokenizer-init): the decoder, stop strings, include_stop_str_in_output. */
  text?: { decode: (ids: number[]) => string; stop: readonly string[]; includeStop: boolean };
}

export type FinishReason = 'stop' | 'length' | 'abort';

/** One finished continuation. */
export interface ChoiceOutput {
  tokens: number[];
  logprobs: number[];
  /** Top-k (id, log-prob) per token, when requested. */
  top?: Array<Array<[number, number]>>;
  text: string;
  finishReason: FinishReason;
  /** The stop string or requested stop token id that ended it; null otherwise (vLLM's stop_reason). */
  stopReason: number | string | null;
}

/** What one streamed segment added to continuation `choice` (finishReason set on its last delta). */
export interface ChoiceDelta extends Omit<ChoiceOutput, 'finishReason'> {
  choice: number;
  finishReason: FinishReason | null;
  /** Characters of text sent before this delta (text_offset of its first token). */
  textOffset: number;
}

/** The state of one continuation while it is generated. */
class Continuation {
  tokens: number[] = [];
  logprobs: number[] = [];
  top: Array<Array<[number, number]>> = [];
  finish: FinishReason | undefined;
  stopReason: number | string | null = null;
  handle: string | undefined;
  readonly text: StopText | undefined;

  constructor(readonly g: Generation) {
    this.text = g.text && new StopText(g.text.decode, g.text.stop, g.text.includeStop);
  }

  /** Add a sampled piece; returns what was kept (the piece cut at a stop string) and sets `finish` when it ended. */
  add(c: SampleCompletion): { tokens: number[]; logprobs: number[]; top?: Array<Array<[number, number]>> } {
    const stops = this.g.request.stopTokens ?? [];
    const last = c.tokens[c.tokens.length - 1];
    const byToken = c.finishReason === 'stop' && c.tokens.length > 0 && stops.includes(last);
    let kept = c.tokens.length;
    if (this.text) {
      const visible = byToken && !this.g.text!.includeStop ? c.tokens.slice(0, -1) : c.tokens;
      const taken = this.text.push(visible);
      if (this.text.stop !== undefined) kept = taken;
    }
    const top = c.topLogprobs?.slice(0, kept);
    const piece = { tokens: c.tokens.slice(0, kept), logprobs: c.logprobs.slice(0, kept), top };
    this.tokens.push(...piece.tokens);
    this.logprobs.push(...piece.logprobs);
    if (piece.top) this.top.push(...piece.top);
    if (this.text?.stop !== undefined) {
      this.finish = 'stop';
      this.stopReason = this.text.stop;
    } else if (c.finishReason !== 'length' || this.tokens.length >= this.g.perContinuation) {
      this.finish = c.finishReason;
      this.stopReason = byToken && this.g.stopTokenIds.includes(last) ? last : null;
    }
    return piece;
  }

  output(): ChoiceOutput {
    const top = this.g.request.topLogprobs ? this.top : undefined;
    const text = this.text?.text ?? '';
    const finishReason = this.finish ?? 'length';
    return { tokens: this.tokens, logprobs: this.logprobs, top, text, finishReason, stopReason: this.stopReason };
  }
}

/** Usage of a request whose continuations were cut: the decoded tokens are the ones returned. */
function usageOf(usage: SampleUsage, choices: ReadonlyArray<{ tokens: number[] }>): SampleUsage {
  return { ...usage, tokensDecoded: choices.reduce((n, c) => n + c.tokens.length, 0) };
}

/** Sample the n continuations in one engine request, then apply the stop strings. */
export async function generate(
  sampler: Sampler,
  guard: SampleGuard,
  g: Generation,
  signal?: AbortSignal,
): Promise<{ choices: ChoiceOutput[]; usage: SampleUsage }> {
  const result = await guard.sample(g.request, g.perContinuation, signal, sampler);
  const choices = result.completions.map((c) => {
    const state = new Continuation(g);
    state.add(c);
    state.finish ??= c.finishReason;
    return state.output();
  });
  return { choices, usage: usageOf(result.usage, choices) };
}

/** Tokens of streamed segment s (0-based): 1, 2, 4, 8, then 16 each. */
function segmentTokens(s: number): number {
  return Math.min(16, 2 ** s);
}

/**
 * Sample in segments; yields, after each, the deltas of the continuations it advanced. The total
 * usage is returned when the generator finishes. An aborted `signal` ends every continuation still
 * running with `abort`.
 */
export async function* generateStream(
  sampler: Sampler,
  guard: SampleGuard,
  g: Generation,
  signal?: AbortSignal,
): AsyncGenerator<ChoiceDelta[], SampleUsage> {
  const n = g.request.n ?? 1;
  const states = Array.from({ length: n }, () => new Continuation(g));
  const usage: SampleUsage = { promptTokensComputed: 0, prefixTokensReused: 0, tokensDecoded: 0 };
  const leave = await guard.gate.enterShared();
  try {
    for (let s = 0; states.some((c) => !c.finish); s++) {
      await yieldToLoop();
      const running = states.map((c, i) => ({ c, i })).filter(({ c }) => !c.finish);
      if (signal?.aborted) {
        yield running.map(({ c, i }) => finishDelta(c, i, 'abort'));
        break;
      }
      // segment 0: one request forks the prompt into n; later: one request per continuation, from its KV state
      const requests: SampleRequest[] =
        s === 0
          ? [{ ...g.request, maxTokens: Math.min(segmentTokens(0), g.perContinuation), retain: true }]
          : running.map(({ c, i }) => continuation(g, c, i, s, n));
      const results = await sampler.sample(requests, { signal });
      const pieces =
        s === 0
          ? results[0].completions.map((c, i) => ({ c, i }))
          : results.map((r, k) => ({ c: r.completions[0], i: running[k].i }));
      const deltas: ChoiceDelta[] = [];
      const spent: string[] = [];
      for (const { c, i } of pieces) {
        const state = states[i];
        if (state.handle) spent.push(state.handle);
        state.handle = c.cacheHandle;
        const offset = state.text?.sent ?? 0;
        const piece = state.add(c);
        if (state.finish && state.handle) spent.push(state.handle);
        const text = state.text?.delta(state.finish !== undefined) ?? '';
        const top = g.request.topLogprobs ? piece.top : undefined;
        const end = { finishReason: state.finish ?? null, stopReason: state.stopReason };
        deltas.push({ ...piece, top, text, choice: i, ...end, textOffset: offset });
      }
      sampler.release(spent);
      // the prompt's usage is the first segment's; later ones only re-enter each continuation's last token
      if (s === 0) {
        usage.promptTokensComputed = results[0].usage.promptTokensComputed;
        usage.prefixTokensReused = results[0].usage.prefixTokensReused;
      }
      yield deltas;
    }
  } finally {
    sampler.release(states.flatMap((c) => (c.handle ? [c.handle] : [])));
    leave();
  }
  return usageOf(usage, states);
}

/** The request that continues continuation i for segment s from its retained KV state. */
function continuation(g: Generation, c: Continuation, i: number, s: number, n: number): SampleRequest {
  const r = g.request;
  return {
    tokens: r.tokens.concat(c.tokens),
    cacheHandle: c.handle,
    n: 1,
    maxTokens: Math.min(segmentTokens(s), g.perContinuation - c.tokens.length),
    temperature: r.temperature,
    topP: r.topP,
    topK: r.topK,
    stopTokens: r.stopTokens,
    seed: r.seed === undefined ? undefined : derivedSeed(r.seed, s * n + i + 1),
    topLogprobs: r.topLogprobs,
    retain: true,
  };
}

/** The last delta of a continuation ended from outside (an abort): no tokens, the rest of its text. */
function finishDelta(c: Continuation, i: number, reason: FinishReason): ChoiceDelta {
  const offset = c.text?.sent ?? 0;
  c.finish = reason;
  const text = c.text?.delta(true) ?? '';
  return { tokens: [], logprobs: [], text, choice: i, finishReason: reason, stopReason: null, textOffset: offset };
}
