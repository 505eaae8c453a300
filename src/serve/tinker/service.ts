/**
 * The Tinker-compatible API of `arbor serve` (`/api/v1/*`), accepting request bodies exactly as the
 * Tinker Python SDK 0.3–0.24 sends them (JSON; the SDK adds `type` and drops nulls) and the session-less
 * bodies of SDK ≤ 0.2: sessions and heartbeats, `client/config` (protobuf off), GET
 * `get_server_capabilities`, one model per server with `seq_id` checked to increase, training
 * operations queued in order, sampling sessions and `asample` run concurrently, results fetched by
 * `retrieve_future` (long poll, then `{type: "try_again"}`). SDK 0.25's protobuf bodies are not
 * accepted (no protobuf dependency).
 * A nano model trains whole and samples with the current weights. A Hugging Face model (`models`)
 * trains a LoRA adapter when create_model gives `lora_config`, under a new
 * model id each time: the adapter starts from PEFT's init, save_weights_for_sampler writes it in PEFT's
 * layout under the state directory, GET `training_runs/{run}/checkpoints/sampler_weights/{name}/archive`
 * redirects to a tar of it in Tinker's layout, `weights_info` describes it, and a sampling session
 * created with its `model_path` samples with it. Tinker's unembedding LoRA (`train_unembed`) is not trained.
 */
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DataError, NumericsError } from '../../core/errors.js';
import type { Datum, LossSpec, SampleRequest, Sampler, Trainer } from '../../engine/types.js';
import {
  ADAPTER_CONFIG,
  ADAPTER_WEIGHTS,
  savePeftAdapter,
  type LoraAdapter,
  type LoraModule,
  type LoraSettings,
} from '../../engine/open.js';
import {
  BadRequest,
  TooLarge,
  boundedInt,
  boundedNum,
  Conflict,
  NotFound,
  optBool,
  optInt,
  requiredString,
} from '../validate.js';
import { field, tokenList, type ServeReply } from '../validate.js';
import { chunksField, samplingParamsField, tokenStopsField } from '../../wire/tinker.js';
import { lossFromTinker } from '../../wire/tinker-loss.js';
import { DEFAULT_LIMITS, SampleGuard } from '../limits.js';
import { tarFiles } from './archive.js';

/** What a Hugging Face model's Tinker training needs from the engine (serve/engine.ts builds it). */
export interface TinkerModels {
  /** base_model_name_or_path written into saved adapters. */
  baseModel: string;
  /** Largest LoRA rank create_model accepts. */
  maxRank: number;
  /**
   * A trainer of a fresh LoRA adapter (PEFT init from `seed`) over the frozen base, with a fresh
   * optimizer (the arrays of an earlier trainer of the same shape may be reused: it is replaced).
   */
  loraTrainer(settings: LoraSettings, seed: number): { trainer: Trainer; adapter: LoraAdapter };
  /** A trainer of the whole model (create_model without lora_config). */
  fullTrainer(): Trainer;
  /** A sampler applying the PEFT adapter saved in `dir`. */
  adapterSampler(dir: string): Sampler;
}

/** Tinker's LoRA alpha is not part of its API; SkyRL tx uses 32 (SkyRL@a956457 skyrl/tinker/api.py). */
export const TINKER_LORA_ALPHA = 32;

export interface TinkerServiceOptions {
  sampler: Sampler;
  /** Request checks, concurrency bound, sliced sampling and the weight lock shared with the server. */
  guard?: SampleGuard;
  /** The trainer of the served model (nano: full fine-tuning; lora_config is ignored). */
  trainer?: Trainer;
  /** A Hugging Face model: LoRA (or full) trainers per create_model, adapters saved for sampling. */
  models?: TinkerModels;
  /** The one model this server trains (model_id and base model name). */
  modelName: string;
  /** Where save_weights / load_weights keep trainer states. */
  stateDir: string;
  /** Long-poll time for retrieve_future before answering {type: "try_again"} (ms). */
  futureWaitMs: number;
}

interface FutureEntry {
  done: boolean;
  result?: unknown;
  error?: string;
  /** Tinker's RequestFailedResponse category: "user" for a request the client got wrong. */
  category?: 'user' | 'server';
  waiters: Array<() => void>;
}

