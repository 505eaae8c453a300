/**
 * Sampler over an OpenAI-compatible `/v1/completions` endpoint as vLLM serves it (pinned: vLLM
 * 0.10.2+ request/response fields), token-in/token-out: `prompt` is a token-id list; the reply's
 * `choices[i].token_ids` (vLLM `return_token_ids`) or, for older servers, the `token_id:N` strings of
 * `logprobs.tokens` (`return_tokens_as_token_ids`) give the new ids. Entropy is estimated from the
 * top-k log-probs when k ≥ 1 (a lower bound; exact entropy is not served). Prefix reuse relies on the
 * server's automatic prefix caching (`--enable-prefix-caching`); `cache_salt` isolates weight versions.
 * Cache handles are not supported (requests re-send the full prefix, which the server's cache serves).
 * `stopAfterGroups` (stop-rule.ts) cancels the requests still in flight once enough groups finished;
 * they come back as `abort` completions without tokens. After a LoRA sync `model` is the adapter
 * name (vLLM routes by it). Cached prompt tokens are reported only with
 * `--enable-prompt-tokens-details`; log-probs are of the sampling distribution only with
 * `--logprobs-mode processed_logprobs` (default: raw model log-probs).
 * Wire format: vllm-project/vllm@002032ee vllm/entrypoints/openai/completion/protocol.py
 * (CompletionRequest, CompletionResponseChoice.token_ids), serving.py@cc139d8e.
 */
import { EngineCallError } from '../../core/errors.js';
import { sampleWithStopRule } from './stop-rule.js';
import type {
  SampleCompletion,
  SampleOptions,
  SampleRequest,
  SampleResult,
  Sampler,
  SamplerCapabilities,
} from '../types.js';
import { malformedReply, type JsonClientOptions } from './http.js';
import { ServerPool } from './balancer.js';
import { usageFromWire } from './usage.js';
import { SwapGate } from './weight-sync.js';

export interface OpenAICompletionsOptions {
  /** One or more servers (base URLs without /v1). Requests with the same affinityKey stick to one. */
  servers: Array<string | JsonClientOptions>;
  /** The served model name (vLLM `--served-model-name`, or the HF id); after a LoRA sync, the adapter name. */
  model: string;
  /** Requests in flight per server. */
  concurrencyPerServer?: number;
  /** Top-k log-probs to request per token (≥1 gives an entropy estimate). */
  logprobs?: number;
  /** Send `cache_salt: "<prefix>-v<weightVersion>"` so stale prefix-cache entries are never reused. */
  cacheSalt?: string | null;
}

/** The subset of a vLLM completion choice we read. */
interface CompletionChoice {
  index: number;
  text?: string;
  token_ids?: number[] | null;
  finish_reason: string | null;
  logprobs?: {
    tokens?: string[];
    token_logprobs?: Array<number | null>;
    top_logprobs?: Array<Record<string, number> | null> | null;
  } | null;
}

export class OpenAICompletionsSampler implements Sampler {
  readonly specificationVersion = 'arbor.sampler.v1' as const;
  readonly capabilities: SamplerCapabilities = {
    entropy: true,
    topLogprobs: true,
    forcedTokens: false,
    cacheHandles: false,
    prefixCaching: true,
  };
  private readonly pool: ServerPool;
  private version = 0;
  /** The `model` requests name: the served base model, then the LoRA adapter once one is loaded. */
  private model: string;
  /** Held by every request; a LoRA swap waits until none is in flight (weight-sync.ts). */
  readonly gate = new SwapGate();

  constructor(readonly options: OpenAICompletionsOptions) {
    this.pool = new ServerPool(options.servers, options.concurrencyPerServer ?? 64);
    this.model = options.model;
  }

  /** vLLM serves a LoRA adapter only to requests whose `model` is the adapter's name. */
  setModel(model: string): void {
    this.model = model;
  }

  weightVersion(): number {
    return this.version;
  }

  /** Close idle keep-alive connections. */
  async close(): Promise<void> {
    for (const c of this.pool.clients) c.close();
  }

  /** Called by the weight-sync hook after the server loaded new weights. */
  setWeightVersion(version: number): void {
    this.version = version;
  }

  release(): void {
    // No handles: the server's prefix cache evicts on its own.
  }

  /** The request body sent for one SampleRequest (exported for tests and docs). */
  requestBody(request: SampleRequest): Record<string, unknown> {
    if (request.forcedTokens?.length) {
      throw new EngineCallError(
        'openai-completions sampler: forcedTokens is not supported by /v1/completions; use the embedded engine or SGLang',
        { isRetryable: false },
      );
    }
    const k = Math.max(request.topLogprobs ?? 0, request.returnEntropy ? (this.options.logprobs ?? 5) : 1);
    const body: Record<string, unknown> = {
      model: this.model,
      prompt: request.tokens,
      n: request.n ?? 1,
      max_tokens: request.maxTokens,
      temperature: request.temperature ?? 1,
      top_p: request.topP ?? 1,
      top_k: request.topK && request.topK > 0 ? request.topK : -1,
      logprobs: k,
      return_tokens_as_token_ids: true,
      return_token_ids: true,
      skip_special_tokens: false,
      include_stop_str_in_output: true,
    };
    if (request.seed !== undefined) body.seed = request.seed;
    if (request.stopTokens?.length) body.stop_token_ids = request.stopTokens;
    if (this.options.cacheSalt !== null) body.cache_salt = `${this.options.cacheSalt ?? 'arbor'}-v${this.version}`;
    return body;
  }

