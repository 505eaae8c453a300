/**
 * `arbor serve`: an HTTP server exposing a local Sampler/Trainer through the APIs the remote clients
 * speak — vLLM's OpenAI-compatible routes (serve/vllm/: `/v1/completions`, `/v1/chat/completions`,
 * SSE streaming, `/v1/models`, `/tokenize`, `/detokenize`, runtime LoRA adapters), SGLang-style
 * `/generate` + `/abort_request` + `/update_weights_from_disk`, the Tinker-compatible API under
 * `/api/v1/*` (serve/tinker/: SDK 0.3–0.24.1 bodies, checkpoint archives), and `/health`. Usage is
 * reported with the one accounting of wire/usage.ts. Every request body is validated: 400/404/
 * 409 name the offending field (in vLLM's error envelope on its routes), 413 for a request over
 * `--max-batch-tokens`, 429 when `--max-concurrent` sampling requests are running; 5xx only for server
 * faults; it never crashes on input. Sampling is sliced (serve/limits.ts) so `/health` stays
 * responsive; a client that disconnects cancels its completion; `/update_weights_from_disk` loads and
 * validates a whole checkpoint inside the weight roots before swapping it in (serve/weights.ts).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { disconnectSignal, parseJson, readBody, send } from './http.js';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SampleRequest, Sampler, Trainer } from '../engine/types.js';
import { ArborError } from '../core/errors.js';
import { usageToWire } from '../wire/usage.js';
import { TinkerService, type TinkerModels } from './tinker/service.js';
import { SampleGuard, servedLimits, type ServeLimits } from './limits.js';
import { RequestWorker } from './request-worker.js';
import type { LoraRegistry } from './vllm/lora.js';
import type { ModelDefaults, ServeTokenizer } from './text.js';
import { VllmRoutes } from './vllm/routes.js';
import type { ToolCallSettings } from './vllm/chat.js';
import { stopList, topP } from './vllm/params.js';
import { resolveWeightsPath } from './weights.js';
import { BadRequest, boundedInt, boundedNum, errorReply, NotFound, optBool, tokenList } from './validate.js';
import type { ServeReply } from './validate.js';

export type { ServeReply } from './validate.js';

export interface ServeOptions {
  sampler: Sampler;
  /** Optional: enables the Tinker-compatible training endpoints (full fine-tuning of the served model). */
  trainer?: Trainer;
  /** Tinker training of a Hugging Face model: LoRA per create_model, saved adapters, archives (serve/engine.ts). */
  tinkerModels?: TinkerModels;
  /** Name reported by /v1/models and accepted as `model`. */
  modelName?: string;
  /** /v1/models `root` of the served model (default: its name). */
  modelRoot?: string;
  /** The tokenizer: text prompts, chat templates, /tokenize, output text (absent: token ids only). */
  tokenizer?: ServeTokenizer;
  /** Without a tokenizer: decode token ids to text for the `text` fields (optional). */
  decode?: (tokens: number[]) => string;
  /** --skip-tokenizer-init: no tokenizer on purpose (logprob token names need return_tokens_as_token_ids). */
  skipTokenizerInit?: boolean;
  /** generation_config.json's sampling defaults (vLLM --generation-config auto). */
  generationDefaults?: ModelDefaults['generation'];
  /** LoRA adapters a request may name as `model`; with it, /v1/load_lora_adapter and /v1/unload_lora_adapter. */
  lora?: LoraRegistry;
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
  /** Every end id (generation_config's eos_token_id list); overrides eosTokenId. */
  eosTokenIds?: number[];
  /** Tool-call parsing of chat replies (vLLM --enable-auto-tool-choice, --tool-call-parser); default off. */
  toolCalls?: ToolCallSettings;
  /** Long-poll time for retrieve_future before answering {type: "try_again"} (ms). */
  futureWaitMs?: number;
  /** Where save_weights / load_weights keep trainer states (default: <tmpdir>/arbor-serve-state). */
  stateDir?: string;
}

