/**
 * The engine's part of the run configuration (zod schemas with a default and a doc string for every
 * option): the embedded model, its supervised warm-start, and the engine backend (embedded, or remote
 * HTTP sampler + trainer). The run config (run/config.ts) composes them; `buildEngine` consumes them.
 */
import { availableParallelism } from 'node:os';
import { z } from 'zod';
import { Secret } from '../core/secret.js';
import { HF_ARCHITECTURES } from './formats/hf-config.js';
import { ALL_LORA_MODULES } from './model/lora.js';

const loraSchema = z
  .object({
    rank: z.number().int().min(1).max(1024).default(16).describe('r: the adapter rank'),
    alpha: z.number().positive().max(1e6).default(32).describe('α: the update is scaled by α/r (PEFT lora_alpha)'),
    targets: z
      .array(z.enum(ALL_LORA_MODULES as [string, ...string[]]))
      .min(1)
      .default([...ALL_LORA_MODULES])
      .describe(
        'linear layers that get an adapter (PEFT target_modules; default all of them: q,k,v,o,gate,up,down_proj)',
      ),
    useRslora: z.boolean().default(false).describe('scale by α/√r instead of α/r (rsLoRA)'),
    adapter: z
      .string()
      .optional()
      .describe(
        'start from this PEFT adapter directory (adapter_config.json + adapter_model.safetensors) instead of a new one (A random, B = 0)',
      ),
  })
  .strict();

const hfCreateSchema = z
  .object({
    architecture: z.enum(HF_ARCHITECTURES).default('Qwen3ForCausalLM').describe('the Hugging Face architecture'),
    tokenizer: z
      .string()
      .describe('a directory with tokenizer.json (+ tokenizer_config.json, chat template), copied into the model'),
    hiddenSize: z.number().int().min(4).max(8192).default(64).describe('hidden_size'),
    layers: z.number().int().min(1).max(128).default(2).describe('num_hidden_layers'),
    heads: z.number().int().min(1).max(128).default(4).describe('num_attention_heads'),
    kvHeads: z.number().int().min(1).max(128).default(2).describe('num_key_value_heads (grouped-query attention)'),
    headDim: z.number().int().min(2).max(512).default(32).describe('head_dim'),
    intermediateSize: z.number().int().min(1).max(65536).default(128).describe('intermediate_size (MLP width)'),
    tieWordEmbeddings: z.boolean().default(true).describe('tie_word_embeddings'),
    maxPositionEmbeddings: z
      .number()
      .int()
      .min(8)
      .max(1 << 20)
      .default(2048)
      .describe('max_position_embeddings'),
    dtype: z.enum(['F32', 'BF16', 'F16']).default('F32').describe('stored dtype of the weights'),
    seed: z
      .number()
      .int()
      .min(0)
      .max(2 ** 32 - 1)
      .default(1)
      .describe('seed of the random weights'),
  })
  .strict();

export const modelSchema = z
  .object({
    checkpoint: z
      .string()
      .optional()
      .describe(
        'start from this checkpoint directory instead of random weights (a nano checkpoint, or a Hugging Face model directory)',
      ),
    hf: z
      .string()
      .optional()
      .describe(
        'a Hugging Face model directory (LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM: config.json, ' +
          "safetensors, tokenizer files) run by the embedded engine; dModel..tieEmbeddings are then the checkpoint's",
      ),
    create: hfCreateSchema
      .optional()
      .describe(
        'create model.hf as a small random model of this shape when the directory does not exist yet (examples, tests)',
      ),
    lora: loraSchema
      .optional()
      .describe('train a LoRA adapter (saved in PEFT format) on the frozen model instead of every weight'),
    dModel: z.number().int().min(4).max(4096).default(64).describe('C: model width'),
    nLayers: z.number().int().min(1).max(64).default(2).describe('L: transformer blocks'),
    nHeads: z.number().int().min(1).max(64).default(4).describe('NH: attention heads'),
    dFF: z.number().int().min(1).max(16384).default(192).describe('F: gated-MLP width'),
    contextLength: z
      .number()
      .int()
      .min(8)
      .max(1 << 20)
      .default(128)
      .describe("maximum tokens (prompt + response); at most a Hugging Face model's max_position_embeddings"),
    tieEmbeddings: z.boolean().default(true).describe('share the output head with the token embedding'),
    initSeed: z
      .number()
      .int()
      .min(0)
      .max(2 ** 32 - 1)
      .default(1)
      .describe('seed of the random initial weights'),
  })
  .strict()
  .default({});

