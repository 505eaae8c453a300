/**
 * Prompt skipping before rollout (GRESO, arXiv 2506.02177; Infini-AI-Lab/GRESO
 * verl/trainer/ttis/presampling_selector.py). A prompt whose latest k visits all gave zero-variance
 * groups, all solved (group mean ≥ easyThreshold) or all failed (≤ hardThreshold), is skipped with
 * probability 1 − max(p^k, floor), p = pEasy or pHard. After each step p moves by `adjust` within
 * [pMin, pMax]: when the observed share of easy (hard) zero-variance groups reaches its target, the
 * next step skips more (p down), else less. Skipped prompts are consumed from the data order and
 * replaced by the next ones, so the batch keeps its size (GRESO refills by dynamic sampling).
 */
import { z } from 'zod';
import type { Rng } from '../core/rng.js';
import type { TaskItem } from '../core/types.js';
import type { PromptRecord } from './prompt-stats.js';

const noneSchema = z.object({ kind: z.literal('none').describe('train on every selected prompt') }).strict();

export const gresoSchema = z
  .object({
    kind: z.literal('greso').describe('GRESO: skip prompts whose recent groups had zero reward variance'),
    easyThreshold: z
      .number()
      .min(0)
      .max(1)
      .default(0.98)
      .describe('a visit is easy when its group mean reward is at least this'),
    hardThreshold: z
      .number()
      .min(0)
      .max(1)
      .default(0.11)
      .describe('a visit is hard when its group mean reward is at most this'),
    start: z
      .number()
      .min(0)
      .max(1)
      .default(0.5)
      .describe('initial pEasy and pHard (keep probability per zero-variance visit)'),
    adjust: z.number().min(0).max(0.5).default(0.01).describe('per-step change of pEasy / pHard'),
    pMin: z.number().min(0).max(1).default(0.05).describe('lower bound of pEasy / pHard'),
    pMax: z.number().min(0).max(1).default(0.95).describe('upper bound of pEasy / pHard'),
    floor: z
      .number()
      .min(0)
      .max(1)
      .default(0.01)
      .describe('exploration floor: a prompt is kept with at least this probability'),
    targetZeroVariance: z
      .number()
      .min(0)
      .max(1)
      .default(0.25)
      .describe('target share of zero-variance groups in a batch'),
    easyShare: z
      .number()
      .min(0)
      .max(1)
      .default(1 / 3)
      .describe('part of the target that is easy groups (the rest is hard)'),
    maxDrawFactor: z
      .number()
      .int()
      .min(1)
      .max(64)
      .default(4)
      .describe('draw at most this many prompts per batch slot; beyond it prompts are kept'),
  })
  .strict();

export const skipOptionsSchema = z.discriminatedUnion('kind', [noneSchema, gresoSchema]);
export type SkipOptions = z.infer<typeof skipOptionsSchema>;
export type GresoOptions = z.infer<typeof gresoSchema>;

export interface SkipState {
  pEasy: number;
  pHard: number;
}

/** Trailing visits of one kind: the latest consecutive visits that were easy (or hard). */
export function trailingVisits(visits: number[], test: (mean: number) => boolean): number {
  let k = 0;
  for (let i = visits.length - 1; i >= 0 && test(visits[i]); i--) k++;
  return k;
}

/** Probability that GRESO keeps a prompt with this history. */
export function keepProbability(record: PromptRecord | undefined, options: GresoOptions, state: SkipState): number {
  if (!record) return 1;
  const easy = trailingVisits(record.visits, (m) => m >= options.easyThreshold);
  const hard = trailingVisits(record.visits, (m) => m <= options.hardThreshold);
  if (easy > 0) return Math.max(state.pEasy ** easy, options.floor);
  if (hard > 0) return Math.max(state.pHard ** hard, options.floor);
  return 1;
}

/**
 * Draw `count` prompts, skipping by GRESO's rule; at most `maxDrawFactor · count` draws (after that
 * every drawn prompt is kept, so a batch is never starved when the pool is mostly skippable).
 */
export function selectSkipping(
  take: (n: number) => TaskItem[],
  count: number,
  options: GresoOptions,
  state: SkipState,
  record: (id: string) => PromptRecord | undefined,
  rng: Rng,
): { items: TaskItem[]; skipped: number } {
  const items: TaskItem[] = [];
  let skipped = 0;
  for (let draws = 0; items.length < count; draws++) {
    const [item] = take(1);
    if (draws >= options.maxDrawFactor * count || rng.next() < keepProbability(record(item.id), options, state))
      items.push(item);
    else skipped++;
  }
  return { items, skipped };
}

/** GRESO's adaptation after a step from the group means of its batch; returns the new state. */
export function adaptSkip(state: SkipState, groupMeans: number[], options: GresoOptions): SkipState {
  if (!groupMeans.length) return state;
  const easy = groupMeans.filter((m) => m >= options.easyThreshold).length / groupMeans.length;
  const hard = groupMeans.filter((m) => m <= options.hardThreshold).length / groupMeans.length;
  const move = (p: number, observed: number, target: number) =>
    Math.min(options.pMax, Math.max(options.pMin, observed >= target ? p - options.adjust : p + options.adjust));
  return {
    pEasy: move(state.pEasy, easy, options.targetZeroVariance * options.easyShare),
    pHard: move(state.pHard, hard, options.targetZeroVariance * (1 - options.easyShare)),
  };
}
