/**
 * A Sampler that gathers the requests of concurrent callers into one call of the sampler it wraps.
 * The agent gateway answers many agents at once, each with its own HTTP request; the embedded engine
 * decodes every continuation of one `sample()` call together, so requests that arrive while a call is
 * running (or while the batch gathers) are sent together as the next call. Each request keeps its own
 * seed and sampling fields. Requests for the same context with the same sampling fields are merged into
 * one request with a seed per continuation (when the wrapped sampler honours `seeds`), so the context is
 * computed once and each still samples as it would alone. The engine's numerics depend on a batch's
 * composition only in the last float bits (~1e-7 in a log-prob), so batching changes speed, and a token
 * only where a draw falls within that rounding of a boundary. A batch that fails is retried request by
 * request, so one bad request fails alone; a request cancelled while it waited ends `abort` with nothing
 * sampled, as the engine ends a cancelled call. Calls with a partial-rollout stop rule pass through.
 */
import type {
  SampleCompletion,
  SampleOptions,
  SampleRequest,
  SampleResult,
  Sampler,
  SamplerCapabilities,
} from './types.js';

interface Waiting {
  requests: SampleRequest[];
  signal?: AbortSignal;
  resolve: (results: SampleResult[]) => void;
  reject: (error: unknown) => void;
}

/** When a batch is sent: at once, or once the callers that will send have sent (the gateway's episodes). */
export interface GatherOptions {
  /** True when no more requests are expected before the next batch (every open episode has a call waiting). */
  complete(): boolean;
  /** Send anyway once no request arrived for this long (ms). */
  idleMs: number;
  /** Send anyway this long (ms) after the first request of the batch arrived. */
  maxWaitMs: number;
}

export class BatchingSampler implements Sampler {
  readonly specificationVersion = 'arbor.sampler.v1' as const;
  private queue: Waiting[] = [];
  private running = false;
  private firstArrival = 0;
  private lastArrival = 0;
  /** Calls made to the wrapped sampler, the callers' calls they carried, and requests merged into another. */
  readonly counts = { batches: 0, calls: 0, merged: 0 };

  constructor(
    readonly inner: Sampler,
    private readonly gather?: GatherOptions,
  ) {}

  get capabilities(): SamplerCapabilities {
    return this.inner.capabilities;
  }

  weightVersion(): number {
    return this.inner.weightVersion();
  }

  release(handles: string[]): void {
    this.inner.release(handles);
  }

  sample(requests: SampleRequest[], options: SampleOptions = {}): Promise<SampleResult[]> {
    if (options.stopAfterGroups || requests.length === 0) return this.inner.sample(requests, options);
    return new Promise((resolve, reject) => {
      const now = Date.now();
      if (!this.queue.length) this.firstArrival = now;
      this.lastArrival = now;
      this.queue.push({ requests, signal: options.signal, resolve, reject });
      this.pump();
    });
  }

  /** Start the next batch unless one is running: what is queued once the batch is gathered. */
  private pump(): void {
    if (this.running || !this.queue.length) return;
    this.running = true;
    const send = () => {
      const batch = this.queue.splice(0);
      void this.run(batch).finally(() => {
        this.running = false;
        this.pump();
      });
    };
    const g = this.gather;
    if (!g) return void setImmediate(send);
    const check = () => {
      const now = Date.now();
      const ready = g.complete() || now - this.lastArrival >= g.idleMs || now - this.firstArrival >= g.maxWaitMs;
      if (ready) send();
      else setTimeout(check, 1);
    };
    setImmediate(check);
  }

  private async run(batch: Waiting[]): Promise<void> {
    const live = batch.filter((w) => {
      if (!w.signal?.aborted) return true;
      // cancelled while queued: ended as the engine ends a cancelled call (`abort`, nothing sampled), not thrown
      w.resolve(w.requests.map((r) => cancelled(r, this.inner.weightVersion())));
      return false;
    });
    if (!live.length) return;
    this.counts.batches++;
    this.counts.calls += live.length;
    try {
      const flat = live.flatMap((w) => w.requests);
      const { requests, split } = this.inner.capabilities.seedPerContinuation ? merge(flat) : unmerged(flat);
      this.counts.merged += flat.length - requests.length;
      const results = split(await this.inner.sample(requests, { signal: allAborted(live.map((w) => w.signal)) }));
      let at = 0;
      for (const w of live) {
        w.resolve(results.slice(at, at + w.requests.length));
        at += w.requests.length;
      }
    } catch (error) {
      if (live.length === 1) return live[0].reject(error);
      // one bad request must not fail the others: each again on its own
      for (const w of live) await this.inner.sample(w.requests, { signal: w.signal }).then(w.resolve, w.reject);
    }
  }
}