export class TinkerService {
  private readonly futures = new Map<string, FutureEntry>();
  private counter = 0;
  private queue: Promise<void> = Promise.resolve();
  private readonly sessions = new Map<string, { heartbeats: number }>();
  /** Sampling sessions: the last seq_id, and the adapter's sampler for a session of saved LoRA weights. */
  private readonly samplingSessions = new Map<string, { lastSeq: number; sampler?: Sampler }>();
  private modelCreated = false;
  /** seq_id of the model's last request (0 = none yet). */
  private lastSeq = 0;
  /** The model being trained (set when create_model runs; the nano trainer before that). */
  private current: { trainer: Trainer; lora?: { adapter: LoraAdapter; settings: LoraSettings } } | undefined;
  /** Samplers of saved adapters (sampling sessions), the most recent few. */
  private readonly adapterSamplers = new Map<string, Sampler>();
  /** The model name made path-safe: the model id of a nano model, the prefix of an HF model's ids. */
  readonly runId: string;
  /**
   * The current model's id (the run in tinker:// paths): the runId for a nano model; for an HF model a new
   * id per create_model, as Tinker's are unique (clients cache downloaded adapters by run and name).
   */
  modelId: string;

  private readonly guard: SampleGuard;

  constructor(readonly options: TinkerServiceOptions) {
    this.guard = options.guard ?? new SampleGuard(options.sampler, DEFAULT_LIMITS);
    this.runId = options.modelName.replace(/[^A-Za-z0-9_.-]+/g, '-');
    this.modelId = this.runId;
    if (options.trainer) this.current = { trainer: options.trainer };
  }

  private get trains(): boolean {
    return this.options.trainer !== undefined || this.options.models !== undefined;
  }

  /** Heartbeats received per session (for tests and /health). */
  heartbeats(sessionId: string): number | undefined {
    return this.sessions.get(sessionId)?.heartbeats;
  }

  async handle(method: string, op: string, b: Record<string, unknown>): Promise<unknown> {
    if (method === 'GET' && op === 'get_server_capabilities')
      return { supported_models: [{ model_name: this.options.modelName }] };
    if (method !== 'POST') throw new NotFound(`${method} /api/v1/${op}: no such route`);
    switch (op) {
      case 'retrieve_future':
        return this.retrieveFuture(
          requiredString(b.request_id === undefined ? undefined : String(b.request_id), 'request_id'),
        );
      case 'get_server_capabilities':
        return { supported_models: [{ model_name: this.options.modelName }] };
      case 'client/config':
        // JSON bodies only: the protobuf forward_backward flags are off
        return {
          pjwt_auth_enabled: false,
          credential_default_source: 'api_key',
          proto_write_fwdbwd: false,
          proto_compress_fwdbwd: false,
        };
      case 'create_session':
        return this.createSession(b);
      case 'session_heartbeat':
        this.session(b.session_id).heartbeats++;
        return { type: 'session_heartbeat' };
      case 'create_sampling_session':
        return this.createSamplingSession(b);
      case 'asample':
        return this.asample(b);
      case 'weights_info':
        return this.weightsInfo(b);
      default:
        return this.training(op, b);
    }
  }

  private createSession(b: Record<string, unknown>): unknown {
    requiredString(b.sdk_version, 'sdk_version');
    if (b.tags !== undefined && (!Array.isArray(b.tags) || !b.tags.every((t) => typeof t === 'string')))
      throw new BadRequest('field "tags" must be an array of strings');
    const id = `session-${++this.counter}`;
    this.sessions.set(id, { heartbeats: 0 });
    evictOldest(this.sessions, MAX_ENTRIES);
    return { type: 'create_session', session_id: id, info_message: null, warning_message: null, error_message: null };
  }

  private session(id: unknown): { heartbeats: number } {
    const session = typeof id === 'string' ? this.sessions.get(id) : undefined;
    if (!session) throw new NotFound(`field "session_id": Session not found: ${JSON.stringify(id)}`);
    return session;
  }

  /** The trainer of the current model, when a training operation runs (create_model may have replaced it). */
  private trainer(): Trainer {
    if (!this.current) throw new BadRequest('field "model_id": no model yet (call create_model first)');
    return this.current.trainer;
  }

