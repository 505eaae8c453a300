/**
 * The run configuration: one strict zod schema (unknown keys are errors), a default and a doc string
 * for every option. `loadConfig(file)` reads YAML or JSON and reports problems as
 * `<file>: <dotted.key>: <message>`; `defaultsYaml()` prints the full default config with the doc
 * strings as comments (`arbor config --print-defaults`).
 */
import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { z } from 'zod';
import { noisyCorrectionSchema, rewardPartSchema } from '../filter/config.js';
import YAML from 'yaml';
import { ConfigError } from '../core/errors.js';
import { generateOptionsSchema } from '../generate/index.js';
import { envOptionsSchema } from '../env/index.js';
import { advantageOptionsSchema, aggregationSchema, lossOptionsSchema } from '../optimize/index.js';
import { engineSchema, modelSchema, sftSchema } from '../engine/config.js';
import { selectOptionsSchema } from '../replay/select.js';
import { mixSchema } from '../tasks/mix.js';
import {
  allocateOptionsSchema,
  controlStrategySchemas,
  hintOptionsSchema,
  promptStatsSchema,
  pruneOptionsSchema,
  qualityHeadSchema,
  skipOptionsSchema,
} from '../control/index.js';
import { contrastiveOptionsSchema } from '../control/contrastive.js';
import { storeOptionsSchema } from '../replay/store.js';
import { replayOptionsSchema } from '../replay/replay.js';
import { shareOptionsSchema } from './share.js';

const runSchema = z
  .object({
    name: z
      .string()
      .regex(/^[A-Za-z0-9_.-]+$/)
      .default('run')
      .describe('run name (also the default output folder name)'),
    outDir: z.string().optional().describe('run directory (default runs/<name>)'),
    seed: z
      .number()
      .int()
      .min(0)
      .max(2 ** 32 - 1)
      .default(0)
      .describe('seed of every random choice in the run'),
    steps: z.number().int().min(0).max(10_000_000).default(40).describe('RL steps'),
    promptsPerStep: z.number().int().min(1).max(100_000).default(16).describe('prompts (groups) per step'),
    trainItems: z.number().int().min(1).max(100_000_000).default(2000).describe('size of the training prompt pool'),
    evalEvery: z
      .number()
      .int()
      .min(0)
      .max(10_000_000)
      .default(10)
      .describe('held-out evaluation every N steps (0 = only at start and end)'),
    evalCount: z.number().int().min(1).max(1_000_000).default(200).describe('held-out prompts per evaluation'),
    evalPassK: z.number().int().min(0).max(1024).default(4).describe('k of pass@k at temperature 1 (0 = off)'),
    checkpointEvery: z
      .number()
      .int()
      .min(0)
      .max(10_000_000)
      .default(10)
      .describe('checkpoint every N steps (0 = only at the end)'),
    logTreesEvery: z
      .number()
      .int()
      .min(0)
      .max(10_000_000)
      .default(5)
      .describe('write trees/step-N.jsonl every N steps (0 = never)'),
    mode: z
      .enum(['sync', 'async'])
      .default('sync')
      .describe(
        'sync: generate then train, one after the other; async: rollout production overlaps training ' +
          '(embedded engine: the sampler runs in a worker thread with its own copy of the weights)',
      ),
    maxStaleness: z
      .number()
      .int()
      .min(0)
      .max(64)
      .default(0)
      .describe(
        'async: k, the weight versions a trained token may lag the learner; the rollouts of step t are generated ' +
          'with version max(0, t−1−k), so production runs k steps ahead (0 = the synchronous loop)',
      ),
    maxFailedSteps: z
      .number()
      .int()
      .min(1)
      .max(1000)
      .default(3)
      .describe('stop the run after this many consecutive steps without a usable tree'),
  })
  .strict()
  .default({});

const taskSchema = z
  .preprocess(
    resolveTaskMix,
    z
      .object({
        name: z
          .string()
          .default('arith')
          .describe('built-in task: arith, countdown ("module" when task.module is given)'),
        module: z
          .string()
          .min(1)
          .optional()
          .describe(
            'instead of name: a module whose default export is a defineTask(...) (path relative to the config file)',
          ),
        options: z.record(z.unknown()).default({}).describe('task options (see README: tasks)'),
        mix: mixSchema
          .optional()
          .describe(
            'a task mixture instead of name/options: [{ name, options, weight, label }, ...] ' +
              '(items of every component, ids prefixed by the component; src/tasks/mix.ts)',
          ),
        overlong: z
          .enum(['error', 'skip'])
          .default('error')
          .describe(
            "a prompt that leaves no room for a response in the model's context (embedded engine): " +
              'fail at load naming its file and line, or leave it out (counted in the run log)',
          ),
      })
      .strict()
      .transform((t) => (t.mix ? { ...t, options: { components: t.mix } } : t)),
  )
  .default({});

