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
 * `--logprobs-mode processed_logprobs` (default: raw model log-probs). Servers form a fleet
 * (fleet.ts): failed attempts go to another server, a server that answers 404 for the adapter it
 * should hold (restarted empty) is loaded again, and a reply whose `metadata.weight_version` (SGLang's
 * OpenAI server) changed behind Arbor's back is not used.
 * Wire format: the request and reply schemas of wire/openai-completions.ts (shared with `arbor serve`),
 * after vllm-project/vllm@002032ee vllm/entrypoints/openai/completion/protocol.py (CompletionRequest,
 * CompletionResponseChoice.token_ids), serving.py@cc139d8e.
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
import { HttpCallError, malformedReply, type JsonClientOptions } from './http.js';
import { SamplerFleet, StaleServerError, type FleetOptions } from './fleet.js';
import type { CompletionChoice, CompletionRequest, CompletionUsage } from '../../wire/openai-completions.js';
import { usageFromWire } from '../../wire/usage.js';

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
  /** Retries, timeouts, health probes and the wait with every server down (fleet.ts). */
  fleet?: Omit<FleetOptions, 'servers' | 'concurrencyPerServer'>;
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
  /** The servers, their health and the weight version each holds. */
  readonly fleet: SamplerFleet;
  /** The `model` requests name: the served base model, then the LoRA adapter once one is loaded. */
  private model: string;

  constructor(readonly options: OpenAICompletionsOptions) {
    this.fleet = new SamplerFleet({
      ...options.fleet,
      servers: options.servers,
      concurrencyPerServer: options.concurrencyPerServer ?? 64,
    });
    this.model = options.model;
  }

  /** Run `swap` while no request is in flight on any server (a weight sync of servers outside the fleet). */
  readonly gate = { exclusive: <T>(swap: () => Promise<T>): Promise<T> => this.fleet.exclusive(swap) };

  /** vLLM serves a LoRA adapter only to requests whose `model` is the adapter's name. */
  setModel(model: string): void {
    this.model = model;
  }

  weightVersion(): number {
    return this.fleet.version;
  }

  /** Stop health probes and close idle keep-alive connections. */
  async close(): Promise<void> {
    this.fleet.close();
  }

  /** Publish a version without loading anything (weightSync none: another process syncs the servers). */
  setWeightVersion(version: number): void {
    void this.fleet.publish({ version });
  }

  release(): void {
    // No handles: the server's prefix cache evicts on its own.
  }

  /** The request body sent for one SampleRequest (exported for tests and docs). */
  requestBody(request: SampleRequest, version = this.fleet.version): CompletionRequest {
    if (request.forcedTokens?.length) {
      throw new EngineCallError(
        'openai-completions sampler: forcedTokens is not supported by /v1/completions; use the embedded engine or SGLang',
        { isRetryable: false },
      );
    }
    const k = Math.max(request.topLogprobs ?? 0, request.returnEntropy ? (this.options.logprobs ?? 5) : 1);
    const body: CompletionRequest = {
      model: this.fleet.adapter ?? this.model,
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
    if (this.options.cacheSalt !== null) body.cache_salt = `${this.options.cacheSalt ?? 'arbor'}-v${version}`;
    return body;
  }

  async sample(requests: SampleRequest[], options: SampleOptions = {}): Promise<SampleResult[]> {
    return sampleWithStopRule(requests, options, (r, _i, signal) => this.sampleOne(r, signal), this.fleet.version);
  }

  private async sampleOne(request: SampleRequest, signal?: AbortSignal): Promise<SampleResult> {
    const { value } = await this.fleet.run(
      request.affinityKey,
      async (server, version) => {
        const url = server.client.baseUrl + '/v1/completions';
        const model = this.fleet.adapter ?? this.model;
        let reply: Record<string, unknown>;
        try {
          reply = await server.client.call<Record<string, unknown>>(
            '/v1/completions',
            this.requestBody(request, version),
            signal,
          );
        } catch (error) {
          // vLLM answers 404 "The model `x` does not exist." for an adapter it does not hold (it restarted empty)
          if (error instanceof HttpCallError && error.details.status === 404 && model !== this.options.model)
            throw new StaleServerError(
              `${url}: does not hold adapter ${model} (${error.message})`,
              { url },
              { cause: error },
            );
          throw error;
        }
        checkReportedVersion(server, (reply.metadata as { weight_version?: unknown } | undefined)?.weight_version, url);
        return parseCompletionsReply(reply, request, url, version);
      },
      signal,
    );
    return value;
  }
}

/**
 * A reply's own weight version (SGLang `weight_version`) against the one the server reported since
 * its last sync: the first is remembered; a different one later means the server restarted or was
 * changed by someone else, and the reply is not used (StaleServerError: the server is loaded again).
 */
export function checkReportedVersion(
  server: { token?: string; version: number },
  reported: unknown,
  url: string,
): void {
  if (reported === undefined || reported === null) return;
  const token = String(reported);
  if (server.token === undefined) server.token = token;
  else if (server.token !== token)
    throw new StaleServerError(
      `${url}: reports weight version ${JSON.stringify(token)}, but held ${JSON.stringify(server.token)} ` +
        `(Arbor's version ${server.version}): it restarted or was updated by another process`,
      { url },
    );
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
  // the reply is read as the wire schema's shape; its fields are checked one by one below
  const choices = (reply.choices as CompletionChoice[]).slice().sort((a, b) => a.index - b.index);
  if (choices.length !== n) throw malformed(`expected ${n} choices, got ${choices.length}`);
  const completions: SampleCompletion[] = choices.map((choice, i) => parseChoice(choice, i, request, malformed));
  // cached_tokens is reported only by servers started with --enable-prompt-tokens-details
  const usage = (reply.usage ?? {}) as Partial<CompletionUsage>;
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
