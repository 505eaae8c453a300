/**
 * `arbor serve`: an HTTP server exposing any local Sampler/Trainer through the same APIs the remote
 * clients speak — OpenAI-compatible `/v1/completions` (vLLM token-id fields), SGLang-style
 * `/generate` + `/abort_request` + `/update_weights_from_disk`, the Tinker-compatible API under
 * `/api/v1/*` (serve/tinker.ts: SDK 0.3–0.24.1 bodies), and `/health`. Usage is reported with the one
 * accounting of engine/remote/usage.ts. It validates every request body and answers 400/404/409 naming
 * the offending field, 413 for a request over `--max-batch-tokens`, 429 when `--max-concurrent`
 * sampling requests are running; 5xx only for server faults. It never crashes on input. Sampling is
 * sliced (serve/limits.ts) so `/health` stays responsive; `/update_weights_from_disk` loads and
 * validates a whole checkpoint inside the weight roots before swapping it in (serve/weights.ts).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SampleRequest, SampleResult, Sampler, Trainer } from '../engine/types.js';
import { ArborError } from '../core/errors.js';
import { usageToWire } from '../engine/remote/usage.js';
import { TinkerService } from './tinker.js';
import { DEFAULT_LIMITS, modelShape, SampleGuard, type ServeLimits } from './limits.js';
import { resolveWeightsPath } from './weights.js';
import { BadRequest, boundedInt, boundedNum, Conflict, NotFound, optBool, TooBusy, TooLarge, tokenList } from './validate.js';

export interface ServeOptions {
  sampler: Sampler;
  /** Optional: enables the Tinker-compatible training endpoints. */
  trainer?: Trainer;
  /** Name reported by /v1/models and accepted as `model`. */
  modelName?: string;
  /** Decode token ids to text for the `text` fields (optional). */
  decode?: (tokens: number[]) => string;
  /**
   * Two-phase weight loading for /update_weights_from_disk: read and validate the whole checkpoint at
   * `dir` (its `file` = dir/model.safetensors, both inside `weightsRoots`) without changing anything,
   * and return `commit`, which installs it synchronously and returns the new weight version.
   * `nanoWeightLoader(model)` (serve/weights.ts) is this for the embedded engine.
   */
  prepareWeights?: (dir: string, file: string, asGiven?: string) => Promise<() => number>;
  /** One-step reload (no separate validation; used when prepareWeights is absent), run under the exclusive weight lock. */
  reloadWeights?: (path: string) => Promise<number>;
  /** Directories /update_weights_from_disk may load from (symlinks resolved); none = every path refused. */
  weightsRoots?: string[];
  /** Request limits (serve/limits.ts); context length and vocabulary default to the sampler's model when it exposes them. */
  limits?: Partial<ServeLimits>;
  /** End-of-sequence token: completions and /generate stop at it unless the request sets ignore_eos. */
  eosTokenId?: number;
  /** Long-poll time for retrieve_future before answering {type: "try_again"} (ms). */
  futureWaitMs?: number;
  /** Where save_weights / load_weights keep trainer states (default: <tmpdir>/arbor-serve-state). */
  stateDir?: string;
}

export class ArborServer {
  private server: Server | undefined;
  private futureCounter = 0;
  /** The Tinker-compatible API under /api/v1/* (serve/tinker.ts). */
  readonly tinker: TinkerService;
  private readonly running = new Map<string, AbortController>();
  /** Requests answered, by route (for tests and /health). */
  readonly counters: Record<string, number> = {};
  /** The limits in force (defaults, the model's shape, then options.limits). */
  readonly limits: ServeLimits;
  /** Request checks, the concurrency bound, sliced sampling and the weight lock. */
  readonly guard: SampleGuard;

  constructor(readonly options: ServeOptions) {
    this.limits = { ...DEFAULT_LIMITS, ...definedOnly(modelShape(options.sampler)), ...definedOnly(options.limits ?? {}) };
    this.guard = new SampleGuard(options.sampler, this.limits);
    this.tinker = new TinkerService({
      guard: this.guard,
      sampler: options.sampler,
      trainer: options.trainer,
      modelName: options.modelName ?? 'arbor-nano',
      stateDir: options.stateDir ?? join(tmpdir(), 'arbor-serve-state'),
      futureWaitMs: options.futureWaitMs ?? 30_000,
    });
  }

  /** Listen on host:port; a port in use (or not allowed) rejects with a one-line ArborError naming it. */
  async listen(port = 0, host = '127.0.0.1'): Promise<string> {
    const server = createServer((req, res) => void this.handle(req, res));
    server.keepAliveTimeout = 30_000;
    await new Promise<void>((resolve, reject) => {
      server.once('error', (error: NodeJS.ErrnoException) => {
        const why = error.code === 'EADDRINUSE' ? 'is already in use (another server is listening there; pick another with --port)' : error.code === 'EACCES' ? 'is not allowed for this user (pick a port above 1023 with --port)' : `cannot be opened (${error.code ?? error.message})`;
        reject(new ArborError(`serve: port ${port} on ${host} ${why}`));
      });
      server.listen(port, host, () => resolve());
    });
    this.server = server;
    const address = this.server.address() as AddressInfo;
    return `http://${host}:${address.port}`;
  }