  async sample(requests: SampleRequest[], options: SampleOptions = {}): Promise<SampleResult[]> {
    return sampleWithStopRule(requests, options, (r, _i, signal) => this.sampleOne(r, signal), this.version);
  }

  private async sampleOne(request: SampleRequest, signal?: AbortSignal): Promise<SampleResult> {
    const client = this.pool.pick(request.affinityKey);
    const version = this.version;
    const reply = await this.gate.run(() =>
      client.call<Record<string, unknown>>('/v1/completions', this.requestBody(request), signal),
    );
    return parseCompletionsReply(reply, request, client.baseUrl + '/v1/completions', version);
  }
}

/** Parse a /v1/completions reply into a SampleResult; throws EngineCallError on malformed input. */
export function parseCompletionsReply(
  reply: Record<string, unknown>,
  request: SampleRequest,
  url: string,
  weightVersion: number,
): SampleResult {
  const malformed = malformedReply(url, reply);
  if (!reply || !Array.isArray(reply.choices)) throw malformed('missing "choices" array');
  const n = request.n ?? 1;
  const choices = (reply.choices as CompletionChoice[]).slice().sort((a, b) => a.index - b.index);
  if (choices.length !== n) throw malformed(`expected ${n} choices, got ${choices.length}`);
  const completions: SampleCompletion[] = choices.map((choice, i) => parseChoice(choice, i, request, malformed));
  // cached_tokens is reported only by servers started with --enable-prompt-tokens-details
  const usage = (reply.usage ?? {}) as {
    prompt_tokens?: number;
    prompt_tokens_details?: { cached_tokens?: number } | null;
  };
  const decoded = completions.reduce((s, c) => s + c.tokens.length, 0);
  return {
    completions,
    usage: usageFromWire(
      {
        prompt_tokens: usage.prompt_tokens ?? request.tokens.length,
        cached_tokens: usage.prompt_tokens_details?.cached_tokens ?? 0,
      },
      decoded,
      n,
    ),
    weightVersion,
  };
}

function parseChoice(
  choice: CompletionChoice,
  i: number,
  request: SampleRequest,
  malformed: (w: string) => Error,
): SampleCompletion {
  const lp = choice.logprobs;
  if (!lp || !Array.isArray(lp.token_logprobs))
    throw malformed(`choices[${i}].logprobs.token_logprobs missing (was logprobs requested?)`);
  let tokens: number[];
  if (Array.isArray(choice.token_ids)) tokens = choice.token_ids;
  else if (Array.isArray(lp.tokens))
    tokens = lp.tokens.map((t, j) => parseTokenId(t, `choices[${i}].logprobs.tokens[${j}]`, malformed));
  else throw malformed(`choices[${i}] has neither token_ids nor logprobs.tokens`);
  if (tokens.length !== lp.token_logprobs.length)
    throw malformed(`choices[${i}]: ${tokens.length} tokens but ${lp.token_logprobs.length} logprobs`);
  const logprobs = lp.token_logprobs.map((x, j) => {
    if (typeof x !== 'number' || !Number.isFinite(x))
      throw malformed(`choices[${i}].logprobs.token_logprobs[${j}] is ${x}`);
    return x;
  });
  const completion: SampleCompletion = { tokens, logprobs, finishReason: finishReason(choice.finish_reason) };
  if (lp.top_logprobs && (request.returnEntropy || (request.topLogprobs ?? 0) > 0)) {
    const top = lp.top_logprobs.map((entry, j) =>
      Object.entries(entry ?? {}).map(
        ([t, v]) => [parseTokenId(t, `choices[${i}].logprobs.top_logprobs[${j}]`, malformed), v] as [number, number],
      ),
    );
    if (request.topLogprobs) completion.topLogprobs = top;
    if (request.returnEntropy) completion.entropies = top.map(entropyFromTopK);
  }
  return completion;
}

/** Entropy estimate from top-k log-probs: the top-k terms plus the leftover mass as one bucket. */
export function entropyFromTopK(top: Array<[number, number]>): number {
  let h = 0;
  let mass = 0;
  for (const [, lp] of top) {
    const p = Math.exp(lp);
    mass += p;
    if (p > 0) h -= p * lp;
  }
  const rest = 1 - mass;
  if (rest > 1e-9) h -= rest * Math.log(rest);
  return h;
}

function parseTokenId(text: string, where: string, malformed: (w: string) => Error): number {
  const m = /^token_id:(\d+)$/.exec(text);
  if (!m)
    throw malformed(
      `${where} is "${text}", expected "token_id:<id>" (start vLLM with return_tokens_as_token_ids support)`,
    );
  return Number(m[1]);
}

function finishReason(reason: string | null): SampleCompletion['finishReason'] {
  if (reason === 'stop') return 'stop';
  if (reason === 'abort') return 'abort';
  return 'length';
}
