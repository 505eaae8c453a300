/**
 * Control strategies by name: `controlFromConfig({kind, ...})` builds one. `controlOptionsSchema` is
 * the discriminated union the run config embeds (`control: { kind: april, overProvision: 1.5 }`);
 * adding a strategy = one module + one line in each list below.
 */
import { z } from 'zod';
import { aprilControl, aprilSchema } from './april.js';
import { dynamicSamplingControl, dynamicSamplingSchema } from './dynamic-sampling.js';
import { fixedBatch } from './fixed-batch.js';
import type { ControlStrategy } from './types.js';

export * from './types.js';
export { isInformative, dynamicSampling } from './dynamic-sampling.js';

const noneSchema = z.object({ kind: z.literal('none').describe('a fixed batch of fresh prompts per step, each grown to completion') }).strict();

export const controlOptionsSchema = z.discriminatedUnion('kind', [noneSchema, dynamicSamplingSchema, aprilSchema]);
export type ControlOptions = z.infer<typeof controlOptionsSchema>;

export function controlFromConfig(options: ControlOptions): ControlStrategy {
  switch (options.kind) {
    case 'none':
      return fixedBatch(options);
    case 'dynamic_sampling':
      return dynamicSamplingControl(options);
    case 'april':
      return aprilControl(options);
  }
}
