/**
 * The engine's part of the run configuration (zod schemas with a default and a doc string for every
 * option): the embedded model, its supervised warm-start, and the engine backend (embedded, or remote
 * HTTP sampler + trainer). The run config (run/config.ts) composes them; `buildEngine` consumes them.
 */
import { z } from 'zod';
import { Secret } from './remote/secret.js';

export const modelSchema = z
  .object({
    checkpoint: z.string().optional().describe('start from this checkpoint directory instead of random weights'),
    dModel: z.number().int().min(4).max(4096).default(64).describe('C: model width'),
    nLayers: z.number().int().min(1).max(64).default(2).describe('L: transformer blocks'),
    nHeads: z.number().int().min(1).max(64).default(4).describe('NH: attention heads'),
    dFF: z.number().int().min(1).max(16384).default(192).describe('F: gated-MLP width'),
    contextLength: z.number().int().min(8).max(65536).default(128).describe('maximum tokens (prompt + response)'),
    tieEmbeddings: z.boolean().default(true).describe('share the output head with the token embedding'),
    initSeed: z.number().int().min(0).max(2 ** 32 - 1).default(1).describe('seed of the random initial weights'),
  })
  .strict()
  .default({});

export const sftSchema = z
  .object({
    enabled: z.boolean().default(true).describe('run a supervised warm-start on task demonstrations first'),
    steps: z.number().int().min(1).max(1_000_000).default(300).describe('SFT optimiser steps'),
    batchSize: z.number().int().min(1).max(4096).default(32).describe('SFT sequences per step'),
    learningRate: z.number().positive().max(10).default(1e-2).describe('SFT peak learning rate'),
    examples: z.number().int().min(1).max(10_000_000).default(4000).describe('demonstrations drawn from the train split'),
    checkpoint: z.string().optional().describe('warm-start checkpoint dir (default: a cache dir keyed by the SFT, model and task config)'),
  })
  .strict()
  .default({});

const remoteSamplerSchema = z
  .object({
    api: z.enum(['openai', 'sglang', 'tinker']).default('openai').describe('openai = vLLM /v1/completions; sglang = SGLang /generate; tinker = Tinker sampling (asample) on engine.trainer.url'),
    servers: z.array(z.string().url()).default([]).describe('base URLs of the sampling servers (without /v1); required for openai and sglang'),
    model: z.string().default('arbor-nano').describe('served base model name (vLLM --served-model-name), used until the first LoRA sync; then requests name weightSync.loraName'),
    concurrencyPerServer: z.number().int().min(1).max(4096).default(64).describe('requests in flight per server'),
  })
  .strict();

const remoteTrainerSchema = z
  .object({
    api: z.enum(['tinker']).default('tinker').describe('Tinker-compatible training service'),
    url: z.string().url().describe('base URL of the training service'),
    baseModel: z.string().default('arbor-nano').describe('base model to create'),
    modelId: z.string().optional().describe('attach to an existing model id instead of creating one'),
    loraRank: z.number().int().min(1).max(1024).default(32).describe('LoRA rank for create_model'),
    apiKey: z.string().min(1).nullish().transform((key) => (key ? new Secret(key) : undefined)).describe('X-API-Key for hosted Tinker (default: $TINKER_API_KEY); never logged or written to the run directory'),
  })
  .strict();

const weightSyncSchema = z
  .object({
    kind: z.enum(['none', 'sglang_update_weights_from_disk', 'vllm_load_lora_adapter', 'sglang_load_lora_adapter']).default('none').describe('how new weights reach the samplers'),
    servers: z.array(z.string().url()).default([]).describe('servers to notify (default: the sampling servers)'),
    loraName: z.string().min(1).default('arbor-policy').describe('LoRA adapter name; after the first sync every request names it (vLLM model, SGLang lora_path); must differ from sampler.model'),
    adapterDir: z.string().optional().describe('where tinker:// adapters are downloaded and converted to PEFT (default <tmpdir>/arbor-adapters); the sampling servers must be able to read it'),
    tiedEmbeddings: z.boolean().default(false).describe('the base model ties its output head to the embedding: Tinker unembed LoRA maps to model.embed_tokens, not lm_head'),
    languageModelPrefix: z.boolean().default(false).describe('vision-language base model whose text weights live under model.language_model.'),
  })
  .strict()
  .default({});

export const engineSchema = z
  .object({
    kind: z.enum(['embedded', 'remote']).default('embedded').describe('embedded (in-process nano transformer) or remote (HTTP sampler + trainer)'),
    kernels: z.enum(['auto', 'wasm', 'reference']).default('auto').describe('kernel backend of the embedded engine'),
    threads: z.number().int().min(1).max(2).default(1).describe('threads of the embedded engine\'s WASM kernels: 2 adds a helper thread that takes half of each large kernel call (training ~1.7x faster on an idle 2-core machine; results bit-identical); keep 1 when the second core is busy (an async sampler worker, other jobs)'),
    pageSize: z.number().int().min(1).max(1024).default(16).describe('KV-cache page size in tokens'),
    sampler: remoteSamplerSchema.optional().describe('remote: the sampling servers'),
    trainer: remoteTrainerSchema.optional().describe('remote: the training service'),
    tokenizer: z.string().optional().describe('remote: directory with tokenizer.json (an Arbor char tokenizer or a Hugging Face tokenizer.json + tokenizer_config.json)'),
    chatTemplate: z.boolean().default(false).describe('remote + Hugging Face tokenizer: wrap each prompt as a user message with the chat template'),
    weightSync: weightSyncSchema.describe('remote: weight synchronisation after each step'),
  })
  .strict()
  .default({});


export type ModelConfig = z.infer<typeof modelSchema>;
export type SftConfig = z.infer<typeof sftSchema>;
export type EngineConfig = z.infer<typeof engineSchema>;