  private training(op: string, b: Record<string, unknown>): unknown {
    if (!this.trains) throw new NotFound(`/api/v1/${op}: this server has no trainer`);
    if (op === 'create_model') return this.createModel(b);
    const known = [
      'forward_backward',
      'forward',
      'optim_step',
      'save_weights_for_sampler',
      'save_weights',
      'load_weights',
    ];
    if (!known.includes(op)) throw new NotFound(`/api/v1/${op}: not part of the supported Tinker subset`);
    this.checkModel(b);
    this.checkSeq(b.seq_id);
    // the model's trainer when the operation runs: a create_model queued before it may have replaced it
    const trainer: Pick<Trainer, 'forwardBackward' | 'logprobs' | 'optimStep'> = {
      forwardBackward: (data, loss, extras) => this.trainer().forwardBackward(data, loss, extras),
      logprobs: (data) => this.trainer().logprobs(data),
      optimStep: (params) => this.trainer().optimStep(params),
    };
    switch (op) {
      case 'forward_backward': {
        const input = (b.forward_backward_input ?? {}) as Record<string, unknown>;
        const loss = lossFromTinker(input.loss_fn, input.loss_fn_config, (message) => new BadRequest(message));
        const data = this.checkDatums(
          datumsFromTinker(input.data, loss, 'forward_backward_input.data'),
          'forward_backward_input.data',
        );
        return { request_id: this.enqueue(async () => forwardOutput(await trainer.forwardBackward(data, loss))) };
      }
      case 'forward': {
        const input = (b.forward_input ?? {}) as Record<string, unknown>;
        const data = this.checkDatums(
          datumsFromTinker(input.data, { kind: 'cross_entropy' }, 'forward_input.data'),
          'forward_input.data',
        );
        return {
          request_id: this.enqueue(async () =>
            forwardOutput({ loss: Number.NaN, logprobs: await trainer.logprobs(data), metrics: {} }),
          ),
        };
      }
      case 'optim_step': {
        const params = adamFromTinker((b.adam_params ?? {}) as Record<string, unknown>);
        return {
          request_id: this.enqueue(async () => {
            const r = await trainer.optimStep(params);
            return { type: 'optim_step', metrics: { grad_norm: r.gradNorm, step: r.step } };
          }),
        };
      }
      case 'save_weights_for_sampler': {
        const name = b.path === undefined ? undefined : checkpointName(b.path, 'path');
        return { request_id: this.enqueue(() => this.saveForSampler(name)) };
      }
      default:
        return this.saveOrLoad(op, b);
    }
  }

  /** Publish the weights; a LoRA adapter is also written in PEFT's layout for sampling sessions and archives. */
  private async saveForSampler(given: string | undefined): Promise<unknown> {
    const r = await this.trainer().saveForSampler();
    const name = given ?? `v${r.weightVersion}`;
    const lora = this.current?.lora;
    if (lora) {
      const dir = this.samplerDir(name);
      savePeftAdapter(dir, lora.adapter, this.options.models!.baseModel);
      this.adapterSamplers.delete(dir);
    }
    const path = `tinker://${this.modelId}/sampler_weights/${name}`;
    return { type: 'save_weights_for_sampler', path, weight_version: r.weightVersion };
  }

  /** Where sampler weights `name` of model `run` (the current one by default) are saved. */
  private samplerDir(name: string, run = this.modelId): string {
    return join(this.options.stateDir, 'sampler_weights', run, name);
  }

  /** The saved adapter a `tinker://<run>/sampler_weights/<name>` path names, if there is one. */
  private savedAdapter(path: unknown, field: string): string | undefined {
    if (typeof path !== 'string') throw new BadRequest(`field "${field}" must be a tinker:// path`);
    const m = /^tinker:\/\/([A-Za-z0-9_.-]+)\/sampler_weights\/([A-Za-z0-9_.-]+)$/.exec(path);
    if (!m || m[1].includes('..') || m[2].includes('..')) return undefined;
    const dir = this.samplerDir(m[2], m[1]);
    return existsSync(join(dir, ADAPTER_WEIGHTS)) && existsSync(join(dir, ADAPTER_CONFIG)) ? dir : undefined;
  }

