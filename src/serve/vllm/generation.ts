/**
 * Generating one prompt's n continuations for the vLLM routes of `arbor serve`, with text and stop
 * strings (text.ts) on top of a Sampler. Seeded requests sample the same tokens streamed or not, as
 * vLLM does:
 * - `generate` (not streamed) is one engine request sampled exactly as the engine samples it
 *   (SampleGuard.sample); with stop strings on a sampler with cache handles it samples the same tokens
 *   in segments and stops at the first stop string instead of decoding to max_tokens;
 * - `generateStream` samples in growing segments (1, 2, 4, … 16 tokens), each continuing a
 *   continuation's retained KV state and random stream (`continueRandom`), and yields what every
 *   segment added. On a sampler without cache handles it samples one engine request and streams it out.
 *   The weights stay shared (no weight change) for the whole stream.
 * A continuation ended by a stop token (a `stop_token_ids` entry or an end id) keeps the token in its
 * ids, not in its text (unless `include_stop_str_in_output`), and reports it as `stop_reason` only when
 * the request named it (an end id reports null), as vLLM does.
 */
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import type { SampleCompletion, SampleRequest, SampleUsage, Sampler } from '../../engine/types.js';
import type { SampleGuard } from '../limits.js';
import { StopText } from '../text.js';

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

/**
 * vLLM's usage of one prompt: prompt_tokens counts the prompt once, however many continuations were
 * sampled (vllm-project/vllm@00463e6 vllm/entrypoints/openai/serving_completion.py and @003fe59
 * serving_chat.py: `num_prompt_tokens += len(prompt_token_ids)` per prompt); cached_tokens are the
 * prompt tokens the engine did not compute (`computed`: the prompt tokens it prefilled, once per slice
 * group; 0 when an abort came first), none for a fresh prompt: the embedded sampler's n − 1 forks are
 * no prompt tokens, so no cached ones either. Completion tokens are the ones returned (a cut
 * continuation's).
 */
function usageOf(computed: number, g: Generation, choices: ReadonlyArray<{ tokens: number[] }>): SampleUsage {
  const prompt = g.request.tokens.length;
  const cached = computed > 0 ? Math.min(prompt, Math.max(0, prompt - computed)) : 0;
  const tokensDecoded = choices.reduce((n, c) => n + c.tokens.length, 0);
  return { promptTokensComputed: prompt - cached, prefixTokensReused: cached, tokensDecoded };
}

/**
 * Sample the n continuations and apply the stop strings: one engine request, or with stop strings
 * (and cache handles) the same tokens in segments, stopping at the first stop string.
 */
export async function generate(
  sampler: Sampler,
  guard: SampleGuard,
  g: Generation,
  signal?: AbortSignal,
): Promise<{ choices: ChoiceOutput[]; usage: SampleUsage }> {
  if (g.text?.stop.length && sampler.capabilities.cacheHandles) {
    const states = continuations(g);
    const run = segments(sampler, guard, g, states, signal);
    let step = await run.next();
    while (!step.done) step = await run.next();
    return { choices: states.map((c) => c.output()), usage: step.value };
  }
  const result = await guard.sample(g.request, g.perContinuation, signal, sampler);
  const choices = result.completions.map((c, i) => {
    const state = new Continuation(g);
    advance(state, i, c, true);
    return state.output();
  });
  return { choices, usage: usageOf(result.usage.promptTokensComputed, g, choices) };
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
  const states = continuations(g);
  if (sampler.capabilities.cacheHandles) return yield* segments(sampler, guard, g, states, signal);
  // without handles a segment could only re-send the prompt: sample once, stream the result out
  const result = await guard.sample(g.request, g.perContinuation, signal, sampler);
  for (let s = 0, from = 0; states.some((c) => !c.finish); from += segmentTokens(s), s++) {
    const to = from + segmentTokens(s);
    const running = states.flatMap((state, i) => (state.finish ? [] : [{ state, i }]));
    yield running.map(({ state, i }) => {
      const c = result.completions[i];
      const complete = to >= c.tokens.length;
      const piece: SampleCompletion = {
        tokens: c.tokens.slice(from, to),
        logprobs: c.logprobs.slice(from, to),
        topLogprobs: c.topLogprobs?.slice(from, to),
        finishReason: complete ? c.finishReason : 'length',
      };
      return advance(state, i, piece, complete);
    });
  }
  return usageOf(result.usage.promptTokensComputed, g, states);
}

