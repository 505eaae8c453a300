/**
 * Task registry: `getTask(name, options)` builds a built-in task by name with zod-validated
 * options (unknown names or keys are ConfigErrors that list what exists); `taskFromConfig(task)`
 * builds the task of a config's `task` section, a built-in or a user module (`task.module`, checked
 * for the Task shape, its makeItems/demonstration errors named after the module), and prepares it.
 */
import { z } from 'zod';
import { ConfigError, configErrorFromIssue, DataError } from '../core/errors.js';
import { applyOptions, checkShape, importUserModule, moduleExport } from '../core/modules.js';
import type { TaskItem } from '../core/types.js';
import { arithTask } from './arith.js';
import { countdownTask } from './countdown.js';
import { closestTask } from './closest.js';
import { calculatorTask } from './calculator.js';
import { kvTask } from './kv.js';
import { scratchpadTask } from './scratchpad.js';
import { datasetTask, gsm8kTask, math500Task } from './datasets/task.js';
import { mixLabels, mixSchema, mixTask } from './mix.js';
import type { Task } from './types.js';

export * from './types.js';
export { arithTask, arithSolution, extractArithAnswer } from './arith.js';
export { countdownTask, checkCountdown } from './countdown.js';
export { closestExpression, closestTask, gradeClosest, type ClosestMeta, type ClosestOptions } from './closest.js';
export { evaluateExpression } from '../core/expression.js';
export { calculatorTask, extractFinalAnswer, type MultiTurnTask } from './calculator.js';
export { kvTask, replayKv } from './kv.js';
export { firstWrongStep, scratchpadLines, scratchpadTask, type ScratchpadOptions } from './scratchpad.js';
export * from './datasets/index.js';
export {
  componentOf,
  componentOfId,
  mixComponentSchema,
  mixLabels,
  mixSchema,
  mixTask,
  type MixComponent,
} from './mix.js';

