/**
 * JSON-over-HTTP calls for the remote engine clients: a per-server concurrency limit, retries with
 * exponential back-off and jitter on 408/429/5xx, connection errors and timeouts, cancellation by
 * AbortSignal (never retried), and clear EngineCallErrors naming the URL, status and body.
 * A node:http keep-alive agent per server reuses connections. No request-specific logic here.
 */
import { EngineCallError, isAbortError } from '../../core/errors.js';
import { Rng } from '../../core/rng.js';
import { Semaphore } from '../../core/semaphore.js';
import http from 'node:http';
import https from 'node:https';

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

export const defaultRetryPolicy: RetryPolicy = {
  maxAttempts: 5,
  baseDelayMs: 100,
  maxDelayMs: 5000,
  timeoutMs: 120_000,
};

export interface JsonClientOptions {
  /** Base URL, e.g. http://127.0.0.1:8000 */
  baseUrl: string;
  /** Maximum concurrent requests to this server. */
  concurrency?: number;
  retry?: Partial<RetryPolicy>;
  /** Extra headers (e.g. Authorization). */
  headers?: Record<string, string>;
}

/** Per-call overrides. */
export interface CallOptions {
  signal?: AbortSignal;
  /**
   * `json` (default): the 2xx reply must be JSON. `text`: a 2xx reply that is not JSON comes back as
   * `{ text }` (vLLM's /v1/load_lora_adapter answers `Success: LoRA adapter ...` as plain text).
   */
  accept?: 'json' | 'text';
  /** Statuses that fail at once instead of being retried (e.g. 408 from a long poll: poll again). */
  noRetryStatuses?: number[];
  /** Per-attempt timeout for this call (ms), instead of the client's. */
  timeoutMs?: number;
  /** Attempts for this call, instead of the client's (1 = no retry). */
  maxAttempts?: number;
  /** Retry a timed-out attempt (default true); false = the timeout error surfaces at once. */
  retryTimeouts?: boolean;
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
  /** Keep-alive connection pool for this server. */
  private readonly agent: http.Agent;
  /** Seeded jitter source (back-off timing only; never affects results). */
  private readonly jitter = new Rng(0x6a177e);

  constructor(options: JsonClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.retry = { ...defaultRetryPolicy, ...options.retry };
    this.semaphore = new Semaphore(options.concurrency ?? 256);
    this.headers = { 'content-type': 'application/json', ...options.headers };
    this.agent = new http.Agent({ keepAlive: true, maxSockets: options.concurrency ?? 256, scheduling: 'lifo' });
  }

  /** Close idle keep-alive connections. */
  close(): void {
    this.agent.destroy();
  }

  /** Requests in flight right now. */
  get inFlight(): number {
    return this.semaphore.inUse;
  }

  /** POST JSON (or GET when body is undefined) and parse the JSON reply, retrying as configured. */
  async call<T = unknown>(path: string, body: unknown, signalOrOptions?: AbortSignal | CallOptions): Promise<T> {
    const options: CallOptions =
      signalOrOptions instanceof AbortSignal ? { signal: signalOrOptions } : (signalOrOptions ?? {});
    const signal = options.signal;
    const url = this.baseUrl + path;
    await this.semaphore.acquire();
    try {
      for (let attempt = 1; ; attempt++) {
        this.stats.requests++;
        try {
          return (await this.once(url, body, options)) as T;
        } catch (error) {
          if (isAbortError(error) || signal?.aborted) throw error;
          const status = error instanceof EngineCallError ? error.details.status : undefined;
          const timedOut = ((error as Error).cause as Error | undefined)?.name === 'TimeoutError';
          const retryable =
            error instanceof EngineCallError
              ? error.isRetryable &&
                !(status !== undefined && options.noRetryStatuses?.includes(status)) &&
                !(timedOut && options.retryTimeouts === false)
              : true;
          if (!retryable || attempt >= (options.maxAttempts ?? this.retry.maxAttempts)) {
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

  private async once(url: string, body: unknown, options: CallOptions): Promise<unknown> {
    const { signal } = options;
    const timeoutMs = options.timeoutMs ?? this.retry.timeoutMs;
    let reply: { status: number; text: string };
    try {
      reply = await request(
        url,
        body === undefined ? undefined : JSON.stringify(body),
        this.headers,
        this.agent,
        timeoutMs,
        signal,
      );
    } catch (cause) {
      if (signal?.aborted) throw signal.reason ?? cause;
      const timedOut = (cause as Error)?.name === 'TimeoutError';
      throw new EngineCallError(
        `${url}: ${timedOut ? `timed out after ${timeoutMs} ms` : `connection failed (${(cause as Error)?.message ?? cause})`}`,
        { url, isRetryable: true },
        { cause },
      );
    }
    const { status, text } = reply;
    if (status < 200 || status >= 300) {
      throw new EngineCallError(`${url}: HTTP ${status}: ${text.slice(0, 500)}`, {
        url,
        status,
        body: text.slice(0, 2000),
      });
    }
    try {
      return JSON.parse(text);
    } catch (cause) {
      if (options.accept === 'text') return { text };
      throw new EngineCallError(
        `${url}: reply is not JSON: ${text.slice(0, 200)}`,
        { url, status, body: text.slice(0, 2000), isRetryable: false },
        { cause },
      );
    }
  }
}

/** One HTTP request over a keep-alive agent; resolves with status and body text. */
function request(
  url: string,
  body: string | undefined,
  headers: Record<string, string>,
  agent: http.Agent,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const target = new URL(url);
    const lib = target.protocol === 'https:' ? https : http;
    const req = lib.request(
      target,
      {
        method: body === undefined ? 'GET' : 'POST',
        headers: body === undefined ? headers : { ...headers, 'content-length': Buffer.byteLength(body) },
        agent: target.protocol === 'https:' ? undefined : agent,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          cleanup();
          resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') });
        });
        res.on('error', fail);
      },
    );
    let timer: NodeJS.Timeout | undefined;
    const onAbort = () => {
      req.destroy();
      cleanup();
      reject(signal!.reason);
    };
    function fail(error: Error) {
      cleanup();
      reject(error);
    }
    function cleanup() {
      if (timer) clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    }
    if (timeoutMs > 0) {
      timer = setTimeout(() => {
        const error = new Error(`timed out after ${timeoutMs} ms`);
        error.name = 'TimeoutError';
        req.destroy(error);
      }, timeoutMs);
    }
    signal?.addEventListener('abort', onAbort, { once: true });
    req.on('error', fail);
    req.end(body);
  });
}

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

/**
 * The error of a reply a parser cannot read: `<url>: malformed reply: <what>`, not retryable (the same request
 * gets the same reply), with the first 2000 characters of the reply as its body.
 */
export function malformedReply(url: string, reply: unknown): (what: string) => EngineCallError {
  return (what) =>
    new EngineCallError(`${url}: malformed reply: ${what}`, {
      url,
      isRetryable: false,
      body: JSON.stringify(reply)?.slice(0, 2000),
    });
}

/** Narrow an unknown JSON value, throwing a clear EngineCallError naming the url and field path. */
export function expectField<T>(
  value: unknown,
  path: string,
  url: string,
  check: (v: unknown) => boolean,
  what: string,
): T {
  if (!check(value)) {
    throw new EngineCallError(
      `${url}: malformed reply: field ${path} should be ${what}, got ${JSON.stringify(value)?.slice(0, 100)}`,
      { url, isRetryable: false },
    );
  }
  return value as T;
}
