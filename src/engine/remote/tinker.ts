/**
 * Trainer client for a Tinker-compatible training service (JSON over HTTP, `/api/v1/*`): hosted
 * Tinker, SkyRL tx and `arbor serve`. A session (tinker-session.ts) comes first; `create_model` sends
 * `session_id` + `model_seq_id` and takes `model_id` from the future when the reply lacks it; every
 * later request of the model carries `seq_id` 1, 2, … as the SDK does. Operations: `forward_backward`
 * (cross_entropy / importance_sampling / ppo with clip thresholds), `forward`, `optim_step`
 * (adam_params), `save_weights_for_sampler`, `save_weights` / `load_weights` (with `optimizer`; only
 * a model's first request, so resume creates a fresh model). Replies are read as each server sends
 * them: SkyRL's `skyrl.ai/grad_norm` and its empty forward_backward metrics (the loss is then the sum
 * of the per-datum `elementwise_loss`); a requested setting a server ignores is a run-log warning.
 * Datums map 1:1: model_input = input tokens, loss_fn_inputs = target_tokens, weights, logprobs
 * (sampling), advantages. Tinker's policy losses have no per-token weights, so the client folds
 * Arbor's non-negative weights into the advantages (exact for IS and PPO, which are linear in A).
 * Faults: the session retries transient ones without applying an operation twice (tinker-session.ts);
 * when the trainer reports its optimizer step (`metrics.step`: arbor serve) a jump of more than one
 * means a step was applied twice and stops the run. A checkpoint records the saved state's path, the
 * sampler weight version and the trainer's step; resuming loads the state into a fresh model and
 * publishes its sampler weights again under the same version, so every sampling server (restarted,
 * or still holding a later version) samples with exactly the checkpoint's weights.
 */
import { readFile } from 'node:fs/promises';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { lossToTinker } from '../../wire/tinker-loss.js';
import type { TensorData, TinkerDatum } from '../../wire/tinker.js';
import { ArborError, DataError } from '../../core/errors.js';
import { writeFileAtomic } from '../../core/files.js';
import type {
  AdamParams,
  Datum,
  ForwardBackwardResult,
  LossExtras,
  LossSpec,
  OptimStepResult,
  Trainer,
} from '../types.js';
import { TinkerSession, type TinkerSessionOptions } from './tinker-session.js';

export interface TinkerClientOptions extends TinkerSessionOptions {
  /** Base model name the service should create (e.g. "Qwen/Qwen3-4B-Instruct-2507", or "nano"). */
  baseModel: string;
  /** LoRA rank for create_model. */
  loraRank?: number;
  /** Existing model id to attach to instead of creating one. */
  modelId?: string;
  /** The session to use (shared with a Tinker sampler); default: one of its own from these options. */
  session?: TinkerSession;
  /** Called after save_weights_for_sampler with the returned path (e.g. to sync a vLLM server). */
  onSamplerWeights?: (path: string, version: number) => Promise<void>;
}

/**
 * Result payloads (thinking-machines-lab/tinker@d595dc2 types/forward_backward_output.py,
 * optim_step_response.py, save_weights_for_sampler_response.py; SkyRL@a956457 backends/jax.py:
 * `loss_fn_output_type: "scalar"`, outputs `{elementwise_loss, logprobs}`, `metrics: {}`, optim
 * metrics `skyrl.ai/grad_norm`, `skyrl.ai/learning_rate`).
 */
export interface ForwardBackwardOutput {
  loss_fn_output_type?: string;
  loss_fn_outputs: Array<Record<string, { data?: number[]; dtype?: string; shape?: number[] }>>;
  metrics?: Record<string, number>;
}
export interface OptimStepResponse {
  metrics?: Record<string, number> | null;
}

/** What a saved trainer state records (tinker-state.json in the checkpoint's engine directory). */
export interface TinkerState {
  modelId: string;
  /** The `save_weights` path (`tinker://…/weights/…`) that `load_weights` restores. */
  path: string;
  /** Optimizer steps the client ran. */
  steps: number;
  /** The sampler weight version these weights were published as. */
  version: number;
  baseModel: string;
  /** The `save_weights_for_sampler` path of `version` (absent in checkpoints of older versions). */
  samplerPath?: string;
  /** The trainer's own optimizer step counter, when it reports one (arbor serve's optim_step `metrics.step`). */
  trainerStep?: number;
}