  /**
   * GET `training_runs/{run}/checkpoints/sampler_weights/{name}/archive` → 302 to the archive (Tinker
   * answers with a signed URL and an `Expires` date, thinking-machines-lab/tinker@d595dc2
   * resources/weights.py); GET `…/archive/download` → the tar. Other GETs: undefined (not an archive route).
   */
  archive(op: string): ServeReply | undefined {
    const m = /^training_runs\/([^/]+)\/checkpoints\/sampler_weights\/([^/]+)\/archive(\/download)?$/.exec(op);
    if (!m) return undefined;
    const [run, name] = [decodeURIComponent(m[1]), decodeURIComponent(m[2])];
    const dir = this.savedAdapter(`tinker://${run}/sampler_weights/${name}`, 'path');
    if (!dir) {
      const why = this.options.models
        ? 'no saved LoRA sampler weights by that name'
        : 'this server trains the whole nano model; only LoRA sampler weights have archives';
      throw new NotFound(`checkpoint tinker://${run}/sampler_weights/${name} has no archive: ${why}`);
    }
    if (!m[3]) {
      const expires = new Date(Date.now() + 15 * 60_000).toUTCString();
      const headers = { location: `/api/v1/${op}/download`, expires };
      return { status: 302, body: null, headers, raw: { contentType: 'text/plain', data: '' } };
    }
    const files: Array<[string, Buffer]> = [
      [ADAPTER_CONFIG, readFileSync(join(dir, ADAPTER_CONFIG))],
      [ADAPTER_WEIGHTS, readFileSync(join(dir, ADAPTER_WEIGHTS))],
      ['checkpoint_complete', Buffer.alloc(0)],
    ];
    return { status: 200, body: null, raw: { contentType: 'application/x-tar', data: tarFiles(files) } };
  }

  /**
   * POST weights_info `{tinker_path}` →
   * `{base_model, is_lora, lora_rank?, train_unembed?, train_mlp?, train_attn?}`.
   */
  private weightsInfo(b: Record<string, unknown>): unknown {
    const path = requiredString(b.tinker_path, 'tinker_path');
    const dir = this.savedAdapter(path, 'tinker_path');
    if (!dir) {
      if (this.options.models) throw new NotFound(`field "tinker_path": no saved sampler weights at ${path}`);
      return { type: 'weights_info', base_model: this.options.modelName, is_lora: false };
    }
    const config = JSON.parse(readFileSync(join(dir, ADAPTER_CONFIG), 'utf8')) as {
      r?: number;
      target_modules?: string[];
    };
    const targets = new Set(config.target_modules ?? []);
    return {
      type: 'weights_info',
      base_model: this.options.modelName,
      is_lora: true,
      lora_rank: config.r,
      train_unembed: false,
      train_mlp: ['gate_proj', 'up_proj', 'down_proj'].some((t) => targets.has(t)),
      train_attn: ['q_proj', 'k_proj', 'v_proj', 'o_proj'].some((t) => targets.has(t)),
    };
  }

  /** Datums the model can take: non-empty, within the context length and the vocabulary, bounded in count. */
  private checkDatums(data: Datum[], field: string): Datum[] {
    const { contextLength, vocabSize, maxBatchTokens } = this.guard.limits;
    let total = 0;
    data.forEach((d, i) => {
      const where = `${field}[${i}]`;
      if (!d.inputTokens.length) throw new BadRequest(`field "${where}.model_input.chunks" holds no tokens`);
      if (contextLength !== undefined && d.inputTokens.length > contextLength)
        throw new BadRequest(
          `field "${where}.model_input": ${d.inputTokens.length} tokens exceed the context length of ${contextLength}`,
        );
      if (vocabSize !== undefined) {
        const bad = d.inputTokens.find((t) => t >= vocabSize);
        if (bad !== undefined)
          throw new BadRequest(
            `field "${where}.model_input.chunks": token id ${bad} is outside the vocabulary of ${vocabSize}`,
          );
        const badTarget = d.targetTokens.find((t) => !(Number.isInteger(t) && t >= 0 && t < vocabSize));
        if (badTarget !== undefined)
          throw new BadRequest(
            `field "${where}.loss_fn_inputs.target_tokens.data": token id ${badTarget} is outside the vocabulary of ${vocabSize}`,
          );
      } else if (d.targetTokens.some((t) => !(Number.isInteger(t) && t >= 0))) {
        throw new BadRequest(
          `field "${where}.loss_fn_inputs.target_tokens.data" must hold token ids (non-negative integers)`,
        );
      }
      total += d.inputTokens.length;
    });
    if (total > maxBatchTokens)
      throw new TooLarge(`field "${field}": ${total} tokens, over the limit of ${maxBatchTokens} (--max-batch-tokens)`);
    return data;
  }