  async close(): Promise<void> {
    for (const c of this.running.values()) c.abort();
    if (!this.server) return;
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server!.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let reply: ServeReply;
    try {
      const body = req.method === 'POST' ? await readBody(req) : undefined;
      reply = await this.handleRequest(req.method ?? 'GET', req.url ?? '/', body);
    } catch (error) {
      reply = errorReply(error);
    }
    if (!res.headersSent && !res.destroyed) send(res, reply);
  }

  /**
   * Answer one request in process (no socket): what the HTTP handler does after reading the body.
   * `body` is the raw body (undefined for GET). Used by the fuzz tests and benches.
   */
  async handleRequest(method: string, rawUrl: string, body?: string | Buffer): Promise<ServeReply> {
    const url = rawUrl.split('?')[0];
    // bounded: arbitrary URLs from clients do not grow the map without end
    if (this.counters[url] !== undefined || Object.keys(this.counters).length < 256) this.counters[url] = (this.counters[url] ?? 0) + 1;
    try {
      const parsed = body === undefined ? undefined : parseJson(body);
      const result = await this.route(method, url, parsed);
      return { status: 200, body: result };
    } catch (error) {
      return errorReply(error);
    }
  }

  private async route(method: string, url: string, body: unknown): Promise<unknown> {
    if (body !== undefined && body !== null && (typeof body !== 'object' || Array.isArray(body))) throw new BadRequest('request body must be a JSON object');
    const b = (body ?? {}) as Record<string, unknown>;
    if (method === 'GET' && (url === '/health' || url === '/api/v1/healthz')) return { status: 'ok', weight_version: this.options.sampler.weightVersion() };
    if (method === 'GET' && url === '/v1/models') return { object: 'list', data: [{ id: this.modelName, object: 'model' }] };
    if (url.startsWith('/api/v1/')) return this.tinker.handle(method, url.slice('/api/v1/'.length), b);
    if (method !== 'POST') throw new NotFound(`${method} ${url}: no such route`);
    switch (url) {
      case '/v1/completions':
        return this.completions(b);
      case '/generate':
        return this.generate(b);
      case '/abort_request':
        if (b.rid !== undefined && typeof b.rid !== 'string' && typeof b.rid !== 'number') throw new BadRequest('field "rid" must be a string');
        this.running.get(String(b.rid))?.abort();
        return { success: true };
      case '/update_weights_from_disk':
        return this.updateWeights(b);
      default:
        throw new NotFound(`POST ${url}: no such route`);
    }
  }

  private get modelName(): string {
    return this.options.modelName ?? 'arbor-nano';
  }

  /** The stop tokens of a request: its own, plus the end-of-sequence token unless ignore_eos. */
  private stops(given: number[] | undefined, ignoreEos: boolean): number[] | undefined {
    const eos = this.options.eosTokenId;
    if (eos === undefined || ignoreEos || given?.includes(eos)) return given;
    return [...(given ?? []), eos];
  }

