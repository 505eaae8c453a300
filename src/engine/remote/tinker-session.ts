/**
 * One client session with a Tinker-compatible service (hosted Tinker, SkyRL tx, `arbor serve`), shared
 * by the trainer and the Tinker sampler: `create_session` once, a `session_heartbeat` every 10 s,
 * the model and sampling-session sequence numbers, the `X-API-Key` header, and the future protocol
 * (POST → `{request_id}` → `retrieve_future` until the result). It speaks the SDK's JSON wire format
 * (SDK ≤ 0.24.1); the protobuf bodies of SDK 0.25 are not implemented (no protobuf dependency).
 * The key is read only when the header is built; it is never logged or written anywhere.
 * Transient faults (connection refused or reset, 408/429/5xx with Retry-After, a lost poll) are
 * retried `retries` times with back-off, each POST with the same `X-Idempotency-Key` (as the SDK,
 * thinking-machines-lab/tinker@d595dc2 _client.py / _base_client.py) and the same `seq_id`. When a
 * POST may have reached the trainer before its connection broke and the retry is refused as a reused
 * `seq_id` (409: SkyRL tx, arbor serve), the trainer holds the operation but Arbor lost its future:
 * the client stops with TrainerStateError instead of guessing, so no step is applied twice.
 */
import { EngineCallError, isAbortError } from '../../core/errors.js';
import { Rng } from '../../core/rng.js';
import { backoffMs, HttpCallError, JsonClient, sleep, type CallOptions, type RetryPolicy } from './http.js';
import type { Secret } from '../../core/secret.js';

/**
 * Wire types, from thinking-machines-lab/tinker@d595dc2 (v0.25.0) src/tinker/types/*.py and
 * lib/internal_client_holder.py, and NovaSky-AI/SkyRL@a956457 skyrl/tinker/api.py
 * (CreateSessionRequest/Response, SessionHeartbeatRequest, FutureResponse, RetrieveFutureRequest).
 */
export interface CreateSessionRequest {
  tags: string[];
  user_metadata: Record<string, unknown>;
  sdk_version: string;
  type: 'create_session';
}
export interface CreateSessionResponse {
  session_id: string;
  info_message?: string | null;
  warning_message?: string | null;
  error_message?: string | null;
}
/** POST replies: hosted Tinker `{request_id}` (UntypedAPIFuture); SkyRL `{future_id, status: "pending", request_id}`. */
export interface FutureReply {
  request_id?: string;
  future_id?: string;
  model_id?: string;
}
/**
 * retrieve_future: 200 result; `{type: "try_again"}` or HTTP 408 (SkyRL after 300 s) = poll again;
 * 410 = future lost, resubmit; `{error, category}` = failed (tinker lib/api_future_impl.py).
 */
export interface RequestFailedResponse {
  error: string;
  category?: 'unknown' | 'server' | 'user';
}

export interface TinkerSessionOptions {
  /** Base URL of the service (hosted: https://tinker.thinkingmachines.dev/services/tinker-prod). */
  baseUrl: string;
  /** `X-API-Key` (hosted Tinker); resolved by `tinkerApiKey` (trainer.apiKey, then $TINKER_API_KEY). */
  apiKey?: Secret;
  /** `sdk_version` sent in create_session: the SDK release whose JSON wire format this client speaks. */
  sdkVersion?: string;
  /** Session tags. */
  tags?: string[];
  /** Heartbeat period (ms); the SDK sends one every 10 s. 0 = none. */
  heartbeatMs?: number;
  /** Poll back-off bounds between `try_again` replies (ms). */
  pollMinMs?: number;
  pollMaxMs?: number;
  /** Per-poll HTTP timeout (ms): longer than the server's long poll (SkyRL holds 300 s, then 408). */
  pollTimeoutMs?: number;
  /** Give up on one future after this long (ms); 0 = wait as long as the server keeps answering. */
  futureTimeoutMs?: number;
  /** Per-attempt timeout and back-off (`maxAttempts` is replaced by `retries`). */
  retry?: Partial<RetryPolicy>;
  /** Times a request is sent again after a transient fault (engine.trainer.retries; default 6). */
  retries?: number;
  concurrency?: number;
  /** Warnings for the run log (a server-side warning_message, a missed heartbeat). */
  warn?: (message: string) => void;
}

