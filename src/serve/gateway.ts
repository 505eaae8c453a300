/**
 * The agent gateway: during a run, an OpenAI-compatible endpoint on 127.0.0.1 (a free port) that the
 * user's unchanged agent calls — `/v1/chat/completions` (streamed and not, tools and tool calls),
 * `/v1/completions` and `/v1/models` — answered by `arbor serve`'s own routes (serve/vllm/routes.ts,
 * serve/vllm/chat.ts) over the run's sampler, with the model's chat template and tool-call format.
 *
 * Every episode gets its own API key (`ctx.apiKey`); a call is attributed to the episode of its key,
 * and a call with no key, an unknown one or the key of a finished episode is answered 401. The
 * episode's sampling policy (the run's temperature, top_p, top_k; one seed per call derived from the
 * episode's seed and the call's arrival index; max tokens capped) replaces the request's own, and
 * every answered call is recorded token-exact (core/episode.ts: prompt ids, sampled ids and their
 * log-probs, the message sent back). Concurrent calls are batched into one engine call
 * (engine/batch-sampler.ts). Request bodies are bounded (413), malformed ones are a 400 naming the field.
 * `close()` frees the port and ends every connection; an episode's `close()` cancels its calls in flight.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { ArborError } from '../core/errors.js';
import type { EpisodeCall } from '../core/episode.js';
import { BatchingSampler } from '../engine/open.js';
import type { Sampler } from '../engine/types.js';
import type { AnsweredCall, CallHooks } from './hooks.js';
import { disconnectSignal, readBody, send } from './http.js';
import { derivedSeed, SampleGuard, servedLimits, type ServeLimits } from './limits.js';
import { RequestWorker } from './request-worker.js';
import type { ServeTokenizer } from './text.js';
import type { ToolCallParserName } from './tool-calls.js';
import { BadRequest, errorReply, NotFound, type ServeReply } from './validate.js';
import { VllmRoutes } from './vllm/routes.js';
import type { SamplingFields } from './vllm/params.js';

export interface GatewayOptions {
  /** The run's sampler (embedded or remote). */
  sampler: Sampler;
  /** The model's tokenizer with its chat template. */
  tokenizer: ServeTokenizer;
  /** Every id that ends a reply (generation_config's eos ids). */
  eosIds: number[];
  /** The model's tool-call format. */
  toolCallParser: ToolCallParserName;
  /** The name /v1/models reports and `model` may give (any `model` is accepted). */
  modelName?: string;
  /** Context length and vocabulary (default: the sampler's model when it exposes them). */
  limits?: Partial<ServeLimits>;
  /** Largest request body in bytes (413 above; default serve/limits.ts's, 16 MiB). */
  maxRequestBytes?: number;
  /** Largest `n` of one request. */
  maxN?: number;
}

/** How an episode's calls are sampled: the run's policy, whatever the request asks. */
export interface EpisodePolicy {
  temperature: number;
  topP: number;
  /** 0 or -1 = off. */
  topK: number;
  /** Tokens one call may sample at most (a request's max_tokens is capped to it). */
  maxTokens: number;
  /** Seed of the episode: call k samples with a seed derived from (seed, k). */
  seed: number;
}

/** An episode while its agent runs. */
export interface GatewayEpisode {
  readonly episodeId: string;
  /** The episode's API key (`Authorization: Bearer <key>`). */
  readonly apiKey: string;
  /** The calls answered so far (arrival order). */
  calls(): EpisodeCall[];
  /** Revoke the key (later calls get 401), cancel calls in flight, and return every call in arrival order. */
  close(): Promise<EpisodeCall[]>;
}

/** The default model name: plain, so client libraries apply no model-specific behaviour (no `gpt-`/`o1` prefix). */
export const GATEWAY_MODEL = 'arbor-policy';

interface OpenEntry {
  episodeId: string;
  policy: EpisodePolicy;
  opened: number;
  calls: EpisodeCall[];
  nextIndex: number;
  inFlight: Set<Promise<unknown>>;
  abort: AbortController;
  closed: boolean;
}

