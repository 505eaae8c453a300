/**
 * Per-prompt allocators by name (`allocate: { kind: uniform | knapsack | xrpo | dars }`): the schema
 * the run config embeds and the factory. Adding one = a module + a line in each list.
 */
import { z } from 'zod';
import { darsAllocator, darsSchema } from './dars.js';
import { knapsackAllocator, knapsackSchema } from './knapsack.js';
import type { Allocator } from './types.js';
import { xrpoAllocator, xrpoSchema } from './xrpo.js';

export * from './types.js';
export { knapsackValue, solveKnapsack, usefulRollouts } from './knapsack.js';
export { darsExtra } from './dars.js';
export { xrpoPriority } from './xrpo.js';
export { studentTQuantile, studentTCdf } from './student-t.js';

const uniformSchema = z
  .object({ kind: z.literal('uniform').describe('every prompt gets G rollouts in one round') })
  .strict();

export const allocateOptionsSchema = z.discriminatedUnion('kind', [
  uniformSchema,
  knapsackSchema,
  xrpoSchema,
  darsSchema,
]);
export type AllocateOptions = z.infer<typeof allocateOptionsSchema>;

/** The allocator; `groupSize` is G (the uniform allocator's rollouts, and the per-prompt budget). */
export function allocatorFromConfig(options: AllocateOptions, groupSize: number): Allocator {
  switch (options.kind) {
    case 'uniform':
      return { kind: 'uniform', firstRound: groupSize, extra: (prompts) => prompts.map(() => 0) };
    case 'knapsack':
      return knapsackAllocator(options);
    case 'xrpo':
      return xrpoAllocator(options);
    case 'dars':
      return darsAllocator(options);
  }
}
