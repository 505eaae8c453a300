/**
 * NanoSampler: the Sampler interface on the embedded model with a paged, prefix-shared KV cache.
 * One sample() call batches all requests: their contexts are prefilled together (a request whose
 * cacheHandle names a retained sequence forks it and prefills only the new tokens), each request's
 * context is forked into its n continuations (no recomputation, copy-on-write for the last partial
 * page), and all continuations decode together one token per step. Retained continuations return a
 * cacheHandle; handles die when the model's weight version changes (stale KV is never reused). A
 * handle keeps its continuation's random generator too: a request with `continueRandom` draws on from
 * it, so sampling in segments picks exactly the tokens one request would: the last token, re-entered
 * through prefill, gets the logits its decode step gets when the same rows share the forward call.
 * Contexts are clamped at contextLength: a continuation reaching it finishes with reason "length".
 * Cancellation (`signal`, the `abortProbe` option) and the partial-rollout stop rule
 * (`stopAfterGroups`) are checked before every decode step: when one holds, every continuation still
 * running ends "abort" with the tokens it has. The stop rule is exact and deterministic: it depends on
 * decode steps only, and an aborted continuation's tokens are a prefix of what it would have sampled.
 */
import { Rng } from '../../core/rng.js';
import { EngineCallError } from '../../core/errors.js';
import type {
  SampleCompletion,
  SampleOptions,
  SampleRequest,
  SampleResult,
  Sampler,
  SamplerCapabilities,
} from '../types.js';
import { DecodeWorkspace, forwardRows, type DecodeRow } from '../model/decode.js';
import { PagedKVCache } from '../model/kvcache.js';
import type { NanoModel } from '../model/model.js';
import { chooseToken, rowDistributions, usesDistribution } from '../model/sampling.js';
import type { ChoiceOptions, RowDistribution } from '../model/sampling.js';
import type { LoraAdapter } from '../model/lora.js';

export interface NanoSamplerOptions {
  /** Tokens per KV page. */
  pageSize?: number;
  /** Share a request's context pages among its n continuations and honour cacheHandles. */
  prefixSharing?: boolean;
  /** Maximum rows per forward call during prefill. */
  maxPrefillRows?: number;
  /** Seed for requests that give none. */
  seed?: number;
  /** Checked between decode steps like an abort signal (a worker thread drives it from shared memory). */
  abortProbe?: () => boolean;
  /** A LoRA adapter applied on top of the (shared, frozen) base weights. */
  adapter?: LoraAdapter;
}

/** Rows of a prompt's logits whose distributions scorePrompt computes per kernel call. */
const SCORE_CHUNK_ROWS = 16;

interface Retained {
  seq: number;
  tokens: number[];
  version: number;
  /** The continuation's generator after its last token (`continueRandom` draws on from a copy). */
  rng: Rng;
}

interface Continuation {
  request: number;
  seq: number;
  rng: Rng;
  forced?: number;
  tokens: number[];
  logprobs: number[];
  entropies: number[];
  top: Array<Array<[number, number]>>;
  finish?: SampleCompletion['finishReason'];
  contextLength: number;
  /** Logits row for the next token. */
  logits: Float32Array;
  logitsOffset: number;
  /** Final-norm hidden row those logits came from (only when some request asked for `returnHidden`). */
  hidden?: Float32Array;
}

export class NanoSampler implements Sampler {
  readonly specificationVersion = 'arbor.sampler.v1' as const;
  readonly capabilities: SamplerCapabilities;
  readonly cache: PagedKVCache;
  private readonly ws: DecodeWorkspace;
  private readonly retained = new Map<string, Retained>();
  private handleCounter = 0;
  private cacheVersion: number;
  private readonly seedRng: Rng;
  private readonly prefixSharing: boolean;
  private readonly maxPrefillRows: number;
  private readonly abortProbe: (() => boolean) | undefined;
  /** The LoRA adapter this sampler applies (undefined = the base model). */
  readonly adapter: LoraAdapter | undefined;
  /** Cumulative counters over the sampler's life. */
  readonly totals = { promptTokensComputed: 0, prefixTokensReused: 0, tokensDecoded: 0, forwardCalls: 0 };

