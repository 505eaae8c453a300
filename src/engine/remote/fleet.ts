/**
 * The sampling servers of a remote sampler (vLLM or SGLang) as a fleet: every server is `healthy`,
 * `down` or `syncing` and holds a weight version. A request goes to a healthy server that holds the
 * fleet's newest version (rendezvous hashing by affinity key, else the fewest in flight), inside that
 * server's SwapGate; a failed or timed-out attempt is sent again, unchanged (same seed), to another
 * server, with back-off. A server whose connection fails is taken out and probed (`GET /health`) with
 * back-off; when it answers it is brought to the current weights (resync: vLLM and SGLang may come
 * back empty) before it gets requests again. A weight sync that cannot reach a server marks it down
 * instead of failing. With every server down for `unavailableMs`, requests fail with a
 * SamplerFleetError naming each server and its last error, which stops the run (it stays resumable).
 * The fleet never starts, restarts or reschedules servers: that is the orchestrator's job.
 */
import { ArborError, EngineCallError, EnvironmentError, isAbortError } from '../../core/errors.js';
import { Rng } from '../../core/rng.js';
import { rendezvous } from './balancer.js';
import { backoffMs, HttpCallError, JsonClient, sleep, type JsonClientOptions, type RetryPolicy } from './http.js';
import { SwapGate } from './weight-sync.js';

export type ServerState = 'healthy' | 'down' | 'syncing';

/** What every server should hold: weight version `version`, loaded from `path` (none: nothing to load). */
export interface FleetTarget {
  version: number;
  path?: string;
  /** The LoRA adapter name requests of this version use (vLLM `model`, SGLang `lora_path`); none: the base model. */
  adapter?: string;
}

/**
 * Bring one server to `target` (load the adapter or weights). Returns the weight version the server
 * will report in its replies (SGLang `weight_version`) when that is known, else undefined.
 */
export type ServerSync = (client: JsonClient, target: FleetTarget, signal?: AbortSignal) => Promise<string | undefined>;

export interface FleetOptions {
  servers: Array<string | JsonClientOptions>;
  /** Requests in flight per server. */
  concurrencyPerServer?: number;
  /** Attempts of one request after its first, on other servers when there are (engine.sampler.retries). */
  retries?: number;
  /** Per-attempt timeout (ms): a slower reply counts as a failure of that server. */
  requestTimeoutMs?: number;
  /** How long requests wait while every server is down before the run stops (ms). */
  unavailableMs?: number;
  /** First delay between `/health` probes of a down server (ms); it doubles up to 16 times this. */
  probeMs?: number;
  /** Progress lines: a server going down, coming back, a sync that missed servers. */
  log?: (line: string) => void;
}

/** One server of the fleet. */
export interface FleetServer {
  readonly url: string;
  readonly client: JsonClient;
  /** Held by each request on this server; a weight swap on it waits until none is in flight. */
  readonly gate: SwapGate;
  state: ServerState;
  /** The weight version it holds (meaningful while healthy). */
  version: number;
  /** The weight version the server itself reports in replies, once known (a change means it restarted). */
  token?: string;
  /** Why it was taken out (while down). */
  downReason?: string;
  /** The last failure seen on it (a request, a sync or a health probe). */
  lastError?: string;
  /** Consecutive 5xx replies (three take it out). */
  serverErrors: number;
  probeDelayMs: number;
  probeTimer?: NodeJS.Timeout;
  /** The health probe in flight. */
  probing?: Promise<void>;
  /** When it last came back (Date.now()). */
  backAt?: number;
}

/**
 * Every sampling server has been down for engine.sampler.unavailableSeconds: the run cannot go on. An
 * EnvironmentError that is not recoverable, so the Generate stage lets it through instead of recording
 * an error tree.
 */
export class SamplerFleetError extends EnvironmentError {
  override name = 'SamplerFleetError';
}

/** A server answered for weights other than the ones Arbor loaded on it (it restarted, or lost its adapter). */
export class StaleServerError extends EngineCallError {
  override name = 'StaleServerError';
}

/** Counters since the fleet was made (metrics take differences per step). */
export interface FleetCounters {
  /** Attempts sent again after a failure. */
  retries: number;
  /** Times a server was brought back to the current weights after being down or stale. */
  resyncs: number;
  /** Times a server was taken out. */
  downs: number;
}

const SERVER_ERRORS_TO_DOWN = 3;
/** Down again this soon after coming back: the probe wait keeps growing instead of starting over. */
const FLAPPING_MS = 60_000;
const PROBE_TIMEOUT_MS = 5000;
const RETRY_POLICY: RetryPolicy = { maxAttempts: 1, baseDelayMs: 100, maxDelayMs: 5000, timeoutMs: 0 };

