/**
 * The two engine interfaces every backend implements: `Sampler` (tokens in → tokens, log-probs out)
 * and `Trainer` (datums in → gradients, optimiser steps), modelled on the Tinker API so remote clients
 * stay thin. The embedded engine (`engine/embedded`, over `engine/model`) implements both in-process; `engine/remote` speaks
 * vLLM/SGLang/Tinker over HTTP. Stages depend on these types only, never on a concrete engine.
 */

import type { LossSpec, SampleUsage } from '../wire/types.js';

// the shapes that also cross the wire (Tinker's loss, the servers' usage) are defined in wire/
export type { LossSpec, SampleUsage };

/** One sampling request: continue `tokens` with `n` independent continuations. */
export interface SampleRequest {
  /** Full context token ids (prompt + response so far). */
  tokens: number[];
  /**
   * Handle of a cached sequence returned by an earlier completion whose tokens are a prefix of
   * `tokens` (engines with explicit prefix sharing fork it instead of recomputing). Optional hint:
   * engines without handles, or with an unknown/expired handle, recompute or use their own cache.
   */
  cacheHandle?: string;
  /** Number of continuations (children) to sample from this context. Default 1. */
  n?: number;
  /** Maximum new tokens per continuation (a segment may be short). */
  maxTokens: number;
  /** Softmax temperature; 0 = greedy. Default 1. */
  temperature?: number;
  /** Nucleus sampling mass in (0, 1]. Default 1. */
  topP?: number;
  /** Keep only the k most likely tokens; 0 or -1 = off. */
  topK?: number;
  /** Token ids that end a continuation (the stop token is included in the output). */
  stopTokens?: number[];
  /** Seed for this request's sampling; continuation i uses a stream derived from (seed, i). */
  seed?: number;
  /**
   * One seed per continuation (length n; samplers with `capabilities.seedPerContinuation`): continuation i
   * samples exactly as a request with n = 1 and seed `seeds[i]` would, so requests for the same context
   * can be merged into one (the agent gateway's batching) without changing what each samples.
   */
  seeds?: number[];
  /**
   * The n continuations start with n different tokens: continuation i's first token is sampled from
   * the distribution with the first tokens of continuations 0..i−1 removed (sampling without
   * replacement; TreePO `distinct`). Recorded log-probs stay the model's, unrenormalised.
   */
  distinctFirstTokens?: boolean;
  /** Force the first token of continuation i to `forcedTokens[i]` (LATR branching). */
  forcedTokens?: number[];
  /** Return per-token entropy of the sampling distribution. */
  returnEntropy?: boolean;
  /** Return the top-k log-probs at every position (0 = none). */
  topLogprobs?: number;
  /**
   * Return each continuation's last hidden state (`SampleCompletion.hidden`): the final-norm
   * activation from which its last token was sampled (a quality-head feature at a segment boundary).
   * Only samplers with `capabilities.hiddenSize` honour it.
   */
  returnHidden?: boolean;
  /** Keep each continuation's KV state alive and return a `cacheHandle` for it. */
  retain?: boolean;
  /** Draw on from the generator retained with `cacheHandle` (n = 1, no `seed`): segments sample as one request. */
  continueRandom?: boolean;
  /** Affinity key (e.g. tree id): requests with the same key go to the same server when balancing. */
  affinityKey?: string;
}

/** One sampled continuation. */
export interface SampleCompletion {
  /** New token ids (includes the stop token if one was produced). */
  tokens: number[];
  /** Sampling log-prob of each new token under the (temperature-scaled, truncated) distribution. */
  logprobs: number[];
  /** Entropy (nats) of the sampling distribution at each new token, when requested and available. */
  entropies?: number[];
  /** Top-k (token, log-prob) pairs per position, when requested. */
  topLogprobs?: Array<Array<[number, number]>>;
  /** The last hidden state (length `capabilities.hiddenSize`), when `returnHidden` was set. */
  hidden?: number[];
  /** `stop`: stop token produced; `length`: maxTokens reached; `abort`: cancelled. */
  finishReason: 'stop' | 'length' | 'abort';
  /** Handle of the KV state after this continuation, when `retain` was set and supported. */
  cacheHandle?: string;
}