/** The Tinker wire form of one datum (wire/tinker.ts). */
export function datumToTinker(datum: Datum, loss: LossSpec): TinkerDatum {
  const T = datum.inputTokens.length;
  const tensor = (data: number[], dtype: TensorData['dtype']): TensorData => ({ data, dtype, shape: [data.length] });
  const inputs: Record<string, TensorData> = { target_tokens: tensor(datum.targetTokens, 'int64') };
  if (loss.kind === 'cross_entropy') {
    inputs.weights = tensor(datum.weights, 'float32');
  } else {
    if (!datum.samplingLogprobs || !datum.advantages)
      throw new ArborError(`tinker: loss ${loss.kind} needs samplingLogprobs and advantages on every datum`);
    inputs.logprobs = tensor(datum.samplingLogprobs, 'float32');
    inputs.advantages = tensor(
      datum.advantages.map((a, t) => {
        if (datum.weights[t] < 0)
          throw new ArborError('tinker: negative datum weights cannot be folded into advantages');
        return a * datum.weights[t];
      }),
      'float32',
    );
  }
  for (const [k, v] of Object.entries(inputs))
    if (v.data.length !== T)
      throw new ArborError(`tinker: datum field ${k} has length ${v.data.length}, expected ${T}`);
  return { model_input: { chunks: [{ type: 'encoded_text', tokens: datum.inputTokens }] }, loss_fn_inputs: inputs };
}

export class TinkerTrainer implements Trainer {
  readonly specificationVersion = 'arbor.trainer.v1' as const;
  readonly session: TinkerSession;
  private model: Promise<string> | undefined;
  /** seq_id of the model's last request (the SDK sends 1, 2, … per training client). */
  private seq = 0;
  private steps = 0;
  private version = 0;
  /** The sampler weights path of `version`. */
  private samplerPath: string | undefined;
  /** The trainer's reported optimizer step after the last optim_step (undefined until it reports one). */
  trainerStep: number | undefined;
  private readonly warned = new Set<string>();

  constructor(readonly options: TinkerClientOptions) {
    this.session = options.session ?? new TinkerSession(options);
    if (options.modelId) this.model = Promise.resolve(options.modelId);
  }

  get client() {
    return this.session.client;
  }

  /** Create (or attach to) the model; called lazily by the first operation. */
  ensureModel(): Promise<string> {
    this.model ??= this.createModel().catch((error) => {
      this.model = undefined;
      throw error;
    });
    return this.model;
  }

  private async createModel(): Promise<string> {
    const sessionId = await this.session.ensure();
    const path = '/api/v1/create_model';
    const body = {
      session_id: sessionId,
      model_seq_id: this.session.nextModelSeqId(),
      base_model: this.options.baseModel,
      lora_config: { rank: this.options.loraRank ?? 32 },
      type: 'create_model',
    };
    const reply = await this.session.post(path, body);
    // hosted Tinker answers {request_id} and puts model_id in the future's result; SkyRL answers both
    const result = (await this.session.awaitFuture(String(reply.request_id ?? reply.future_id))) as {
      model_id?: unknown;
    } | null;
    const modelId = typeof reply.model_id === 'string' ? reply.model_id : result?.model_id;
    if (typeof modelId !== 'string') throw this.session.malformed(path, 'model_id', { reply, result });
    this.seq = 0;
    return modelId;
  }

  /** POST a training operation of the model with the next seq_id, then wait for its result. */
  private async op(path: string, body: Record<string, unknown>, type: string): Promise<unknown> {
    const modelId = await this.ensureModel();
    return this.session.submit(path, { model_id: modelId, seq_id: ++this.seq, ...body, type });
  }

