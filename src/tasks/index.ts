/**
 * Task registry: `getTask({name, options})` builds a built-in task by name with zod-validated
 * options (unknown names or keys are ConfigErrors that list what exists).
 */
import { z } from 'zod';
import { ConfigError, configErrorFromIssue } from '../core/errors.js';
import { arithTask } from './arith.js';
import { countdownTask } from './countdown.js';
import { calculatorTask } from './calculator.js';
import { kvTask } from './kv.js';
import { datasetTask, gsm8kTask, math500Task } from './datasets/task.js';
import { mixLabels, mixSchema, mixTask } from './mix.js';
import type { Task } from './types.js';

export * from './types.js';
export { arithTask, arithSolution, extractArithAnswer } from './arith.js';
export { countdownTask, checkCountdown } from './countdown.js';
export { evaluateExpression } from './expression.js';
export { calculatorTask, extractFinalAnswer, type MultiTurnTask } from './calculator.js';
export { kvTask, replayKv } from './kv.js';
export * from './datasets/index.js';
export { componentOf, componentOfId, mixComponentSchema, mixLabels, mixSchema, mixTask, type MixComponent } from './mix.js';

const arithOptions = z
  .object({
    digits: z.number().int().min(1).max(9).default(3).describe('maximum digits of the first operand'),
    minDigits: z.number().int().min(1).max(9).default(1).describe('minimum digits of the first operand'),
    ops: z.array(z.enum(['+', '-', '*'])).min(1).default(['+', '-', '*']).describe('operators'),
    digitsDistribution: z.enum(['uniform', 'geometric']).default('uniform').describe('how digits are drawn from minDigits..digits: uniform, or geometric (P ∝ 2^−(d−minDigits): mostly short problems with a long tail of long ones)'),
    teacherErrorRate: z.number().min(0).max(1).default(0).describe('fraction of SFT demonstrations from a careless teacher that drops carries and borrows (answers and the verifier stay exact)'),
  })
  .strict();

const countdownOptions = z
  .object({
    count: z.number().int().min(2).max(6).default(3).describe('how many numbers'),
    maxNumber: z.number().int().min(2).max(100).default(9).describe('numbers are drawn from 1..maxNumber'),
    useAll: z.boolean().default(false).describe('every number must be used exactly once'),
    formatCredit: z.number().min(0).max(1).default(0).describe('reward for a valid expression that misses the target'),
  })
  .strict();

const fieldsSchema = z
  .object({
    prompt: z.string().min(1).default('prompt').describe('column with the prompt/question'),
    answer: z.string().min(1).default('answer').describe('column with the gold answer or solution'),
    id: z.string().min(1).optional().describe('column with a unique id (default: file:line)'),
  })
  .strict();

const datasetOptions = z
  .object({
    train: z.string().optional().describe('train file (.jsonl or .parquet)'),
    test: z.string().optional().describe('test file; without it the test split is carved from train by testFraction'),
    format: z.enum(['jsonl', 'parquet']).optional().describe('file format (default: from the extension)'),
    fields: fieldsSchema.default({}).describe('which columns are the prompt, the answer and the id'),
    template: z.string().default('{prompt}').describe('prompt template: {prompt} or any {column}'),
    answerFrom: z.enum(['field', 'solution']).default('field').describe("'field': the answer column is the answer; 'solution': extract it (####, \\boxed{}, 'The answer is')"),
    verifier: z.enum(['math', 'exact', 'numeric']).default('math').describe('how responses are checked'),
    testFraction: z.number().min(0).max(1).default(0.1).describe('test share when there is a single file (1 = evaluation-only)'),
  })
  .strict();

const gsm8kOptions = z
  .object({
    dataDir: z.string().optional().describe('directory with gsm8k/{train,test}.jsonl (default: $ARBOR_DATA_DIR or ../shared/data)'),
    template: z.string().optional().describe('prompt template ({prompt} = the question)'),
  })
  .strict();

const math500Options = gsm8kOptions
  .extend({ testFraction: z.number().gt(0).max(1).default(1).describe('share of the 500 problems in the test split (1 = evaluation only)') })
  .strict();

