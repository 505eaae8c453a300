/**
 * `arbor serve`: an HTTP server exposing any local Sampler/Trainer through the same APIs the remote
 * clients speak — OpenAI-compatible `/v1/completions` (vLLM token-id fields), SGLang-style
 * `/generate` + `/abort_request` + `/update_weights_from_disk`, the Tinker-compatible training subset
 * under `/api/v1/*` (operations queued in order, results fetched by `retrieve_future`), and `/health`.
 * It validates every request body and answers 400 with the offending field; it never crashes on input.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ArborError } from '../core/errors.js';
import type { Datum, LossSpec, SampleRequest, Sampler, Trainer } from '../engine/types.js';

export interface ServeOptions {
  sampler: Sampler;
  /** Optional: enables the Tinker-compatible training endpoints. */
  trainer?: Trainer;
  /** Name reported by /v1/models and accepted as `model`. */
  modelName?: string;
  /** Decode token ids to text for the `text` fields (optional). */
  decode?: (tokens: number[]) => string;
  /** Reload weights from a path (for /update_weights_from_disk); returns the new weight version. */
  reloadWeights?: (path: string) => Promise<number>;
  /** Long-poll time for retrieve_future before answering {type: "try_again"} (ms). */
  futureWaitMs?: number;
  /** Where save_weights / load_weights keep trainer states (default: <tmpdir>/arbor-serve-state). */
  stateDir?: string;
}

/** A 400 error naming the bad field. */
class BadRequest extends ArborError {
  override name = 'BadRequest';
}

interface FutureEntry {
  done: boolean;
  result?: unknown;
  error?: string;
  waiters: Array<() => void>;
}

export class ArborServer {
  private server: Server | undefined;
  private readonly futures = new Map<string, FutureEntry>();
  private futureCounter = 0;
  private queue: Promise<void> = Promise.resolve();
  private readonly running = new Map<string, AbortController>();
  private modelCreated = false;
  /** Requests answered, by route (for tests and /health). */
  readonly counters: Record<string, number> = {};

  constructor(readonly options: ServeOptions) {}

  async listen(port = 0, host = '127.0.0.1'): Promise<string> {
    this.server = createServer((req, res) => void this.handle(req, res));
    this.server.keepAliveTimeout = 30_000;
    await new Promise<void>((resolve) => this.server!.listen(port, host, resolve));
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
    const url = (req.url ?? '/').split('?')[0];
    this.counters[url] = (this.counters[url] ?? 0) + 1;
    try {
      const body = req.method === 'POST' ? await readJson(req) : undefined;
      const result = await this.route(req.method ?? 'GET', url, body);
      send(res, 200, result);
    } catch (error) {
      if (error instanceof BadRequest) send(res, 400, { error: error.message });
      else if (error instanceof NotFound) send(res, 404, { error: error.message });
      else send(res, 500, { error: (error as Error)?.message ?? String(error) });
    }
  }

  private async route(method: string, url: string, body: unknown): Promise<unknown> {
    const b = (body ?? {}) as Record<string, unknown>;
    if (method === 'GET' && (url === '/health' || url === '/api/v1/healthz')) return { status: 'ok', weight_version: this.options.sampler.weightVersion() };
    if (method === 'GET' && url === '/v1/models') return { object: 'list', data: [{ id: this.modelName, object: 'model' }] };
    if (method !== 'POST') throw new NotFound(`${method} ${url}: no such route`);
    switch (url) {
      case '/v1/completions':
        return this.completions(b);
      case '/generate':
        return this.generate(b);
      case '/abort_request':
        this.running.get(String(b.rid))?.abort();
        return { success: true };
      case '/update_weights_from_disk':
        return this.updateWeights(b);
      default:
        if (url.startsWith('/api/v1/')) return this.tinker(url.slice('/api/v1/'.length), b);
        throw new NotFound(`POST ${url}: no such route`);
    }
  }

  private get modelName(): string {
    return this.options.modelName ?? 'arbor-nano';
  }