  constructor(
    readonly model: NanoModel,
    options: NanoSamplerOptions = {},
  ) {
    const { L, C, Ckv } = model.dims;
    this.capabilities = {
      entropy: true,
      topLogprobs: true,
      forcedTokens: true,
      cacheHandles: options.prefixSharing ?? true,
      prefixCaching: false,
      distinctFirstTokens: true,
      hiddenSize: C,
      seedPerContinuation: true,
    };
    this.cache = new PagedKVCache(L, Ckv, options.pageSize ?? 16);
    this.ws = new DecodeWorkspace(model, options.adapter);
    this.adapter = options.adapter;
    this.cacheVersion = model.weightVersion;
    this.seedRng = new Rng(options.seed ?? 0x5eed);
    this.prefixSharing = options.prefixSharing ?? true;
    this.maxPrefillRows = options.maxPrefillRows ?? 2048;
    this.abortProbe = options.abortProbe;
  }

  weightVersion(): number {
    return this.model.weightVersion;
  }

  release(handles: string[]): void {
    for (const h of handles) {
      const r = this.retained.get(h);
      if (!r) continue;
      this.cache.free(r.seq);
      this.retained.delete(h);
    }
  }

  /** Number of live retained handles. */
  get retainedCount(): number {
    return this.retained.size;
  }

  /** The retained sequence `r` continues: a live handle of this weight version whose tokens `r` extends. */
  private liveHandle(r: SampleRequest, version: number): Retained | undefined {
    const handle = this.prefixSharing && r.cacheHandle ? this.retained.get(r.cacheHandle) : undefined;
    if (!handle || handle.version !== version || !isPrefix(handle.tokens, r.tokens)) return undefined;
    return r.tokens.length > this.cache.length(handle.seq) ? handle : undefined;
  }

  private dropStale(): void {
    if (this.model.weightVersion === this.cacheVersion) return;
    this.release([...this.retained.keys()]);
    this.cacheVersion = this.model.weightVersion;
  }