/** The JSON wire format of SDK 0.24.1 (the last release that sends JSON forward_backward bodies). */
export const TINKER_JSON_SDK_VERSION = '0.24.1';

/**
 * The trainer cannot say what became of an operation (it received it and lost the reply, or it
 * restarted and lost the model or future): the run stops; it resumes from its last checkpoint.
 */
export class TrainerStateError extends EngineCallError {
  override name = 'TrainerStateError';
}

/** How the run resumes after a TrainerStateError or a trainer that stayed down. */
const RESUME_HINT = 'resume the run from its last checkpoint once the trainer is up: arbor train --resume RUN_DIR';

export class TinkerSession {
  readonly client: JsonClient;
  private sessionId: Promise<string> | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private lastHeartbeat = Date.now();
  private modelSeq = 0;
  private samplingSessionSeq = 0;
  private requestCounter = 0;
  /** Heartbeats answered (for tests). */
  heartbeats = 0;
  /** Requests sent again after a transient fault (metrics: trainer_retries). */
  retries = 0;
  private readonly retryPolicy: RetryPolicy;
  /** Seeded back-off jitter (timing only); idempotency keys are unique per process and session. */
  private readonly jitter = new Rng(0x7171);
  private readonly startedAt = Date.now();

  constructor(readonly options: TinkerSessionOptions) {
    const headers: Record<string, string> = {};
    if (options.apiKey) headers['x-api-key'] = options.apiKey.reveal();
    this.client = new JsonClient({
      baseUrl: options.baseUrl,
      concurrency: options.concurrency ?? 64,
      retry: { ...options.retry, maxAttempts: 1 },
      headers,
    });
    this.retryPolicy = {
      maxAttempts: 1 + (options.retries ?? 6),
      baseDelayMs: options.retry?.baseDelayMs ?? 500,
      maxDelayMs: options.retry?.maxDelayMs ?? 30_000,
      timeoutMs: this.client.retry.timeoutMs,
    };
  }

