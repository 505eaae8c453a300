/**
 * DAPO dynamic sampling: drop prompt groups whose leaves all got the same reward (zero advantage,
 * no gradient) and draw more rounds until `targetGroups` informative groups are collected or
 * `maxRounds` rounds were drawn. Surplus groups are dropped from the end (draw order is kept).
 */
import { z } from 'zod';
import { hasError, isComplete, leaves, type RolloutTree } from '../core/tree.js';
import type { TaskItem } from '../core/types.js';
import type { CarriedTree, ControlIO, ControlResult, ControlStrategy } from './types.js';

export const dynamicSamplingSchema = z
  .object({
    kind: z
      .literal('dynamic_sampling')
      .describe('DAPO dynamic sampling: drop zero-variance groups and refill the batch'),
    maxRounds: z
      .number()
      .int()
      .min(1)
      .max(100)
      .default(3)
      .describe('maximum generation rounds per step (first included)'),
  })
  .strict();
export type DynamicSamplingOptions = z.infer<typeof dynamicSamplingSchema>;

/** The strategy: rounds of fresh prompts until `groups` informative trees (carried trees are grown first). */
export function dynamicSamplingControl(options: DynamicSamplingOptions): ControlStrategy {
  return {
    kind: 'dynamic_sampling',
    async collect(groups: number, carried: CarriedTree[], io: ControlIO): Promise<ControlResult> {
      const items = new Map<string, TaskItem>();
      const drawRound = async (needed: number, round: number): Promise<RolloutTree[]> => {
        const entries: Array<{ item: TaskItem; tree?: RolloutTree }> =
          round === 0 && carried.length
            ? [
                ...carried.map((c) => ({ item: c.item, tree: c.tree })),
                ...io.select(Math.max(0, needed - carried.length)).map((item) => ({ item })),
              ]
            : io.select(needed).map((item) => ({ item }));
        for (const e of entries) items.set(e.item.id, e.item);
        const trees = await io.grow(
          entries.map((e) => ({ item: e.item, tree: e.tree && !isComplete(e.tree) ? e.tree : undefined })),
          round,
        );
        return trees.map((t, i) => (entries[i].tree && isComplete(entries[i].tree!) ? entries[i].tree! : t));
      };
      const out = await dynamicSampling({ targetGroups: groups, maxRounds: options.maxRounds }, drawRound);
      return {
        batch: out.trees.map((tree) => ({ tree, item: items.get(tree.itemId)! })),
        drawn: out.drawn,
        carry: [],
        info: { groups_dropped: out.dropped, sampling_rounds: out.rounds, carried_in: carried.length },
      };
    },
  };
}

/** A group carries signal when its leaf rewards are not all equal (a single leaf counts as informative). */
export function isInformative(tree: RolloutTree): boolean {
  const rewards = leaves(tree).map((l) => l.reward ?? 0);
  if (rewards.length <= 1) return true;
  return rewards.some((r) => r !== rewards[0]);
}

export async function dynamicSampling(
  options: { targetGroups: number; maxRounds: number },
  drawRound: (needed: number, round: number) => Promise<RolloutTree[]>,
): Promise<{ trees: RolloutTree[]; rounds: number; dropped: number; drawn: RolloutTree[] }> {
  const kept: RolloutTree[] = [];
  const drawn: RolloutTree[] = [];
  let dropped = 0;
  let rounds = 0;
  while (kept.length < options.targetGroups && rounds < options.maxRounds) {
    const batch = await drawRound(options.targetGroups - kept.length, rounds);
    rounds++;
    drawn.push(...batch);
    for (const t of batch) {
      if (isInformative(t) && isComplete(t) && !hasError(t)) kept.push(t);
      else dropped++;
    }
  }
  return { trees: kept.slice(0, options.targetGroups), rounds, dropped, drawn };
}
