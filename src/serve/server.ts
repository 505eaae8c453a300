/**
 * `arbor serve`: an HTTP server exposing any local Sampler/Trainer through the same APIs the remote
 * clients speak — OpenAI-compatible `/v1/completions` (vLLM token-id fields), SGLang-style
 * `/generate` + `/abort_request` + `/update_weights_from_disk`, the Tinker-compatible API under
 * `/api/v1/*` (serve/tinker.ts: SDK 0.3–0.24.1 bodies), and `/health`. Usage is reported with the one
 * accounting of engine/remote/usage.ts. It validates every request body and answers 400/404/409 naming
 * the offending field; it never crashes on input.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SampleRequest, Sampler, Trainer } from '../engine/types.js';
import { usageToWire } from '../engine/remote/usage.js';
import { TinkerService } from './tinker.js';
import { BadRequest, Conflict, NotFound, optInt, optNum, tokenList } from './validate.js';

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

export class ArborServer {
  private server: Server | undefined;
  private futureCounter = 0;
  /** The Tinker-compatible API under /api/v1/* (serve/tinker.ts). */
  readonly tinker: TinkerService;
  private readonly running = new Map<string, AbortController>();
  /** Requests answered, by route (for tests and /health). */
  readonly counters: Record<string, number> = {};

  constructor(readonly options: ServeOptions) {
    this.tinker = new TinkerService({
      sampler: options.sampler,
      trainer: options.trainer,
      modelName: options.modelName ?? 'arbor-nano',
      stateDir: options.stateDir ?? join(tmpdir(), 'arbor-serve-state'),
      futureWaitMs: options.futureWaitMs ?? 30_000,
    });
  }

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
      else if (error instanceof Conflict) send(res, 409, { error: error.message });
      else send(res, 500, { error: (error as Error)?.message ?? String(error) });
    }
  }

  private async route(method: string, url: string, body: unknown): Promise<unknown> {
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
    if (typeof b.model_path !== 'string') throw new BadRequest('field "model_path" must be a string');
    if (!this.options.reloadWeights) throw new BadRequest('this server was started without weight reloading');
    const version = await this.options.reloadWeights(b.model_path);
    return { success: true, message: `loaded ${b.model_path}`, weight_version: version };
  }
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