/** `task.mix` is the alternative to `task.name`/`options` (exactly one of the two): it resolves to the task "mix" with the components as options. */
function resolveTaskMix(raw: unknown, ctx: z.RefinementCtx): unknown {
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) return raw;
  const t = raw as Record<string, unknown>;
  // `task.module` (a user module) is the other alternative to a built-in name: it resolves to the name "module"
  if (t.module !== undefined) {
    const clash =
      t.mix !== undefined ? 'task.mix' : t.name !== undefined && t.name !== 'module' ? 'task.name' : undefined;
    if (!clash) return { ...t, name: 'module' };
    ctx.addIssue({
      code: z.ZodIssueCode.custom,
      path: ['module'],
      message: `give either task.module or ${clash}, not both`,
    });
    return z.NEVER;
  }
  const components =
    t.mix ?? (t.name === 'mix' ? (t.options as Record<string, unknown> | undefined)?.components : undefined);
  if (components === undefined) return raw;
  if (
    t.mix !== undefined &&
    ((t.name !== undefined && t.name !== 'mix') || (t.options !== undefined && t.name !== 'mix'))
  ) {
    ctx.addIssue({
      code: z.ZodIssueCode.custom,
      path: ['mix'],
      message: 'give either task.mix or task.name/task.options, not both',
    });
    return z.NEVER;
  }
  return { ...t, name: 'mix', options: { components }, mix: components };
}

const samplingSchema = z
  .object({
    temperature: z.number().min(0).max(100).default(1).describe('rollout temperature'),
    topP: z.number().gt(0).max(1).default(1).describe('rollout nucleus mass'),
    topK: z.number().int().min(-1).max(1_000_000).default(0).describe('rollout top-k (0 = off)'),
    maxResponseTokens: z.number().int().min(1).max(65536).default(64).describe('maximum response length in tokens'),
  })
  .strict()
  .default({});

const rewardSchema = z
  .object({
    parts: z
      .array(rewardPartSchema)
      .min(1)
      .default([{ kind: 'task', weight: 1 }])
      .describe(
        "weighted sum of rewards; kinds: task (the task's verifier), exact, numeric, math, format, length_penalty, judge, code, program",
      ),
    noisyCorrection: noisyCorrectionSchema
      .optional()
      .describe('de-bias a noisy binary reward given its false-positive/negative rates'),
    timeoutMs: z.number().int().min(1).max(86_400_000).default(10_000).describe('per-call reward timeout'),
    failureReward: z.number().min(-1e6).max(1e6).default(0).describe('reward when the verifier throws or times out'),
    concurrency: z.number().int().min(1).max(4096).default(8).describe('rewards scored in parallel'),
  })
  .strict()
  .default({});

const optimizeSchema = z
  .object({
    advantage: advantageOptionsSchema.default({}).describe('advantage estimator'),
    loss: lossOptionsSchema.default({}).describe('policy loss'),
    aggregation: aggregationSchema,
  })
  .strict()
  .default({});

/**
 * The Control methods' sections, nested under `control:` beside the strategy's kind (the same in every
 * strategy). Each is a hook of the producer (src/control/hooks.ts).
 */
const controlHookSections = {
  allocate: allocateOptionsSchema
    .default({ kind: 'uniform' })
    .describe('per-prompt rollout allocation within the step budget: uniform | knapsack | xrpo | dars'),
  skip: skipOptionsSchema.default({ kind: 'none' }).describe('prompt skipping before rollout: none | greso'),
  select: selectOptionsSchema
    .default({ kind: 'sequential' })
    .describe(
      "which prompts a step draws: sequential | dots | vade (difficulty targeting from each prompt's success " +
        'posterior) | ucb (DUMP: UCB over the components of task.mix)',
    ),
  hint: hintOptionsSchema
    .default({ kind: 'none' })
    .describe('hint rescue of all-fail prompts: none | gold_prefix | example'),
  contrastive: contrastiveOptionsSchema
    .default({ kind: 'none' })
    .describe('contrastive prompting (CUDA-L1): none | cuda_l1 (earlier scored candidates in the prompt)'),
  prune: pruneOptionsSchema
    .default({ kind: 'none' })
    .describe('online pruning of partial rollouts: none | arrol (TreePO)'),
  qualityHead: qualityHeadSchema
    .default({})
    .describe('the learned success predictor behind value-guided TreePO and pruning'),
  promptStats: promptStatsSchema
    .default({})
    .describe('per-prompt success statistics kept across steps (allocation, skipping, hints, the quality head)'),
};