  private createModel(b: Record<string, unknown>): unknown {
    // SDK ≥ 0.3 sends session_id + model_seq_id; SDK ≤ 0.2 sent neither (still accepted)
    if (b.session_id !== undefined) this.session(b.session_id);
    optInt(b.model_seq_id, 'model_seq_id', 0);
    if (b.base_model !== undefined && b.base_model !== this.options.modelName)
      throw new BadRequest(
        `field "base_model": this server trains ${JSON.stringify(this.options.modelName)}, not ${JSON.stringify(b.base_model)}`,
      );
    const lora = this.options.models ? loraFromTinker(b, this.options.models.maxRank) : undefined;
    this.modelCreated = true;
    this.lastSeq = 0;
    const modelId = this.options.models ? `${this.runId}-${randomUUID().slice(0, 8)}` : this.runId;
    this.modelId = modelId;
    return {
      model_id: modelId,
      base_model: this.options.modelName,
      request_id: this.enqueue(async () => {
        this.current = this.newModel(lora);
        return { type: 'create_model', model_id: modelId };
      }),
    };
  }

  /** The trainer of a new model: nano's own; for an HF model a fresh LoRA adapter, or the whole model. */
  private newModel(lora: { settings: LoraSettings; seed: number } | undefined): NonNullable<TinkerService['current']> {
    const models = this.options.models;
    if (!models) return { trainer: this.options.trainer! };
    if (!lora) return { trainer: models.fullTrainer() };
    const { trainer, adapter } = models.loraTrainer(lora.settings, lora.seed);
    return { trainer, lora: { adapter, settings: lora.settings } };
  }

  private saveOrLoad(op: string, b: Record<string, unknown>): unknown {
    const name = checkpointName(b.path, 'path');
    const dir = join(this.options.stateDir, name);
    if (op === 'save_weights') {
      return {
        request_id: this.enqueue(async () => {
          await this.trainer().saveState(dir);
          return { type: 'save_weights', path: `tinker://${this.modelId}/weights/${name}` };
        }),
      };
    }
    optBool(b.optimizer, 'optimizer', true);
    return {
      request_id: this.enqueue(async () => {
        if (!existsSync(join(dir, 'model.safetensors')) && !existsSync(join(dir, ADAPTER_WEIGHTS))) {
          throw new NotFound(`field "path": no saved weights named ${JSON.stringify(name)}`);
        }
        await this.trainer().loadState(dir);
        return { type: 'load_weights', path: b.path };
      }),
    };
  }

  private checkModel(b: Record<string, unknown>): void {
    if (b.model_id === this.modelId) return;
    const hint = this.modelCreated ? '' : ' (call create_model first)';
    throw new BadRequest(`field "model_id": unknown model ${JSON.stringify(b.model_id)}${hint}`);
  }

  /** seq_id is optional (SDK ≤ 0.2); when sent it must grow (SkyRL tx answers 409 to a reused one). */
  private checkSeq(value: unknown): void {
    if (value === undefined || value === null) return;
    const seq = optInt(value, 'seq_id', 0);
    if (seq <= this.lastSeq) throw new Conflict(`field "seq_id": ${seq} was already used (last ${this.lastSeq})`);
    this.lastSeq = seq;
  }

