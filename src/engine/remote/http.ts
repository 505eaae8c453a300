/**
 * JSON-over-HTTP calls for the remote engine clients: a per-server concurrency limit, retries with
 * exponential back-off and jitter on 408/429/5xx, connection errors and timeouts (a 429/503's
 * `Retry-After` is honoured up to 60 s), cancellation by AbortSignal (never retried), and clear
 * HttpCallErrors naming the URL, status and body and saying whether the request can have reached the
 * server (callers that must not apply an operation twice decide on that). A node:http keep-alive agent
 * per server reuses connections. No request-specific logic here.
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
  /** Extra headers of this call (e.g. Tinker's `X-Idempotency-Key`, the same on every attempt). */
  headers?: Record<string, string>;
}

/**
 * Whether a failed call can have reached the server: `not_sent` (the connection was refused or the
 * host not found: nothing was received), `unknown` (the connection broke or timed out after the
 * request may have been read), `replied` (the server answered with an error status).
 */
export type Delivery = 'not_sent' | 'unknown' | 'replied';

/** An EngineCallError of one HTTP call, with what a caller needs to decide on a retry. */
export class HttpCallError extends EngineCallError {
  override name = 'HttpCallError';
  constructor(
    message: string,
    details: { url?: string; status?: number; body?: string; isRetryable?: boolean },
    readonly delivery: Delivery,
    /** The reply's Retry-After (`retry-after-ms`, seconds or an HTTP date), in ms, when it sent one. */
    readonly retryAfterMs?: number,
    options?: { cause?: unknown },
  ) {
    super(message, details, options);
  }

  /** The attempt timed out on the client. */
  get timedOut(): boolean {
    return ((this.cause as Error | undefined)?.name ?? '') === 'TimeoutError';
  }
}

/** Connection errors raised before anything was sent (the request cannot have been received). */
const NOT_SENT_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EADDRNOTAVAIL',
]);

/** Longest Retry-After honoured (ms), as the Tinker SDK (thinking-machines-lab/tinker@d595dc2 _base_client.py). */
const MAX_RETRY_AFTER_MS = 60_000;

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
          const retryAfter = error instanceof HttpCallError ? (error.retryAfterMs ?? 0) : 0;
          await sleep(Math.max(retryAfter, backoffMs(attempt, this.retry, this.jitter.next())), signal);
        }
      }
    } finally {
      this.semaphore.release();
    }
  }

  private async once(url: string, body: unknown, options: CallOptions): Promise<unknown> {
    const { signal } = options;
    const timeoutMs = options.timeoutMs ?? this.retry.timeoutMs;
    let reply: { status: number; text: string; headers: http.IncomingHttpHeaders };
    try {
      reply = await request(
        url,
        body === undefined ? undefined : JSON.stringify(body),
        options.headers ? { ...this.headers, ...options.headers } : this.headers,
        this.agent,
        timeoutMs,
        signal,
      );
    } catch (cause) {
      if (signal?.aborted) throw signal.reason ?? cause;
      const timedOut = (cause as Error)?.name === 'TimeoutError';
      const code = (cause as NodeJS.ErrnoException)?.code;
      throw new HttpCallError(
        `${url}: ${timedOut ? `timed out after ${timeoutMs} ms` : `connection failed (${(cause as Error)?.message ?? cause})`}`,
        { url, isRetryable: true },
        code !== undefined && NOT_SENT_CODES.has(code) ? 'not_sent' : 'unknown',
        undefined,
        { cause },
      );
    }
    const { status, text } = reply;
    if (status < 200 || status >= 300) {
      throw new HttpCallError(
        `${url}: HTTP ${status}: ${text.slice(0, 500)}`,
        { url, status, body: text.slice(0, 2000) },
        'replied',
        status === 429 || status === 503 ? retryAfterMs(reply.headers) : undefined,
      );
    }
    try {
      return JSON.parse(text);
    } catch (cause) {
      if (options.accept === 'text') return { text };
      throw new HttpCallError(
        `${url}: reply is not JSON: ${text.slice(0, 200)}`,
        { url, status, body: text.slice(0, 2000), isRetryable: false },
        'replied',
        undefined,
        { cause },
      );
    }
  }
}

/**
 * A reply's wait request in ms: `retry-after-ms`, else `retry-after` as seconds or an HTTP date (as the
 * Tinker SDK reads it, thinking-machines-lab/tinker@d595dc2 _base_client.py `_parse_retry_after_header`),
 * at most 60 s; undefined when absent or unreadable.
 */
export function retryAfterMs(headers: http.IncomingHttpHeaders, now = Date.now()): number | undefined {
  const one = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v);
  const ms = Number(one(headers['retry-after-ms']));
  let wait: number | undefined;
  const after = one(headers['retry-after'])?.trim();
  if (one(headers['retry-after-ms']) !== undefined && Number.isFinite(ms)) wait = ms;
  else if (after && Number.isFinite(Number(after))) wait = Number(after) * 1000;
  else if (after && Number.isFinite(Date.parse(after))) wait = Date.parse(after) - now;
  if (wait === undefined || !(wait > 0)) return undefined;
  return Math.min(wait, MAX_RETRY_AFTER_MS);
}

/** One HTTP request over a keep-alive agent; resolves with status and body text. */
function request(
  url: string,
  body: string | undefined,
  headers: Record<string, string>,
  agent: http.Agent,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<{ status: number; text: string; headers: http.IncomingHttpHeaders }> {
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
          resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8'), headers: res.headers });
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

/** Wait `ms`, or reject with the signal's reason when it aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
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