export class SamplerFleet {
  readonly servers: FleetServer[];
  readonly counters: FleetCounters = { retries: 0, resyncs: 0, downs: 0 };
  private target: FleetTarget = { version: 0 };
  private sync: ServerSync | undefined;
  private readonly waiters = new Set<() => void>();
  private allDownSince: number | undefined;
  private closed = false;
  /** Seeded back-off jitter (timing only; never affects what is sampled). */
  private readonly jitter = new Rng(0xf1ee7);
  private readonly retries: number;
  private readonly unavailableMs: number;
  private readonly probeMs: number;

  constructor(readonly options: FleetOptions) {
    if (!options.servers.length) throw new ArborError('sampler fleet: at least one server URL is required');
    const concurrency = options.concurrencyPerServer ?? 64;
    const timeoutMs = options.requestTimeoutMs ?? 600_000;
    this.retries = options.retries ?? 3;
    this.unavailableMs = options.unavailableMs ?? 300_000;
    this.probeMs = options.probeMs ?? 1000;
    this.servers = options.servers.map((s) => {
      const given: JsonClientOptions = typeof s === 'string' ? { baseUrl: s } : s;
      // one attempt per call: the fleet retries, on another server when there is one
      const client = new JsonClient({
        concurrency,
        ...given,
        retry: { timeoutMs, ...given.retry, maxAttempts: given.retry?.maxAttempts ?? 1 },
      });
      return {
        url: client.baseUrl,
        client,
        gate: new SwapGate(),
        state: 'healthy' as ServerState,
        version: 0,
        serverErrors: 0,
        probeDelayMs: this.probeMs,
      };
    });
  }

  /** The newest published weight version (what requests must be sampled with). */
  get version(): number {
    return this.target.version;
  }

  /** The adapter requests of the newest version name (undefined: the base model, or set by the sampler). */
  get adapter(): string | undefined {
    return this.target.adapter;
  }

  /** How a server is brought to a weight version (none: nothing to load, e.g. weightSync.kind none). */
  setSync(sync: ServerSync | undefined): void {
    this.sync = sync;
  }

  /**
   * Run one request: `attempt` is called with a healthy server at the newest version, inside its gate,
   * and again on another server when it fails with a connection error, a timeout, a 5xx or 429, or a
   * stale server; a 4xx or a malformed reply fails at once (any server would answer the same).
   */
  async run<T>(
    affinityKey: string | undefined,
    attempt: (server: FleetServer, version: number) => Promise<T>,
    signal?: AbortSignal,
  ): Promise<{ value: T; version: number; server: FleetServer }> {
    const tried = new Set<FleetServer>();
    for (let failures = 0; ;) {
      const server = await this.acquire(affinityKey, tried, signal);
      let result: { value: T; version: number; server: FleetServer } | undefined;
      try {
        result = await server.gate.run(async () => {
          // a sync or a failure may have changed the server while this request waited for its gate
          if (server.state !== 'healthy' || server.version !== this.target.version) return undefined;
          const version = server.version;
          const value = await attempt(server, version);
          server.serverErrors = 0;
          return { value, version, server };
        });
      } catch (error) {
        if (signal?.aborted || isAbortError(error)) throw error;
        if (!this.failed(server, error)) throw error;
        tried.add(server);
        if (++failures > this.retries) throw withAttempts(error, failures);
        this.counters.retries++;
        const retryAfter = error instanceof HttpCallError ? (error.retryAfterMs ?? 0) : 0;
        await sleep(Math.max(retryAfter, backoffMs(failures, RETRY_POLICY, this.jitter.next())), signal);
      }
      if (result) return result;
    }
  }

  /**
   * Publish weight version `target`: requests from now on need a server holding it; every healthy
   * server loads it (each inside its own gate: its requests in flight finish first). A server the sync
   * cannot reach is taken out and brought to the newest version when it answers again. Fails only when
   * no server took the weights and a server refused them (a bad adapter, not a missing server).
   */
  async publish(target: FleetTarget, signal?: AbortSignal): Promise<void> {
    this.target = target;
    const live = this.servers.filter((s) => s.state === 'healthy');
    this.notify();
    // each server serves the new version as soon as it holds it
    const results = await Promise.allSettled(live.map((s) => this.load(s, target, signal).then(() => this.notify())));
    if (signal?.aborted) throw signal.reason;
    const refused: string[] = [];
    results.forEach((r, i) => {
      if (r.status === 'fulfilled') return;
      const message = (r.reason as Error)?.message ?? String(r.reason);
      if (!(r.reason instanceof EngineCallError && r.reason.isRetryable)) refused.push(`${live[i].url}: ${message}`);
      this.markDown(live[i], `weight sync to version ${target.version} failed: ${message}`);
    });
    const loaded = results.filter((r) => r.status === 'fulfilled').length;
    if (!loaded && refused.length) {
      const why = `weight sync of version ${target.version} failed on every server:\n  ${refused.join('\n  ')}`;
      throw new EngineCallError(why, { isRetryable: false });
    }
    if (loaded < this.servers.length) {
      const missing = this.servers.filter((s) => s.version !== target.version || s.state !== 'healthy');
      this.log(
        `sampler: weight version ${target.version} loaded on ${loaded} of ${this.servers.length} servers; ` +
          `${missing.map((s) => s.url).join(', ')} will get it before their next request`,
      );
    }
  }