/** Routes answered with vLLM's error envelope. */
const VLLM_ROUTES = new Set([
  '/v1/completions',
  '/v1/chat/completions',
  '/v1/models',
  '/tokenize',
  '/detokenize',
  '/v1/load_lora_adapter',
  '/v1/unload_lora_adapter',
]);

export class ArborServer {
  private server: Server | undefined;
  private futureCounter = 0;
  /** The Tinker-compatible API under /api/v1/* (serve/tinker/service.ts). */
  readonly tinker: TinkerService;
  /** The vLLM routes (serve/vllm/routes.ts). */
  readonly vllm: VllmRoutes;
  private readonly running = new Map<string, AbortController>();
  /** Requests answered, by route (for tests and /health). */
  readonly counters: Record<string, number> = {};
  /** The limits in force (defaults, the model's shape, then options.limits). */
  readonly limits: ServeLimits;
  /** Request checks, the concurrency bound, sliced sampling and the weight lock. */
  readonly guard: SampleGuard;
  private readonly eosIds: number[];
  /** Large bodies and long prompt texts are parsed and encoded here, off the event loop. */
  readonly work: RequestWorker;

  constructor(readonly options: ServeOptions) {
    this.limits = servedLimits(options.sampler, options.limits);
    this.guard = new SampleGuard(options.sampler, this.limits);
    this.work = new RequestWorker(options.tokenizer);
    this.eosIds = options.eosTokenIds ?? (options.eosTokenId === undefined ? [] : [options.eosTokenId]);
    this.tinker = new TinkerService({
      guard: this.guard,
      sampler: options.sampler,
      trainer: options.trainer,
      models: options.tinkerModels,
      modelName: this.modelName,
      stateDir: options.stateDir ?? join(tmpdir(), 'arbor-serve-state'),
      futureWaitMs: options.futureWaitMs ?? 30_000,
    });
    this.vllm = new VllmRoutes({
      modelName: this.modelName,
      modelRoot: options.modelRoot ?? this.modelName,
      sampler: options.sampler,
      guard: this.guard,
      tokenizer: options.tokenizer,
      work: this.work,
      decode: options.decode,
      skipTokenizerInit: options.skipTokenizerInit === true,
      defaults: { eosIds: this.eosIds, generation: options.generationDefaults ?? {} },
      lora: options.lora,
      toolCalls: options.toolCalls,
    });
  }