  /**
   * One request with the trainer's retry rules (see the header). `idempotencyKey` (POSTs) is sent as
   * `X-Idempotency-Key` on every attempt; `what` names the operation in errors.
   */
  async send<T>(
    path: string,
    body: unknown,
    options: Omit<CallOptions, 'maxAttempts' | 'headers'> & { idempotencyKey?: string; what?: string } = {},
  ): Promise<T> {
    const { idempotencyKey, what = path, ...call } = options;
    const headers = idempotencyKey ? { 'x-idempotency-key': idempotencyKey } : undefined;
    let maybeReceived = false;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.client.call<T>(path, body, { ...call, headers, maxAttempts: 1 });
      } catch (error) {
        if (call.signal?.aborted || isAbortError(error) || !(error instanceof HttpCallError)) throw error;
        const status = error.details.status;
        if (status === 409 && maybeReceived)
          throw new TrainerStateError(
            `${this.client.baseUrl}: ${what} may have been applied: its connection broke after sending, and the ` +
              `trainer refuses the retry as a reused seq_id (${error.message}); Arbor cannot tell whether or how it ` +
              `was applied, so it stops rather than apply it twice; ${RESUME_HINT}`,
            { url: error.details.url, status, isRetryable: false },
            { cause: error },
          );
        const retryable =
          error.isRetryable &&
          !(status !== undefined && call.noRetryStatuses?.includes(status)) &&
          !(error.timedOut && call.retryTimeouts === false);
        if (!retryable) throw error;
        if (attempt >= this.retryPolicy.maxAttempts)
          throw new EngineCallError(
            `${this.client.baseUrl}: the trainer did not answer ${what} after ${attempt} attempts ` +
              `(engine.trainer.retries ${attempt - 1}): ${error.message}; ${RESUME_HINT}`,
            { url: error.details.url, status, isRetryable: false },
            { cause: error },
          );
        if (error.delivery === 'unknown') maybeReceived = true;
        this.retries++;
        const wait = backoffMs(attempt, this.retryPolicy, this.jitter.next());
        await sleep(Math.max(error.retryAfterMs ?? 0, wait), call.signal);
      }
    }
  }

  /** An idempotency key for a request that has no model sequence number (sessions, sampling). */
  private nextKey(kind: string): string {
    return `arbor-${kind}-${process.pid}-${this.startedAt}-${++this.requestCounter}`;
  }

  /** The session id; the first call creates the session and starts the heartbeat. */
  ensure(): Promise<string> {
    this.sessionId ??= this.create().catch((error) => {
      this.sessionId = undefined;
      throw error;
    });
    return this.sessionId;
  }

  /** `model_seq_id` for the next create_model (0, 1, … as the SDK's training-client counter). */
  nextModelSeqId(): number {
    return this.modelSeq++;
  }

  /** `sampling_session_seq_id` for the next create_sampling_session. */
  nextSamplingSessionSeqId(): number {
    return this.samplingSessionSeq++;
  }

  /** POST an operation and return its immediate reply (must name a future). */
  async post(
    path: string,
    body: Record<string, unknown>,
    signal?: AbortSignal,
  ): Promise<FutureReply & Record<string, unknown>> {
    // a model's operation is identified by (model_id, seq_id): the same key on every attempt of it
    const key =
      typeof body.model_id === 'string' && typeof body.seq_id === 'number'
        ? `arbor-${body.model_id}-${body.seq_id}`
        : this.nextKey(String(body.type ?? 'request'));
    const what = `${String(body.type ?? path)}${typeof body.seq_id === 'number' ? ` (seq_id ${body.seq_id})` : ''}`;
    const reply = await this.send<FutureReply & Record<string, unknown>>(path, body, {
      signal,
      idempotencyKey: key,
      what,
    });
    if (reply?.request_id === undefined && reply?.future_id === undefined)
      throw this.malformed(path, 'request_id', reply);
    return reply;
  }

  /** POST an operation, then wait for its future's result. */
  /**
   * POST an operation, then wait for its future's result. A 410 from retrieve_future means the
   * server lost the future: the original request is sent again (up to 3 times), as the SDK does.
   */
  async submit(path: string, body: Record<string, unknown>, signal?: AbortSignal): Promise<unknown> {
    for (let attempt = 1; ; attempt++) {
      const reply = await this.post(path, body, signal);
      try {
        return await this.awaitFuture(String(reply.request_id ?? reply.future_id), signal);
      } catch (error) {
        if (!(error instanceof EngineCallError && error.details.status === 410) || attempt >= 3) throw error;
      }
    }
  }

  /** Poll `retrieve_future` until the result is ready; 408 and `try_again` mean "poll again". */
  async awaitFuture(requestId: string, signal?: AbortSignal): Promise<unknown> {
    const start = Date.now();
    let delay = this.options.pollMinMs ?? 20;
    const deadline = this.options.futureTimeoutMs ?? 0;
    for (;;) {
      const result = await this.pollOnce(requestId, signal);
      if (result !== undefined) return result;
      if (deadline > 0 && Date.now() - start > deadline)
        throw new EngineCallError(`tinker future ${requestId}: not ready after ${deadline} ms`, {
          url: this.client.baseUrl,
          isRetryable: false,
        });
      await pause(delay, signal);
      delay = Math.min(this.options.pollMaxMs ?? 1000, delay * 2);
    }
  }

  /** One poll: the result, or undefined when the server says to poll again. */
  private async pollOnce(requestId: string, signal?: AbortSignal): Promise<unknown> {
    let result: Record<string, unknown>;
    try {
      result = await this.send<Record<string, unknown>>(
        '/api/v1/retrieve_future',
        { request_id: requestId, allow_metadata_only: false },
        {
          signal,
          noRetryStatuses: [408],
          timeoutMs: this.options.pollTimeoutMs ?? 330_000,
          retryTimeouts: false,
          what: `retrieve_future ${requestId}`,
        },
      );
    } catch (error) {
      // SkyRL holds the poll up to 300 s, then answers 408 {detail}: the future is still running.
      // A poll that times out on our side says the same: ask again, never count it as a failure.
      if (
        error instanceof EngineCallError &&
        (error.details.status === 408 || (error.cause as Error | undefined)?.name === 'TimeoutError')
      )
        return undefined;
      // a trainer that restarted has lost its futures: the operation's outcome cannot be known
      if (error instanceof HttpCallError && error.details.status === 404)
        throw new TrainerStateError(
          `${this.client.baseUrl}: the trainer no longer knows future ${requestId} (did it restart?): ${error.message}; ` +
            RESUME_HINT,
          { url: error.details.url, status: 404, isRetryable: false },
          { cause: error },
        );
      throw error;
    }
    if (result?.type === 'try_again' || result?.status === 'pending') return undefined;
    if (typeof result?.error === 'string') {
      const failed = result as unknown as RequestFailedResponse;
      throw new EngineCallError(
        `tinker future ${requestId} failed${failed.category ? ` (${failed.category} error)` : ''}: ${failed.error}`,
        { url: `${this.client.baseUrl}/api/v1/retrieve_future`, isRetryable: false },
      );
    }
    return result;
  }

  /** Stop the heartbeat and close idle connections. */
  close(): void {
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = undefined;
    this.client.close();
  }

  malformed(path: string, field: string, reply: unknown): EngineCallError {
    return new EngineCallError(
      `${this.client.baseUrl}${path}: malformed reply: missing or invalid "${field}": ${JSON.stringify(reply)?.slice(0, 300)}`,
      { url: this.client.baseUrl + path, isRetryable: false },
    );
  }

  private async create(): Promise<string> {
    const body: CreateSessionRequest = {
      tags: this.options.tags ?? ['arbor'],
      user_metadata: {},
      sdk_version: this.options.sdkVersion ?? TINKER_JSON_SDK_VERSION,
      type: 'create_session',
    };
    const reply = await this.send<CreateSessionResponse>('/api/v1/create_session', body, {
      idempotencyKey: this.nextKey('create_session'),
      what: 'create_session',
    });
    if (typeof reply?.session_id !== 'string') throw this.malformed('/api/v1/create_session', 'session_id', reply);
    if (reply.error_message)
      throw new EngineCallError(`${this.client.baseUrl}/api/v1/create_session: ${reply.error_message}`, {
        url: this.client.baseUrl,
        isRetryable: false,
      });
    if (reply.warning_message) this.options.warn?.(`tinker: ${reply.warning_message}`);
    this.startHeartbeat(reply.session_id);
    return reply.session_id;
  }

  private startHeartbeat(sessionId: string): void {
    const period = this.options.heartbeatMs ?? 10_000;
    if (period <= 0) return;
    this.lastHeartbeat = Date.now();
    let warned = false;
    this.heartbeat = setInterval(() => {
      this.client
        .call(
          '/api/v1/session_heartbeat',
          { session_id: sessionId, type: 'session_heartbeat' },
          { timeoutMs: 10_000, maxAttempts: 1 },
        )
        .then(
          () => {
            this.heartbeats++;
            this.lastHeartbeat = Date.now();
            warned = false;
          },
          (error: Error) => {
            // like the SDK: ignore single failures, warn after 2 minutes without an answer
            if (!warned && Date.now() - this.lastHeartbeat > 120_000) {
              warned = true;
              this.options.warn?.(
                `tinker: session heartbeat failing for ${Math.round((Date.now() - this.lastHeartbeat) / 1000)} s: ${error.message}`,
              );
            }
          },
        );
    }, period);
    this.heartbeat.unref();
  }
}

/** Wait `ms`, or reject with the signal's reason when it aborts first. */
function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
