/**
 * JSON-over-HTTP calls for the remote engine clients: a per-server concurrency limit, retries with
 * exponential back-off and jitter on 408/429/5xx, connection errors and timeouts, cancellation by
 * AbortSignal (never retried), and clear EngineCallErrors naming the URL, status and body.
 * Node's global fetch (undici) keeps connections alive between calls. No request-specific logic here.
 */
import { EngineCallError, isAbortError } from '../../core/errors.js';
import { Rng } from '../../core/rng.js';

export interface RetryPolicy {
  /** Attempts in total (1 = no retry). */
  maxAttempts: number;
  /** First back-off delay in ms; doubles each retry, with ±50% jitter. */
  baseDelayMs: number;
  /** Back-off ceiling in ms. */
  maxDelayMs: number;
  /** Per-attempt timeout in ms (0 = none). */
  timeoutMs: number;
}

export const defaultRetryPolicy: RetryPolicy = { maxAttempts: 5, baseDelayMs: 100, maxDelayMs: 5000, timeoutMs: 120_000 };

/** A counting semaphore: at most `limit` holders at once, FIFO. */
export class Semaphore {
  private active = 0;
  private readonly waiting: Array<() => void> = [];
  constructor(readonly limit: number) {}

  async acquire(): Promise<void> {
    if (this.active < this.limit) {
      this.active++;
      return;
    }
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.active--;
  }

  /** Holders right now. */
  get inUse(): number {
    return this.active;
  }
}

export interface JsonClientOptions {
  /** Base URL, e.g. http://127.0.0.1:8000 */
  baseUrl: string;
  /** Maximum concurrent requests to this server. */
  concurrency?: number;
  retry?: Partial<RetryPolicy>;
  /** Extra headers (e.g. Authorization). */
  headers?: Record<string, string>;
}

/** Counters for observability and tests. */
export interface JsonClientStats {
  requests: number;
  retries: number;
  failures: number;
}

export class JsonClient {
  readonly baseUrl: string;
  readonly retry: RetryPolicy;
  readonly stats: JsonClientStats = { requests: 0, retries: 0, failures: 0 };
  private readonly semaphore: Semaphore;
  private readonly headers: Record<string, string>;
  /** Seeded jitter source (back-off timing only; never affects results). */
  private readonly jitter = new Rng(0x6a177e);

  constructor(options: JsonClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.retry = { ...defaultRetryPolicy, ...options.retry };
    this.semaphore = new Semaphore(options.concurrency ?? 256);
    this.headers = { 'content-type': 'application/json', ...options.headers };
  }

  /** Requests in flight right now. */
  get inFlight(): number {
    return this.semaphore.inUse;
  }

  /** POST JSON (or GET when body is undefined) and parse the JSON reply, retrying as configured. */
  async call<T = unknown>(path: string, body: unknown, signal?: AbortSignal): Promise<T> {
    const url = this.baseUrl + path;
    await this.semaphore.acquire();
    try {
      for (let attempt = 1; ; attempt++) {
        this.stats.requests++;
        try {
          return (await this.once(url, body, signal)) as T;
        } catch (error) {
          if (isAbortError(error) || signal?.aborted) throw error;
          const retryable = error instanceof EngineCallError ? error.isRetryable : true;
          if (!retryable || attempt >= this.retry.maxAttempts) {
            this.stats.failures++;
            throw error;
          }
          this.stats.retries++;
          await sleep(backoffMs(attempt, this.retry, this.jitter.next()), signal);
        }
      }
    } finally {
      this.semaphore.release();
    }
  }

  private async once(url: string, body: unknown, signal?: AbortSignal): Promise<unknown> {
    const signals: AbortSignal[] = [];
    if (signal) signals.push(signal);
    if (this.retry.timeoutMs > 0) signals.push(AbortSignal.timeout(this.retry.timeoutMs));
    const combined = signals.length ? AbortSignal.any(signals) : undefined;
    let response: Response;
    try {
      response = await fetch(url, {
        method: body === undefined ? 'GET' : 'POST',
        headers: this.headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: combined,
      });
    } catch (cause) {
      if (signal?.aborted) throw signal.reason ?? cause;
      const timedOut = (cause as Error)?.name === 'TimeoutError';
      throw new EngineCallError(`${url}: ${timedOut ? `timed out after ${this.retry.timeoutMs} ms` : `connection failed (${(cause as Error)?.message ?? cause})`}`, { url, isRetryable: true }, { cause });
    }
    let text: string;
    try {
      text = await response.text();
    } catch (cause) {
      if (signal?.aborted) throw signal.reason ?? cause;
      throw new EngineCallError(`${url}: reply body could not be read (${(cause as Error)?.message})`, { url, status: response.status, isRetryable: true }, { cause });
    }
    if (!response.ok) {
      throw new EngineCallError(`${url}: HTTP ${response.status}: ${text.slice(0, 500)}`, { url, status: response.status, body: text.slice(0, 2000) });
    }
    try {
      return JSON.parse(text);
    } catch (cause) {
      throw new EngineCallError(`${url}: reply is not JSON: ${text.slice(0, 200)}`, { url, status: response.status, body: text.slice(0, 2000), isRetryable: false }, { cause });
    }
  }
}

/** Delay before retry `attempt` (1-based): exponential, capped, scaled by jitter u ∈ [0,1) to ±50%. */
export function backoffMs(attempt: number, policy: RetryPolicy, u: number): number {
  const base = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (attempt - 1));
  return base * (0.5 + u);
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Narrow an unknown JSON value, throwing a clear EngineCallError naming the url and field path. */
export function expectField<T>(value: unknown, path: string, url: string, check: (v: unknown) => boolean, what: string): T {
  if (!check(value)) {
    throw new EngineCallError(`${url}: malformed reply: field ${path} should be ${what}, got ${JSON.stringify(value)?.slice(0, 100)}`, { url, isRetryable: false });
  }
  return value as T;
}