/** The n continuations of a generation, not yet started. */
function continuations(g: Generation): Continuation[] {
  return Array.from({ length: g.request.n ?? 1 }, () => new Continuation(g));
}

/**
 * The segments of a generation on a sampler with cache handles. Segment 0 forks the prompt into each
 * slice group's continuations (SampleGuard.sliceGroups: the groups and seeds of the one-shot
 * request); later segments continue each running continuation from its retained KV state and random
 * generator, one sampler call per group, so every forward pass batches the rows the one-shot request
 * batches and the tokens are the same. Holds the weights shared until it ends; releases every handle.
 */
async function* segments(
  sampler: Sampler,
  guard: SampleGuard,
  g: Generation,
  states: Continuation[],
  signal?: AbortSignal,
): AsyncGenerator<ChoiceDelta[], SampleUsage> {
  const groups = guard.sliceGroups(g.request, g.perContinuation);
  let computed = 0;
  const leave = await guard.gate.enterShared();
  try {
    for (let s = 0; states.some((c) => !c.finish); s++) {
      for (const group of groups) {
        const running: number[] = [];
        for (let i = group.start; i < group.start + group.count; i++) if (!states[i].finish) running.push(i);
        if (!running.length) continue;
        await yieldToLoop();
        if (signal?.aborted) {
          yield running.map((i) => finishDelta(states[i], i, 'abort'));
          continue;
        }
        const maxTokens = Math.min(segmentTokens(s), g.perContinuation);
        const requests: SampleRequest[] =
          s === 0 ? [{ ...group.request, maxTokens, retain: true }] : running.map((i) => continued(g, states[i], s));
        const results = await sampler.sample(requests, { signal });
        const pieces =
          s === 0
            ? results[0].completions.map((c, k) => ({ c, i: group.start + k }))
            : results.map((r, k) => ({ c: r.completions[0], i: running[k] }));
        if (s === 0) computed += results[0].usage.promptTokensComputed;
        const spent: string[] = [];
        const deltas = pieces.map(({ c, i }) => {
          const state = states[i];
          if (state.handle) spent.push(state.handle);
          state.handle = c.cacheHandle;
          const delta = advance(state, i, c, false);
          if (state.finish && state.handle) spent.push(state.handle);
          if (state.finish) state.handle = undefined;
          return delta;
        });
        sampler.release(spent);
        yield deltas;
      }
    }
  } finally {
    sampler.release(states.flatMap((c) => (c.handle ? [c.handle] : [])));
    leave();
  }
  return usageOf(computed, g, states);
}

/**
 * Add a sampled piece to continuation i and return its delta. `complete`: the piece ends what the
 * engine sampled for it (its finish reason stands even when no stop string or limit ended it).
 */
function advance(state: Continuation, i: number, c: SampleCompletion, complete: boolean): ChoiceDelta {
  const offset = state.text?.sent ?? 0;
  const piece = state.add(c);
  if (complete) state.finish ??= c.finishReason;
  const text = state.text?.delta(state.finish !== undefined) ?? '';
  const top = state.g.request.topLogprobs ? piece.top : undefined;
  const end = { finishReason: state.finish ?? null, stopReason: state.stopReason };
  return { ...piece, top, text, choice: i, ...end, textOffset: offset };
}

/** The request that continues a continuation for segment s from its retained KV state and random stream. */
function continued(g: Generation, c: Continuation, s: number): SampleRequest {
  const r = g.request;
  return {
    tokens: r.tokens.concat(c.tokens),
    cacheHandle: c.handle,
    continueRandom: true,
    n: 1,
    maxTokens: Math.min(segmentTokens(s), g.perContinuation - c.tokens.length),
    temperature: r.temperature,
    topP: r.topP,
    topK: r.topK,
    stopTokens: r.stopTokens,
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