export interface SampleResult {
  completions: SampleCompletion[];
  usage: SampleUsage;
  /** Weight version that produced these tokens. */
  weightVersion: number;
}

/** What a sampler can do; generators check these and fail clearly if something is missing. */
export interface SamplerCapabilities {
  entropy: boolean;
  topLogprobs: boolean;
  forcedTokens: boolean;
  cacheHandles: boolean;
  /** Automatic prefix caching of re-sent prefixes (vLLM/SGLang). */
  prefixCaching: boolean;
  /** `SampleRequest.distinctFirstTokens` is honoured (absent = no). */
  distinctFirstTokens?: boolean;
  /** Width of the hidden state `SampleRequest.returnHidden` returns (absent or 0 = not supported). */
  hiddenSize?: number;
  /** `SampleRequest.seeds` is honoured (absent = no). */
  seedPerContinuation?: boolean;
}

/** Options of one sample() call. */
export interface SampleOptions {
  /** Cancel the call (shutdown); the embedded sampler stops between decode steps. */
  signal?: AbortSignal;
  /**
   * Partial rollouts: `groupOf[i]` is the group of request i; once `count` groups have all their
   * continuations finished (stop/length), every continuation still running ends with finishReason
   * `abort`, keeping the tokens produced so far (count ≤ 0: at once). The embedded sampler applies it
   * exactly after each decode step (deterministic); remote samplers count groups as replies arrive and
   * then stop the requests still in flight (timing-dependent; see engine/remote/stop-rule.ts).
   */
  stopAfterGroups?: { groupOf: number[]; count: number };
}

export interface Sampler {
  readonly specificationVersion: 'arbor.sampler.v1';
  readonly capabilities: SamplerCapabilities;
  /** Sample all requests (engines batch them together). Results are in request order. */
  sample(requests: SampleRequest[], options?: SampleOptions): Promise<SampleResult[]>;
  /** Release retained cache handles. Unknown handles are ignored. */
  release(handles: string[]): void;
  /** Current weight version. */
  weightVersion(): number;
  close?(): Promise<void>;
}

/**
 * One training sequence. All per-token arrays have length T = inputTokens.length, aligned with
 * `targetTokens` (input = sequence[:-1], target = sequence[1:]).
 */
export interface Datum {
  inputTokens: number[];
  targetTokens: number[];
  /**
   * Per-token loss weight. The trainer's loss is sum_t weights[t] * loss_t; aggregation
   * (token_mean, seq_mean_token_mean, ...) and masks are encoded here by the caller.
   */
  weights: number[];
  /** Behaviour-policy log-prob of each target token (policy losses). */
  samplingLogprobs?: number[];
  /** Per-token advantage (policy losses). */
  advantages?: number[];
  /** Reference-policy log-probs for the KL penalty (optional). */
  referenceLogprobs?: number[];
}

/** Extra terms added to every policy loss. */
export interface LossExtras {
  /** Coefficient of the k3 KL estimator to `referenceLogprobs` (0 = off). */
  klCoef?: number;
  /** Coefficient of an entropy bonus (0 = off). */
  entropyCoef?: number;
}

export interface ForwardBackwardResult {
  /** Sum over datums and tokens of weights * loss. */
  loss: number;
  /** Current-policy log-prob of each target token, per datum. */
  logprobs: number[][];
  /** clip_fraction, approx_kl, entropy, ... (loss-dependent). */
  metrics: Record<string, number>;
}

export interface AdamParams {
  learningRate: number;
  beta1?: number;
  beta2?: number;
  eps?: number;
  weightDecay?: number;
  /** Clip the global gradient norm to this value (0 = off). */
  gradClipNorm?: number;
}

export interface OptimStepResult {
  /** Global gradient norm before clipping. */
  gradNorm: number;
  /** Number of optimiser steps taken so far. */
  step: number;
  /** The gradient was NaN or infinite and nothing was applied (weights and moments unchanged). */
  skipped?: boolean;
}

