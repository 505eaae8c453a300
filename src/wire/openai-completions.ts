/**
 * The OpenAI/vLLM `/v1/completions` request and response as zod schemas, written once for both sides:
 * the client (engine/remote/openai-completions.ts) builds its request as a `CompletionRequest` and reads
 * replies of this shape; `arbor serve`'s vLLM routes (serve/vllm/) read each request field with its
 * schema here, so a bad field is a 400 naming it (`field "stop_token_ids" must be an array of token ids
 * ...`). The schemas hold the JSON types and the protocol's own rules (a `stop` string or list of at
 * most 64 non-empty strings); bounds a server chooses (`--max-n`, its context length, its most
 * log-probs) are the server's. Fields follow vllm-project/vllm@002032ee
 * vllm/entrypoints/openai/completion/protocol.py (CompletionRequest, CompletionResponse,
 * CompletionResponseChoice, CompletionLogProbs) and openai/protocol.py (UsageInfo).
 */
import { z } from 'zod';
import { booleanField, integerField, numberField, tokenIdsField } from './fields.js';

/** `stop`: one string or a list of at most 64 strings, none empty (vLLM refuses an empty one); read as a list. */
export const stopField = z
  .union([z.string().transform((s) => [s]), z.array(z.string())], {
    errorMap: () => ({ message: 'must be a string or a list of strings' }),
  })
  .superRefine((list, ctx) => {
    if (list.length > 64) ctx.addIssue({ code: 'custom', message: `: ${list.length} stop strings, at most 64` });
    else if (list.some((s) => s === ''))
      ctx.addIssue({ code: 'custom', message: ': stop cannot contain an empty string.' });
  });

/** The four shapes of `prompt`: a string, a list of strings, a list of token ids, a list of token-id lists. */
export const promptShapes = {
  text: z.string(),
  texts: z.array(z.string()).nonempty(),
  ids: tokenIdsField,
  idLists: z.array(tokenIdsField).nonempty(),
} as const;

/** `prompt`, any of its four shapes. */
export const promptField = z.union([promptShapes.text, promptShapes.texts, promptShapes.idLists, promptShapes.ids], {
  errorMap: () => ({
    message: 'must be a string, a list of strings, a list of token ids or a list of token-id lists',
  }),
});

/** `stream_options` (only with `stream: true`). */
export const streamOptionsField = z.object({ include_usage: booleanField.nullish() }).passthrough();

/**
 * A /v1/completions request: the fields a client sends and a server reads (null = absent, as vLLM's
 * pydantic models read it). Other fields pass through; a server refuses those it cannot honour.
 */
export const completionRequestSchema = z
  .object({
    model: z.string().nullish(),
    prompt: promptField,
    n: integerField.nullish(),
    max_tokens: integerField.nullish(),
    temperature: numberField.nullish(),
    top_p: numberField.nullish(),
    top_k: integerField.nullish(),
    seed: integerField.nullish(),
    stop: stopField.nullish(),
    stop_token_ids: tokenIdsField.nullish(),
    ignore_eos: booleanField.nullish(),
    include_stop_str_in_output: booleanField.nullish(),
    skip_special_tokens: booleanField.nullish(),
    logprobs: integerField.nullish(),
    echo: booleanField.nullish(),
    stream: booleanField.nullish(),
    stream_options: streamOptionsField.nullish(),
    return_tokens_as_token_ids: booleanField.nullish(),
    return_token_ids: booleanField.nullish(),
    add_special_tokens: booleanField.nullish(),
    cache_salt: z.string().nullish(),
  })
  .passthrough();

/** A /v1/completions request as a client writes it. */
export type CompletionRequest = z.input<typeof completionRequestSchema>;

/** The fields of a completions request, each with its schema. */
export const completionFields = completionRequestSchema.shape;

/** A choice's `logprobs` (CompletionLogProbs): per token its text (`token_id:<id>` with return_tokens_as_token_ids). */
export const completionLogprobsSchema = z
  .object({
    text_offset: z.array(z.number()).optional(),
    tokens: z.array(z.string()).optional(),
    token_logprobs: z.array(z.number().nullable()),
    top_logprobs: z.array(z.record(z.number()).nullable()).nullish(),
  })
  .passthrough();

/** One choice of a reply (CompletionResponseChoice; `token_ids` with return_token_ids). */
export const completionChoiceSchema = z
  .object({
    index: z.number().int().nonnegative(),
    text: z.string().optional(),
    token_ids: tokenIdsField.nullish(),
    finish_reason: z.string().nullable(),
    stop_reason: z.union([z.string(), z.number()]).nullish(),
    logprobs: completionLogprobsSchema.nullish(),
    prompt_token_ids: tokenIdsField.nullish(),
  })
  .passthrough();

/** `usage` (UsageInfo; prompt_tokens_details with --enable-prompt-tokens-details, null when none cached). */
export const completionUsageSchema = z
  .object({
    prompt_tokens: z.number().int().nonnegative(),
    completion_tokens: z.number().int().nonnegative().optional(),
    total_tokens: z.number().int().nonnegative().optional(),
    prompt_tokens_details: z.object({ cached_tokens: z.number().int().nonnegative().optional() }).nullish(),
  })
  .passthrough();

/** A /v1/completions reply (CompletionResponse; SGLang's OpenAI server adds `metadata.weight_version`). */
export const completionResponseSchema = z
  .object({
    id: z.string().optional(),
    object: z.literal('text_completion').optional(),
    created: z.number().optional(),
    model: z.string().optional(),
    choices: z.array(completionChoiceSchema),
    usage: completionUsageSchema.nullish(),
    metadata: z.object({ weight_version: z.unknown().optional() }).passthrough().nullish(),
  })
  .passthrough();

export type CompletionResponse = z.infer<typeof completionResponseSchema>;
export type CompletionChoice = z.infer<typeof completionChoiceSchema>;
export type CompletionUsage = z.infer<typeof completionUsageSchema>;
