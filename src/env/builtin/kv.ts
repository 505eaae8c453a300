/**
 * Built-in `kv` environment: a stateful key-value store of integers with tools `get(key)`,
 * `set(key,value)` and `add(key,n)`. The initial store comes from the task item (`item.meta.store`);
 * the goal (`item.meta.goal`, e.g. c = a + b) is checked on the final state and reported as the last
 * step's `reward` (1 when it holds, else 0). Forks copy the store, so branches are independent.
 */
import { z } from 'zod';
import type { TaskItem } from '../../core/types.js';
import { DataError } from '../../core/errors.js';
import { tool, type ArborTool } from '../tools.js';
import { toolEnvironmentFactory } from '../tool-env.js';
import type { EnvironmentFactory } from '../types.js';

export type KvOp = '+' | '-' | '*';

/** The goal "target = left op right", over the initial values of left and right. */
export interface KvGoal {
  target: string;
  left: string;
  op: KvOp;
  right: string;
}

export interface KvState {
  store: Record<string, number>;
}

const keySchema = z
  .string()
  .min(1)
  .max(16)
  .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'a key is a letter followed by letters, digits or _');
const intSchema = z.number().int().min(-1e9).max(1e9);

export const kvMetaSchema = z.object({
  store: z.record(intSchema),
  goal: z.object({ target: keySchema, left: keySchema, op: z.enum(['+', '-', '*']), right: keySchema }).optional(),
});

/** The item's store and goal, validated (DataError naming the field). */
export function kvMeta(item: TaskItem): { store: Record<string, number>; goal?: KvGoal } {
  const parsed = kvMetaSchema.safeParse(item.meta ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = ['meta', ...issue.path].join('.');
    throw new DataError(`item "${item.id}": ${field}: ${issue.message}`, undefined, undefined, field);
  }
  return parsed.data;
}

export function applyOp(a: number, op: KvOp, b: number): number {
  return op === '+' ? a + b : op === '-' ? a - b : a * b;
}

/** The value the goal asks for, from the initial store. */
export function kvGoalValue(store: Record<string, number>, goal: KvGoal): number {
  return applyOp(store[goal.left] ?? 0, goal.op, store[goal.right] ?? 0);
}

/** Does `final` satisfy the goal set on `initial`? */
export function kvGoalHolds(initial: Record<string, number>, final: Record<string, number>, goal: KvGoal): boolean {
  return final[goal.target] === kvGoalValue(initial, goal);
}

export const kvTools: Record<string, ArborTool<any, string, KvState>> = {
  get: tool({
    description: 'Read the integer stored under key.',
    inputSchema: z.object({ key: keySchema.describe('the key') }),
    execute: async ({ key }, { state }: { state: KvState }) => {
      if (!(key in state.store)) throw new Error(`no key "${key}"`);
      return String(state.store[key]);
    },
  }),
  set: tool({
    description: 'Store an integer under key.',
    inputSchema: z.object({ key: keySchema.describe('the key'), value: intSchema.describe('the integer to store') }),
    execute: async ({ key, value }, { state }: { state: KvState }) => {
      state.store[key] = value;
      return 'ok';
    },
  }),
  add: tool({
    description: 'Add n to the integer under key (a missing key counts as 0); returns the new value.',
    inputSchema: z.object({ key: keySchema.describe('the key'), n: intSchema.describe('the amount to add') }),
    execute: async ({ key, n }, { state }: { state: KvState }) => {
      state.store[key] = (state.store[key] ?? 0) + n;
      return String(state.store[key]);
    },
  }),
};

export const kvEnvOptions = z
  .object({
    kind: z.literal('kv'),
    maxObservationChars: z.number().int().min(16).max(100_000).default(100).describe('longest tool output passed back'),
  })
  .strict();

export function kvEnvironmentFactory(options: Partial<z.infer<typeof kvEnvOptions>> = {}): EnvironmentFactory {
  return toolEnvironmentFactory<KvState>({
    kind: 'kv',
    tools: kvTools,
    state: {
      init: (item) => ({ store: { ...kvMeta(item).store } }),
      clone: (s) => ({ store: { ...s.store } }),
    },
    reward: ({ state, item }) => {
      const meta = kvMeta(item);
      return meta.goal ? (kvGoalHolds(meta.store, state.store, meta.goal) ? 1 : 0) : undefined;
    },
    maxObservationChars: options.maxObservationChars ?? 100,
  });
}
