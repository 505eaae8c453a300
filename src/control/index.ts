/**
 * Control strategies by name: `controlFromConfig({kind, ...}, plan)` builds one. `controlOptionsSchema`
 * is the discriminated union the run config embeds (`control: { kind: april, overProvision: 1.5 }`);
 * adding a strategy = one module + one line in each list below. The Control methods (allocation,
 * skipping, selection, hints, contrastive prompting, pruning, the quality head, prompt statistics) are
 * sections of `control:` beside the strategy's kind; allocation and hints go to the strategy, the
 * others are the producer's hooks (hooks.ts).
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

/** The control strategies' own options by kind (the run config extends each with the hooks' sections). */
export const controlStrategySchemas = [noneSchema, dynamicSamplingSchema, aprilSchema] as const;
export const controlOptionsSchema = z.discriminatedUnion('kind', [...controlStrategySchemas]);
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
        `control.allocate.kind "${plan.allocate.kind}" needs control.kind "none" (got "${options.kind}")`,
        'control.allocate.kind',
      );
    if (plan.hint.kind !== 'none')
      throw new ConfigError(
        `control.hint.kind "${plan.hint.kind}" needs control.kind "none" (got "${options.kind}")`,
        'control.hint.kind',
      );
  }
  if (plan.allocate.kind !== 'uniform') {
    const { firstRound, maxPerPrompt } = plan.allocate;
    if (firstRound >= plan.groupSize)
      throw new ConfigError(
        `control.allocate.firstRound (${firstRound}) must be below the group size G = ${plan.groupSize}, or nothing is left to allocate`,
        'control.allocate.firstRound',
      );
    if (maxPerPrompt < plan.groupSize)
      throw new ConfigError(
        `control.allocate.maxPerPrompt (${maxPerPrompt}) must be at least the group size G = ${plan.groupSize}`,
        'control.allocate.maxPerPrompt',
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