  private createSamplingSession(b: Record<string, unknown>): unknown {
    this.session(b.session_id);
    optInt(b.sampling_session_seq_id, 'sampling_session_seq_id', 0);
    if ((b.model_path === undefined || b.model_path === null) === (b.base_model === undefined || b.base_model === null))
      throw new BadRequest('fields "model_path" / "base_model": exactly one must be given');
    let sampler: Sampler | undefined;
    if (b.model_path !== undefined && b.model_path !== null && this.options.models) {
      // an HF model's sampler weights are adapters: sample with the one saved at that path
      const dir = this.savedAdapter(b.model_path, 'model_path');
      if (!dir) throw new NotFound(`field "model_path": no saved sampler weights at ${String(b.model_path)}`);
      sampler = this.adapterSampler(dir);
    }
    const id = `sampling-${++this.counter}`;
    this.samplingSessions.set(id, { lastSeq: -1, sampler });
    evictOldest(this.samplingSessions, MAX_ENTRIES);
    return { type: 'create_sampling_session', sampling_session_id: id };
  }

  /** The sampler of a saved adapter, kept for the few most recent (older ones are left to the collector). */
  private adapterSampler(dir: string): Sampler {
    let sampler = this.adapterSamplers.get(dir);
    if (!sampler) {
      try {
        sampler = this.options.models!.adapterSampler(dir);
      } catch (error) {
        throw new BadRequest(`field "model_path": ${(error as Error).message}`, { cause: error });
      }
    }
    this.adapterSamplers.delete(dir);
    this.adapterSamplers.set(dir, sampler);
    evictOldest(this.adapterSamplers, 4);
    return sampler;
  }

  private asample(b: Record<string, unknown>): unknown {
    const session =
      typeof b.sampling_session_id === 'string' ? this.samplingSessions.get(b.sampling_session_id) : undefined;
    if (!session)
      throw new NotFound(
        `field "sampling_session_id": Sampling session not found: ${JSON.stringify(b.sampling_session_id)}`,
      );
    const request = sampleRequestFromTinker(b, this.guard.limits.maxN);
    const per = this.guard.check(request, {
      prompt: 'prompt.chunks',
      n: 'num_samples',
      maxTokens: 'sampling_params.max_tokens',
    });
    this.guard.checkBudget((request.n ?? 1) * per, `num_samples × max_tokens = ${request.n} × ${per}`);
    const seq = optInt(b.seq_id, 'seq_id', session.lastSeq + 1);
    if (seq <= session.lastSeq)
      throw new Conflict(`field "seq_id": ${seq} was already used in this sampling session (last ${session.lastSeq})`);
    const release = this.guard.acquire();
    session.lastSeq = seq;
    return {
      request_id: this.start(async () => {
        let result;
        try {
          result = await this.guard.sample(request, per, undefined, session.sampler);
        } finally {
          release();
        }
        const sequences = result.completions.map((c) => ({
          tokens: c.tokens,
          logprobs: c.logprobs,
          stop_reason: c.finishReason === 'stop' ? 'stop' : 'length',
        }));
        return { type: 'sample', sequences, prompt_logprobs: null };
      }),
    };
  }

  /** Run `task` after every earlier queued operation (training is ordered); returns the future id. */
  private enqueue(task: () => Promise<unknown>): string {
    const { id, settle } = this.future();
    // training changes the weights: never while a sampling request is running
    this.queue = this.queue.then(() => settle(() => this.guard.gate.exclusive(task)));
    return id;
  }

  /** Run `task` now (sampling is concurrent); returns the future id. */
  private start(task: () => Promise<unknown>): string {
    const { id, settle } = this.future();
    void settle(task);
    return id;
  }

  private future(): { id: string; settle: (task: () => Promise<unknown>) => Promise<void> } {
    const id = String(++this.counter);
    const entry: FutureEntry = { done: false, waiters: [] };
    this.futures.set(id, entry);
    // results nobody fetches do not accumulate without end: the oldest finished ones go first
    if (this.futures.size > MAX_ENTRIES) {
      for (const [key, f] of this.futures) {
        if (this.futures.size <= MAX_ENTRIES) break;
        if (f.done) this.futures.delete(key);
      }
    }
    const settle = async (task: () => Promise<unknown>) => {
      try {
        entry.result = await task();
      } catch (error) {
        entry.error = (error as Error)?.message ?? String(error);
        entry.category =
          error instanceof BadRequest ||
          error instanceof NotFound ||
          error instanceof Conflict ||
          error instanceof DataError ||
          error instanceof NumericsError
            ? 'user'
            : 'server';
      }
      entry.done = true;
      for (const w of entry.waiters.splice(0)) w();
    };
    return { id, settle };
  }