export interface Trainer {
  readonly specificationVersion: 'arbor.trainer.v1';
  /** Forward and backward; gradients accumulate until `optimStep`. */
  forwardBackward(data: Datum[], loss: LossSpec, extras?: LossExtras): Promise<ForwardBackwardResult>;
  /** Apply accumulated gradients with AdamW, then zero them. */
  optimStep(params: AdamParams): Promise<OptimStepResult>;
  /** Discard accumulated gradients without stepping (after a failed forward/backward); absent = nothing to discard. */
  zeroGrad?(): void;
  /** Start over as a fresh optimizer (no moments, step 0, no accumulated gradients; weights kept); absent = cannot. */
  reset?(): void;
  /** Current-policy log-probs of each datum's target tokens (no gradient). */
  logprobs(data: Datum[]): Promise<number[][]>;
  /** Publish current weights to the sampler; returns the new weight version. */
  saveForSampler(): Promise<{ weightVersion: number; path?: string }>;
  /** Save full training state (weights + optimiser) into `dir`. */
  saveState(dir: string): Promise<void>;
  /** Load full training state from `dir`. */
  loadState(dir: string): Promise<void>;
}

/** A tool call inside an assistant message, as transformers and OpenAI write it. */
export interface ChatToolCall {
  type?: 'function';
  id?: string;
  /** `arguments`: an object, or a JSON string (passed to the template unchanged, as transformers does). */
  function: { name: string; arguments: Record<string, unknown> | string };
}

/** One chat message as chat templates read it (`role` is free: system, user, assistant, tool, ...). */
export interface ChatMessage {
  role: string;
  /** null: an assistant turn that only calls tools (a template may refuse it, as in Python). */
  content: string | null;
  tool_calls?: ChatToolCall[];
  tool_call_id?: string;
  name?: string;
  /** Read by reasoning templates (Qwen3) instead of a `<think>` block inside `content`. */
  reasoning_content?: string;
}

/** A tool offered to a chat template: a JSON-schema dict (transformers' `get_json_schema` shape). */
export interface ChatTool {
  type: 'function';
  function: { name: string; description?: string; parameters?: Record<string, unknown> };
}

/** Options of `applyChatTemplate` / `encodeChat` (transformers' `apply_chat_template` arguments). */
export interface ChatTemplateOptions {
  tools?: ChatTool[];
  /** Append the assistant header after the last message (default false, as in transformers). */
  addGenerationPrompt?: boolean;
  /** Cut the text after the last message's content so the model continues it (not with addGenerationPrompt). */
  continueFinalMessage?: boolean;
  /** A template name (a tokenizer with named templates) or a whole template source. */
  template?: string;
  /** Extra template variables (e.g. `enable_thinking: false`); they override the special-token strings. */
  kwargs?: Record<string, unknown>;
}

/** Text ↔ token ids for a run (the embedded char tokenizer, or a Hugging Face tokenizer). */
export interface TextTokenizer {
  /** Prepended to every prompt when defined. */
  readonly bos: number | undefined;
  /** Ends a response (used as the stop token). */
  readonly eos: number;
  /** Every id that ends a response (generation_config.json's eos_token_id ∪ eos, eos first); absent = [eos]. */
  readonly eosIds?: readonly number[];
  /** Largest token id + 1. */
  readonly vocabSize?: number;
  encode(text: string): number[];
  /** Encode text whose special-token strings must stay text (tool output); absent = `encode` (no special tokens in the text's alphabet). */
  encodePlain?(text: string): number[];
  /** Decode ids, dropping special tokens. */
  decode(ids: number[]): string;
  /** Render chat messages with the model's chat template (Hugging Face tokenizers only). */
  applyChatTemplate?(messages: ChatMessage[], options?: ChatTemplateOptions): string;
  /** Render, then encode without special tokens (transformers' `apply_chat_template(tokenize=True)`). */
  encodeChat?(messages: ChatMessage[], options?: ChatTemplateOptions): number[];
  /** The raw vocabulary string of an id (`Ġthe`), as `convert_ids_to_tokens`. */
  idToToken?(id: number): string | undefined;
}
