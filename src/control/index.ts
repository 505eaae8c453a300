/**
 * Control strategies by name: `controlFromConfig({kind, ...}, plan)` builds one. `controlOptionsSchema`
 * is the discriminated union the run config embeds (`control: { kind: april, overProvision: 1.5 }`);
 * adding a strategy = one module + one line in each list below. Per-prompt allocation (`allocate`),
 * prompt skipping (`skip`) and hint rescue (`hint`) are their own config sections.
 */
import { z } from 'zod';
import { ConfigError } from '../core/errors.js';
import { allocatorFromConfig, type AllocateOptions } from './allocate/index.js';
import { aprilControl, aprilSchema } from './april.js';
import { dynamicSamplingControl, dynamicSamplingSchema } from './dynamic-sampling.js';
import { fixedBatch } from './fixed-batch.js';
import type { HintOptions } from './hint.js';
import type { ControlStrategy } from './types.js';

export * from './types.js';
export { isInformative, dynamicSampling } from './dynamic-sampling.js';
export { allocateOptionsSchema, allocatorFromConfig, type AllocateOptions } from './allocate/index.js';
export { hintOptionsSchema, type HintOptions } from './hint.js';
export { skipOptionsSchema, selectSkipping, adaptSkip, type SkipOptions, type SkipState } from './skip.js';
export { pruneOptionsSchema, choosePruned, keepProbabilities, type PruneOptions } from './prune.js';
export {
  qualityHeadSchema,
  freshHead,
  nodeFeatures,
  nodeLabels,
  predict,
  train as trainHead,
  auc,
  brier,
  type QualityHeadOptions,
  type QualityHeadState,
} from './quality-head.js';
export { PromptStats, promptStatsSchema, type PromptStatsOptions, type PromptStatsState } from './prompt-stats.js';

const noneSchema = z
  .object({ kind: z.literal('none').describe('a fixed batch of fresh prompts per step, each grown to completion') })
  .strict();

export const controlOptionsSchema = z.discriminatedUnion('kind', [noneSchema, dynamicSamplingSchema, aprilSchema]);
export type ControlOptions = z.infer<typeof controlOptionsSchema>;

export interface ControlPlan {
  allocate: AllocateOptions;
  hint: HintOptions;
  /** The generator's G. */
  groupSize: number;
}

export function controlFromConfig(options: ControlOptions, plan: ControlPlan): ControlStrategy {
  if (options.kind !== 'none') {
    if (plan.allocate.kind !== 'uniform')
      throw new ConfigError(
        `allocate.kind "${plan.allocate.kind}" needs control.kind "none" (got "${options.kind}")`,
        'allocate.kind',
      );
    if (plan.hint.kind !== 'none')
      throw new ConfigError(
        `hint.kind "${plan.hint.kind}" needs control.kind "none" (got "${options.kind}")`,
        'hint.kind',
      );
  }
  if (plan.allocate.kind !== 'uniform') {
    const { firstRound, maxPerPrompt } = plan.allocate;
    if (firstRound >= plan.groupSize)
      throw new ConfigError(
        `allocate.firstRound (${firstRound}) must be below the group size G = ${plan.groupSize}, or nothing is left to allocate`,
        'allocate.firstRound',
      );
    if (maxPerPrompt < plan.groupSize)
      throw new ConfigError(
        `allocate.maxPerPrompt (${maxPerPrompt}) must be at least the group size G = ${plan.groupSize}`,
        'allocate.maxPerPrompt',
      );
  }
  switch (options.kind) {
    case 'none':
      return fixedBatch(options, { allocator: allocatorFromConfig(plan.allocate, plan.groupSize), hint: plan.hint });
    case 'dynamic_sampling':
      return dynamicSamplingControl(options);
    case 'april':
      return aprilControl(options);
  }
}
