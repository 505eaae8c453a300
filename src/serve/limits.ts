/**
 * Request limits and scheduling for `arbor serve`:
 * - every sampling request is checked against the model (token ids inside the vocabulary, a prompt
 *   that leaves room in the context) and the server's limits (`maxN`, `maxBatchTokens` over
 *   n × the tokens a continuation can actually decode), answering 400 (a bad field, named) or 413
 *   (a request over the batch budget) before any work starts;
 * - at most `maxConcurrent` sampling requests run at once; more are answered 429;
 * - a request's continuations are sampled in slices of about `sliceTokens` decoded tokens, and the
 *   server yields to the event loop between slices, so `/health` and other requests are answered
 *   while a heavy request runs (a slice is one synchronous sampler call);
 * - sampling and weight changes (`/update_weights_from_disk`, Tinker training operations) never
 *   interleave: a WeightGate lets sampling requests share the weights and gives a weight change
 *   exclusive use, so every completion comes from one weight version.
 */
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import type { SampleRequest, SampleResult, Sampler } from '../engine/types.js';
import { BadRequest, TooBusy, TooLarge } from './validate.js';

export interface ServeLimits {
  /** Largest `n` (num_samples) of one request. */
  maxN: number;
  /** Largest n × (tokens a continuation may decode) of one request (for /generate: of one HTTP request). */
  maxBatchTokens: number;
  /** Sampling requests running at once; more are answered 429. */
  maxConcurrent: number;
  /** Longest prompt, in tokens (besides the context length, when known). */
  maxPromptTokens: number;
  /** Largest `logprobs` / `top_logprobs_num` (top alternatives per token), as vLLM's max_logprobs. */
  maxLogprobs: number;
  /** Decoded tokens per synchronous sampler call before the server yields to the event loop. */
  sliceTokens: number;
  /** Largest request body in bytes: a larger one is refused (413) by its size, before it is parsed. */
  maxRequestBytes: number;
  /** The model's context length (prompt + completion), when known: longer prompts are refused. */
  contextLength?: number;
  /** The model's vocabulary size, when known: token ids outside it are refused. */
  vocabSize?: number;
}

export const DEFAULT_LIMITS: ServeLimits = {
  maxN: 1024,
  maxBatchTokens: 262_144,
  maxConcurrent: 64,
  maxPromptTokens: 1_048_576,
  maxLogprobs: 20,
  sliceTokens: 1024,
  maxRequestBytes: 16 * 1024 * 1024,
};

/** Context length and vocabulary of an embedded sampler (NanoSampler exposes its model's config). */
export function modelShape(sampler: Sampler): { contextLength?: number; vocabSize?: number } {
  const config = (sampler as { model?: { config?: { contextLength?: unknown; vocabSize?: unknown } } }).model?.config;
  const int = (x: unknown) => (typeof x === 'number' && Number.isInteger(x) && x > 0 ? x : undefined);
  return { contextLength: int(config?.contextLength), vocabSize: int(config?.vocabSize) };
}

/** The limits in force: the defaults, then the sampler's model shape, then `overrides` (undefined fields ignored). */
export function servedLimits(sampler: Sampler, overrides: Partial<ServeLimits> = {}): ServeLimits {
  return { ...DEFAULT_LIMITS, ...definedOnly(modelShape(sampler)), ...definedOnly(overrides) };
}

function definedOnly<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** Readers (sampling) share the weights; a writer (a weight change) runs alone. Writers go first. */
export class WeightGate {
  private readers = 0;
  private writing = false;
  private writersWaiting = 0;
  private waiters: Array<() => void> = [];

  private wait(): Promise<void> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  async shared<T>(fn: () => Promise<T>): Promise<T> {
    const leave = await this.enterShared();
    try {
      return await fn();
    } finally {
      leave();
    }
  }

  /** Share the weights until the returned function is called (a streamed request holds them across segments). */
  async enterShared(): Promise<() => void> {
    while (this.writing || this.writersWaiting > 0) await this.wait();
    this.readers++;
    let left = false;
    return () => {
      if (left) return;
      left = true;
      this.readers--;
      this.wake();
    };
  }

  async exclusive<T>(fn: () => Promise<T> | T): Promise<T> {
    this.writersWaiting++;
    try {
      while (this.writing || this.readers > 0) await this.wait();
    } finally {
      this.writersWaiting--;
    }
    this.writing = true;
    try {
      return await fn();
    } finally {
      this.writing = false;
      this.wake();
    }
  }
}

/** Continuations [start, start + count) of a request, sampled as `request` (n = count). */
export interface SliceGroup {
  start: number;
  count: number;
  request: SampleRequest;
}

/** Field names of one API's request, for the 400 messages. */
export interface SampleFields {
  prompt: string;
  n: string;
  maxTokens: string;
}

export class SampleGuard {
  private inFlight = 0;
  readonly gate = new WeightGate();
  /** Requests refused with 429 (for tests and /health). */
  busyRefusals = 0;

  constructor(
    readonly sampler: Sampler,
    readonly limits: ServeLimits,
  ) {}

  get running(): number {
    return this.inFlight;
  }

  /** The most tokens a sampling request's prompt may have (the prompt limit, and room for one token in the context). */
  get promptLimit(): number {
    const { contextLength, maxPromptTokens } = this.limits;
    return contextLength === undefined ? maxPromptTokens : Math.min(maxPromptTokens, contextLength - 1);
  }