  async sample(requests: SampleRequest[], options: SampleOptions = {}): Promise<SampleResult[]> {
    this.dropStale();
    const { vocabSize: V, contextLength } = this.model.config;
    const version = this.model.weightVersion;
    requests.forEach((r, i) => validateRequest(r, i, V, contextLength));
    const live = requests.map((r) => this.liveHandle(r, version));
    requests.forEach((r, i) => {
      if (r.continueRandom && !live[i])
        throw new EngineCallError(
          `nano sampler: request ${i}: continueRandom needs the live cacheHandle of a retained continuation`,
          { isRetryable: false },
        );
    });
    const stop = options.stopAfterGroups;
    if (stop && stop.groupOf.length !== requests.length)
      throw new EngineCallError(
        `nano sampler: stopAfterGroups.groupOf has ${stop.groupOf.length} entries for ${requests.length} requests`,
        { isRetryable: false },
      );
    const usage = requests.map(() => ({ promptTokensComputed: 0, prefixTokensReused: 0, tokensDecoded: 0 }));
    const continuations: Continuation[] = [];
    // 1. prefill contexts (once per request, or once per continuation without sharing)
    const prefills: Array<{ request: number; seq: number; start: number; child?: number }> = [];
    requests.forEach((r, i) => {
      const n = r.n ?? 1;
      const handle = live[i];
      if (handle) {
        const [seq] = this.cache.fork(handle.seq, 1);
        prefills.push({ request: i, seq, start: this.cache.length(handle.seq) });
      } else if (this.prefixSharing) {
        prefills.push({ request: i, seq: this.cache.createSequence(), start: 0 });
      } else {
        for (let c = 0; c < n; c++) prefills.push({ request: i, seq: this.cache.createSequence(), start: 0, child: c });
      }
    });
    const wantHidden = requests.some((r) => r.returnHidden);
    const { logits: lastLogits, hidden: lastHidden } = this.prefill(requests, prefills, wantHidden);
    const C = this.model.config.dModel;
    // 2. fork each context into its continuations
    prefills.forEach((p, k) => {
      const r = requests[p.request];
      const n = r.n ?? 1;
      const computed = r.tokens.length - p.start;
      // a continued stream draws on from a copy of the retained generator (the handle stays reusable)
      const continued = r.continueRandom ? live[p.request]!.rng : undefined;
      const seed = continued ? 0 : (r.seed ?? this.seedRng.nextU32());
      const make = (seq: number, c: number): Continuation => ({
        request: p.request,
        seq,
        // per-continuation seeds: continuation c samples as a request of its own with n = 1 and seed seeds[c]
        rng: continued ? new Rng(continued.getState()) : r.seeds ? new Rng(r.seeds[c]).fork(0) : new Rng(seed).fork(c),
        forced: r.forcedTokens?.[c],
        tokens: [],
        logprobs: [],
        entropies: [],
        top: [],
        contextLength: r.tokens.length,
        logits: lastLogits,
        logitsOffset: k * V,
        hidden: lastHidden?.subarray(k * C, (k + 1) * C),
      });
      if (p.child !== undefined) {
        usage[p.request].promptTokensComputed += computed;
        continuations.push(make(p.seq, p.child));
        return;
      }
      usage[p.request].promptTokensComputed += computed;
      usage[p.request].prefixTokensReused += p.start + (n - 1) * r.tokens.length;
      const children = n === 1 ? [p.seq] : this.cache.fork(p.seq, n);
      if (n !== 1) this.cache.free(p.seq);
      children.forEach((seq, c) => continuations.push(make(seq, c)));
    });
    // 3. decode all continuations together
    this.decode(requests, continuations, options.signal, stop, wantHidden);
    // 4. assemble results, retain or free sequences
    const results: SampleResult[] = requests.map((_, i) => ({
      completions: [],
      usage: usage[i],
      weightVersion: version,
    }));
    for (const c of continuations) {
      const r = requests[c.request];
      const completion: SampleCompletion = {
        tokens: c.tokens,
        logprobs: c.logprobs,
        finishReason: c.finish ?? 'length',
      };
      if (r.returnEntropy) completion.entropies = c.entropies;
      if (r.topLogprobs) completion.topLogprobs = c.top;
      if (r.returnHidden && c.hidden) completion.hidden = Array.from(c.hidden);
      if (r.retain && this.prefixSharing) {
        const handle = `h${++this.handleCounter}`;
        this.retained.set(handle, { seq: c.seq, tokens: r.tokens.concat(c.tokens), version, rng: c.rng });
        completion.cacheHandle = handle;
      } else {
        this.cache.free(c.seq);
      }
      results[c.request].completions.push(completion);
      usage[c.request].tokensDecoded += c.tokens.length;
    }
    for (const u of usage) {
      this.totals.promptTokensComputed += u.promptTokensComputed;
      this.totals.prefixTokensReused += u.prefixTokensReused;
      this.totals.tokensDecoded += u.tokensDecoded;
    }
    return results;
  }

  /**
   * Log-probs of a prompt's own tokens under the model (vLLM's echo + logprobs): entry t is
   * log p(tokens[t] | tokens[<t]) for t ≥ 1 (entry 0 is null: nothing predicts the first token), with the
   * `topK` most likely tokens of each position when topK > 0. Runs in row blocks, so a long prompt over a
   * large vocabulary never holds all its logits at once.
   */
  scorePrompt(
    tokens: number[],
    topK = 0,
  ): { logprobs: Array<number | null>; top: Array<Array<[number, number]> | null> } {
    const { V } = this.model.dims;
    const fail = (msg: string) => new EngineCallError(`nano sampler: prompt scoring: ${msg}`, { isRetryable: false });
    if (!tokens.length) throw fail('tokens is empty');
    if (tokens.length > this.model.config.contextLength)
      throw fail(`${tokens.length} tokens exceed contextLength ${this.model.config.contextLength}`);
    for (const t of tokens)
      if (!(Number.isInteger(t) && t >= 0 && t < V)) throw fail(`token id ${t} outside vocabulary of ${V}`);
    const logprobs: Array<number | null> = [null];
    const top: Array<Array<[number, number]> | null> = [null];
    const seq = this.cache.createSequence();
    try {
      const block = Math.max(1, Math.min(this.maxPrefillRows, Math.floor((1 << 24) / V)));
      for (let t0 = 0; t0 < tokens.length - 1; t0 += block) {
        const rows = tokens
          .slice(t0, Math.min(tokens.length - 1, t0 + block))
          .map((token) => ({ seq, token, wantLogits: true }));
        const logits = forwardRows(this.model, this.cache, this.ws, rows);
        this.totals.forwardCalls++;
        for (let c0 = 0; c0 < rows.length; c0 += SCORE_CHUNK_ROWS) {
          const chunk = Math.min(SCORE_CHUNK_ROWS, rows.length - c0);
          const o = (i: number): ChoiceOptions => ({
            temperature: 1,
            topP: 1,
            topK: 0,
            topLogprobs: topK,
            forced: tokens[t0 + i + 1],
          });
          const rowLogits = logits.subarray(c0 * V, (c0 + chunk) * V);
          const ones = new Float64Array(chunk).fill(1);
          const dists = usesDistribution(o(0), V) ? this.distributions(rowLogits, ones) : undefined;
          for (let i = c0; i < c0 + chunk; i++) {
            const choice = chooseToken(logits, i * V, V, this.seedRng, o(i), dists?.[i - c0]);
            logprobs.push(choice.logprob);
            top.push(choice.top ?? []);
          }
        }
      }
    } finally {
      this.cache.free(seq);
    }
    return { logprobs, top };
  }

