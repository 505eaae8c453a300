/**
 * Sampler over SGLang's native `/generate` API (pinned: SGLang 0.4.x/0.5.x fields): `input_ids`,
 * `sampling_params` {max_new_tokens, temperature, top_p, top_k, stop_token_ids, sampling_seed},
 * `return_logprob`, `top_logprobs_num`, `rid`; reply `meta_info` {finish_reason.type,
 * output_token_logprobs [[logprob, id, text]], output_top_logprobs, prompt_tokens, cached_tokens}.
 * n continuations are sent as one batched request of n copies (the radix cache shares the prefix).
 * Cancellation calls `/abort_request` for every rid still running, then rejects with the abort reason.
 * `stopAfterGroups` (stop-rule.ts) also stops requests by `/abort_request`: SGLang then answers them
 * with their partial output (finish_reason abort), which is returned, not thrown.
 * After a LoRA sync requests send `lora_path: <adapter name>`. SGLang honours `sampling_seed` only
 * when launched with `--enable-deterministic-inference`; otherwise seeded runs are not reproducible.
 * Servers form a fleet (fleet.ts): a failed attempt is sent again (new rids) to another server; a
 * server that says the adapter is not loaded (restarted empty), or whose `meta_info.weight_version`
 * changed behind Arbor's back, is loaded again and its reply not used.
 * Wire format: sgl-project/sglang@001067ff python/sglang/srt/managers/io_struct.py (GenerateReqInput),
 * tokenizer_manager.py (meta_info).
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
import { HttpCallError, malformedReply, type JsonClientOptions } from './http.js';
import { SamplerFleet, StaleServerError, type FleetOptions } from './fleet.js';
import { checkReportedVersion, entropyFromTopK } from './openai-completions.js';
import { sampleWithStopRule } from './stop-rule.js';
import { usageFromWire } from '../../wire/usage.js';

export interface SGLangOptions {
  servers: Array<string | JsonClientOptions>;
  concurrencyPerServer?: number;
  /** Top-k log-probs per token used for the entropy estimate. */
  topLogprobsForEntropy?: number;
  /** Retries, timeouts, health probes and the wait with every server down (fleet.ts). */
  fleet?: Omit<FleetOptions, 'servers' | 'concurrencyPerServer'>;
}

interface SGLangMeta {
  finish_reason?: { type?: string } | null;
  prompt_tokens?: number;
  cached_tokens?: number;
  output_token_logprobs?: Array<[number, number, string | null]>;
  output_top_logprobs?: Array<Array<[number, number, string | null]> | null>;
  weight_version?: unknown;
}

let ridCounter = 0;

export class SGLangSampler implements Sampler {
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
  /** The LoRA adapter requests use (`lora_path` = its name) once one is loaded; none = base model. */
  private loraName: string | undefined;

  constructor(readonly options: SGLangOptions) {
    this.fleet = new SamplerFleet({
      ...options.fleet,
      servers: options.servers,
      concurrencyPerServer: options.concurrencyPerServer ?? 64,
    });
  }

  /** Run `swap` while no request is in flight on any server (a weight sync of servers outside the fleet). */
  readonly gate = { exclusive: <T>(swap: () => Promise<T>): Promise<T> => this.fleet.exclusive(swap) };

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

  /** Route requests to the loaded LoRA adapter (SGLang's `lora_path` takes the adapter name). */
  setLoraName(name: string): void {
    this.loraName = name;
  }

  release(): void {}

  /** Body for one request (n copies batched). */
  requestBody(request: SampleRequest, rids: string[]): Record<string, unknown> {
    if (request.forcedTokens?.length)
      throw new EngineCallError('sglang sampler: forcedTokens is not supported', { isRetryable: false });
    const n = request.n ?? 1;
    const k = Math.max(request.topLogprobs ?? 0, request.returnEntropy ? (this.options.topLogprobsForEntropy ?? 5) : 0);
    const samplingParams = (i: number): Record<string, unknown> => {
      const p: Record<string, unknown> = {
        max_new_tokens: request.maxTokens,
        temperature: request.temperature ?? 1,
        top_p: request.topP ?? 1,
        top_k: request.topK && request.topK > 0 ? request.topK : -1,
        skip_special_tokens: false,
      };
      if (request.stopTokens?.length) p.stop_token_ids = request.stopTokens;
      if (request.seed !== undefined) p.sampling_seed = (request.seed + i * 7919) >>> 0;
      return p;
    };
    const lora = this.fleet.adapter ?? this.loraName;
    return {
      ...(lora ? { lora_path: Array.from({ length: n }, () => lora) } : {}),
      input_ids: Array.from({ length: n }, () => request.tokens),
      sampling_params: Array.from({ length: n }, (_, i) => samplingParams(i)),
      return_logprob: true,
      top_logprobs_num: k,
      logprob_start_len: -1,
      rid: rids,
      stream: false,
    };
  }

