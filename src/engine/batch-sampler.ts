/**
 * A Sampler that gathers the requests of concurrent callers into one call of the sampler it wraps.
 * The agent gateway answers many agents at once, each with its own HTTP request; the embedded engine
 * decodes every continuation of one `sample()` call together, so requests that arrive while a call is
 * running (or in the same turn of the event loop) are sent together as the next call. Each request
 * keeps its own seed and sampling fields, and the engine's results do not depend on what else is in
 * the batch, so batching changes speed, not tokens. A batch that fails is retried request by request,
 * so one bad request fails alone; one cancelled while it waits ends `abort` with nothing sampled, as the
 * engine ends a cancelled call. Calls with a partial-rollout stop rule are passed through unbatched.
 */
import type { SampleOptions, SampleRequest, SampleResult, Sampler, SamplerCapabilities } from './types.js';

interface Waiting {
  requests: SampleRequest[];
  signal?: AbortSignal;
  resolve: (results: SampleResult[]) => void;
  reject: (error: unknown) => void;
}

export class BatchingSampler implements Sampler {
  readonly specificationVersion = 'arbor.sampler.v1' as const;
  private queue: Waiting[] = [];
  private running = false;
  /** Calls made to the wrapped sampler, and the callers' calls they carried (for tests and metrics). */
  readonly counts = { batches: 0, calls: 0 };

  constructor(readonly inner: Sampler) {}

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
      this.queue.push({ requests, signal: options.signal, resolve, reject });
      this.pump();
    });
  }

  /** Start the next batch unless one is running: everything queued by the next turn of the event loop. */
  private pump(): void {
    if (this.running || !this.queue.length) return;
    this.running = true;
    setImmediate(() => {
      const batch = this.queue.splice(0);
      void this.run(batch).finally(() => {
        this.running = false;
        this.pump();
      });
    });
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
      const results = await this.inner.sample(
        live.flatMap((w) => w.requests),
        { signal: allAborted(live.map((w) => w.signal)) },
      );
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

/** The result of a request cancelled before it was sampled: each continuation `abort` with no tokens. */
function cancelled(r: SampleRequest, weightVersion: number): SampleResult {
  const completions = Array.from({ length: r.n ?? 1 }, () => ({
    tokens: [],
    logprobs: [],
    finishReason: 'abort' as const,
  }));
  return { completions, usage: { promptTokensComputed: 0, prefixTokensReused: 0, tokensDecoded: 0 }, weightVersion };
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
