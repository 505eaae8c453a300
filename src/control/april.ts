/**
 * `april` (APRIL partial rollouts, arXiv 2509.18521; slime `sglang_rollout.py`): launch more prompts
 * than the batch needs (`overProvision` × groups), stop generating as soon as `groups` trees are
 * complete, and hand every unfinished tree back to the store, to be continued FIRST in the next step
 * from its cached prefix. Nothing generated is discarded; continued segments keep the weight version
 * of each token, so the loss can correct for them. A tree already carried `maxCarries` times is grown
 * to completion in its own round, which bounds how stale a carried token can get.
 */
import { z } from 'zod';
import { isComplete, type RolloutTree } from '../core/tree.js';
import type { TaskItem } from '../core/types.js';
import type { CarriedTree, ControlIO, ControlResult, ControlStrategy } from './types.js';

export const aprilSchema = z
  .object({
    kind: z
      .literal('april')
      .describe('APRIL partial rollouts: over-provision, stop when the batch is complete, carry the rest'),
    overProvision: z
      .number()
      .min(1)
      .max(8)
      .default(1.5)
      .describe(
        "prompts in flight per step as a multiple of run.promptsPerStep (slime's over_sampling_batch_size / rollout_batch_size)",
      ),
    maxCarries: z
      .number()
      .int()
      .min(1)
      .max(100)
      .default(2)
      .describe('a tree carried this many times is finished without stopping (bounds token staleness)'),
  })
  .strict();
export type AprilOptions = z.infer<typeof aprilSchema>;

const carries = (tree: RolloutTree): number => (typeof tree.meta?.carries === 'number' ? tree.meta.carries : 0);

export function aprilControl(options: AprilOptions): ControlStrategy {
  return {
    kind: 'april',
    async collect(groups: number, carried: CarriedTree[], io: ControlIO): Promise<ControlResult> {
      const batch: Array<{ tree: RolloutTree; item: TaskItem }> = [];
      const carry: CarriedTree[] = [];
      const drawn: RolloutTree[] = [];
      // 1. complete leftovers from the last step come first (oldest first)
      for (const c of carried.filter((c) => c.status === 'ready')) {
        if (batch.length < groups) batch.push(c);
        else carry.push(c);
      }
      const partial = carried.filter((c) => c.status === 'partial');
      // 2. trees carried too often are finished without a stop rule
      const forced = partial.filter((c) => carries(c.tree) >= options.maxCarries);
      let round = 0;
      if (forced.length) {
        const grown = await io.grow(
          forced.map((c) => ({ item: c.item, tree: c.tree })),
          round++,
        );
        drawn.push(...grown);
        grown.forEach((tree, i) => place(tree, forced[i].item, batch, carry, groups));
      }
      // 3. the rest of the carried trees first, then fresh prompts up to the over-provisioned count
      const resumable = partial.filter((c) => carries(c.tree) < options.maxCarries);
      const need = groups - batch.length;
      if (need <= 0) carry.push(...resumable);
      else {
        const inFlight = Math.max(resumable.length, Math.ceil(options.overProvision * groups));
        const fresh = io.select(Math.max(0, inFlight - resumable.length));
        const entries = [...resumable.map((c) => ({ item: c.item, tree: c.tree })), ...fresh.map((item) => ({ item }))];
        const grown = await io.grow(entries, round++, { stopAfterTrees: need });
        drawn.push(...grown);
        grown.forEach((tree, i) => place(tree, entries[i].item, batch, carry, groups));
      }
      return {
        batch,
        drawn,
        carry,
        info: {
          sampling_rounds: round,
          carried_in: carried.length,
          carried_out: carry.length,
          carried_partial_out: carry.filter((c) => c.status === 'partial').length,
          forced_finish: forced.length,
        },
      };
    },
  };
}

/** Complete trees fill the batch in order, surplus complete trees wait as ready, the rest as partial. */
function place(
  tree: RolloutTree,
  item: TaskItem,
  batch: Array<{ tree: RolloutTree; item: TaskItem }>,
  carry: CarriedTree[],
  groups: number,
): void {
  if (isComplete(tree)) {
    if (batch.length < groups) batch.push({ tree, item });
    else carry.push({ tree, item, status: 'ready' });
    return;
  }
  tree.meta = { ...tree.meta, carries: carries(tree) + 1 };
  carry.push({ tree, item, status: 'partial' });
}