const arithOptions = z
  .object({
    digits: z.number().int().min(1).max(9).default(3).describe('maximum digits of the first operand'),
    minDigits: z.number().int().min(1).max(9).default(1).describe('minimum digits of the first operand'),
    ops: z
      .array(z.enum(['+', '-', '*']))
      .min(1)
      .default(['+', '-', '*'])
      .describe('operators'),
    digitsDistribution: z
      .enum(['uniform', 'geometric'])
      .default('uniform')
      .describe(
        'how digits are drawn from minDigits..digits: uniform, or geometric (P ∝ 2^−(d−minDigits): mostly short problems with a long tail of long ones)',
      ),
    teacherErrorRate: z
      .number()
      .min(0)
      .max(1)
      .default(0)
      .describe(
        'fraction of SFT demonstrations from a careless teacher that drops carries and borrows (answers and the verifier stay exact)',
      ),
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

const closestOptions = z
  .object({
    count: z.number().int().min(2).max(4).default(3).describe('how many numbers'),
    maxNumber: z.number().int().min(2).max(100).default(9).describe('numbers are drawn from 1..maxNumber'),
    maxTarget: z.number().int().min(1).max(10_000).default(60).describe('targets are drawn from 1..maxTarget'),
    width: z
      .number()
      .gt(0)
      .max(10_000)
      .default(2)
      .describe('distance from the target at which the score halves relative to the best reachable'),
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
    answerFrom: z
      .enum(['field', 'solution'])
      .default('field')
      .describe("'field': the answer column is the answer; 'solution': extract it (####, \\boxed{}, 'The answer is')"),
    verifier: z.enum(['math', 'exact', 'numeric']).default('math').describe('how responses are checked'),
    testFraction: z
      .number()
      .min(0)
      .max(1)
      .default(0.1)
      .describe('test share when there is a single file (1 = evaluation-only)'),
  })
  .strict();

const gsm8kOptions = z
  .object({
    dataDir: z
      .string()
      .optional()
      .describe('directory with gsm8k/{train,test}.jsonl (default: $ARBOR_DATA_DIR or ../shared/data)'),
    template: z.string().optional().describe('prompt template ({prompt} = the question)'),
  })
  .strict();

const math500Options = gsm8kOptions
  .extend({
    testFraction: z
      .number()
      .gt(0)
      .max(1)
      .default(1)
      .describe('share of the 500 problems in the test split (1 = evaluation only)'),
  })
  .strict();

const calculatorOptions = z
  .object({
    minDigitsA: z.number().int().min(1).max(9).default(3).describe('minimum digits of the first factor'),
    maxDigitsA: z.number().int().min(1).max(9).default(4).describe('maximum digits of the first factor'),
    minDigitsB: z.number().int().min(1).max(9).default(1).describe('minimum digits of the second factor'),
    maxDigitsB: z.number().int().min(1).max(9).default(4).describe('maximum digits of the second factor'),
    demoToolRate: z
      .number()
      .min(0)
      .max(1)
      .default(0.5)
      .describe('share of SFT demonstrations that call the calc tool (the rest answer directly)'),
    toolCost: z.number().min(0).max(1).default(0).describe('reward subtracted per tool call'),
  })
  .strict();

const kvOptions = z
  .object({
    storeSize: z
      .number()
      .int()
      .min(2)
      .max(25)
      .default(4)
      .describe('keys in the store (the two operands and distractors)'),
    maxValue: z.number().int().min(1).max(1_000_000).default(50).describe('store values are drawn from 0..maxValue'),
    ops: z
      .array(z.enum(['+', '-', '*']))
      .min(1)
      .default(['+'])
      .describe('goal operators (c=a+b, c=a-b, c=a*b)'),
  })
  .strict();

const scratchpadOptions = z
  .object({
    digits: z.number().int().min(1).max(5).default(3).describe('maximum digits of the multiplicand'),
    minDigits: z.number().int().min(1).max(5).default(2).describe('minimum digits of the multiplicand'),
    multiplierDigits: z.number().int().min(1).max(3).default(2).describe('digits of the multiplier'),
    teacherErrorRate: z
      .number()
      .min(0)
      .max(1)
      .default(0)
      .describe('share of SFT demonstrations with one dropped carry that propagates (their answer is wrong)'),
    flawedCorrectRate: z
      .number()
      .min(0)
      .max(1)
      .default(0)
      .describe('share of SFT demonstrations with one wrong carry but the right result (flawed positives)'),
  })
  .strict();

/** The scratchpad task, its option sums checked (the two teacher shares cannot exceed 1). */
function buildScratchpad(o: z.infer<typeof scratchpadOptions>): Task {
  if (o.teacherErrorRate + o.flawedCorrectRate > 1)
    throw new ConfigError(
      'task.options.flawedCorrectRate: teacherErrorRate + flawedCorrectRate must be ≤ 1',
      'task.options.flawedCorrectRate',
    );
  if (o.minDigits > o.digits)
    throw new ConfigError('task.options.minDigits: must be ≤ digits', 'task.options.minDigits');
  return scratchpadTask(o);
}

type Builder = { schema: z.ZodTypeAny; build: (options: never) => Task };
const registry: Record<string, Builder> = {
  arith: { schema: arithOptions, build: (o: z.infer<typeof arithOptions>) => arithTask(o) as Task },
  countdown: { schema: countdownOptions, build: (o: z.infer<typeof countdownOptions>) => countdownTask(o) },
  closest: { schema: closestOptions, build: (o: z.infer<typeof closestOptions>) => closestTask(o) },
  dataset: { schema: datasetOptions, build: (o: z.infer<typeof datasetOptions>) => datasetTask(o) },
  gsm8k: { schema: gsm8kOptions, build: (o: z.infer<typeof gsm8kOptions>) => gsm8kTask(o) },
  math500: { schema: math500Options, build: (o: z.infer<typeof math500Options>) => math500Task(o) },
  calculator: { schema: calculatorOptions, build: (o: z.infer<typeof calculatorOptions>) => calculatorTask(o) },
  kv: { schema: kvOptions, build: (o: z.infer<typeof kvOptions>) => kvTask(o) },
  scratchpad: { schema: scratchpadOptions, build: buildScratchpad },
  // `task: { mix: [...] }` (run/config.ts) resolves to name "mix" with the components as options
  mix: {
    schema: z.object({ components: mixSchema }).strict(),
    build: (o: { components: z.infer<typeof mixSchema> }) => buildMix(o.components),
  },
};

/** The mixed task of `task.mix`: each component built by name, its errors keyed `task.mix.<i>.…`. */
function buildMix(components: z.infer<typeof mixSchema>): Task {
  const labels = mixLabels(components);
  return mixTask(
    components.map((c, i) => {
      if (c.name === 'mix')
        throw new ConfigError(`task.mix.${i}.name: a mix cannot contain a mix`, `task.mix.${i}.name`);
      try {
        return { label: labels[i], weight: c.weight, task: getTask(c.name, c.options) };
      } catch (error) {
        if (!(error instanceof ConfigError)) throw error;
        const key = (error.path ?? 'task.options').replace(/^task\./, `task.mix.${i}.`);
        throw new ConfigError(`${key}: ${error.message.replace(/^task\.[\w.]+: /, '')}`, key, error.file, {
          cause: error,
        });
      }
    }),
  );
}

/**
 * Register an extra task family (e.g. dataset-backed tasks) under `name`, replacing one of that name; the
 * returned function undoes it (restoring the task it replaced).
 */
export function registerTask(name: string, schema: z.ZodTypeAny, build: (options: never) => Task): () => void {
  const previous = registry[name];
  const entry = { schema, build };
  registry[name] = entry;
  return () => {
    if (registry[name] !== entry) return;
    if (previous) registry[name] = previous;
    else delete registry[name];
  };
}

export function knownTasks(): string[] {
  return Object.keys(registry).sort();
}

/** Each registered task's options schema (for checks that walk every option). */
export function taskOptionSchemas(): Record<string, z.ZodTypeAny> {
  return Object.fromEntries(Object.entries(registry).map(([name, b]) => [name, b.schema]));
}

export function getTask(name: string, options: unknown = {}): Task {
  if (name === 'module') {
    throw new ConfigError('task.module: a user task module loads asynchronously: use taskFromConfig', 'task.module');
  }
  const entry = registry[name];
  if (!entry)
    throw new ConfigError(`task.name: unknown task "${name}" (known: ${knownTasks().join(', ')})`, 'task.name');
  const parsed = entry.schema.safeParse(options ?? {});
  if (!parsed.success) {
    throw configErrorFromIssue('task.options', parsed.error.issues[0]);
  }
  return entry.build(parsed.data as never);
}

/** A config's `task` section: a built-in by name, or a user module (an absolute path by now). */
export interface TaskSpec {
  name: string;
  options?: Record<string, unknown>;
  module?: string;
}

/** The task of a config's `task` section, prepared (`prepare()` awaited) unless `prepare: false` (a config check). */
export async function taskFromConfig(spec: TaskSpec, options: { prepare?: boolean } = {}): Promise<Task> {
  const task = spec.module ? await loadTaskModule(spec.module, spec.options ?? {}) : getTask(spec.name, spec.options);
  if (options.prepare === false) return task;
  try {
    await task.prepare?.();
  } catch (cause) {
    if (!spec.module || cause instanceof ConfigError || cause instanceof DataError) throw cause;
    throw new ConfigError(
      `task.module: ${spec.module}: prepare() threw: ${messageOf(cause)}`,
      'task.module',
      spec.module,
      { cause },
    );
  }
  return task;
}

const isFunction = (v: unknown) => typeof v === 'function';
const optionalFunction = (v: unknown) => v === undefined || typeof v === 'function';

/** A task module's default export (or `task` export): a Task, or a Configurable made by defineTask(schema, create). */
async function loadTaskModule(file: string, options: Record<string, unknown>): Promise<Task> {
  const mod = await importUserModule(file, 'task.module');
  const task = applyOptions(moduleExport(mod, 'task', file, 'task.module'), options, file, 'task.options') as Task;
  checkShape(task, 'task (defineTask)', file, 'task.module', [
    ['name', (t) => typeof t.name === 'string' && t.name.length > 0],
    ['makeItems', (t) => isFunction(t.makeItems)],
    [
      'reward',
      (t) =>
        !!t.reward &&
        typeof (t.reward as { name?: unknown }).name === 'string' &&
        isFunction((t.reward as { score?: unknown }).score),
    ],
    ['demonstration', (t) => isFunction(t.demonstration)],
    ['extractAnswer', (t) => optionalFunction(t.extractAnswer)],
    ['demonstrationTurns', (t) => optionalFunction(t.demonstrationTurns)],
    ['prepare', (t) => optionalFunction(t.prepare)],
    ['transcript', (t) => optionalFunction(t.transcript)],
    ['agentTranscript', (t) => optionalFunction(t.agentTranscript)],
    ['firstWrongStep', (t) => optionalFunction(t.firstWrongStep)],
  ]);
  return guardedTask(task, file);
}

function messageOf(error: unknown): string {
  return (error as Error)?.message ?? String(error);
}

/** The user's task with its calls checked: a throw or a malformed item names the module and the call. */
function guardedTask(task: Task, file: string): Task {
  const guard =
    <A extends unknown[], R>(name: string, fn: (...args: A) => R, what: (...args: A) => string) =>
    (...args: A): R => {
      try {
        return fn.apply(task, args);
      } catch (cause) {
        if (cause instanceof ConfigError || cause instanceof DataError) throw cause;
        throw new ConfigError(
          `task.module: ${file}: ${name}(${what(...args)}) threw: ${messageOf(cause)}`,
          'task.module',
          file,
          { cause },
        );
      }
    };
  const turns = (task as { demonstrationTurns?: (item: TaskItem) => unknown }).demonstrationTurns;
  return {
    name: task.name,
    description: typeof task.description === 'string' ? task.description : task.name,
    reward: task.reward,
    ...(task.extractAnswer ? { extractAnswer: task.extractAnswer.bind(task) } : {}),
    ...(task.prepare ? { prepare: task.prepare.bind(task) } : {}),
    ...(task.firstWrongStep ? { firstWrongStep: task.firstWrongStep.bind(task) } : {}),
    makeItems: (split, count, seed) => {
      const items = guard('makeItems', task.makeItems, (sp, c, s) => `${JSON.stringify(sp)}, ${c}, ${s}`)(
        split,
        count,
        seed,
      );
      return checkItems(items, file, split);
    },
    demonstration: guard('demonstration', task.demonstration, (item) => `item ${JSON.stringify(item.id)}`),
    ...(turns
      ? {
          demonstrationTurns: guard('demonstrationTurns', turns, (item: TaskItem) => `item ${JSON.stringify(item.id)}`),
        }
      : {}),
    ...(task.transcript
      ? { transcript: guard('transcript', task.transcript, (item) => `item ${JSON.stringify(item.id)}`) }
      : {}),
    ...(task.agentTranscript
      ? {
          agentTranscript: guard('agentTranscript', task.agentTranscript, (item) => `item ${JSON.stringify(item.id)}`),
        }
      : {}),
  };
}

/** Items as the run needs them: a list of { id, prompt, answer } strings with distinct ids. */
function checkItems(items: unknown, file: string, split: string): TaskItem[] {
  const where = `${file}: makeItems(${JSON.stringify(split)})`;
  if (!Array.isArray(items)) throw new DataError(`${where} returned ${typeof items}, not a list of items`, file);
  const seen = new Set<string>();
  items.forEach((item: Record<string, unknown> | null, i) => {
    for (const field of ['id', 'prompt', 'answer']) {
      if (typeof item?.[field] !== 'string')
        throw new DataError(
          `${where}: item ${i}: "${field}" must be a string (got ${typeof item?.[field]})`,
          file,
          undefined,
          field,
        );
    }
    if (seen.has(item!.id as string))
      throw new DataError(`${where}: item ${i}: id ${JSON.stringify(item!.id)} is not unique`, file, undefined, 'id');
    seen.add(item!.id as string);
  });
  return items as TaskItem[];
}
