/**
 * Trainer client for a Tinker-compatible training service (JSON over HTTP, `/api/v1/*`, pinned to the
 * field names of the Tinker API as served by hosted Tinker and SkyRL tx): `create_model`,
 * `forward_backward` (loss_fn cross_entropy / importance_sampling / ppo with loss_fn_config
 * clip thresholds), `forward`, `optim_step` (adam_params), `save_weights_for_sampler`,
 * `save_weights` / `load_weights`, each answered by a future polled at `retrieve_future` with
 * back-off. Datums map 1:1: model_input = input tokens, loss_fn_inputs = target_tokens, weights,
 * logprobs (sampling), advantages. Tinker's policy losses have no per-token weights, so the client
 * folds Arbor's non-negative weights into the advantages (exact for IS and PPO, which are linear in A).
 */
import { ArborError, EngineCallError } from '../../core/errors.js';
import type { AdamParams, Datum, ForwardBackwardResult, LossExtras, LossSpec, OptimStepResult, Trainer } from '../types.js';
import { JsonClient, type JsonClientOptions } from './http.js';

export interface TinkerClientOptions extends JsonClientOptions {
  /** Base model name the service should create (e.g. "Qwen/Qwen3-4B-Instruct-2507", or "nano"). */
  baseModel: string;
  /** LoRA rank for create_model. */
  loraRank?: number;
  /** Existing model id to attach to instead of creating one. */
  modelId?: string;
  /** Poll interval bounds for retrieve_future (ms). */
  pollMinMs?: number;
  pollMaxMs?: number;
  /** Give up on one future after this long (ms). */
  futureTimeoutMs?: number;
  /** Called after save_weights_for_sampler with the returned path (e.g. to sync a vLLM server). */
  onSamplerWeights?: (path: string, version: number) => Promise<void>;
}

type TensorJSON = { data: number[]; dtype: 'int64' | 'float32'; shape: number[] };

/** The Tinker wire form of one datum. */
export function datumToTinker(datum: Datum, loss: LossSpec): { model_input: { chunks: Array<{ type: 'encoded_text'; tokens: number[] }> }; loss_fn_inputs: Record<string, TensorJSON> } {
  const T = datum.inputTokens.length;
  const tensor = (data: number[], dtype: TensorJSON['dtype']): TensorJSON => ({ data, dtype, shape: [data.length] });
  const inputs: Record<string, TensorJSON> = { target_tokens: tensor(datum.targetTokens, 'int64') };
  if (loss.kind === 'cross_entropy') {
    inputs.weights = tensor(datum.weights, 'float32');
  } else {
    if (!datum.samplingLogprobs || !datum.advantages) throw new ArborError(`tinker: loss ${loss.kind} needs samplingLogprobs and advantages on every datum`);
    inputs.logprobs = tensor(datum.samplingLogprobs, 'float32');
    inputs.advantages = tensor(datum.advantages.map((a, t) => {
      if (datum.weights[t] < 0) throw new ArborError('tinker: negative datum weights cannot be folded into advantages');
      return a * datum.weights[t];
    }), 'float32');
  }
  for (const [k, v] of Object.entries(inputs)) if (v.data.length !== T) throw new ArborError(`tinker: datum field ${k} has length ${v.data.length}, expected ${T}`);
  return { model_input: { chunks: [{ type: 'encoded_text', tokens: datum.inputTokens }] }, loss_fn_inputs: inputs };
}

/** Tinker's loss name and config for an Arbor LossSpec. */
export function lossToTinker(loss: LossSpec): { loss_fn: string; loss_fn_config?: Record<string, number> } {
  switch (loss.kind) {
    case 'cross_entropy':
      return { loss_fn: 'cross_entropy' };
    case 'importance_sampling':
      if (loss.truncateAt !== undefined) throw new ArborError('tinker: truncated importance sampling is not a Tinker built-in loss');
      return { loss_fn: 'importance_sampling' };
    case 'ppo':
      if (loss.dualClip !== undefined || loss.truncateAt !== undefined) throw new ArborError('tinker: dual clip / truncation are not part of Tinker\'s ppo loss');
      return { loss_fn: 'ppo', loss_fn_config: { clip_low_threshold: 1 - loss.clipLow, clip_high_threshold: 1 + loss.clipHigh } };
    case 'gspo':
      throw new ArborError('tinker: gspo is not a Tinker built-in loss (use ppo or importance_sampling)');
  }
}