  /** Why a prompt of `length` tokens is refused (the 400's message, naming `field`), or undefined when it fits. */
  promptLengthProblem(length: number, field: string): string | undefined {
    const { contextLength, maxPromptTokens } = this.limits;
    if (length > maxPromptTokens) return `field "${field}": ${length} tokens exceed the limit of ${maxPromptTokens}`;
    if (contextLength !== undefined && length >= contextLength)
      return `field "${field}": ${length} tokens leave no room in the context length of ${contextLength}`;
    return undefined;
  }

  /** Model-dependent checks of one request (400 naming the field). Returns the tokens it may decode per continuation. */
  check(r: SampleRequest, f: SampleFields): number {
    const { contextLength, vocabSize, maxN } = this.limits;
    if (r.tokens.length === 0) throw new BadRequest(`field "${f.prompt}" must not be empty (give at least one token)`);
    const tooLong = this.promptLengthProblem(r.tokens.length, f.prompt);
    if (tooLong) throw new BadRequest(tooLong);
    if (vocabSize !== undefined) {
      const bad = r.tokens.findIndex((t) => t >= vocabSize);
      if (bad >= 0)
        throw new BadRequest(
          `field "${f.prompt}": token id ${r.tokens[bad]} at position ${bad} is outside the vocabulary of ${vocabSize}`,
        );
    }
    const n = r.n ?? 1;
    if (n < 1 || n > maxN)
      throw new BadRequest(`field "${f.n}" must be an integer in [1, ${maxN}] (--max-n), got ${n}`);
    if (r.maxTokens < 1) throw new BadRequest(`field "${f.maxTokens}" must be a positive integer, got ${r.maxTokens}`);
    return contextLength === undefined ? r.maxTokens : Math.min(r.maxTokens, contextLength - r.tokens.length);
  }

  /** 413 when the decoded tokens of a whole HTTP request (sum over its requests of n × tokens) exceed the budget. */
  checkBudget(total: number, what: string): void {
    if (total > this.limits.maxBatchTokens)
      throw new TooLarge(
        `${what} asks for up to ${total} decoded tokens, over the limit of ${this.limits.maxBatchTokens} (--max-batch-tokens); lower n or max_tokens`,
      );
  }

  /** Take `count` concurrency slots or answer 429; returns the release function (idempotent). */
  acquire(count = 1): () => void {
    if (this.inFlight + count > this.limits.maxConcurrent) {
      this.busyRefusals++;
      throw new TooBusy(
        `server busy: ${this.inFlight} sampling requests running (limit ${this.limits.maxConcurrent}, --max-concurrent); retry later`,
      );
    }
    this.inFlight += count;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.inFlight -= count;
    };
  }

  /**
   * The continuation groups `sample` splits a request into: continuations [start, start + count), as
   * one request seeded `seed` (`derivedSeed(seed, g)` for group g > 0; the request's own when it is
   * one group). Each group decodes about `sliceTokens` tokens at most.
   */
  sliceGroups(r: SampleRequest, perContinuation: number): SliceGroup[] {
    const n = r.n ?? 1;
    const size = Math.max(1, Math.floor(this.limits.sliceTokens / Math.max(1, perContinuation)));
    if (n <= size) return [{ start: 0, count: n, request: r }];
    const groups: SliceGroup[] = [];
    for (let g = 0, start = 0; start < n; g++, start += size) {
      const count = Math.min(size, n - start);
      const seed = r.seed === undefined ? undefined : derivedSeed(r.seed, g);
      const forcedTokens = r.forcedTokens?.slice(start, start + count);
      groups.push({ start, count, request: { ...r, n: count, seed, forcedTokens } });
    }
    return groups;
  }

  /**
   * Sample one request under the shared weight lock, in slices of about `sliceTokens` decoded
   * tokens, yielding to the event loop before each slice. A request that fits one slice is one
   * sampler call (exactly what the sampler would return); a larger n is split into groups of
   * continuations (`sliceGroups`). `sampler` chooses another sampler over the same weights (a LoRA
   * adapter's); default the guard's own.
   */
  async sample(
    r: SampleRequest,
    perContinuation: number,
    signal?: AbortSignal,
    sampler: Sampler = this.sampler,
  ): Promise<SampleResult> {
    return this.gate.shared(async () => {
      const groups = this.sliceGroups(r, perContinuation);
      await yieldToLoop();
      if (groups.length === 1) {
        const [result] = await sampler.sample([r], { signal });
        return result;
      }
      const usage = { promptTokensComputed: 0, prefixTokensReused: 0, tokensDecoded: 0 };
      const merged: SampleResult = { completions: [], usage, weightVersion: sampler.weightVersion() };
      for (const [g, { count, request }] of groups.entries()) {
        if (g > 0) await yieldToLoop();
        if (signal?.aborted) {
          for (let i = 0; i < count; i++) merged.completions.push({ tokens: [], logprobs: [], finishReason: 'abort' });
          continue;
        }
        const [part] = await sampler.sample([request], { signal });
        merged.completions.push(...part.completions);
        merged.usage.promptTokensComputed += part.usage.promptTokensComputed;
        merged.usage.prefixTokensReused += part.usage.prefixTokensReused;
        merged.usage.tokensDecoded += part.usage.tokensDecoded;
        merged.weightVersion = part.weightVersion;
      }
      return merged;
    });
  }
}

/** The seed of continuation group g of a request split into slices (g = 0 keeps the request's seed). */
export function derivedSeed(seed: number, g: number): number {
  return g === 0 ? seed : (Math.imul((seed >>> 0) ^ 0x9e3779b9, 0x85ebca6b) + Math.imul(g, 0xc2b2ae35)) >>> 0;
}
