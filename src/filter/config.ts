/**
 * Config schemas of the Filter stage: one entry per reward kind in `reward.parts` (zod, strict,
 * every option with a default or a doc string) and the noisy-verifier correction.
 */
import { z } from 'zod';

const weight = z.number().min(-1e6).max(1e6).default(1).describe('weight in the sum');
const extract = z
  .boolean()
  .default(true)
  .describe('compare the extracted final answer (\\boxed{}, ####, "The answer is") rather than the whole response');
const limits = z
  .object({
    wallMs: z.number().int().positive().max(3_600_000).optional().describe('wall-clock limit per run (ms)'),
    cpuSeconds: z.number().int().positive().max(3600).optional().describe('CPU-time limit per run (s)'),
    memoryMB: z.number().int().positive().max(65536).optional().describe('address-space limit (MB)'),
    maxProcesses: z.number().int().positive().max(4096).optional().describe('process limit'),
    outputBytes: z
      .number()
      .int()
      .positive()
      .max(1 << 30)
      .optional()
      .describe('stdout+stderr cap (bytes)'),
  })
  .strict()
  .default({});

export const rewardPartSchema = z.discriminatedUnion('kind', [
  z
    .object({ kind: z.literal('task'), weight })
    .strict()
    .describe("the task's own verifier"),
  z
    .object({
      kind: z.literal('env'),
      weight,
      missing: z.number().min(-1e6).max(1e6).default(0).describe('reward when the environment gave none'),
    })
    .strict()
    .describe("agent runs: the reward the environment gave along the episode (OpenEnv, the kv store's goal check)"),
  z
    .object({ kind: z.literal('majority_vote'), weight })
    .strict()
    .describe(
      "test-time RL (TTRL): the group's majority answer, by the task verifier's equivalence, is the pseudo-label; gold answers are not used",
    ),
  z.object({ kind: z.literal('exact'), weight, caseSensitive: z.boolean().default(true), extract }).strict(),
  z
    .object({
      kind: z.literal('numeric'),
      weight,
      absTol: z.number().min(0).max(1e6).default(1e-6),
      relTol: z.number().min(0).max(1).default(1e-6),
      extract,
    })
    .strict(),
  z
    .object({
      kind: z.literal('math'),
      weight,
      tolerance: z.number().positive().max(1).default(1e-4).describe('relative tolerance of numeric comparison'),
    })
    .strict(),
  z
    .object({
      kind: z.literal('format'),
      weight,
      pattern: z.string().min(1).describe('regular expression the response must match'),
      flags: z.string().default('s'),
    })
    .strict(),
  z
    .object({
      kind: z.literal('length_penalty'),
      weight,
      maxLength: z.number().int().positive().max(1_000_000).describe('L_max in tokens'),
      cacheLength: z.number().int().positive().max(1_000_000).describe('soft-penalty window L_cache'),
    })
    .strict(),
  z
    .object({
      kind: z.literal('judge'),
      weight,
      baseUrl: z.string().url().describe('OpenAI-compatible server (…/v1/chat/completions)'),
      model: z.string().min(1),
      rubric: z.string().optional().describe('template with {prompt} {response} {answer}'),
      apiKeyEnv: z.string().optional().describe('environment variable holding the API key'),
      maxScore: z.number().positive().max(1e6).default(10),
      maxAttempts: z.number().int().min(1).max(100).default(3),
      timeoutMs: z.number().int().positive().max(3_600_000).default(30_000),
    })
    .strict(),
  z
    .object({ kind: z.literal('code'), weight, language: z.enum(['python', 'javascript']).default('python'), limits })
    .strict()
    .describe('run the response against item.meta tests in the sandbox'),
  z
    .object({
      kind: z.literal('program'),
      weight,
      path: z.string().min(1).describe('JS module exporting default ({response, answer, prompt, meta}) => number'),
      limits,
    })
    .strict(),
  z
    .object({
      kind: z.literal('fapo'),
      weight,
      lambda: z
        .number()
        .min(0)
        .max(1e6)
        .default(0.5)
        .describe("penalty λ on a flawed positive (0.5 on a 0/1 verifier is the paper's 1 on ±1)"),
      judge: z.literal('program').default('program').describe("program: the task's firstWrongStep"),
      unparseableIsFlawed: z
        .boolean()
        .default(false)
        .describe('a correct response whose steps the judge cannot parse counts as flawed (the paper: no)'),
    })
    .strict()
    .describe("FAPO: the task's verifier minus λ when the answer is right but a step is wrong"),
  z
    .object({
      kind: z.literal('module'),
      weight,
      module: z
        .string()
        .min(1)
        .describe('module whose default export is a defineReward(...) (path relative to the config file)'),
      options: z.record(z.unknown()).default({}).describe("the module's options (checked by its own schema)"),
    })
    .strict()
    .describe('your own reward, run in-process with the timeout and failure reward of every reward'),
]);
export type RewardPartSpec = z.infer<typeof rewardPartSchema>;

export const noisyCorrectionSchema = z
  .object({
    falsePositiveRate: z.number().min(0).max(1).describe('P(verifier says 1 | wrong)'),
    falseNegativeRate: z.number().min(0).max(1).describe('P(verifier says 0 | right)'),
  })
  .strict();
