/**
 * The run configuration: one strict zod schema (unknown keys are errors), a default and a doc string
 * for every option. `loadConfig(file)` reads YAML or JSON and reports problems as
 * `<file>: <dotted.key>: <message>`; `defaultsYaml()` prints the full default config with the doc
 * strings as comments (`arbor config --print-defaults`).
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { noisyCorrectionSchema, rewardPartSchema } from '../filter/config.js';
import YAML from 'yaml';
import { ConfigError } from '../core/errors.js';
import { generateOptionsSchema } from '../generate/index.js';
import { advantageOptionsSchema, aggregationSchema, lossOptionsSchema } from '../optimize/index.js';
import { dynamicSamplingSchema } from '../control/dynamic-sampling.js';

const runSchema = z
  .object({
    name: z.string().regex(/^[A-Za-z0-9_.-]+$/).default('run').describe('run name (also the default output folder name)'),
    outDir: z.string().optional().describe('run directory (default runs/<name>)'),
    seed: z.number().int().default(0).describe('seed of every random choice in the run'),
    steps: z.number().int().min(0).default(40).describe('RL steps'),
    promptsPerStep: z.number().int().min(1).default(16).describe('prompts (groups) per step'),
    trainItems: z.number().int().min(1).default(2000).describe('size of the training prompt pool'),
    evalEvery: z.number().int().min(0).default(10).describe('held-out evaluation every N steps (0 = only at start and end)'),
    evalCount: z.number().int().min(1).default(200).describe('held-out prompts per evaluation'),
    evalPassK: z.number().int().min(0).default(4).describe('k of pass@k at temperature 1 (0 = off)'),
    checkpointEvery: z.number().int().min(0).default(10).describe('checkpoint every N steps (0 = only at the end)'),
    logTreesEvery: z.number().int().min(0).default(5).describe('write trees/step-N.jsonl every N steps (0 = never)'),
  })
  .strict()
  .default({});

const taskSchema = z
  .object({
    name: z.string().default('arith').describe('built-in task: arith, countdown'),
    options: z.record(z.unknown()).default({}).describe('task options (see README: tasks)'),
  })
  .strict()
  .default({});

const modelSchema = z
  .object({
    checkpoint: z.string().optional().describe('start from this checkpoint directory instead of random weights'),
    dModel: z.number().int().min(4).default(64).describe('C: model width'),
    nLayers: z.number().int().min(1).default(2).describe('L: transformer blocks'),
    nHeads: z.number().int().min(1).default(4).describe('NH: attention heads'),
    dFF: z.number().int().min(1).default(192).describe('F: gated-MLP width'),
    contextLength: z.number().int().min(8).default(128).describe('maximum tokens (prompt + response)'),
    tieEmbeddings: z.boolean().default(true).describe('share the output head with the token embedding'),
    initSeed: z.number().int().default(1).describe('seed of the random initial weights'),
  })
  .strict()
  .default({});

const sftSchema = z
  .object({
    enabled: z.boolean().default(true).describe('run a supervised warm-start on task demonstrations first'),
    steps: z.number().int().min(1).default(300).describe('SFT optimiser steps'),
    batchSize: z.number().int().min(1).default(32).describe('SFT sequences per step'),
    learningRate: z.number().positive().default(1e-2).describe('SFT peak learning rate'),
    examples: z.number().int().min(1).default(4000).describe('demonstrations drawn from the train split'),
    checkpoint: z.string().optional().describe('warm-start checkpoint dir (default: a cache dir keyed by the SFT, model and task config)'),
  })
  .strict()
  .default({});

const samplingSchema = z
  .object({
    temperature: z.number().min(0).default(1).describe('rollout temperature'),
    topP: z.number().gt(0).max(1).default(1).describe('rollout nucleus mass'),
    topK: z.number().int().default(0).describe('rollout top-k (0 = off)'),
    maxResponseTokens: z.number().int().min(1).default(64).describe('maximum response length in tokens'),
  })
  .strict()
  .default({});

const rewardSchema = z
  .object({
    parts: z.array(rewardPartSchema).min(1).default([{ kind: 'task', weight: 1 }]).describe("weighted sum of rewards; kinds: task (the task's verifier), exact, numeric, math, format, length_penalty, judge, code, program"),
    noisyCorrection: noisyCorrectionSchema.optional().describe('de-bias a noisy binary reward given its false-positive/negative rates'),
    timeoutMs: z.number().int().min(1).default(10_000).describe('per-call reward timeout'),
    failureReward: z.number().default(0).describe('reward when the verifier throws or times out'),
    concurrency: z.number().int().min(1).default(8).describe('rewards scored in parallel'),
  })
  .strict()
  .default({});

const optimizeSchema = z
  .object({
    advantage: advantageOptionsSchema.default({}).describe('advantage estimator'),
    loss: lossOptionsSchema.default({}).describe('policy loss'),
    aggregation: aggregationSchema,
    dynamicSampling: dynamicSamplingSchema.default({}).describe('DAPO dynamic sampling'),
  })
  .strict()
  .default({});

const trainerSchema = z
  .object({
    learningRate: z.number().positive().default(1e-3).describe('peak RL learning rate'),
    beta1: z.number().min(0).lt(1).default(0.9).describe('Adam β1'),
    beta2: z.number().min(0).lt(1).default(0.99).describe('Adam β2'),
    eps: z.number().positive().default(1e-8).describe('Adam ε'),
    weightDecay: z.number().min(0).default(0).describe('decoupled weight decay (not on norm gains)'),
    gradClipNorm: z.number().min(0).default(1).describe('clip the global gradient norm (0 = off)'),
    warmupSteps: z.number().int().min(0).default(0).describe('linear warm-up optimiser steps'),
    schedule: z.enum(['constant', 'cosine']).default('constant').describe('learning-rate schedule after warm-up'),
    minLearningRateRatio: z.number().min(0).max(1).default(0.1).describe('cosine floor as a fraction of the peak'),
    updatesPerStep: z.number().int().min(1).default(1).describe('optimiser updates (mini-batches) per RL step'),
  })
  .strict()
  .default({});

const remoteSamplerSchema = z
  .object({
    api: z.enum(['openai', 'sglang']).default('openai').describe('openai = vLLM /v1/completions; sglang = SGLang /generate'),
    servers: z.array(z.string().url()).min(1).describe('base URLs of the sampling servers (without /v1)'),
    model: z.string().default('arbor-nano').describe('served model name (openai api)'),
    concurrencyPerServer: z.number().int().min(1).default(64).describe('requests in flight per server'),
  })
  .strict();

const remoteTrainerSchema = z
  .object({
    api: z.enum(['tinker']).default('tinker').describe('Tinker-compatible training service'),
    url: z.string().url().describe('base URL of the training service'),
    baseModel: z.string().default('arbor-nano').describe('base model to create'),
    modelId: z.string().optional().describe('attach to an existing model id instead of creating one'),
    loraRank: z.number().int().min(1).default(32).describe('LoRA rank for create_model'),
  })
  .strict();

const weightSyncSchema = z
  .object({
    kind: z.enum(['none', 'sglang_update_weights_from_disk', 'vllm_load_lora_adapter']).default('none').describe('how new weights reach the samplers'),
    servers: z.array(z.string().url()).default([]).describe('servers to notify (default: the sampling servers)'),
    loraName: z.string().default('arbor').describe('adapter name for vllm_load_lora_adapter'),
  })
  .strict()
  .default({});

const engineSchema = z
  .object({
    kind: z.enum(['embedded', 'remote']).default('embedded').describe('embedded (in-process nano transformer) or remote (HTTP sampler + trainer)'),
    kernels: z.enum(['auto', 'wasm', 'reference']).default('auto').describe('kernel backend of the embedded engine'),
    pageSize: z.number().int().min(1).default(16).describe('KV-cache page size in tokens'),
    sampler: remoteSamplerSchema.optional().describe('remote: the sampling servers'),
    trainer: remoteTrainerSchema.optional().describe('remote: the training service'),
    tokenizer: z.string().optional().describe('remote: directory with tokenizer.json (an Arbor char tokenizer or a Hugging Face tokenizer.json + tokenizer_config.json)'),
    chatTemplate: z.boolean().default(false).describe('remote + Hugging Face tokenizer: wrap each prompt as a user message with the chat template'),
    weightSync: weightSyncSchema.describe('remote: weight synchronisation after each step'),
  })
  .strict()
  .default({});

export const configSchema = z
  .object({
    run: runSchema.describe('the run: steps, batch, evaluation, checkpoints'),
    task: taskSchema.describe('what to train on'),
    model: modelSchema.describe('the embedded model'),
    sft: sftSchema.describe('supervised warm-start'),
    engine: engineSchema.describe('engine backend'),
    sampling: samplingSchema.describe('rollout sampling'),
    generate: generateOptionsSchema.default({ kind: 'treepo' }).describe('rollout topology (iid or treepo)'),
    reward: rewardSchema.describe('the Filter stage'),
    optimize: optimizeSchema.describe('advantages and losses'),
    trainer: trainerSchema.describe('optimiser'),
  })
  .strict();

export type ArborConfig = z.infer<typeof configSchema>;

/** Validate a parsed object; `source` names the file in errors. */
export function parseConfig(raw: unknown, source = 'config'): ArborConfig {
  const parsed = configSchema.safeParse(raw ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const path = issue.path.join('.');
    let message = issue.message;
    if (issue.code === 'unrecognized_keys') message = `unknown key(s) ${issue.keys.map((k) => JSON.stringify(k)).join(', ')}`;
    if (issue.code === 'invalid_type') message = `expected ${issue.expected}, got ${issue.received}`;
    throw new ConfigError(`${source}: ${path || '(root)'}: ${message}`, path, source);
  }
  return parsed.data;
}