  async forwardBackward(data: Datum[], loss: LossSpec, extras?: LossExtras): Promise<ForwardBackwardResult> {
    if (extras?.klCoef || extras?.entropyCoef)
      throw new ArborError('tinker: KL and entropy terms are not Tinker built-in loss options; set them to 0');
    const { loss_fn, loss_fn_config } = lossToTinker(loss);
    const input = {
      data: data.map((d) => datumToTinker(d, loss)),
      loss_fn,
      ...(loss_fn_config ? { loss_fn_config } : {}),
    };
    const result = await this.op('/api/v1/forward_backward', { forward_backward_input: input }, 'forward_backward');
    return parseForwardOutput(result, data, (field) =>
      this.session.malformed('/api/v1/forward_backward', field, result),
    );
  }

  async logprobs(data: Datum[]): Promise<number[][]> {
    const input = { data: data.map((d) => datumToTinker(d, { kind: 'cross_entropy' })), loss_fn: 'cross_entropy' };
    const result = await this.op('/api/v1/forward', { forward_input: input }, 'forward');
    return parseForwardOutput(result, data, (field) => this.session.malformed('/api/v1/forward', field, result))
      .logprobs;
  }

  async optimStep(params: AdamParams): Promise<OptimStepResult> {
    const adam: Record<string, number> = {
      learning_rate: params.learningRate,
      beta1: params.beta1 ?? 0.9,
      beta2: params.beta2 ?? 0.95,
      eps: params.eps ?? 1e-12,
    };
    if (params.weightDecay !== undefined) adam.weight_decay = params.weightDecay;
    if (params.gradClipNorm !== undefined) adam.grad_clip_norm = params.gradClipNorm;
    const result = (await this.op(
      '/api/v1/optim_step',
      { adam_params: adam },
      'optim_step',
    )) as OptimStepResponse | null;
    this.steps++;
    const metrics = result?.metrics ?? {};
    this.checkTrainerStep(metrics['step']);
    const gradNorm = metrics['grad_norm'] ?? metrics['grad_norm:mean'] ?? metrics['skyrl.ai/grad_norm'];
    if (gradNorm === undefined)
      this.warnOnce(
        'grad_norm',
        `tinker: ${this.client.baseUrl} reports no gradient norm in optim_step metrics ` +
          `(got ${JSON.stringify(Object.keys(metrics))}); grad_norm is logged as NaN`,
      );
    // SkyRL tx's AdamParams has no grad_clip_norm: its optimiser never clips (SkyRL@a956457 api.py AdamParams)
    if (params.gradClipNorm && Object.keys(metrics).some((k) => k.startsWith('skyrl.ai/'))) {
      this.warnOnce(
        'grad_clip_norm',
        `tinker: optimizer.gradClipNorm ${params.gradClipNorm} is not supported by SkyRL tx (adam_params.grad_clip_norm is ignored); gradients are not clipped`,
      );
    }
    return { gradNorm: gradNorm ?? Number.NaN, step: this.steps };
  }

  async saveForSampler(): Promise<{ weightVersion: number; path?: string }> {
    const path = await this.saveSamplerWeights(`arbor-v${this.version + 1}`);
    this.version++;
    this.samplerPath = path;
    await this.options.onSamplerWeights?.(path, this.version);
    return { weightVersion: this.version, path };
  }

  private async saveSamplerWeights(name: string): Promise<string> {
    const result = (await this.op('/api/v1/save_weights_for_sampler', { path: name }, 'save_weights_for_sampler')) as {
      path?: string;
    } | null;
    if (typeof result?.path !== 'string')
      throw this.session.malformed('/api/v1/save_weights_for_sampler', 'path', result);
    return result.path;
  }

  /**
   * arbor serve reports its optimizer step in optim_step's metrics: one optim_step must move it by one.
   * More means an optimizer step was applied twice (a retried request the trainer ran twice).
   */
  private checkTrainerStep(reported: number | undefined): void {
    if (typeof reported !== 'number' || !Number.isFinite(reported)) return;
    const before = this.trainerStep;
    this.trainerStep = reported;
    if (before !== undefined && reported > before + 1)
      throw new ArborError(
        `tinker: ${this.client.baseUrl} reports optimizer step ${reported} after ${before}: an optimizer step was ` +
          'applied more than once; stopping (resume from the last checkpoint: arbor train --resume RUN_DIR)',
      );
  }

