/**
 * Tinker's sampling and training bodies as zod schemas, written once for both sides: the Tinker client
 * (engine/remote/tinker-sampler.ts, engine/remote/tinker.ts) builds its requests as these types, and
 * `arbor serve`'s Tinker routes (serve/tinker/) read the fields with these schemas, a bad one a 400
 * naming it (`field "prompt.chunks[0].type": only encoded_text chunks are supported`). The loss is
 * wire/tinker-loss.ts. Bounds a server chooses (`--max-n`, its context and vocabulary) are the
 * server's. Fields follow thinking-machines-lab/tinker types (model_input.py, encoded_text_chunk.py,
 * sampling_params.py, sample_request.py, sample_response.py, create_sampling_session_request.py,
 * datum.py, tensor_data.py) and SkyRL@a956457 skyrl/tinker/api.py (max_tokens required).
 */
import { z } from 'zod';
import { integerField, numberField, tokenIdsField } from './fields.js';

/**
 * One chunk of a ModelInput: `{type: "encoded_text", tokens}` (the type may be left out, as SDK ≤ 0.2
 * sends it). A chunk that is not an object has no tokens.
 */
export const encodedTextChunkSchema = z.preprocess(
  (c) => (c !== null && typeof c === 'object' && !Array.isArray(c) ? c : {}),
  z
    .object({
      type: z
        .literal('encoded_text', { errorMap: () => ({ message: ': only encoded_text chunks are supported' }) })
        .optional(),
      tokens: tokenIdsField,
    })
    .passthrough(),
);

/** A ModelInput's `chunks`: a non-empty list of encoded-text chunks. */
export const chunksField = z
  .array(encodedTextChunkSchema, {
    invalid_type_error: 'must be a non-empty array',
    required_error: 'must be a non-empty array',
  })
  .nonempty('must be a non-empty array');

/** A ModelInput: the context as token chunks. */
export const modelInputSchema = z.object({ chunks: chunksField }).passthrough();

const TOKEN_STOPS = ': only token-id stops are supported';

/** `sampling_params.stop`: token ids only (Tinker also allows strings, which this server does not decode). */
export const tokenStopsField = z
  .array(z.unknown(), { invalid_type_error: TOKEN_STOPS })
  .refine((list): list is number[] => list.every((t) => Number.isInteger(t)), TOKEN_STOPS);

/** SamplingParams (max_tokens required by SkyRL tx and by `arbor serve`). */
export const samplingParamsSchema = z
  .object({
    max_tokens: integerField,
    temperature: numberField.nullish(),
    top_p: numberField.nullish(),
    top_k: integerField.nullish(),
    stop: tokenStopsField.nullish(),
    seed: integerField.nullish(),
  })
  .passthrough();

/** `sampling_params` as a field: an object (absent: every default). */
export const samplingParamsField = z.object({}, { invalid_type_error: 'must be an object' }).passthrough();

/** An `asample` request. */
export const sampleRequestSchema = z
  .object({
    sampling_session_id: z.string().optional(),
    seq_id: integerField.optional(),
    num_samples: integerField.nullish(),
    prompt: modelInputSchema,
    sampling_params: samplingParamsSchema,
    prompt_logprobs: z.boolean().optional(),
    topk_prompt_logprobs: integerField.optional(),
    type: z.literal('sample').optional(),
  })
  .passthrough();

/** A `create_sampling_session` request: sample the base model, or the weights at a `tinker://` path. */
export const createSamplingSessionRequestSchema = z
  .object({
    session_id: z.string(),
    sampling_session_seq_id: integerField,
    model_path: z.string().optional(),
    base_model: z.string().optional(),
    type: z.literal('create_sampling_session'),
  })
  .passthrough();

/** One sampled sequence: its tokens, their log-probs, why it stopped (`stop`, `length`). */
export const sampledSequenceSchema = z
  .object({
    tokens: z.array(z.number().int()),
    logprobs: z.array(z.number()).nullish(),
    stop_reason: z.string(),
  })
  .passthrough();

/** An `asample` result. */
export const sampleResponseSchema = z
  .object({
    type: z.literal('sample').optional(),
    sequences: z.array(sampledSequenceSchema),
    prompt_logprobs: z.array(z.number().nullable()).nullish(),
  })
  .passthrough();

/** TensorData: a flat list with its dtype and shape. */
export const tensorDataSchema = z.object({
  data: z.array(z.number()),
  dtype: z.enum(['int64', 'float32']),
  shape: z.array(z.number().int()),
});

/** A Datum: the input tokens and the loss function's inputs (target_tokens, weights, logprobs, advantages). */
export const datumSchema = z.object({ model_input: modelInputSchema, loss_fn_inputs: z.record(tensorDataSchema) });

export type EncodedTextChunk = { type: 'encoded_text'; tokens: number[] };
export type TinkerModelInput = { chunks: EncodedTextChunk[] };
export type TinkerSamplingParams = z.input<typeof samplingParamsSchema>;
export type TinkerSampleRequest = Omit<z.input<typeof sampleRequestSchema>, 'prompt'> & { prompt: TinkerModelInput };
export type CreateSamplingSessionRequest = z.input<typeof createSamplingSessionRequestSchema>;
export type TinkerSampleResponse = z.infer<typeof sampleResponseSchema>;
export type TensorData = z.infer<typeof tensorDataSchema>;
export type TinkerDatum = { model_input: TinkerModelInput; loss_fn_inputs: Record<string, TensorData> };