  private async completions(b: Record<string, unknown>): Promise<unknown> {
    if (b.model !== undefined && b.model !== this.modelName) throw new BadRequest(`field "model": unknown model ${JSON.stringify(b.model)} (serving ${this.modelName})`);
    const tokens = tokenList(b.prompt, 'prompt');
    const k = optInt(b.logprobs, 'logprobs', 0);
    const request: SampleRequest = {
      tokens,
      n: optInt(b.n, 'n', 1),
      maxTokens: optInt(b.max_tokens, 'max_tokens', 16),
      temperature: optNum(b.temperature, 'temperature', 1),
      topP: optNum(b.top_p, 'top_p', 1),
      topK: optInt(b.top_k, 'top_k', -1),
      stopTokens: b.stop_token_ids === undefined ? undefined : tokenList(b.stop_token_ids, 'stop_token_ids'),
      seed: b.seed === undefined || b.seed === null ? undefined : optInt(b.seed, 'seed', 0),
      topLogprobs: k,
    };
    const [result] = await this.options.sampler.sample([request]);
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
        prompt_tokens: tokens.length,
        completion_tokens: result.usage.tokensDecoded,
        total_tokens: tokens.length + result.usage.tokensDecoded,
        prompt_tokens_details: { cached_tokens: Math.min(tokens.length, result.usage.prefixTokensReused) },
      },
    };
  }

  private async generate(b: Record<string, unknown>): Promise<unknown> {
    const batched = Array.isArray(b.input_ids) && Array.isArray((b.input_ids as unknown[])[0]);
    const inputs = batched ? (b.input_ids as unknown[]).map((x, i) => tokenList(x, `input_ids[${i}]`)) : [tokenList(b.input_ids, 'input_ids')];
    const paramsList = Array.isArray(b.sampling_params) ? (b.sampling_params as unknown[]) : inputs.map(() => b.sampling_params ?? {});
    if (paramsList.length !== inputs.length) throw new BadRequest(`field "sampling_params": ${paramsList.length} entries for ${inputs.length} inputs`);
    const rids = Array.isArray(b.rid) ? (b.rid as unknown[]).map(String) : inputs.map((_, i) => (b.rid !== undefined && !batched ? String(b.rid) : `gen-${++this.futureCounter}-${i}`));
    const k = optInt(b.top_logprobs_num, 'top_logprobs_num', 0);
    const outputs = await Promise.all(
      inputs.map(async (tokens, i) => {
        const p = (paramsList[i] ?? {}) as Record<string, unknown>;
        const field = (name: string) => `sampling_params${batched ? `[${i}]` : ''}.${name}`;
        const request: SampleRequest = {
          tokens,
          n: 1,
          maxTokens: optInt(p.max_new_tokens, field('max_new_tokens'), 128),
          temperature: optNum(p.temperature, field('temperature'), 1),
          topP: optNum(p.top_p, field('top_p'), 1),
          topK: optInt(p.top_k, field('top_k'), -1),
          stopTokens: p.stop_token_ids === undefined ? undefined : tokenList(p.stop_token_ids, field('stop_token_ids')),
          seed: p.sampling_seed === undefined ? undefined : optInt(p.sampling_seed, field('sampling_seed'), 0),
          topLogprobs: k,
        };
        const controller = new AbortController();
        this.running.set(rids[i], controller);
        try {
          const [result] = await this.options.sampler.sample([request], { signal: controller.signal });
          const c = result.completions[0];
          return {
            text: this.options.decode?.(c.tokens) ?? '',
            output_ids: c.tokens,
            meta_info: {
              id: rids[i],
              finish_reason: { type: c.finishReason },
              prompt_tokens: tokens.length,
              completion_tokens: c.tokens.length,
              cached_tokens: Math.min(tokens.length, result.usage.prefixTokensReused),
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
    if (typeof b.model_path !== 'string') throw new BadRequest('field "model_path" must be a string');
    if (!this.options.reloadWeights) throw new BadRequest('this server was started without weight reloading');
    const version = await this.options.reloadWeights(b.model_path);
    return { success: true, message: `loaded ${b.model_path}`, weight_version: version };
  }

  // ---- Tinker-compatible training subset ----
  private async tinker(op: string, b: Record<string, unknown>): Promise<unknown> {
    const trainer = this.options.trainer;
    if (op === 'retrieve_future') return this.retrieveFuture(String(b.request_id ?? ''));
    if (op === 'get_server_capabilities') return { supported_models: [{ model_name: this.modelName }] };
    if (!trainer) throw new NotFound(`/api/v1/${op}: this server has no trainer`);
    switch (op) {
      case 'create_model':
        this.modelCreated = true;
        return { model_id: this.modelName, base_model: this.modelName, request_id: this.enqueue(async () => ({ model_id: this.modelName })) };
      case 'forward_backward': {
        this.checkModel(b);
        const input = (b.forward_backward_input ?? {}) as Record<string, unknown>;
        const loss = lossFromTinker(input.loss_fn, input.loss_fn_config);
        const data = datumsFromTinker(input.data, loss, 'forward_backward_input.data');
        return { request_id: this.enqueue(async () => forwardOutput(await trainer.forwardBackward(data, loss))) };
      }
      case 'forward': {
        this.checkModel(b);
        const input = (b.forward_input ?? {}) as Record<string, unknown>;
        const data = datumsFromTinker(input.data, { kind: 'cross_entropy' }, 'forward_input.data');
        return { request_id: this.enqueue(async () => forwardOutput({ loss: Number.NaN, logprobs: await trainer.logprobs(data), metrics: {} })) };
      }
      case 'optim_step': {
        this.checkModel(b);
        const adam = (b.adam_params ?? {}) as Record<string, unknown>;
        const params = {
          learningRate: optNum(adam.learning_rate, 'adam_params.learning_rate', 1e-4),
          beta1: optNum(adam.beta1, 'adam_params.beta1', 0.9),
          beta2: optNum(adam.beta2, 'adam_params.beta2', 0.95),
          eps: optNum(adam.eps, 'adam_params.eps', 1e-12),
          weightDecay: optNum(adam.weight_decay, 'adam_params.weight_decay', 0),
          gradClipNorm: optNum(adam.grad_clip_norm, 'adam_params.grad_clip_norm', 0),
        };
        return { request_id: this.enqueue(async () => { const r = await trainer.optimStep(params); return { metrics: { grad_norm: r.gradNorm, step: r.step } }; }) };
      }
      case 'save_weights_for_sampler':
        this.checkModel(b);
        return { request_id: this.enqueue(async () => { const r = await trainer.saveForSampler(); return { path: r.path ?? `arbor://${this.modelName}/sampler_weights/v${r.weightVersion}`, weight_version: r.weightVersion }; }) };
      case 'save_weights':
      case 'load_weights': {
        this.checkModel(b);
        if (typeof b.path !== 'string' || !/^[A-Za-z0-9_\-./]+$/.test(b.path) || b.path.includes('..')) throw new BadRequest('field "path" must be a relative name of [A-Za-z0-9_-./]');
        const dir = join(this.options.stateDir ?? join(tmpdir(), 'arbor-serve-state'), b.path);
        return { request_id: this.enqueue(async () => { if (op === 'save_weights') await trainer.saveState(dir); else await trainer.loadState(dir); return { path: b.path, type: op }; }) };
      }
      default:
        throw new NotFound(`/api/v1/${op}: not part of the supported Tinker subset`);
    }
  }

  private checkModel(b: Record<string, unknown>): void {
    if (b.model_id !== this.modelName) throw new BadRequest(`field "model_id": unknown model ${JSON.stringify(b.model_id)}${this.modelCreated ? '' : ' (call create_model first)'}`);
  }

  /** Run `task` after every earlier queued operation; returns the future id. */
  private enqueue(task: () => Promise<unknown>): string {
    const id = String(++this.futureCounter);
    const entry: FutureEntry = { done: false, waiters: [] };
    this.futures.set(id, entry);
    this.queue = this.queue.then(async () => {
      try {
        entry.result = await task();
      } catch (error) {
        entry.error = (error as Error)?.message ?? String(error);
      }
      entry.done = true;
      for (const w of entry.waiters.splice(0)) w();
    });
    return id;
  }

  private async retrieveFuture(id: string): Promise<unknown> {
    const entry = this.futures.get(id);
    if (!entry) throw new NotFound(`future ${JSON.stringify(id)} not found`);
    if (!entry.done) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, this.options.futureWaitMs ?? 30_000);
        entry.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    if (!entry.done) return { type: 'try_again', request_id: id };
    this.futures.delete(id);
    if (entry.error !== undefined) return { error: entry.error, status: 'failed' };
    return entry.result;
  }
}

class NotFound extends ArborError {
  override name = 'NotFound';
}

function forwardOutput(r: { loss: number; logprobs: number[][]; metrics: Record<string, number> }): unknown {
  return {
    loss_fn_output_type: 'logprobs',
    loss_fn_outputs: r.logprobs.map((lp) => ({ logprobs: { data: lp, dtype: 'float32', shape: [lp.length] } })),
    metrics: { 'loss:sum': r.loss, ...r.metrics },
  };
}

function lossFromTinker(name: unknown, config: unknown): LossSpec {
  const c = (config ?? {}) as Record<string, unknown>;
  switch (name) {
    case 'cross_entropy':
      return { kind: 'cross_entropy' };
    case 'importance_sampling':
      return { kind: 'importance_sampling' };
    case 'ppo':
      return { kind: 'ppo', clipLow: 1 - optNum(c.clip_low_threshold, 'loss_fn_config.clip_low_threshold', 0.8), clipHigh: optNum(c.clip_high_threshold, 'loss_fn_config.clip_high_threshold', 1.2) - 1 };
    default:
      throw new BadRequest(`field "loss_fn": unsupported ${JSON.stringify(name)} (cross_entropy, importance_sampling, ppo)`);
  }
}

function datumsFromTinker(raw: unknown, loss: LossSpec, field: string): Datum[] {
  if (!Array.isArray(raw) || raw.length === 0) throw new BadRequest(`field "${field}" must be a non-empty array`);
  return raw.map((d, i) => {
    const where = `${field}[${i}]`;
    const chunks = (d as { model_input?: { chunks?: Array<{ tokens?: unknown }> } })?.model_input?.chunks;
    if (!Array.isArray(chunks)) throw new BadRequest(`field "${where}.model_input.chunks" must be an array`);
    const inputTokens = chunks.flatMap((c, j) => tokenList(c.tokens, `${where}.model_input.chunks[${j}].tokens`));
    const inputs = ((d as { loss_fn_inputs?: Record<string, { data?: unknown }> }).loss_fn_inputs ?? {}) as Record<string, { data?: unknown }>;
    const tensor = (name: string, required: boolean): number[] | undefined => {
      const data = inputs[name]?.data;
      if (data === undefined && !required) return undefined;
      if (!Array.isArray(data) || data.length !== inputTokens.length || !data.every((x) => typeof x === 'number' && Number.isFinite(x))) {
        throw new BadRequest(`field "${where}.loss_fn_inputs.${name}.data" must be ${inputTokens.length} finite numbers`);
      }
      return data as number[];
    };
    const targetTokens = tensor('target_tokens', true)!;
    if (loss.kind === 'cross_entropy') return { inputTokens, targetTokens, weights: tensor('weights', false) ?? inputTokens.map(() => 1) };
    return { inputTokens, targetTokens, weights: inputTokens.map(() => 1), samplingLogprobs: tensor('logprobs', true), advantages: tensor('advantages', true) };
  });
}

function tokenList(value: unknown, field: string): number[] {
  if (!Array.isArray(value) || !value.every((t) => Number.isInteger(t) && t >= 0)) throw new BadRequest(`field "${field}" must be an array of token ids (non-negative integers)`);
  return value as number[];
}

function optNum(value: unknown, field: string, fallback: number): number {
  if (value === undefined || value === null) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value)) throw new BadRequest(`field "${field}" must be a number`);
  return value;
}

function optInt(value: unknown, field: string, fallback: number): number {
  const v = optNum(value, field, fallback);
  if (!Number.isInteger(v)) throw new BadRequest(`field "${field}" must be an integer`);
  return v;
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > 256 * 1024 * 1024) throw new BadRequest('request body larger than 256 MiB');
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (!text) return {};
  try {
    return JSON.parse(text);
  } catch {
    throw new BadRequest('request body is not valid JSON');
  }
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}