/** The result of a request cancelled before it reached the engine: n continuations, nothing sampled. */
function cancelled(r: SampleRequest, weightVersion: number): SampleResult {
  const completions = Array.from({ length: r.n ?? 1 }, () => ({
    tokens: [],
    logprobs: [],
    finishReason: 'abort' as const,
  }));
  return { completions, usage: { promptTokensComputed: 0, prefixTokensReused: 0, tokensDecoded: 0 }, weightVersion };
}

/** Requests as they are, and results as they come. */
function unmerged(requests: SampleRequest[]) {
  return { requests, split: (results: SampleResult[]) => results };
}

/** A request merging may fold into another: one seeded continuation, no engine state of its own. */
function mergeable(r: SampleRequest): boolean {
  return (
    (r.n ?? 1) === 1 &&
    r.seed !== undefined &&
    !r.seeds &&
    !r.cacheHandle &&
    !r.retain &&
    !r.continueRandom &&
    !r.forcedTokens &&
    !r.distinctFirstTokens
  );
}

/** What must be equal for two requests to become continuations of one. */
function mergeKey(r: SampleRequest): string {
  const fields = [r.maxTokens, r.temperature, r.topP, r.topK, r.topLogprobs, r.returnEntropy, r.returnHidden];
  return `${JSON.stringify(fields)}|${(r.stopTokens ?? []).join(',')}|${r.tokens.join(',')}`;
}

/**
 * Requests for the same context and sampling as one request with a seed per continuation; `split` gives
 * each original request its own result back (the shared prefill's computed tokens counted on the first).
 */
function merge(requests: SampleRequest[]) {
  const groups = new Map<string, number[]>();
  const out: SampleRequest[] = [];
  const slot: Array<{ at: number; c: number }> = [];
  requests.forEach((r, i) => {
    if (!mergeable(r)) {
      slot[i] = { at: out.push(r) - 1, c: 0 };
      return;
    }
    const key = mergeKey(r);
    const members = groups.get(key);
    if (!members) {
      groups.set(key, [i]);
      slot[i] = { at: out.push({ ...r, seeds: [r.seed!] }) - 1, c: 0 };
      return;
    }
    const merged = out[slot[members[0]].at];
    slot[i] = { at: slot[members[0]].at, c: merged.seeds!.length };
    merged.seeds!.push(r.seed!);
    merged.n = merged.seeds!.length;
    members.push(i);
  });
  // a group of one goes as it came: the caller's own request
  for (const members of groups.values()) if (members.length === 1) out[slot[members[0]].at] = requests[members[0]];
  const split = (results: SampleResult[]): SampleResult[] =>
    requests.map((_, i) => {
      const { at, c } = slot[i];
      const result = results[at];
      if (!out[at].seeds) return result;
      const completion: SampleCompletion = result.completions[c];
      const prompt = result.usage.promptTokensComputed + result.usage.prefixTokensReused;
      const share = out[at].n ?? 1;
      const usage = {
        promptTokensComputed: c === 0 ? result.usage.promptTokensComputed : 0,
        prefixTokensReused: c === 0 ? prompt / share - result.usage.promptTokensComputed : prompt / share,
        tokensDecoded: completion.tokens.length,
      };
      return { completions: [completion], usage, weightVersion: result.weightVersion };
    });
  return { requests: out, split };
}

/** A signal that aborts once every given signal has aborted (a batch stops only when nobody waits for it). */
function allAborted(signals: Array<AbortSignal | undefined>): AbortSignal | undefined {
  if (signals.some((s) => s === undefined)) return undefined;
  const controller = new AbortController();
  const check = () => {
    if (signals.every((s) => s!.aborted)) controller.abort();
  };
  for (const s of signals) s!.addEventListener('abort', check, { once: true });
  check();
  return controller.signal;
}