  async sample(requests: SampleRequest[], options: SampleOptions = {}): Promise<SampleResult[]> {
    // stopAfterGroups: /abort_request by rid, then /generate answers with the partial output
    const aborts: Array<() => void> = [];
    return sampleWithStopRule(
      requests,
      options,
      (r, i, signal) => this.sampleOne(r, signal, (abort) => (aborts[i] = abort)),
      this.fleet.version,
      { abort: (i) => aborts[i]?.() },
    );
  }

  private async sampleOne(
    request: SampleRequest,
    signal?: AbortSignal,
    exposeAbort?: (abort: () => void) => void,
  ): Promise<SampleResult> {
    const n = request.n ?? 1;
    const { value } = await this.fleet.run(
      request.affinityKey,
      async (server, version) => {
        const { client } = server;
        const url = client.baseUrl + '/generate';
        // fresh rids per attempt: an earlier attempt's may still run on its server
        const rids = Array.from({ length: n }, () => `arbor-${process.pid}-${++ridCounter}`);
        const onAbort = () => {
          for (const rid of rids) client.call('/abort_request', { rid }).catch(() => undefined);
        };
        exposeAbort?.(onAbort);
        signal?.addEventListener('abort', onAbort, { once: true });
        const lora = this.fleet.adapter ?? this.loraName;
        try {
          const reply = await client.call<unknown>('/generate', this.requestBody(request, rids), signal);
          const items = (Array.isArray(reply) ? reply : [reply]) as Array<{ meta_info?: SGLangMeta }>;
          for (const item of items) checkReportedVersion(server, item?.meta_info?.weight_version, url);
          return parseGenerateReply(reply, request, url, version);
        } catch (error) {
          // SGLang: 400 "The following requested LoRA adapters are not loaded: ..." (sgl-project/sglang@5bf90e9d
          // python/sglang/srt/lora/lora_registry.py): the server restarted empty
          if (
            lora &&
            error instanceof HttpCallError &&
            error.details.status === 400 &&
            /not loaded/i.test(error.message)
          )
            throw new StaleServerError(
              `${url}: does not hold adapter ${lora} (${error.message})`,
              { url },
              { cause: error },
            );
          throw error;
        } finally {
          signal?.removeEventListener('abort', onAbort);
        }
      },
      signal,
    );
    return value;
  }
}

export function parseGenerateReply(
  reply: unknown,
  request: SampleRequest,
  url: string,
  weightVersion: number,
): SampleResult {
  const malformed = malformedReply(url, reply);
  const items = (Array.isArray(reply) ? reply : [reply]) as Array<{ meta_info?: SGLangMeta; output_ids?: number[] }>;
  const n = request.n ?? 1;
  if (items.length !== n) throw malformed(`expected ${n} outputs, got ${items.length}`);
  let promptComputed = 0;
  let reused = 0;
  let decoded = 0;
  const completions: SampleCompletion[] = items.map((item, i) => {
    const meta = item?.meta_info;
    if (!meta || !Array.isArray(meta.output_token_logprobs))
      throw malformed(`[${i}].meta_info.output_token_logprobs missing`);
    const tokens = meta.output_token_logprobs.map((e, j) => {
      if (!Array.isArray(e) || typeof e[1] !== 'number')
        throw malformed(`[${i}].meta_info.output_token_logprobs[${j}] is not [logprob, id, text]`);
      return e[1];
    });
    const logprobs = meta.output_token_logprobs.map((e, j) => {
      if (typeof e[0] !== 'number' || !Number.isFinite(e[0]))
        throw malformed(`[${i}].meta_info.output_token_logprobs[${j}][0] is ${e[0]}`);
      return e[0];
    });
    const type = meta.finish_reason?.type;
    const completion: SampleCompletion = {
      tokens,
      logprobs,
      finishReason: type === 'stop' ? 'stop' : type === 'abort' ? 'abort' : 'length',
    };
    if (meta.output_top_logprobs && (request.returnEntropy || request.topLogprobs)) {
      const top = meta.output_top_logprobs.map((row) => (row ?? []).map((e) => [e[1], e[0]] as [number, number]));
      if (request.topLogprobs) completion.topLogprobs = top;
      if (request.returnEntropy) completion.entropies = top.map(entropyFromTopK);
    }
    const usage = usageFromWire(
      { prompt_tokens: meta.prompt_tokens ?? request.tokens.length, cached_tokens: meta.cached_tokens ?? 0 },
      tokens.length,
    );
    promptComputed += usage.promptTokensComputed;
    reused += usage.prefixTokensReused;
    decoded += usage.tokensDecoded;
    return completion;
  });
  return {
    completions,
    usage: { promptTokensComputed: promptComputed, prefixTokensReused: reused, tokensDecoded: decoded },
    weightVersion,
  };
}