export class AgentGateway {
  private server: Server | undefined;
  private readonly episodes = new Map<string, OpenEntry>();
  private readonly routes: VllmRoutes;
  private readonly batching: BatchingSampler;
  private readonly limits: ServeLimits;
  /** Large bodies and long prompt texts are parsed and encoded here, off the event loop. */
  private readonly work: RequestWorker;
  /** Requests answered, refused for their key (401), and refused as malformed (4xx). */
  readonly counters = { calls: 0, unauthorized: 0, refused: 0 };

  constructor(private readonly o: GatewayOptions) {
    // a batch is sent once every open episode has a call waiting (or after a short idle gap): agents
    // between calls (running a tool, parsing a reply) join the same engine call instead of a later one
    const complete = () => [...this.episodes.values()].every((e) => e.inFlight.size > 0);
    this.batching = new BatchingSampler(o.sampler, { complete, idleMs: 3, maxWaitMs: 50 });
    // concurrency is bounded by episodes (env.concurrency), not here
    const own = { maxN: o.maxN ?? 16, maxConcurrent: 1_000_000, maxRequestBytes: o.maxRequestBytes };
    this.limits = servedLimits(o.sampler, { ...own, ...o.limits });
    this.work = new RequestWorker(o.tokenizer);
    this.routes = new VllmRoutes({
      modelName: o.modelName ?? GATEWAY_MODEL,
      modelRoot: o.modelName ?? GATEWAY_MODEL,
      sampler: this.batching,
      guard: new SampleGuard(this.batching, this.limits),
      tokenizer: o.tokenizer,
      work: this.work,
      skipTokenizerInit: false,
      defaults: { eosIds: o.eosIds, generation: {} },
      toolCalls: { autoToolChoice: true, parser: o.toolCallParser },
    });
  }

  /** Batches sent to the engine, the calls they carried, and requests merged into another for the same context. */
  get batches(): { batches: number; calls: number; merged: number } {
    return { ...this.batching.counts };
  }

  /** Chat replies whose tool-call markup did not parse (returned as content). */
  get toolParseFailures(): number {
    return this.routes.toolParseFailures;
  }

  /** Listen on 127.0.0.1, a free port; returns the base URL clients take (`http://127.0.0.1:PORT/v1`). */
  async listen(): Promise<string> {
    const server = createServer((req, res) => void this.handle(req, res));
    server.keepAliveTimeout = 30_000;
    await new Promise<void>((resolve, reject) => {
      server.once('error', (error) => reject(new ArborError(`agent gateway: cannot listen on 127.0.0.1: ${error}`)));
      server.listen(0, '127.0.0.1', () => resolve());
    });
    this.server = server;
    return this.baseURL;
  }