export const sftSchema = z
  .object({
    enabled: z.boolean().default(true).describe('run a supervised warm-start on task demonstrations first'),
    steps: z.number().int().min(1).max(1_000_000).default(300).describe('SFT optimiser steps'),
    batchSize: z.number().int().min(1).max(4096).default(32).describe('SFT sequences per step'),
    learningRate: z.number().positive().max(10).default(1e-2).describe('SFT peak learning rate'),
    examples: z
      .number()
      .int()
      .min(1)
      .max(10_000_000)
      .default(4000)
      .describe('demonstrations drawn from the train split'),
    checkpoint: z
      .string()
      .optional()
      .describe('warm-start checkpoint dir (default: a cache dir keyed by the SFT, model and task config)'),
    transcripts: z
      .string()
      .min(1)
      .optional()
      .describe(
        'JSONL of OpenAI chat transcripts ({"messages": [...], "tools"?: [...]}, one per line; a path relative to the ' +
          "config file) to warm-start on instead of the task's demonstrations: every line, rendered in generate.format, " +
          'only assistant turns trained',
      ),
    trains: z
      .enum(['model', 'adapter'])
      .default('model')
      .describe(
        'Hugging Face models: the warm-start trains every weight (saved as a model directory; RL then puts ' +
          'model.lora on it) or the model.lora adapter (saved in PEFT format; RL continues it)',
      ),
  })
  .strict()
  .default({});

const remoteSamplerSchema = z
  .object({
    api: z
      .enum(['openai', 'sglang', 'tinker'])
      .default('openai')
      .describe(
        'openai = vLLM /v1/completions; sglang = SGLang /generate; tinker = Tinker sampling (asample) on engine.trainer.url',
      ),
    servers: z
      .array(z.string().url())
      .default([])
      .describe('base URLs of the sampling servers (without /v1); required for openai and sglang'),
    model: z
      .string()
      .default('arbor-nano')
      .describe(
        'served base model name (vLLM --served-model-name), used until the first LoRA sync; then requests name weightSync.loraName',
      ),
    concurrencyPerServer: z.number().int().min(1).max(4096).default(64).describe('requests in flight per server'),
    retries: z
      .number()
      .int()
      .min(0)
      .max(100)
      .default(3)
      .describe(
        'openai/sglang: times a failed or timed-out request is sent again, unchanged (same seed), to another ' +
          'healthy server when there is one (back-off 0.1 s doubling; a 4xx is not retried)',
      ),
    requestTimeoutSeconds: z
      .number()
      .positive()
      .max(86_400)
      .default(600)
      .describe('openai/sglang: a request without a reply after this long counts as a failure of its server'),
    unavailableSeconds: z
      .number()
      .positive()
      .max(86_400)
      .default(300)
      .describe(
        'openai/sglang: with every server down, requests wait this long for one to come back, then the run ' +
          'stops (exit 1) naming each server and its last error; it stays resumable',
      ),
    probeSeconds: z
      .number()
      .positive()
      .max(3600)
      .default(1)
      .describe(
        "openai/sglang: first wait before a down server's GET /health probe; it doubles up to 16 times this " +
          'while the server stays down',
      ),
  })
  .strict();

