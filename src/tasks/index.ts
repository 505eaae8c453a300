/**
 * Task registry: `getTask({name, options})` builds a built-in task by name with zod-validated
 * options (unknown names or keys are ConfigErrors that list what exists).
 */
import { z } from 'zod';
import { ConfigError } from '../core/errors.js';
import { arithTask } from './arith.js';
import { countdownTask } from './countdown.js';
import type { Task } from './types.js';

export * from './types.js';
export { arithTask, arithSolution, extractArithAnswer } from './arith.js';
export { countdownTask, checkCountdown } from './countdown.js';
export { evaluateExpression } from './expression.js';

const arithOptions = z
  .object({
    digits: z.number().int().min(1).max(9).default(3).describe('maximum digits of the first operand'),
    minDigits: z.number().int().min(1).max(9).default(1).describe('minimum digits of the first operand'),
    ops: z.array(z.enum(['+', '-', '*'])).min(1).default(['+', '-', '*']).describe('operators'),
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

type Builder = { schema: z.ZodTypeAny; build: (options: never) => Task };
const registry: Record<string, Builder> = {
  arith: { schema: arithOptions, build: (o: z.infer<typeof arithOptions>) => arithTask(o) as Task },
  countdown: { schema: countdownOptions, build: (o: z.infer<typeof countdownOptions>) => countdownTask(o) },
};

/** Register an extra task family (e.g. dataset-backed tasks) under `name`. */
export function registerTask(name: string, schema: z.ZodTypeAny, build: (options: never) => Task): void {
  registry[name] = { schema, build };
}

export function knownTasks(): string[] {
  return Object.keys(registry).sort();
}

export function getTask(name: string, options: unknown = {}): Task {
  const entry = registry[name];
  if (!entry) throw new ConfigError(`task.name: unknown task "${name}" (known: ${knownTasks().join(', ')})`, 'task.name');
  const parsed = entry.schema.safeParse(options ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new ConfigError(`task.options.${issue.path.join('.')}: ${issue.message}`, `task.options.${issue.path.join('.')}`);
  }
  return entry.build(parsed.data as never);
}