  private async retrieveFuture(id: string): Promise<unknown> {
    const entry = this.futures.get(id);
    if (!entry) throw new NotFound(`field "request_id": future ${JSON.stringify(id)} not found`);
    if (!entry.done) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, this.options.futureWaitMs);
        entry.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    if (!entry.done) return { type: 'try_again', request_id: id, queue_state: 'active' };
    this.futures.delete(id);
    // RequestFailedResponse (thinking-machines-lab/tinker@d595dc2 types/request_failed_response.py)
    if (entry.error !== undefined) return { error: entry.error, category: entry.category ?? 'server' };
    return entry.result;
  }
}

/**
 * create_model's LoRA request: `lora_config.rank` (or a top-level `rank`), `seed`, and which layers
 * train (`train_attn` → q/k/v/o_proj, `train_mlp` → gate/up/down_proj; both default true). Undefined:
 * no LoRA asked (the whole model trains).
 */
function loraFromTinker(
  b: Record<string, unknown>,
  maxRank: number,
): { settings: LoraSettings; seed: number } | undefined {
  const c = b.lora_config;
  if (c !== undefined && c !== null && (typeof c !== 'object' || Array.isArray(c))) {
    throw new BadRequest('field "lora_config" must be an object');
  }
  const config = (c ?? {}) as Record<string, unknown>;
  const rankValue = config.rank ?? b.rank;
  if (rankValue === undefined || rankValue === null) return undefined;
  const rank = boundedInt(rankValue, config.rank !== undefined ? 'lora_config.rank' : 'rank', 0, 1, maxRank);
  const seed = boundedInt(config.seed, 'lora_config.seed', 0, 0, 2 ** 32 - 1);
  const attn = optBool(config.train_attn, 'lora_config.train_attn', true);
  const mlp = optBool(config.train_mlp, 'lora_config.train_mlp', true);
  optBool(config.train_unembed, 'lora_config.train_unembed', true);
  if (!attn && !mlp) {
    const why = 'train_attn and train_mlp are both false (the unembedding LoRA alone is not supported)';
    throw new BadRequest(`field "lora_config": ${why}`);
  }
  const targets: LoraModule[] = [
    ...(attn ? (['q_proj', 'k_proj', 'v_proj', 'o_proj'] as const) : []),
    ...(mlp ? (['gate_proj', 'up_proj', 'down_proj'] as const) : []),
  ];
  return { settings: { rank, alpha: TINKER_LORA_ALPHA, targets }, seed };
}

/** Sessions, sampling sessions and unfetched finished futures kept at most (the oldest are dropped). */
const MAX_ENTRIES = 10_000;

function evictOldest<K, V>(map: Map<K, V>, max: number): void {
  for (const key of map.keys()) {
    if (map.size <= max) return;
    map.delete(key);
  }
}

/** A checkpoint name: a plain name, or the name at the end of a `tinker://<model>/weights/<name>` path. */
function checkpointName(value: unknown, field: string): string {
  const m =
    typeof value === 'string'
      ? /^(?:tinker:\/\/[^/]+\/(?:weights|sampler_weights)\/)?([A-Za-z0-9_.-]+)$/.exec(value)
      : null;
  if (!m || m[1].includes('..'))
    throw new BadRequest(`field "${field}" must be a name of [A-Za-z0-9_.-] or tinker://<model>/weights/<name>`);
  return m[1];
}