  /** Listen on host:port; a port in use (or not allowed) rejects with a one-line ArborError naming it. */
  async listen(port = 0, host = '127.0.0.1'): Promise<string> {
    const server = createServer((req, res) => void this.handle(req, res));
    server.keepAliveTimeout = 30_000;
    await new Promise<void>((resolve, reject) => {
      server.once('error', (error: NodeJS.ErrnoException) => {
        const why =
          error.code === 'EADDRINUSE'
            ? 'is already in use (another server is listening there; pick another with --port)'
            : error.code === 'EACCES'
              ? 'is not allowed for this user (pick a port above 1023 with --port)'
              : `cannot be opened (${error.code ?? error.message})`;
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
    await this.work.close();
    if (!this.server) return;
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server!.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const disconnected = disconnectSignal(res);
    let reply: ServeReply;
    try {
      // refused by its size alone past --max-request-bytes (413), before anything is parsed
      const body = req.method === 'POST' ? await readBody(req, this.limits.maxRequestBytes) : undefined;
      reply = await this.dispatch(req.method ?? 'GET', req.url ?? '/', body, disconnected);
    } catch (error) {
      reply = errorReply(error, VLLM_ROUTES.has((req.url ?? '/').split('?')[0]));
    }
    await send(res, reply);
  }

  /**
   * Answer one request in process (no socket): what the HTTP handler does after reading the body.
   * `body` is the raw body (undefined for GET); a streamed reply comes back whole, as its SSE text.
   * Used by the fuzz tests and benches.
   */
  async handleRequest(method: string, rawUrl: string, body?: string | Buffer): Promise<ServeReply> {
    const reply = await this.dispatch(method, rawUrl, body);
    if (!reply.events) return reply;
    let text = '';
    for await (const event of reply.events) text += event;
    return { status: reply.status, body: text, raw: { contentType: 'text/event-stream', data: text } };
  }

  private async dispatch(
    method: string,
    rawUrl: string,
    body?: string | Buffer,
    signal?: AbortSignal,
  ): Promise<ServeReply> {
    const url = rawUrl.split('?')[0];
    // bounded: arbitrary URLs from clients do not grow the map without end
    if (this.counters[url] !== undefined || Object.keys(this.counters).length < 256)
      this.counters[url] = (this.counters[url] ?? 0) + 1;
    try {
      const parsed =
        body === undefined
          ? undefined
          : typeof body === 'string'
            ? parseJson(body)
            : await this.work.parseJson(body, this.limits.maxPromptTokens);
      return await this.route(method, url, parsed, signal);
    } catch (error) {
      return errorReply(error, VLLM_ROUTES.has(url));
    }
  }

  private async route(method: string, url: string, body: unknown, signal?: AbortSignal): Promise<ServeReply> {
    if (body !== undefined && body !== null && (typeof body !== 'object' || Array.isArray(body)))
      throw new BadRequest('request body must be a JSON object');
    const b = (body ?? {}) as Record<string, unknown>;
    const ok = (value: unknown): ServeReply => ({ status: 200, body: value });
    if (method === 'GET' && (url === '/health' || url === '/api/v1/healthz')) {
      const toolParseFailures = this.vllm.toolParseFailures;
      return ok({
        status: 'ok',
        weight_version: this.options.sampler.weightVersion(),
        tool_parse_failures: toolParseFailures,
      });
    }
    if (method === 'GET' && url === '/v1/models') return ok(this.vllm.models());
    if (url.startsWith('/api/v1/')) {
      const archive = method === 'GET' ? this.tinker.archive(url.slice('/api/v1/'.length)) : undefined;
      return archive ?? ok(await this.tinker.handle(method, url.slice('/api/v1/'.length), b));
    }
    if (method !== 'POST') throw new NotFound(`${method} ${url}: no such route`);
    switch (url) {
      case '/v1/completions':
        return this.vllm.completions(b, signal);
      case '/v1/chat/completions':
        return this.vllm.chat(b, signal);
      case '/tokenize':
        return ok(await this.vllm.tokenize(b));
      case '/detokenize':
        return ok(await this.vllm.detokenize(b));
      case '/v1/load_lora_adapter':
        return this.vllm.loadLora(b);
      case '/v1/unload_lora_adapter':
        return this.vllm.unloadLora(b);
      case '/generate':
        return ok(await this.generate(b));
      case '/abort_request':
        if (b.rid !== undefined && typeof b.rid !== 'string' && typeof b.rid !== 'number')
          throw new BadRequest('field "rid" must be a string');
        this.running.get(String(b.rid))?.abort();
        return ok({ success: true });
      case '/update_weights_from_disk':
        return ok(await this.updateWeights(b));
      default:
        throw new NotFound(`POST ${url}: no such route`);
    }
  }

  private get modelName(): string {
    return this.options.modelName ?? 'arbor-nano';
  }

  /** The stop tokens of a request: its own, plus the end-of-sequence tokens unless ignore_eos. */
  private stops(given: number[] | undefined, ignoreEos: boolean): number[] | undefined {
    const eos = ignoreEos ? [] : this.eosIds.filter((id) => !given?.includes(id));
    return eos.length ? [...(given ?? []), ...eos] : given;
  }

  private async generate(b: Record<string, unknown>): Promise<unknown> {
    const batched =
      Array.isArray(b.input_ids) && b.input_ids.length > 0 && Array.isArray((b.input_ids as unknown[])[0]);
    // an input over the prompt limit is refused by its length, before its ids are checked one by one
    const input = (x: unknown, field: string) => {
      const why = Array.isArray(x) ? this.guard.promptLengthProblem(x.length, field) : undefined;
      if (why) throw new BadRequest(why);
      return tokenList(x, field);
    };
    const inputs = batched
      ? (b.input_ids as unknown[]).map((x, i) => input(x, `input_ids[${i}]`))
      : [input(b.input_ids, 'input_ids')];
    if (inputs.length > this.limits.maxN)
      throw new BadRequest(
        `field "input_ids": ${inputs.length} inputs in one request, over the limit of ${this.limits.maxN} (--max-n)`,
      );
    const paramsList = Array.isArray(b.sampling_params)
      ? (b.sampling_params as unknown[])
      : inputs.map(() => b.sampling_params ?? {});
    if (paramsList.length !== inputs.length)
      throw new BadRequest(`field "sampling_params": ${paramsList.length} entries for ${inputs.length} inputs`);
    if (Array.isArray(b.rid) && b.rid.length !== inputs.length)
      throw new BadRequest(`field "rid": ${b.rid.length} entries for ${inputs.length} inputs`);
    if (
      b.rid !== undefined &&
      b.rid !== null &&
      !Array.isArray(b.rid) &&
      typeof b.rid !== 'string' &&
      typeof b.rid !== 'number'
    )
      throw new BadRequest('field "rid" must be a string or an array of strings');
    const rids = Array.isArray(b.rid)
      ? (b.rid as unknown[]).map(String)
      : inputs.map((_, i) =>
          b.rid !== undefined && b.rid !== null && !batched ? String(b.rid) : `gen-${++this.futureCounter}-${i}`,
        );
    const k = boundedInt(b.top_logprobs_num, 'top_logprobs_num', 0, 0, this.limits.maxLogprobs);
    optBool(b.return_logprob, 'return_logprob', false);
    const requests = inputs.map((tokens, i) => {
      const raw = paramsList[i] ?? {};
      const field = (name: string) => `sampling_params${batched ? `[${i}]` : ''}.${name}`;
      if (typeof raw !== 'object' || Array.isArray(raw))
        throw new BadRequest(`field "${field('').slice(0, -1)}" must be an object`);
      const p = raw as Record<string, unknown>;
      const request: SampleRequest = {
        tokens,
        n: 1,
        maxTokens: boundedInt(p.max_new_tokens, field('max_new_tokens'), 128, 1, Number.MAX_SAFE_INTEGER),
        temperature: boundedNum(p.temperature, field('temperature'), 1, 0, 1e4),
        topP: topP(p.top_p, field('top_p')),
        topK: boundedInt(p.top_k, field('top_k'), -1, -1, Number.MAX_SAFE_INTEGER),
        stopTokens: this.stops(
          p.stop_token_ids === undefined || p.stop_token_ids === null
            ? undefined
            : stopList(p.stop_token_ids, field('stop_token_ids')),
          optBool(p.ignore_eos, field('ignore_eos'), false),
        ),
        seed:
          p.sampling_seed === undefined || p.sampling_seed === null
            ? undefined
            : boundedInt(p.sampling_seed, field('sampling_seed'), 0, -(2 ** 53) + 1, 2 ** 53 - 1),
        topLogprobs: k,
      };
      const per = this.guard.check(request, {
        prompt: batched ? `input_ids[${i}]` : 'input_ids',
        n: 'n',
        maxTokens: field('max_new_tokens'),
      });
      return { request, per };
    });
    this.guard.checkBudget(
      requests.reduce((a, r) => a + r.per, 0),
      batched ? `the batch of ${inputs.length} inputs` : `max_new_tokens = ${requests[0].per}`,
    );
    const release = this.guard.acquire(inputs.length);
    try {
      return await this.runGenerate(requests, rids, k, batched);
    } finally {
      release();
    }
  }

  private async runGenerate(
    requests: Array<{ request: SampleRequest; per: number }>,
    rids: string[],
    k: number,
    batched: boolean,
  ): Promise<unknown> {
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
              output_top_logprobs:
                k > 0 ? (c.topLogprobs ?? []).map((row) => row.map(([t, lp]) => [lp, t, null])) : undefined,
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
    if (typeof b.model_path !== 'string' || !b.model_path)
      throw new BadRequest('field "model_path" must be a non-empty string');
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