export function loadConfig(file: string, overrides: Record<string, unknown> = {}): ArborConfig {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (cause) {
    throw new ConfigError(`${file}: cannot read (${(cause as Error).message})`, undefined, file, { cause });
  }
  let raw: unknown;
  try {
    raw = file.endsWith('.json') ? JSON.parse(text) : YAML.parse(text);
  } catch (cause) {
    throw new ConfigError(`${file}: not valid ${file.endsWith('.json') ? 'JSON' : 'YAML'}: ${(cause as Error).message}`, undefined, file, { cause });
  }
  return parseConfig(deepMerge(raw ?? {}, overrides), file);
}

function deepMerge(a: unknown, b: Record<string, unknown>): unknown {
  if (!a || typeof a !== 'object' || Array.isArray(a)) return b;
  const out: Record<string, unknown> = { ...(a as Record<string, unknown>) };
  for (const [k, v] of Object.entries(b)) {
    out[k] = v && typeof v === 'object' && !Array.isArray(v) ? deepMerge(out[k], v as Record<string, unknown>) : v;
  }
  return out;
}

/** The full default config as YAML, each option preceded by its description. */
export function defaultsYaml(): string {
  const defaults = parseConfig({});
  const lines: string[] = ['# Arbor run configuration: every option with its default.'];
  const shape = configSchema.shape as Record<string, z.ZodTypeAny>;
  for (const [section, schema] of Object.entries(shape)) {
    lines.push('', `# ${schema.description ?? section}`, `${section}:`);
    const inner = innerObject(schema);
    const values = (defaults as Record<string, Record<string, unknown>>)[section];
    if (section === 'generate') {
      const options = (generateOptionsSchema as unknown as { options: z.ZodObject<z.ZodRawShape>[] }).options;
      lines.push('  # kind: iid | treepo. Options of treepo (iid takes kind and groupSize only):');
      for (const [key, field] of Object.entries(options[1].shape)) {
        lines.push(`  # ${(field as z.ZodTypeAny).description ?? ''}`, `  ${key}: ${yamlValue(values[key])}`);
      }
      continue;
    }
    for (const [key, field] of Object.entries(inner ?? {})) {
      const doc = (field as z.ZodTypeAny).description;
      if (doc) lines.push(`  # ${doc}`);
      const v = values?.[key];
      if (v === undefined) lines.push(`  # ${key}: (unset)`);
      else if (v && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length) {
        lines.push(`  ${key}:`);
        const sub = innerObject(field as z.ZodTypeAny) ?? {};
        for (const [k2, v2] of Object.entries(v as Record<string, unknown>)) {
          const d2 = (sub[k2] as z.ZodTypeAny | undefined)?.description;
          if (d2) lines.push(`    # ${d2}`);
          lines.push(`    ${k2}: ${yamlValue(v2)}`);
        }
      } else lines.push(`  ${key}: ${yamlValue(v)}`);
    }
  }
  return lines.join('\n') + '\n';
}

function yamlValue(v: unknown): string {
  return YAML.stringify(v, { flow: true } as never).trim();
}

function innerObject(schema: z.ZodTypeAny): Record<string, z.ZodTypeAny> | undefined {
  let s: z.ZodTypeAny = schema;
  for (let i = 0; i < 5; i++) {
    if (s instanceof z.ZodObject) return s.shape as Record<string, z.ZodTypeAny>;
    const def = (s as unknown as { _def: { innerType?: z.ZodTypeAny; schema?: z.ZodTypeAny } })._def;
    s = def.innerType ?? def.schema ?? s;
  }
  return undefined;
}
