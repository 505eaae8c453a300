/**
 * DAPO dynamic sampling: drop prompt groups whose leaves all got the same reward (zero advantage,
 * no gradient) and draw more rounds until `targetGroups` informative groups are collected or
 * `maxRounds` rounds were drawn. Surplus groups are dropped from the end (draw order is kept).
 */
import { z } from 'zod';
import { leaves, type RolloutTree } from '../core/tree.js';

export const dynamicSamplingSchema = z
  .object({
    enabled: z.boolean().default(false).describe('drop zero-variance groups and refill the batch'),
    maxRounds: z.number().int().min(1).default(3).describe('maximum generation rounds per step (first included)'),
  })
  .strict();

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
      if (isInformative(t)) kept.push(t);
      else dropped++;
    }
  }
  return { trees: kept.slice(0, options.targetGroups), rounds, dropped, drawn };
}