/** An asample body read with the wire schemas (wire/tinker.ts) and this server's bounds. */
function sampleRequestFromTinker(b: Record<string, unknown>, maxN: number): SampleRequest {
  const chunks = field(chunksField, (b.prompt as { chunks?: unknown } | undefined)?.chunks, 'prompt.chunks');
  const tokens = chunks.flatMap((c) => c.tokens);
  const p = (
    b.sampling_params === undefined || b.sampling_params === null
      ? {}
      : field(samplingParamsField, b.sampling_params, 'sampling_params')
  ) as Record<string, unknown>;
  const maxTokens = optInt(p.max_tokens, 'sampling_params.max_tokens', -1);
  if (maxTokens < 1) throw new BadRequest('field "sampling_params.max_tokens" is required (a positive integer)');
  if (p.stop !== undefined && p.stop !== null) field(tokenStopsField, p.stop, 'sampling_params.stop');
  return {
    tokens,
    n: boundedInt(b.num_samples, 'num_samples', 1, 1, maxN, ' (--max-n)'),
    maxTokens,
    temperature: boundedNum(p.temperature, 'sampling_params.temperature', 1, 0, 1e4),
    topP: tinkerTopP(p.top_p),
    topK: boundedInt(p.top_k, 'sampling_params.top_k', -1, -1, Number.MAX_SAFE_INTEGER),
    stopTokens: Array.isArray(p.stop) ? tokenList(p.stop, 'sampling_params.stop') : undefined,
    seed:
      p.seed === undefined || p.seed === null
        ? undefined
        : boundedInt(p.seed, 'sampling_params.seed', 0, -(2 ** 53) + 1, 2 ** 53 - 1),
  };
}

function tinkerTopP(value: unknown): number {
  const v = boundedNum(value, 'sampling_params.top_p', 1, 0, 1);
  if (v <= 0) throw new BadRequest(`field "sampling_params.top_p" must be a number in (0, 1], got ${v}`);
  return v;
}

function adamFromTinker(adam: Record<string, unknown>) {
  return {
    learningRate: boundedNum(adam.learning_rate, 'adam_params.learning_rate', 1e-4, 0, 10),
    beta1: boundedNum(adam.beta1, 'adam_params.beta1', 0.9, 0, 0.999999),
    beta2: boundedNum(adam.beta2, 'adam_params.beta2', 0.95, 0, 0.999999999),
    eps: boundedNum(adam.eps, 'adam_params.eps', 1e-12, 1e-30, 1),
    weightDecay: boundedNum(adam.weight_decay, 'adam_params.weight_decay', 0, 0, 10),
    gradClipNorm: boundedNum(adam.grad_clip_norm, 'adam_params.grad_clip_norm', 0, 0, 1e12),
  };
}

function forwardOutput(r: { loss: number; logprobs: number[][]; metrics: Record<string, number> }): unknown {
  return {
    loss_fn_output_type: 'logprobs',
    loss_fn_outputs: r.logprobs.map((lp) => ({ logprobs: { data: lp, dtype: 'float32', shape: [lp.length] } })),
    metrics: { 'loss:sum': r.loss, ...r.metrics },
  };
}

function datumsFromTinker(raw: unknown, loss: LossSpec, field: string): Datum[] {
  if (!Array.isArray(raw) || raw.length === 0) throw new BadRequest(`field "${field}" must be a non-empty array`);
  return raw.map((d, i) => {
    const where = `${field}[${i}]`;
    const chunks = (d as { model_input?: { chunks?: Array<{ tokens?: unknown }> } })?.model_input?.chunks;
    if (!Array.isArray(chunks)) throw new BadRequest(`field "${where}.model_input.chunks" must be an array`);
    const inputTokens = chunks.flatMap((c, j) =>
      tokenList((c as { tokens?: unknown } | null)?.tokens, `${where}.model_input.chunks[${j}].tokens`),
    );
    const inputs = ((d as { loss_fn_inputs?: Record<string, { data?: unknown }> }).loss_fn_inputs ?? {}) as Record<
      string,
      { data?: unknown }
    >;
    const tensor = (name: string, required: boolean): number[] | undefined => {
      const data = inputs[name]?.data;
      if (data === undefined && !required) return undefined;
      if (
        !Array.isArray(data) ||
        data.length !== inputTokens.length ||
        !data.every((x) => typeof x === 'number' && Number.isFinite(x))
      ) {
        throw new BadRequest(
          `field "${where}.loss_fn_inputs.${name}.data" must be ${inputTokens.length} finite numbers`,
        );
      }
      return data as number[];
    };
    const targetTokens = tensor('target_tokens', true)!;
    if (loss.kind === 'cross_entropy')
      return { inputTokens, targetTokens, weights: tensor('weights', false) ?? inputTokens.map(() => 1) };
    return {
      inputTokens,
      targetTokens,
      weights: inputTokens.map(() => 1),
      samplingLogprobs: tensor('logprobs', true),
      advantages: tensor('advantages', true),
    };
  });
}