/** Sections that were top-level keys before they nested under `control:` (still accepted, with a warning). */
export const LEGACY_CONTROL_KEYS = Object.keys(controlHookSections) as Array<keyof typeof controlHookSections>;

const [noneControl, dynamicSamplingControl, aprilControl] = controlStrategySchemas;
const controlSchema = z.discriminatedUnion('kind', [
  noneControl.extend(controlHookSections),
  dynamicSamplingControl.extend(controlHookSections),
  aprilControl.extend(controlHookSections),
]);

const trainerSchema = z
  .object({
    learningRate: z.number().positive().max(10).default(1e-3).describe('peak RL learning rate'),
    beta1: z.number().min(0).lt(1).default(0.9).describe('Adam β1'),
    beta2: z.number().min(0).lt(1).default(0.99).describe('Adam β2'),
    eps: z.number().positive().max(1).default(1e-8).describe('Adam ε'),
    weightDecay: z.number().min(0).max(10).default(0).describe('decoupled weight decay (not on norm gains)'),
    gradClipNorm: z.number().min(0).max(1e6).default(1).describe('clip the global gradient norm (0 = off)'),
    warmupSteps: z.number().int().min(0).max(10_000_000).default(0).describe('linear warm-up optimiser steps'),
    schedule: z.enum(['constant', 'cosine']).default('constant').describe('learning-rate schedule after warm-up'),
    minLearningRateRatio: z.number().min(0).max(1).default(0.1).describe('cosine floor as a fraction of the peak'),
    updatesPerStep: z
      .number()
      .int()
      .min(1)
      .max(1024)
      .default(1)
      .describe('optimiser updates (mini-batches) per RL step'),
    packing: z
      .enum(['tree', 'flat'])
      .default('tree')
      .describe(
        'embedded trainer: tree packs trajectories that share a prefix as a forest and computes each unique token once (same loss and gradients as flat); flat computes every trajectory whole',
      ),
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
    generate: generateOptionsSchema
      .default({ kind: 'treepo' })
      .describe('rollout topology (iid, treepo, latr or agent)'),
    env: envOptionsSchema
      .optional()
      .describe(
        'agent runs (generate.kind agent): the tool environment — calculator | kv | code | tools (a module of ' +
          'TypeScript tools) | mcp | openenv — or agent (your own agent module, trained through the gateway)',
      ),
    control: controlSchema
      .default({ kind: 'none' })
      .describe(
        'the Control stage: how each step spends its rollout budget (kind: none | dynamic_sampling | april) and the ' +
          'methods that act on it (allocate, skip, select, hint, contrastive, prune, qualityHead, promptStats)',
      ),
    store: storeOptionsSchema.default({}).describe('the rollout store between producers and the learner'),
    replay: replayOptionsSchema
      .default({ kind: 'none' })
      .describe(
        'rollout replay: reuse stored trees in later updates, importance-corrected: none | recent | dots | remix (+ substituteZeroVariance)',
      ),
    share: shareOptionsSchema
      .default({})
      .describe('SAPO rollout sharing across learners through a shared directory (off unless share.dir is set)'),
    reward: rewardSchema.describe('the Filter stage'),
    optimize: optimizeSchema.describe('advantages and losses'),
    trainer: trainerSchema.describe('optimiser'),
  })
  .strict();

export type ArborConfig = z.infer<typeof configSchema>;

/**
 * Validate a parsed object; `source` names the file in errors. User module paths (task.module, reward
 * parts of kind module, env.module) become absolute, resolved against `baseDir` (loadConfig: the
 * config file's directory), so the resolved config in a run directory and the rollout worker find them.
 */
export function parseConfig(
  raw: unknown,
  source = 'config',
  baseDir = process.cwd(),
  warn: (line: string) => void = (line) => console.error(`warning: ${line}`),
): ArborConfig {
  return resolveModulePaths(parseSchema(raw, source, warn), baseDir);
}