  /** Run `fn` while no request is in flight on any server (weight syncs of servers outside the fleet). */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    return this.servers.reduceRight<() => Promise<T>>((inner, s) => () => s.gate.exclusive(inner), fn)();
  }

  /** Per-server state for logs, metrics and tests. */
  snapshot(): Array<{ url: string; state: ServerState; version: number; downReason?: string; lastError?: string }> {
    return this.servers.map(({ url, state, version, downReason, lastError }) => ({
      url,
      state,
      version,
      downReason,
      lastError,
    }));
  }

  /** Servers healthy at the newest version right now. */
  get healthy(): number {
    return this.servers.filter((s) => s.state === 'healthy' && s.version === this.target.version).length;
  }

  /**
   * A server answered for other weights than it should hold: take it out of rotation and bring it to the
   * newest version now (it is up; no probe needed).
   */
  markStale(server: FleetServer, reason: string): void {
    if (server.state !== 'healthy') return;
    server.lastError = reason;
    this.log(`sampler: ${server.url} ${reason}; loading weight version ${this.target.version} on it again`);
    void this.resync(server);
  }

  /** Stop probing and close connections; requests still waiting for a server fail. */
  close(): void {
    this.closed = true;
    for (const s of this.servers) {
      if (s.probeTimer) clearTimeout(s.probeTimer);
      s.probeTimer = undefined;
      s.client.close();
    }
    this.notify();
  }

  /** Record a failed attempt; false when the error says nothing about the server (the request itself is bad). */
  private failed(server: FleetServer, error: unknown): boolean {
    if (error instanceof StaleServerError) {
      this.markStale(server, error.message);
      return true;
    }
    if (!(error instanceof EngineCallError) || !error.isRetryable) return false;
    const status = error.details.status;
    if (status === 429) return true;
    if (status !== undefined && status >= 500 && status !== 503) {
      server.lastError = error.message;
      if (++server.serverErrors >= SERVER_ERRORS_TO_DOWN) this.markDown(server, error.message);
      return true;
    }
    // no reply (connection refused or reset, a timeout), 408 or 503: the server is gone or stuck
    this.markDown(server, error.message);
    return true;
  }

  /** A healthy server at the newest version (preferring one this request has not failed on); waits while there is none. */
  private async acquire(key: string | undefined, tried: Set<FleetServer>, signal?: AbortSignal): Promise<FleetServer> {
    let checked = false;
    for (;;) {
      if (this.closed) throw new ArborError('sampler fleet: closed');
      if (signal?.aborted) throw signal.reason;
      const ready = this.servers.filter((s) => s.state === 'healthy' && s.version === this.target.version);
      if (ready.length) {
        const fresh = ready.filter((s) => !tried.has(s));
        const pool = fresh.length ? fresh : ready;
        if (key !== undefined) return rendezvous(pool, key, (s) => s.url);
        return pool.reduce((a, b) => (b.gate.inFlight < a.gate.inFlight ? b : a));
      }
      if (this.allDownSince !== undefined) {
        const left = this.allDownSince + this.unavailableMs - Date.now();
        if (left > 0) await this.changed(left, signal);
        else if (checked) throw this.unavailable();
        else {
          // before giving up, ask every server once more (one may be back between two probes)
          checked = true;
          await Promise.all(this.servers.map((s) => this.probe(s)));
        }
      } else await this.changed(undefined, signal);
    }
  }

  private unavailable(): SamplerFleetError {
    const seconds = +(this.unavailableMs / 1000).toFixed(1);
    const lines = this.servers.map(
      (s) => `${s.url}: ${s.downReason ?? 'down'}${s.lastError ? `; last ${s.lastError}` : ''}`,
    );
    return new SamplerFleetError(
      `no sampling server answered for ${seconds} s (engine.sampler.unavailableSeconds): ` +
        `the run stops; resume it from its last checkpoint (arbor train --resume RUN_DIR) once a server is back\n  ` +
        lines.join('\n  '),
      { server: this.servers.map((s) => s.url).join(', '), recoverable: false },
    );
  }

  /** Wait for a change of any server's state or of the target (or `timeoutMs`, or an abort). */
  private changed(timeoutMs: number | undefined, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const done = () => {
        this.waiters.delete(done);
        if (timer) clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        resolve();
      };
      const onAbort = () => {
        done();
        reject(signal!.reason);
      };
      const timer = timeoutMs !== undefined ? setTimeout(done, timeoutMs) : undefined;
      this.waiters.add(done);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  private notify(): void {
    this.allDownSince = this.servers.every((s) => s.state === 'down') ? (this.allDownSince ?? Date.now()) : undefined;
    for (const w of [...this.waiters]) w();
  }

  /**
   * Load `target` on one server inside its gate (its requests in flight finish first); records the
   * version it then holds. With nothing to load (weightSync none) only the version changes, at once.
   */
  private async load(server: FleetServer, target: FleetTarget, signal?: AbortSignal): Promise<void> {
    const sync = this.sync;
    const token =
      sync && target.path !== undefined
        ? await server.gate.exclusive(() => sync(server.client, target, signal))
        : undefined;
    server.version = target.version;
    server.token = token;
  }

  private markDown(server: FleetServer, reason: string): void {
    if (server.state === 'down' || this.closed) return;
    server.downReason = reason;
    server.lastError = undefined;
    server.state = 'down';
    server.serverErrors = 0;
    // a server that fails again soon after coming back (healthy /health, failing requests) is probed ever less often
    const flapping = server.backAt !== undefined && Date.now() - server.backAt < FLAPPING_MS;
    server.probeDelayMs = flapping ? Math.min(server.probeDelayMs * 2, this.probeMs * 16) : this.probeMs;
    this.counters.downs++;
    this.log(`sampler: ${server.url} is down (${reason}); probing ${server.url}/health`);
    this.scheduleProbe(server);
    this.notify();
  }

  private scheduleProbe(server: FleetServer): void {
    if (this.closed) return;
    server.probeTimer = setTimeout(() => {
      server.probeTimer = undefined;
      void this.probe(server);
    }, server.probeDelayMs);
    server.probeTimer.unref();
  }

  /**
   * GET /health; an answer brings the server back through a resync, silence doubles the wait. One at a
   * time. vLLM answers 200 with no body, 503 once its engine is dead (vllm-project/vllm@98b137c6
   * vllm/entrypoints/serve/instrumentator/health.py); SGLang and arbor serve answer 200.
   */
  private probe(server: FleetServer): Promise<void> {
    server.probing ??= this.probeOnce(server).finally(() => (server.probing = undefined));
    return server.probing;
  }

  private async probeOnce(server: FleetServer): Promise<void> {
    if (this.closed || server.state !== 'down') return;
    if (server.probeTimer) clearTimeout(server.probeTimer);
    server.probeTimer = undefined;
    try {
      const timeoutMs = Math.min(PROBE_TIMEOUT_MS, server.client.retry.timeoutMs || PROBE_TIMEOUT_MS);
      await server.client.call('/health', undefined, { accept: 'text', maxAttempts: 1, timeoutMs });
    } catch (error) {
      server.lastError = `health probe: ${(error as Error).message.replace(`${server.url}/health: `, '')}`;
      server.probeDelayMs = Math.min(server.probeDelayMs * 2, this.probeMs * 16);
      this.scheduleProbe(server);
      return;
    }
    if (server.state === 'down') await this.resync(server);
  }

  /** Bring a server that answers to the newest version, then put it back in rotation. */
  private async resync(server: FleetServer): Promise<void> {
    server.state = 'syncing';
    this.notify();
    for (;;) {
      const target = this.target;
      try {
        await this.load(server, target);
      } catch (error) {
        this.markDown(server, `loading weight version ${target.version} failed: ${(error as Error).message}`);
        return;
      }
      if (this.closed) return;
      if (this.target === target) break;
    }
    server.state = 'healthy';
    server.serverErrors = 0;
    server.downReason = undefined;
    server.backAt = Date.now();
    this.counters.resyncs++;
    this.log(`sampler: ${server.url} is back, at weight version ${server.version}`);
    this.notify();
  }

  private log(line: string): void {
    this.options.log?.(line);
  }
}

/** The error of a request that failed on every attempt, saying how many there were. */
function withAttempts(error: unknown, attempts: number): unknown {
  if (error instanceof Error && attempts > 1) error.message = `${error.message} (after ${attempts} attempts)`;
  return error;
}