const remoteTrainerSchema = z
  .object({
    api: z.enum(['tinker']).default('tinker').describe('Tinker-compatible training service'),
    url: z.string().url().describe('base URL of the training service'),
    baseModel: z.string().default('arbor-nano').describe('base model to create'),
    modelId: z.string().optional().describe('attach to an existing model id instead of creating one'),
    loraRank: z.number().int().min(1).max(1024).default(32).describe('LoRA rank for create_model'),
    retries: z
      .number()
      .int()
      .min(0)
      .max(100)
      .default(6)
      .describe(
        'times a training request is sent again after a connection failure, a 408/429/5xx (Retry-After honoured up ' +
          'to 60 s) or a lost poll, with back-off from 0.5 s doubling to 30 s; a trainer still down after them ' +
          'stops the run (exit 1, resumable). A request the trainer may have applied is never applied twice',
      ),
    apiKey: z
      .string()
      .min(1)
      .nullish()
      .transform((key) => (key ? new Secret(key) : undefined))
      .describe('X-API-Key for hosted Tinker (default: $TINKER_API_KEY); never logged or written to the run directory'),
  })
  .strict();

const weightSyncSchema = z
  .object({
    kind: z
      .enum(['none', 'sglang_update_weights_from_disk', 'vllm_load_lora_adapter', 'sglang_load_lora_adapter'])
      .default('none')
      .describe('how new weights reach the samplers'),
    servers: z.array(z.string().url()).default([]).describe('servers to notify (default: the sampling servers)'),
    loraName: z
      .string()
      .min(1)
      .default('arbor-policy')
      .describe(
        'LoRA adapter name; after the first sync every request names it (vLLM model, SGLang lora_path); must differ from sampler.model',
      ),
    adapterDir: z
      .string()
      .optional()
      .describe(
        'where tinker:// adapters are downloaded and converted to PEFT (default <tmpdir>/arbor-adapters); the sampling servers must be able to read it',
      ),
    tiedEmbeddings: z
      .boolean()
      .default(false)
      .describe(
        'the base model ties its output head to the embedding: Tinker unembed LoRA maps to model.embed_tokens, not lm_head',
      ),
    languageModelPrefix: z
      .boolean()
      .default(false)
      .describe('vision-language base model whose text weights live under model.language_model.'),
  })
  .strict()
  .default({});

export const engineSchema = z
  .object({
    kind: z
      .enum(['embedded', 'remote'])
      .default('embedded')
      .describe('embedded (in-process nano transformer) or remote (HTTP sampler + trainer)'),
    kernels: z.enum(['auto', 'wasm', 'reference']).default('auto').describe('kernel backend of the embedded engine'),
    threads: z
      .number()
      .int()
      .min(1)
      .max(
        availableParallelism(),
        `at most this machine's parallelism (os.availableParallelism() = ${availableParallelism()})`,
      )
      .default(1)
      .describe(
        "threads of the embedded engine's WASM kernels, up to the machine's cores: T > 1 adds T−1 helper threads that " +
          'each take a share of every large kernel call (results bit-identical to 1 thread; training ~1.7x faster at 2 ' +
          'on an idle 2-core machine); leave cores free for an async sampler worker or other jobs',
      ),
    pageSize: z.number().int().min(1).max(1024).default(16).describe('KV-cache page size in tokens'),
    sampler: remoteSamplerSchema.optional().describe('remote: the sampling servers'),
    trainer: remoteTrainerSchema.optional().describe('remote: the training service'),
    tokenizer: z
      .string()
      .optional()
      .describe(
        'remote: directory with tokenizer.json (an Arbor char tokenizer or a Hugging Face tokenizer.json + tokenizer_config.json)',
      ),
    chatTemplate: z
      .boolean()
      .default(false)
      .describe(
        'Hugging Face tokenizer (remote, or model.hf): wrap each prompt (and SFT demonstration) as a user message with the chat template',
      ),
    chatTemplateKwargs: z
      .record(z.unknown())
      .default({})
      .describe(
        "extra chat-template variables with engine.chatTemplate (e.g. {enable_thinking: false} for Qwen3), as transformers' apply_chat_template(**kwargs)",
      ),
    weightSync: weightSyncSchema.describe('remote: weight synchronisation after each step'),
  })
  .strict()
  .default({});

export type ModelConfig = z.infer<typeof modelSchema>;
export type SftConfig = z.infer<typeof sftSchema>;
export type EngineConfig = z.infer<typeof engineSchema>;
export type LoraConfig = z.infer<typeof loraSchema>;
export type HfCreateConfig = z.infer<typeof hfCreateSchema>;