function resolveModulePaths(config: ArborConfig, baseDir: string): ArborConfig {
  const at = (path: string) => (isAbsolute(path) ? path : resolve(baseDir, path));
  const task = config.task.module ? { ...config.task, module: at(config.task.module) } : config.task;
  const parts = config.reward.parts.map((p) => (p.kind === 'module' ? { ...p, module: at(p.module) } : p));
  const env =
    config.env && typeof config.env.module === 'string' ? { ...config.env, module: at(config.env.module) } : config.env;
  const sft = config.sft.transcripts ? { ...config.sft, transcripts: at(config.sft.transcripts) } : config.sft;
  return { ...config, task, sft, reward: { ...config.reward, parts }, ...(env ? { env } : {}) };
}

/**
 * Moves the Control sections written at the top level (before they nested under `control:`) into
 * `control`, warning once per key; both places at once is an error naming the key. A `control` without
 * a kind is the fixed batch (kind none).
 */
function nestLegacyControl(raw: unknown, source: string, warn: (line: string) => void): unknown {
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) return raw;
  const isObject = (v: unknown): v is Record<string, unknown> => !!v && typeof v === 'object' && !Array.isArray(v);
  let top = raw as Record<string, unknown>;
  // `control: { skip: ... }` without a kind: the fixed batch (kind none), as when control is absent
  if (isObject(top.control) && !('kind' in top.control)) top = { ...top, control: { kind: 'none', ...top.control } };
  const legacy = LEGACY_CONTROL_KEYS.filter((k) => k in top);
  if (!legacy.length) return top;
  const control = top.control ?? { kind: 'none' };
  if (!control || typeof control !== 'object' || Array.isArray(control)) return raw; // the schema names it
  const out: Record<string, unknown> = { ...top, control: { ...control } };
  for (const key of legacy) {
    if (key in (control as Record<string, unknown>))
      throw new ConfigError(`${source}: ${key} and control.${key} are both set: keep control.${key}`, key, source);
    (out.control as Record<string, unknown>)[key] = top[key];
    delete out[key];
    warn(`${source}: top-level "${key}" is deprecated: write it as control.${key} (accepted until the next release)`);
  }
  return out;
}

function parseSchema(raw: unknown, source: string, warn: (line: string) => void): ArborConfig {
  const parsed = configSchema.safeParse(nestLegacyControl(raw ?? {}, source, warn));
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const path = issue.path.join('.');
    let message = issue.message;
    if (issue.code === 'unrecognized_keys')
      message = `unknown key(s) ${issue.keys.map((k) => JSON.stringify(k)).join(', ')}`;
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
    raw = file.endsWith('.json') ? JSON.parse(text) : parseYamlStrict(text);
  } catch (cause) {
    throw new ConfigError(
      `${file}: not valid ${file.endsWith('.json') ? 'JSON' : 'YAML'}: ${(cause as Error).message}`,
      undefined,
      file,
      { cause },
    );
  }
  if (raw !== null && raw !== undefined && (typeof raw !== 'object' || Array.isArray(raw))) {
    throw new ConfigError(
      `${file}: the top level must be a mapping of sections (run:, task:, model:, ...), got ${Array.isArray(raw) ? 'a list' : `a ${typeof raw}`}`,
      undefined,
      file,
    );
  }
  return parseConfig(deepMerge(raw ?? {}, overrides), file, dirname(resolve(file)));
}

/** YAML where a warning (an unknown tag or directive, ...) is an error too: a config means what it says. */
function parseYamlStrict(text: string): unknown {
  const doc = YAML.parseDocument(text, { logLevel: 'silent' });
  const problem = doc.errors[0] ?? doc.warnings[0];
  if (problem) throw new Error(problem.message.split('\n')[0]);
  return doc.toJS();
}

/** `b` merged into `a` key by key (mappings recursively; lists and scalars of `b` replace). */
export function deepMerge(a: unknown, b: Record<string, unknown>): unknown {
  if (!a || typeof a !== 'object' || Array.isArray(a)) return b;
  const out: Record<string, unknown> = { ...(a as Record<string, unknown>) };
  for (const [k, v] of Object.entries(b)) {
    out[k] = v && typeof v === 'object' && !Array.isArray(v) ? deepMerge(out[k], v as Record<string, unknown>) : v;
  }
  return out;
}