  private async completions(b: Record<string, unknown>): Promise<unknown> {
    if (b.model !== undefined && b.model !== this.modelName) throw new BadRequest(`field "model": unknown model ${JSON.stringify(b.model)} (serving ${this.modelName})`);
    const tokens = tokenList(b.prompt, 'prompt');
    const k = boundedInt(b.logprobs, 'logprobs', 0, 0, this.limits.maxLogprobs);
    const request: SampleRequest = {
      tokens,
      n: boundedInt(b.n, 'n', 1, 1, this.limits.maxN, ' (--max-n)'),
      maxTokens: boundedInt(b.max_tokens, 'max_tokens', 16, 1, Number.MAX_SAFE_INTEGER),
      temperature: boundedNum(b.temperature, 'temperature', 1, 0, 1e4),
      topP: topP(b.top_p, 'top_p'),
      topK: boundedInt(b.top_k, 'top_k', -1, -1, Number.MAX_SAFE_INTEGER),
      stopTokens: this.stops(b.stop_token_ids === undefined || b.stop_token_ids === null ? undefined : stopList(b.stop_token_ids, 'stop_token_ids'), optBool(b.ignore_eos, 'ignore_eos', false)),
      seed: b.seed === undefined || b.seed === null ? undefined : boundedInt(b.seed, 'seed', 0, -(2 ** 53) + 1, 2 ** 53 - 1),
      topLogprobs: k,
    };
    optBool(b.return_token_ids, 'return_token_ids', false);
    if (optBool(b.stream, 'stream', false)) throw new BadRequest('field "stream": streaming is not supported by arbor serve (send stream: false)');
    optBool(b.return_tokens_as_token_ids, 'return_tokens_as_token_ids', false);
    const per = this.guard.check(request, { prompt: 'prompt', n: 'n', maxTokens: 'max_tokens' });
    this.guard.checkBudget((request.n ?? 1) * per, `n × max_tokens = ${request.n} × ${per}`);
    const release = this.guard.acquire();
    let result: SampleResult;
    try {
      result = await this.guard.sample(request, per);
    } finally {
      release();
    }
    const usage = usageToWire(result.usage);
    const asId = b.return_tokens_as_token_ids === true;
    const tokenName = (t: number) => (asId ? `token_id:${t}` : this.options.decode?.([t]) ?? `token_id:${t}`);
    return {
      id: `cmpl-${++this.futureCounter}`,
      object: 'text_completion',
      model: this.modelName,
      choices: result.completions.map((c, index) => ({
        index,
        text: this.options.decode?.(c.tokens) ?? '',
        token_ids: b.return_token_ids === true ? c.tokens : undefined,
        finish_reason: c.finishReason,
        logprobs: k > 0 ? {
          tokens: c.tokens.map(tokenName),
          token_logprobs: c.logprobs,
          top_logprobs: (c.topLogprobs ?? c.tokens.map(() => [])).map((row) => Object.fromEntries(row.map(([t, lp]) => [tokenName(t), lp]))),
          text_offset: c.tokens.map(() => 0),
        } : null,
      })),
      usage: {
        prompt_tokens: usage.prompt_tokens,
        completion_tokens: usage.completion_tokens,
        total_tokens: usage.prompt_tokens + usage.completion_tokens,
        prompt_tokens_details: { cached_tokens: usage.cached_tokens },
      },
    };
  }

  private async generate(b: Record<string, unknown>): Promise<unknown> {
    const batched = Array.isArray(b.input_ids) && b.input_ids.length > 0 && Array.isArray((b.input_ids as unknown[])[0]);
    const inputs = batched ? (b.input_ids as unknown[]).map((x, i) => tokenList(x, `input_ids[${i}]`)) : [tokenList(b.input_ids, 'input_ids')];
    if (inputs.length > this.limits.maxN) throw new BadRequest(`field "input_ids": ${inputs.length} inputs in one request, over the limit of ${this.limits.maxN} (--max-n)`);
    const paramsList = Array.isArray(b.sampling_params) ? (b.sampling_params as unknown[]) : inputs.map(() => b.sampling_params ?? {});
    if (paramsList.length !== inputs.length) throw new BadRequest(`field "sampling_params": ${paramsList.length} entries for ${inputs.length} inputs`);
    if (Array.isArray(b.rid) && b.rid.length !== inputs.length) throw new BadRequest(`field "rid": ${b.rid.length} entries for ${inputs.length} inputs`);
    if (b.rid !== undefined && b.rid !== null && !Array.isArray(b.rid) && typeof b.rid !== 'string' && typeof b.rid !== 'number') throw new BadRequest('field "rid" must be a string or an array of strings');
    const rids = Array.isArray(b.rid) ? (b.rid as unknown[]).map(String) : inputs.map((_, i) => (b.rid !== undefined && b.rid !== null && !batched ? String(b.rid) : `gen-${++this.futureCounter}-${i}`));
    const k = boundedInt(b.top_logprobs_num, 'top_logprobs_num', 0, 0, this.limits.maxLogprobs);
    optBool(b.return_logprob, 'return_logprob', false);
    const requests = inputs.map((tokens, i) => {
      const raw = paramsList[i] ?? {};
      const field = (name: string) => `sampling_params${batched ? `[${i}]` : ''}.${name}`;
      if (typeof raw !== 'object' || Array.isArray(raw)) throw new BadRequest(`field "${field('').slice(0, -1)}" must be an object`);
      const p = raw as Record<string, unknown>;
      const request: SampleRequest = {
        tokens,
        n: 1,
        maxTokens: boundedInt(p.max_new_tokens, field('max_new_tokens'), 128, 1, Number.MAX_SAFE_INTEGER),
        temperature: boundedNum(p.temperature, field('temperature'), 1, 0, 1e4),
        topP: topP(p.top_p, field('top_p')),
        topK: boundedInt(p.top_k, field('top_k'), -1, -1, Number.MAX_SAFE_INTEGER),
        stopTokens: this.stops(p.stop_token_ids === undefined || p.stop_token_ids === null ? undefined : stopList(p.stop_token_ids, field('stop_token_ids')), optBool(p.ignore_eos, field('ignore_eos'), false)),
        seed: p.sampling_seed === undefined || p.sampling_seed === null ? undefined : boundedInt(p.sampling_seed, field('sampling_seed'), 0, -(2 ** 53) + 1, 2 ** 53 - 1),
        topLogprobs: k,
      };
      const per = this.guard.check(request, { prompt: batched ? `input_ids[${i}]` : 'input_ids', n: 'n', maxTokens: field('max_new_tokens') });
      return { request, per };
    });
    this.guard.checkBudget(requests.reduce((a, r) => a + r.per, 0), batched ? `the batch of ${inputs.length} inputs` : `max_new_tokens = ${requests[0].per}`);
    const release = this.guard.acquire(inputs.length);
    try {
      return await this.runGenerate(requests, rids, k, batched);
    } finally {
      release();
    }
  }