  async saveState(dir: string): Promise<void> {
    const modelId = await this.ensureModel();
    const name = `arbor-state-${dir.replace(/[^A-Za-z0-9_-]+/g, '_').slice(-100)}`;
    const result = (await this.op('/api/v1/save_weights', { path: name }, 'save_weights')) as { path?: string } | null;
    if (typeof result?.path !== 'string') throw this.session.malformed('/api/v1/save_weights', 'path', result);
    mkdirSync(dir, { recursive: true });
    const state: TinkerState = {
      modelId,
      path: result.path,
      steps: this.steps,
      version: this.version,
      baseModel: this.options.baseModel,
      ...(this.samplerPath !== undefined ? { samplerPath: this.samplerPath } : {}),
      ...(this.trainerStep !== undefined ? { trainerStep: this.trainerStep } : {}),
    };
    writeFileAtomic(join(dir, 'tinker-state.json'), JSON.stringify(state, null, 2) + '\n');
  }

  /**
   * Resume: load_weights is allowed only as a model's first request (hosted Tinker and SkyRL tx both
   * answer 400 otherwise), so a fresh model is created and the saved weights and optimiser state are
   * loaded into it as its first request; the new model replaces any model this trainer had. Its weights
   * are then saved for the sampler again and published as the checkpoint's version: the sampling
   * servers may hold a later version (the run went on past the checkpoint) or nothing (they restarted).
   */
  async loadState(dir: string): Promise<void> {
    const file = join(dir, 'tinker-state.json');
    let state: TinkerState;
    try {
      state = JSON.parse(await readFile(file, 'utf8')) as TinkerState;
    } catch (cause) {
      throw new DataError(
        `${file}: cannot read the Tinker trainer state: ${(cause as Error).message}`,
        file,
        undefined,
        undefined,
        { cause },
      );
    }
    if (typeof state.path !== 'string')
      throw new DataError(
        `${file}: field "path" must be the tinker:// path of the saved weights`,
        file,
        undefined,
        'path',
      );
    this.model = undefined;
    await this.ensureModel();
    await this.op('/api/v1/load_weights', { path: state.path, optimizer: true }, 'load_weights');
    this.steps = state.steps;
    this.version = state.version;
    this.trainerStep = state.trainerStep;
    this.samplerPath = await this.saveSamplerWeights(`arbor-v${state.version}-resumed`);
    await this.options.onSamplerWeights?.(this.samplerPath, this.version);
  }

  private warnOnce(key: string, message: string): void {
    if (this.warned.has(key)) return;
    this.warned.add(key);
    this.options.warn?.(message);
  }
}

/** Log-probs and loss from a forward(_backward) result, as hosted Tinker, SkyRL tx or arbor serve send it. */
export function parseForwardOutput(
  result: unknown,
  data: Datum[],
  malformed: (field: string) => Error,
): ForwardBackwardResult {
  const r = result as ForwardBackwardOutput | null;
  if (!Array.isArray(r?.loss_fn_outputs) || r.loss_fn_outputs.length !== data.length)
    throw malformed('loss_fn_outputs');
  const logprobs = r.loss_fn_outputs.map((o, i) => {
    const lp = o.logprobs?.data;
    if (!Array.isArray(lp) || lp.length !== data[i].targetTokens.length)
      throw malformed(`loss_fn_outputs[${i}].logprobs`);
    return lp;
  });
  const metrics = { ...(r.metrics ?? {}) };
  let loss = metrics['loss:sum'] ?? metrics['loss'];
  if (loss === undefined && r.loss_fn_outputs.every((o) => Array.isArray(o.elementwise_loss?.data))) {
    // SkyRL tx: metrics {} — the loss is the sum of the per-token losses of every datum
    loss = r.loss_fn_outputs.reduce((sum, o) => sum + o.elementwise_loss!.data!.reduce((a, b) => a + b, 0), 0);
    metrics['loss:sum'] = loss;
  }
  return { loss: loss ?? Number.NaN, logprobs, metrics };
}