  get baseURL(): string {
    if (!this.server) throw new ArborError('agent gateway: not listening');
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/v1`;
  }

  /** Open an episode: a fresh key that attributes calls to `episodeId`, sampled under `policy`. */
  open(episodeId: string, policy: EpisodePolicy): GatewayEpisode {
    const apiKey = `arbor-${randomBytes(18).toString('base64url')}`;
    const entry: OpenEntry = {
      episodeId,
      policy,
      opened: Date.now(),
      calls: [],
      nextIndex: 0,
      inFlight: new Set(),
      abort: new AbortController(),
      closed: false,
    };
    this.episodes.set(apiKey, entry);
    const ordered = () => entry.calls.slice().sort((a, b) => a.index - b.index);
    return {
      episodeId,
      apiKey,
      calls: ordered,
      close: async () => {
        entry.closed = true;
        this.episodes.delete(apiKey);
        entry.abort.abort();
        await Promise.allSettled([...entry.inFlight]);
        return ordered();
      },
    };
  }

  /** Stop listening and end every connection (episodes still open are closed too). */
  async close(): Promise<void> {
    for (const entry of this.episodes.values()) {
      entry.closed = true;
      entry.abort.abort();
    }
    this.episodes.clear();
    await this.work.close();
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let reply: ServeReply;
    try {
      reply = await this.answer(req, disconnectSignal(res));
    } catch (error) {
      this.counters.refused++;
      reply = errorReply(error, true);
    }
    await send(res, reply);
  }

  private async answer(req: IncomingMessage, disconnected: AbortSignal): Promise<ServeReply> {
    const url = (req.url ?? '/').split('?')[0];
    const entry = this.episodeOf(req);
    if (!entry) {
      this.counters.unauthorized++;
      return unauthorized(req);
    }
    if (req.method === 'GET' && url === '/v1/models') return { status: 200, body: this.routes.models() };
    if (req.method !== 'POST' || (url !== '/v1/chat/completions' && url !== '/v1/completions'))
      throw new NotFound(
        `${req.method} ${url}: no such route (the gateway serves /v1/chat/completions, /v1/completions and /v1/models)`,
      );
    const limit = this.limits.maxRequestBytes;
    const bytes = await readBody(req, limit, "the agent gateway's limit");
    const body = await this.work.parseJson(bytes, this.limits.maxPromptTokens);
    // the episode may have ended while the body arrived: its key is revoked, and close() has returned its calls
    if (entry.closed) {
      this.counters.unauthorized++;
      return unauthorized(req);
    }
    if (!body || typeof body !== 'object' || Array.isArray(body))
      throw new BadRequest('request body must be a JSON object');
    const b = { ...(body as Record<string, unknown>), model: undefined };
    const signal = AbortSignal.any([disconnected, entry.abort.signal]);
    const hooks = this.hooks(entry, retryCount(req));
    this.counters.calls++;
    const work =
      url === '/v1/chat/completions' ? this.routes.chat(b, signal, hooks) : this.routes.completions(b, signal, hooks);
    entry.inFlight.add(work);
    try {
      const reply = await work;
      // a stream is in flight until its last event is written (its record is made then)
      return reply.events ? { ...reply, events: tracked(entry, reply.events) } : reply;
    } finally {
      entry.inFlight.delete(work);
    }
  }

  /** The open episode of a request's bearer key (undefined: none, unknown, or finished). */
  private episodeOf(req: IncomingMessage): OpenEntry | undefined {
    const auth = req.headers.authorization;
    const key = typeof auth === 'string' && /^Bearer\s+/i.test(auth) ? auth.replace(/^Bearer\s+/i, '').trim() : '';
    const entry = key ? this.episodes.get(key) : undefined;
    return entry && !entry.closed ? entry : undefined;
  }

  /** The episode's policy in place of the request's sampling, and its record of each answered call. */
  private hooks(entry: OpenEntry, retry: number): CallHooks {
    const index = entry.nextIndex++;
    const startedMs = Date.now() - entry.opened;
    return {
      policy: (s: SamplingFields, maxTokens: number) => ({
        sampling: {
          ...s,
          temperature: entry.policy.temperature,
          topP: entry.policy.topP,
          topK: entry.policy.topK,
          seed: derivedSeed(entry.policy.seed >>> 0, index + 1),
        },
        maxTokens: Math.min(maxTokens, entry.policy.maxTokens),
      }),
      record: (call: AnsweredCall) => {
        entry.calls.push({
          index,
          route: call.route,
          promptIds: call.promptIds,
          choices: call.choices,
          weightVersion: call.weightVersion,
          ...(call.messages ? { messages: call.messages as unknown as Array<Record<string, unknown>> } : {}),
          retry,
          startedMs,
          wallMs: Date.now() - entry.opened - startedMs,
          usage: { ...call.usage },
        });
      },
    };
  }
}

/** The events of a stream, counted in flight for its episode from now until the stream ends. */
function tracked(entry: OpenEntry, events: AsyncIterable<string>): AsyncIterable<string> {
  let done!: () => void;
  const finished = new Promise<void>((resolve) => (done = resolve));
  entry.inFlight.add(finished);
  async function* run(): AsyncGenerator<string> {
    try {
      yield* events;
    } finally {
      entry.inFlight.delete(finished);
      done();
    }
  }
  return run();
}

/** OpenAI's reply to a bad key (what clients show as an authentication error). */
function unauthorized(req: IncomingMessage): ServeReply {
  const given = typeof req.headers.authorization === 'string';
  const message = given
    ? 'Incorrect API key provided: this key belongs to no running episode (it is unknown, or its episode has ended)'
    : 'You did not provide an API key: pass the episode key (ctx.apiKey) as the Bearer token';
  return {
    status: 401,
    body: { error: { message, type: 'invalid_request_error', param: null, code: 'invalid_api_key' } },
  };
}

/** `x-stainless-retry-count` (the openai client's retry counter); 0 when absent. */
function retryCount(req: IncomingMessage): number {
  const v = Number(req.headers['x-stainless-retry-count']);
  return Number.isInteger(v) && v > 0 ? Math.min(v, 1000) : 0;
}
