/**
 * Sampler over Tinker's sampling API, so a run needs no GPU of its own: a sampling session
 * (`create_sampling_session` from the base model, then from each `save_weights_for_sampler` path),
 * and per request one `asample` with the context as a `ModelInput` of token chunks, `num_samples` =
 * n, stop tokens, seed, and the log-probs Tinker returns with every sampled token. Tree rollouts send
 * the shared prefix as the prompt and the branching factor as num_samples. Tinker returns no top-k
 * log-probs, so entropy and top-k are not offered (strategies that need them fail clearly); there is
 * no abort endpoint, so a stopped request is cancelled client-side (its future runs out on the server).
 */
import { EngineCallError } from '../../core/errors.js';
import type {
  SampleCompletion,
  SampleOptions,
  SampleRequest,
  SampleResult,
  Sampler,
  SamplerCapabilities,
} from '../types.js';
import { malformedReply } from './http.js';
import { sampleWithStopRule } from './stop-rule.js';
import type { TinkerSession } from './tinker-session.js';
import type {
  CreateSamplingSessionRequest,
  TinkerSampleRequest,
  TinkerSampleResponse,
  TinkerSamplingParams,
} from '../../wire/tinker.js';

/**
 * Wire types (wire/tinker.ts, shared with `arbor serve`) from thinking-machines-lab/tinker@d595dc2
 * (v0.25.0) src/tinker/types/ and lib/public_interfaces/sampling_client.py (`seq_id` = the sampling
 * client's request counter from 0); SkyRL@a956457 skyrl/tinker/api.py (SampleRequest: max_tokens required).
 */
export type {
  CreateSamplingSessionRequest,
  TinkerSampleRequest,
  TinkerSampleResponse,
  TinkerSamplingParams,
} from '../../wire/tinker.js';

export interface TinkerSamplerOptions {
  session: TinkerSession;
  /** Base model to sample from until the first weights are published. */
  baseModel: string;
}

export class TinkerSampler implements Sampler {
  readonly specificationVersion = 'arbor.sampler.v1' as const;
  readonly capabilities: SamplerCapabilities = {
    entropy: false,
    topLogprobs: false,
    forcedTokens: false,
    cacheHandles: false,
    prefixCaching: false,
  };
  private samplingSession: Promise<string> | undefined;
  private seq = 0;
  private version = 0;

  constructor(readonly options: TinkerSamplerOptions) {}

  get session(): TinkerSession {
    return this.options.session;
  }

  weightVersion(): number {
    return this.version;
  }

  setWeightVersion(version: number): void {
    this.version = version;
  }

  release(): void {}

  async close(): Promise<void> {
    this.session.close();
  }

  /** Sample from the weights at `modelPath` (a `tinker://…/sampler_weights/…` path) from now on. */
  async useWeights(modelPath: string, version: number): Promise<void> {
    const next = this.createSamplingSession({ model_path: modelPath });
    await next;
    this.samplingSession = next;
    this.seq = 0;
    this.version = version;
  }

  /** The request body for one SampleRequest (exported for tests and docs). */
  requestBody(request: SampleRequest, samplingSessionId: string, seqId: number): TinkerSampleRequest {
    if (request.forcedTokens?.length)
      throw new EngineCallError('tinker sampler: forcedTokens is not supported by Tinker sampling', {
        isRetryable: false,
      });
    if (request.distinctFirstTokens)
      throw new EngineCallError('tinker sampler: distinctFirstTokens is not supported by Tinker sampling', {
        isRetryable: false,
      });
    const params: TinkerSamplingParams = {
      max_tokens: request.maxTokens,
      temperature: request.temperature ?? 1,
      top_p: request.topP ?? 1,
      top_k: request.topK && request.topK > 0 ? request.topK : -1,
    };
    if (request.stopTokens?.length) params.stop = request.stopTokens;
    if (request.seed !== undefined) params.seed = request.seed;
    return {
      sampling_session_id: samplingSessionId,
      seq_id: seqId,
      num_samples: request.n ?? 1,
      prompt: { chunks: [{ type: 'encoded_text', tokens: request.tokens }] },
      sampling_params: params,
      prompt_logprobs: false,
      topk_prompt_logprobs: 0,
      type: 'sample',
    };
  }

  async sample(requests: SampleRequest[], options: SampleOptions = {}): Promise<SampleResult[]> {
    return sampleWithStopRule(requests, options, (r, _i, signal) => this.sampleOne(r, signal), this.version);
  }

  private async sampleOne(request: SampleRequest, signal?: AbortSignal): Promise<SampleResult> {
    const version = this.version;
    this.samplingSession ??= this.createSamplingSession({ base_model: this.options.baseModel });
    const sessionId = await this.samplingSession;
    const result = await this.session.submit(
      '/api/v1/asample',
      { ...this.requestBody(request, sessionId, this.seq++) },
      signal,
    );
    return parseSampleResponse(result, request, `${this.session.client.baseUrl}/api/v1/asample`, version);
  }

  private async createSamplingSession(from: { model_path?: string; base_model?: string }): Promise<string> {
    const sessionId = await this.session.ensure();
    const body: CreateSamplingSessionRequest = {
      session_id: sessionId,
      sampling_session_seq_id: this.session.nextSamplingSessionSeqId(),
      ...from,
      type: 'create_sampling_session',
    };
    const reply = await this.session.client.call<{ sampling_session_id?: unknown }>(
      '/api/v1/create_sampling_session',
      body,
    );
    if (typeof reply?.sampling_session_id !== 'string')
      throw this.session.malformed('/api/v1/create_sampling_session', 'sampling_session_id', reply);
    return reply.sampling_session_id;
  }
}

/** Parse an asample result into a SampleResult; throws EngineCallError naming the bad field. */
export function parseSampleResponse(
  result: unknown,
  request: SampleRequest,
  url: string,
  weightVersion: number,
): SampleResult {
  const malformed = malformedReply(url, result);
  const sequences = (result as TinkerSampleResponse | null)?.sequences;
  const n = request.n ?? 1;
  if (!Array.isArray(sequences)) throw malformed('missing "sequences" array');
  if (sequences.length !== n) throw malformed(`expected ${n} sequences (num_samples), got ${sequences.length}`);
  const completions: SampleCompletion[] = sequences.map((s, i) => {
    if (!Array.isArray(s?.tokens) || !s.tokens.every((t) => Number.isInteger(t)))
      throw malformed(`sequences[${i}].tokens is not a token-id array`);
    if (!Array.isArray(s.logprobs) || s.logprobs.length !== s.tokens.length)
      throw malformed(`sequences[${i}].logprobs must hold one log-prob per token`);
    s.logprobs.forEach((x, j) => {
      if (typeof x !== 'number' || !Number.isFinite(x)) throw malformed(`sequences[${i}].logprobs[${j}] is ${x}`);
    });
    return { tokens: s.tokens, logprobs: s.logprobs, finishReason: s.stop_reason === 'stop' ? 'stop' : 'length' };
  });
  const decoded = completions.reduce((sum, c) => sum + c.tokens.length, 0);
  return {
    completions,
    usage: { promptTokensComputed: request.tokens.length, prefixTokensReused: 0, tokensDecoded: decoded },
    weightVersion,
  };
}