/**
 * The full default config as YAML, each option preceded by its description. Works for any schema
 * shape: nested objects are indented, and a discriminated union (generate, control, a loss
 * correction...) prints its default variant as YAML and every other variant's options as comments.
 */
export function defaultsYaml(): string {
  const defaults = parseConfig({}) as Record<string, unknown>;
  const lines: string[] = ['# Arbor run configuration: every option with its default.'];
  for (const [section, schema] of Object.entries(configSchema.shape as Record<string, z.ZodTypeAny>)) {
    if (defaults[section] === undefined) {
      // an optional section with no default (env): not set, and each of its kinds commented out as the
      // generate union prints its other variants (options with their defaults and docs)
      lines.push('', `# ${schema.description ?? section}`, `# ${section}: (not set; one of the kinds below)`);
      const variants: string[] = [];
      printFields(schema, undefined, '', variants);
      for (const line of variants) lines.push(`#   ${line}`);
      continue;
    }
    lines.push('', `# ${schema.description ?? section}`, `${section}:`);
    printFields(schema, defaults[section], '  ', lines);
  }
  return lines.join('\n') + '\n';
}

function printFields(
  schema: z.ZodTypeAny,
  value: unknown,
  indent: string,
  lines: string[],
  variantExample = false,
): void {
  const inner = unwrap(schema);
  if (inner instanceof z.ZodDiscriminatedUnion) {
    const variants = [...(inner.options as z.ZodObject<z.ZodRawShape>[])];
    // the discriminator is `kind` for every stage; a nested union may use another key
    const key = inner.discriminator as string;
    const kindOf = (v: z.ZodObject<z.ZodRawShape>) => (v.shape[key] as z.ZodLiteral<string>).value;
    lines.push(`${indent}# ${key}: ${variants.map(kindOf).join(' | ')}`);
    const current = (value as Record<string, string> | undefined)?.[key];
    for (const v of variants.filter((v) => kindOf(v) !== current)) {
      lines.push(`${indent}# ${kindOf(v)}: ${v.shape[key].description ?? ''}`);
      const example = v.safeParse({ [key]: kindOf(v) });
      const sub: string[] = [];
      // a variant with required options (tools, module) lists them as "(unset)", the others' defaults
      printFields(v, example.success ? example.data : { ...fieldDefaults(v), [key]: kindOf(v) }, '', sub, true);
      for (const l of sub) lines.push(`${indent}#   ${l}`);
    }
    const chosen = variants.find((v) => kindOf(v) === current);
    if (chosen) printFields(chosen, value, indent, lines);
    return;
  }
  if (!(inner instanceof z.ZodObject)) return;
  const values = (value ?? {}) as Record<string, unknown>;
  for (const [key, field] of Object.entries(inner.shape as Record<string, z.ZodTypeAny>)) {
    const doc = field.description;
    if (doc && !(variantExample && key === 'kind')) lines.push(`${indent}# ${doc}`);
    const v = values[key];
    const fieldInner = unwrap(field);
    if (v === undefined) lines.push(`${indent}# ${key}: (unset)`);
    else if (
      (fieldInner instanceof z.ZodObject || fieldInner instanceof z.ZodDiscriminatedUnion) &&
      v &&
      typeof v === 'object' &&
      !Array.isArray(v)
    ) {
      lines.push(`${indent}${key}:`);
      printFields(fieldInner, v, indent + '  ', lines);
    } else lines.push(`${indent}${key}: ${yamlValue(v)}`);
  }
}

/** The value each field of `schema` takes when it is not given (fields without a default are left out). */
function fieldDefaults(schema: z.ZodObject<z.ZodRawShape>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, field] of Object.entries(schema.shape as Record<string, z.ZodTypeAny>)) {
    const parsed = field.safeParse(undefined);
    if (parsed.success && parsed.data !== undefined) out[key] = parsed.data;
  }
  return out;
}

/** Strip defaults, optionals and effects around a schema. */
function unwrap(schema: z.ZodTypeAny): z.ZodTypeAny {
  let s: z.ZodTypeAny = schema;
  for (let i = 0; i < 8; i++) {
    const def = (s as unknown as { _def: { innerType?: z.ZodTypeAny; schema?: z.ZodTypeAny } })._def;
    const next = def.innerType ?? def.schema;
    if (!next) break;
    s = next;
  }
  return s;
}

function yamlValue(v: unknown): string {
  return YAML.stringify(v, { flow: true } as never).trim();
}