const calculatorOptions = z
  .object({
    minDigitsA: z.number().int().min(1).max(9).default(3).describe('minimum digits of the first factor'),
    maxDigitsA: z.number().int().min(1).max(9).default(4).describe('maximum digits of the first factor'),
    minDigitsB: z.number().int().min(1).max(9).default(1).describe('minimum digits of the second factor'),
    maxDigitsB: z.number().int().min(1).max(9).default(4).describe('maximum digits of the second factor'),
    demoToolRate: z.number().min(0).max(1).default(0.5).describe('share of SFT demonstrations that call the calc tool (the rest answer directly)'),
    toolCost: z.number().min(0).max(1).default(0).describe('reward subtracted per tool call'),
  })
  .strict();

const kvOptions = z
  .object({
    storeSize: z.number().int().min(2).max(25).default(4).describe('keys in the store (the two operands and distractors)'),
    maxValue: z.number().int().min(1).max(1_000_000).default(50).describe('store values are drawn from 0..maxValue'),
    ops: z.array(z.enum(['+', '-', '*'])).min(1).default(['+']).describe('goal operators (c=a+b, c=a-b, c=a*b)'),
  })
  .strict();

type Builder = { schema: z.ZodTypeAny; build: (options: never) => Task };
const registry: Record<string, Builder> = {
  arith: { schema: arithOptions, build: (o: z.infer<typeof arithOptions>) => arithTask(o) as Task },
  countdown: { schema: countdownOptions, build: (o: z.infer<typeof countdownOptions>) => countdownTask(o) },
  dataset: { schema: datasetOptions, build: (o: z.infer<typeof datasetOptions>) => datasetTask(o) },
  gsm8k: { schema: gsm8kOptions, build: (o: z.infer<typeof gsm8kOptions>) => gsm8kTask(o) },
  math500: { schema: math500Options, build: (o: z.infer<typeof math500Options>) => math500Task(o) },
  calculator: { schema: calculatorOptions, build: (o: z.infer<typeof calculatorOptions>) => calculatorTask(o) },
  kv: { schema: kvOptions, build: (o: z.infer<typeof kvOptions>) => kvTask(o) },
  // `task: { mix: [...] }` (run/config.ts) resolves to name "mix" with the components as options
  mix: { schema: z.object({ components: mixSchema }).strict(), build: (o: { components: z.infer<typeof mixSchema> }) => buildMix(o.components) },
};

/** The mixed task of `task.mix`: each component built by name, its errors keyed `task.mix.<i>.…`. */
function buildMix(components: z.infer<typeof mixSchema>): Task {
  const labels = mixLabels(components);
  return mixTask(components.map((c, i) => {
    if (c.name === 'mix') throw new ConfigError(`task.mix.${i}.name: a mix cannot contain a mix`, `task.mix.${i}.name`);
    try {
      return { label: labels[i], weight: c.weight, task: getTask(c.name, c.options) };
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      const key = (error.path ?? 'task.options').replace(/^task\./, `task.mix.${i}.`);
      throw new ConfigError(`${key}: ${error.message.replace(/^task\.[\w.]+: /, '')}`, key, error.file, { cause: error });
    }
  }));
}

/** Register an extra task family (e.g. dataset-backed tasks) under `name`. */
export function registerTask(name: string, schema: z.ZodTypeAny, build: (options: never) => Task): void {
  registry[name] = { schema, build };
}

export function knownTasks(): string[] {
  return Object.keys(registry).sort();
}

/** Each registered task's options schema (for checks that walk every option). */
export function taskOptionSchemas(): Record<string, z.ZodTypeAny> {
  return Object.fromEntries(Object.entries(registry).map(([name, b]) => [name, b.schema]));
}

export function getTask(name: string, options: unknown = {}): Task {
  const entry = registry[name];
  if (!entry) throw new ConfigError(`task.name: unknown task "${name}" (known: ${knownTasks().join(', ')})`, 'task.name');
  const parsed = entry.schema.safeParse(options ?? {});
  if (!parsed.success) {
    throw configErrorFromIssue('task.options', parsed.error.issues[0]);
  }
  return entry.build(parsed.data as never);
}