export class TinkerTrainer implements Trainer {
  readonly specificationVersion = 'arbor.trainer.v1' as const;
  readonly client: JsonClient;
  private modelId: string | undefined;
  private steps = 0;
  private version = 0;

  constructor(readonly options: TinkerClientOptions) {
    this.client = new JsonClient(options);
    this.modelId = options.modelId;
  }

  /** Create (or attach to) the model; called lazily by the first operation. */
  async ensureModel(): Promise<string> {
    if (this.modelId) return this.modelId;
    const reply = await this.client.call<Record<string, unknown>>('/api/v1/create_model', { base_model: this.options.baseModel, lora_config: { rank: this.options.loraRank ?? 32 } });
    if (typeof reply.model_id !== 'string') throw this.malformed('/api/v1/create_model', 'model_id', reply);
    if (reply.request_id !== undefined) await this.awaitFuture(String(reply.request_id));
    this.modelId = reply.model_id;
    return this.modelId;
  }

  async forwardBackward(data: Datum[], loss: LossSpec, extras?: LossExtras): Promise<ForwardBackwardResult> {
    if (extras?.klCoef || extras?.entropyCoef) throw new ArborError('tinker: KL and entropy terms are not Tinker built-in loss options; set them to 0');
    const modelId = await this.ensureModel();
    const { loss_fn, loss_fn_config } = lossToTinker(loss);
    const body: Record<string, unknown> = { model_id: modelId, forward_backward_input: { data: data.map((d) => datumToTinker(d, loss)), loss_fn, ...(loss_fn_config ? { loss_fn_config } : {}) } };
    const result = await this.submit('/api/v1/forward_backward', body);
    return this.parseForwardResult(result, data, '/api/v1/forward_backward');
  }

  async logprobs(data: Datum[]): Promise<number[][]> {
    const modelId = await this.ensureModel();
    const body = { model_id: modelId, forward_input: { data: data.map((d) => datumToTinker(d, { kind: 'cross_entropy' })), loss_fn: 'cross_entropy' } };
    const result = await this.submit('/api/v1/forward', body);
    return this.parseForwardResult(result, data, '/api/v1/forward').logprobs;
  }

  async optimStep(params: AdamParams): Promise<OptimStepResult> {
    const modelId = await this.ensureModel();
    const adam: Record<string, number> = { learning_rate: params.learningRate, beta1: params.beta1 ?? 0.9, beta2: params.beta2 ?? 0.95, eps: params.eps ?? 1e-12 };
    if (params.weightDecay !== undefined) adam.weight_decay = params.weightDecay;
    if (params.gradClipNorm !== undefined) adam.grad_clip_norm = params.gradClipNorm;
    const result = (await this.submit('/api/v1/optim_step', { model_id: modelId, adam_params: adam })) as { metrics?: Record<string, number> } | null;
    this.steps++;
    const gradNorm = result?.metrics?.['grad_norm'] ?? result?.metrics?.['grad_norm:mean'] ?? Number.NaN;
    return { gradNorm, step: this.steps };
  }

  async saveForSampler(): Promise<{ weightVersion: number; path?: string }> {
    const modelId = await this.ensureModel();
    const name = `arbor-v${this.version + 1}`;
    const result = (await this.submit('/api/v1/save_weights_for_sampler', { model_id: modelId, path: name })) as { path?: string };
    if (typeof result?.path !== 'string') throw this.malformed('/api/v1/save_weights_for_sampler', 'path', result);
    this.version++;
    await this.options.onSamplerWeights?.(result.path, this.version);
    return { weightVersion: this.version, path: result.path };
  }