  /**
   * Each row's distribution at its temperature (sampling.ts rowDistributions: one kernel call over
   * logits [R, V]), or undefined on kernels without samplingStats. Valid until the next call.
   */
  private distributions(logits: Float32Array, temperatures: ArrayLike<number>): RowDistribution[] | undefined {
    const V = this.model.dims.V;
    const R = logits.length / V;
    if (!this.model.kernels.samplingStats) return undefined;
    return rowDistributions(this.model.kernels, logits, R, V, temperatures, this.ws.exps(R * V));
  }

  /** Prefill every context from its start; returns the last row's logits per prefill [P, V] (and hidden states [P, C]). */
  private prefill(
    requests: SampleRequest[],
    prefills: Array<{ request: number; seq: number; start: number }>,
    wantHidden: boolean,
  ): { logits: Float32Array; hidden?: Float32Array } {
    const { vocabSize: V, dModel: C } = this.model.config;
    const out = new Float32Array(prefills.length * V);
    const hiddenOut = wantHidden ? new Float32Array(prefills.length * C) : undefined;
    let rows: DecodeRow[] = [];
    let owners: number[] = [];
    const flush = () => {
      if (!rows.length) return;
      const hidden = hiddenOut ? new Float32Array(rows.filter((r) => r.wantLogits).length * C) : undefined;
      const logits = forwardRows(this.model, this.cache, this.ws, rows, hidden);
      this.totals.forwardCalls++;
      let j = 0;
      rows.forEach((row, i) => {
        if (!row.wantLogits) return;
        out.set(logits.subarray(j * V, (j + 1) * V), owners[i] * V);
        hiddenOut?.set(hidden!.subarray(j * C, (j + 1) * C), owners[i] * C);
        j++;
      });
      rows = [];
      owners = [];
    };
    prefills.forEach((p, k) => {
      const tokens = requests[p.request].tokens;
      for (let t = p.start; t < tokens.length; t++) {
        rows.push({ seq: p.seq, token: tokens[t], wantLogits: t === tokens.length - 1 });
        owners.push(k);
        if (rows.length >= this.maxPrefillRows) flush();
      }
    });
    flush();
    return { logits: out, hidden: hiddenOut };
  }