  private async runGenerate(requests: Array<{ request: SampleRequest; per: number }>, rids: string[], k: number, batched: boolean): Promise<unknown> {
    const outputs = await Promise.all(
      requests.map(async ({ request, per }, i) => {
        const controller = new AbortController();
        this.running.set(rids[i], controller);
        try {
          const result = await this.guard.sample(request, per, controller.signal);
          const c = result.completions[0];
          const usage = usageToWire(result.usage);
          return {
            text: this.options.decode?.(c.tokens) ?? '',
            output_ids: c.tokens,
            meta_info: {
              id: rids[i],
              finish_reason: { type: c.finishReason },
              prompt_tokens: usage.prompt_tokens,
              completion_tokens: usage.completion_tokens,
              cached_tokens: usage.cached_tokens,
              weight_version: result.weightVersion,
              output_token_logprobs: c.tokens.map((t, j) => [c.logprobs[j], t, null]),
              output_top_logprobs: k > 0 ? (c.topLogprobs ?? []).map((row) => row.map(([t, lp]) => [lp, t, null])) : undefined,
            },
          };
        } finally {
          this.running.delete(rids[i]);
        }
      }),
    );
    return batched ? outputs : outputs[0];
  }

  private async updateWeights(b: Record<string, unknown>): Promise<unknown> {
    if (typeof b.model_path !== 'string' || !b.model_path) throw new BadRequest('field "model_path" must be a non-empty string');
    const { prepareWeights, reloadWeights } = this.options;
    if (!prepareWeights && !reloadWeights) throw new BadRequest('this server was started without weight reloading');
    const { dir, file } = resolveWeightsPath(b.model_path, this.options.weightsRoots ?? []);
    let version: number;
    if (prepareWeights) {
      // read and validate everything first; nothing served changes unless all of it is good
      const commit = await prepareWeights(dir, file, b.model_path);
      version = await this.guard.gate.exclusive(() => commit());
    } else {
      version = await this.guard.gate.exclusive(() => reloadWeights!(dir));
    }
    return { success: true, message: `loaded ${b.model_path}`, weight_version: version };
  }
}

/** One HTTP answer: status, JSON body, extra headers. */
export interface ServeReply {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

/** Client errors by type; anything else is a server fault (500). */
function errorReply(error: unknown): ServeReply {
  const message = (error as Error)?.message ?? String(error);
  if (error instanceof BadRequest) return { status: 400, body: { error: message } };
  if (error instanceof TooLarge) return { status: 413, body: { error: message } };
  if (error instanceof TooBusy) return { status: 429, body: { error: message }, headers: { 'retry-after': '1' } };
  if (error instanceof NotFound) return { status: 404, body: { error: message } };
  if (error instanceof Conflict) return { status: 409, body: { error: message } };
  return { status: 500, body: { error: message } };
}

/** top_p in (0, 1]. */
function topP(value: unknown, field: string): number {
  const v = boundedNum(value, field, 1, 0, 1);
  if (v <= 0) throw new BadRequest(`field "${field}" must be a number in (0, 1], got ${v}`);
  return v;
}

/** Stop token ids: at most 1024 non-negative integers. */
function stopList(value: unknown, field: string): number[] {
  const list = tokenList(value, field);
  if (list.length > 1024) throw new BadRequest(`field "${field}": ${list.length} stop tokens, at most 1024`);
  return list;
}

function definedOnly<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

const MAX_BODY = 256 * 1024 * 1024;

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > MAX_BODY) throw new TooLarge('request body larger than 256 MiB');
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY) throw new TooLarge('request body larger than 256 MiB');
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

function parseJson(body: string | Buffer): unknown {
  const text = typeof body === 'string' ? body : body.toString('utf8');
  if (!text.trim()) return {};
  try {
    return JSON.parse(text);
  } catch {
    throw new BadRequest('request body is not valid JSON');
  }
}

function send(res: ServerResponse, reply: ServeReply): void {
  const text = JSON.stringify(reply.body);
  res.writeHead(reply.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...reply.headers });
  res.end(text);
}