  async saveState(dir: string): Promise<void> {
    const modelId = await this.ensureModel();
    const name = `arbor-state-${dir.replace(/[^A-Za-z0-9_-]+/g, '_').slice(-100)}`;
    const result = (await this.submit('/api/v1/save_weights', { model_id: modelId, path: name })) as { path?: string };
    const { writeFile, mkdir } = await import('node:fs/promises');
    await mkdir(dir, { recursive: true });
    await writeFile(`${dir}/tinker-state.json`, JSON.stringify({ modelId, path: result?.path, steps: this.steps, version: this.version }, null, 2));
  }

  async loadState(dir: string): Promise<void> {
    const { readFile } = await import('node:fs/promises');
    const state = JSON.parse(await readFile(`${dir}/tinker-state.json`, 'utf8')) as { modelId: string; path: string; steps: number; version: number };
    const modelId = await this.ensureModel();
    await this.submit('/api/v1/load_weights', { model_id: modelId, path: state.path });
    this.steps = state.steps;
    this.version = state.version;
  }

  /** POST an operation, then poll its future until the result is ready. */
  private async submit(path: string, body: unknown): Promise<unknown> {
    const reply = await this.client.call<Record<string, unknown>>(path, body);
    const id = reply?.request_id ?? reply?.future_id;
    if (id === undefined) throw this.malformed(path, 'request_id', reply);
    return this.awaitFuture(String(id));
  }

  private async awaitFuture(requestId: string): Promise<unknown> {
    const start = Date.now();
    let delay = this.options.pollMinMs ?? 20;
    const maxDelay = this.options.pollMaxMs ?? 1000;
    const deadline = this.options.futureTimeoutMs ?? 600_000;
    for (;;) {
      let result: Record<string, unknown> | undefined;
      try {
        result = await this.client.call<Record<string, unknown>>('/api/v1/retrieve_future', { request_id: requestId });
      } catch (error) {
        // 408: the server's long-poll expired: poll again. Other errors surface.
        if (!(error instanceof EngineCallError && error.details.status === 408)) throw error;
      }
      if (result && result.type !== 'try_again' && result.status !== 'pending') {
        if (typeof result.error === 'string') throw new EngineCallError(`tinker future ${requestId}: ${result.error}`, { url: this.client.baseUrl, isRetryable: false });
        return result;
      }
      if (Date.now() - start > deadline) throw new EngineCallError(`tinker future ${requestId}: not ready after ${deadline} ms`, { url: this.client.baseUrl, isRetryable: false });
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(maxDelay, delay * 2);
    }
  }

  private parseForwardResult(result: unknown, data: Datum[], path: string): ForwardBackwardResult {
    const r = result as { loss_fn_outputs?: Array<Record<string, { data?: number[] }>>; metrics?: Record<string, number> };
    if (!Array.isArray(r?.loss_fn_outputs) || r.loss_fn_outputs.length !== data.length) throw this.malformed(path, 'loss_fn_outputs', result);
    const logprobs = r.loss_fn_outputs.map((o, i) => {
      const lp = o.logprobs?.data;
      if (!Array.isArray(lp) || lp.length !== data[i].targetTokens.length) throw this.malformed(path, `loss_fn_outputs[${i}].logprobs`, result);
      return lp;
    });
    const metrics = r.metrics ?? {};
    const loss = metrics['loss:sum'] ?? metrics['loss'] ?? Number.NaN;
    return { loss, logprobs, metrics };
  }

  private malformed(path: string, field: string, reply: unknown): EngineCallError {
    return new EngineCallError(`${this.client.baseUrl}${path}: malformed reply: missing or invalid "${field}": ${JSON.stringify(reply)?.slice(0, 300)}`, { url: this.client.baseUrl + path, isRetryable: false });
  }
}