  private decode(
    requests: SampleRequest[],
    continuations: Continuation[],
    signal: AbortSignal | undefined,
    stop: SampleOptions['stopAfterGroups'] | undefined,
    wantHidden: boolean,
  ): void {
    const { vocabSize: V, contextLength, dModel: C } = this.model.config;
    let active = continuations.slice();
    const groupDone = stop ? groupTracker(continuations, stop.groupOf) : undefined;
    while (active.length) {
      if (signal?.aborted || this.abortProbe?.() || (groupDone && groupDone(active) >= stop!.count)) {
        for (const c of active) c.finish = 'abort';
        return;
      }
      const next: Continuation[] = [];
      const rows: DecodeRow[] = [];
      // first tokens already taken per request (distinctFirstTokens: sampling without replacement)
      const taken = new Map<number, Set<number>>();
      const choiceOptions = (c: Continuation): ChoiceOptions => {
        const r = requests[c.request];
        const first = c.tokens.length === 0;
        const exclude = first && r.distinctFirstTokens ? (taken.get(c.request) ?? new Set<number>()) : undefined;
        const forced = first ? c.forced : undefined;
        const topLogprobs = r.topLogprobs ?? 0;
        return { temperature: r.temperature ?? 1, topP: r.topP ?? 1, topK: r.topK ?? 0, topLogprobs, forced, exclude };
      };
      // every continuation's logits row lies in one array (the prefill's, then each step's)
      const kernelRows = active.some((c) => usesDistribution(choiceOptions(c), V));
      const dists = kernelRows ? this.distributions(active[0].logits, rowTemperatures(active, requests, V)) : undefined;
      for (const c of active) {
        const r = requests[c.request];
        const o = choiceOptions(c);
        const exclude = o.exclude;
        const choice = chooseToken(c.logits, c.logitsOffset, V, c.rng, o, dists?.[c.logitsOffset / V]);
        if (exclude) taken.set(c.request, exclude.add(choice.token));
        c.tokens.push(choice.token);
        c.logprobs.push(choice.logprob);
        c.entropies.push(choice.entropy);
        if (choice.top) c.top.push(choice.top);
        if (r.stopTokens?.includes(choice.token)) c.finish = 'stop';
        else if (c.tokens.length >= r.maxTokens || c.contextLength + c.tokens.length >= contextLength)
          c.finish = 'length';
        else {
          next.push(c);
          rows.push({ seq: c.seq, token: choice.token, wantLogits: true });
        }
      }
      if (!rows.length) return;
      const hidden = wantHidden ? new Float32Array(rows.length * C) : undefined;
      const logits = forwardRows(this.model, this.cache, this.ws, rows, hidden);
      this.totals.forwardCalls++;
      next.forEach((c, i) => {
        c.logits = logits;
        c.logitsOffset = i * V;
        c.hidden = hidden?.subarray(i * C, (i + 1) * C);
      });
      active = next;
    }
  }
}

/** Temperature of each row of the logits array the active continuations read (rows no one reads: 1). */
function rowTemperatures(active: Continuation[], requests: SampleRequest[], V: number): Float64Array {
  const temperatures = new Float64Array(active[0].logits.length / V).fill(1);
  for (const c of active) temperatures[c.logitsOffset / V] = requests[c.request].temperature ?? 1;
  return temperatures;
}

/** Counts groups whose continuations have all finished, given the ones still active. */
function groupTracker(all: Continuation[], groupOf: number[]): (active: Continuation[]) => number {
  const groups = new Set(all.map((c) => groupOf[c.request]));
  return (active) => {
    const running = new Set(active.map((c) => groupOf[c.request]));
    let done = 0;
    for (const g of groups) if (!running.has(g)) done++;
    return done;
  };
}

function isPrefix(prefix: number[], tokens: number[]): boolean {
  if (prefix.length > tokens.length) return false;
  for (let i = 0; i < prefix.length; i++) if (prefix[i] !== tokens[i]) return false;
  return true;
}

function validateRequest(r: SampleRequest, i: number, V: number, contextLength: number): void {
  const fail = (msg: string) => new EngineCallError(`nano sampler: request ${i}: ${msg}`, { isRetryable: false });
  if (!r.tokens.length) throw fail('tokens is empty (give at least a BOS token)');
  if (r.tokens.length >= contextLength)
    throw fail(`context of ${r.tokens.length} tokens leaves no room (contextLength ${contextLength})`);
  for (const t of r.tokens)
    if (!(Number.isInteger(t) && t >= 0 && t < V)) throw fail(`token id ${t} outside vocabulary of ${V}`);
  if (!(r.maxTokens >= 1)) throw fail(`maxTokens must be ≥ 1, got ${r.maxTokens}`);
  const n = r.n ?? 1;
  if (!(Number.isInteger(n) && n >= 1)) throw fail(`n must be a positive integer, got ${n}`);
  if (r.continueRandom && n !== 1) throw fail(`continueRandom continues one stream: n must be 1, got ${n}`);
  if (r.seeds && (r.seeds.length !== n || r.seeds.some((x) => !Number.isFinite(x))))
    throw fail(`seeds must hold one finite seed per continuation (n = ${n}), got ${r.seeds.length}`);
  if (r.forcedTokens && r.forcedTokens.some((t) => !(t >= 0 && t < V))) throw fail('forcedTokens outside vocabulary');
}
