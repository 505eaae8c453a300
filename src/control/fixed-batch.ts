/**
 * `none`: the plain synchronous batch. Select exactly `groups` new prompts, grow each to completion
 * and train on all of them (trees that failed are dropped later by the learner). Never carries
 * anything; trees carried by an earlier strategy (after a config change) go first: ready ones as they
 * are, partial ones continued with the fresh prompts.
 *
 * Two budget decisions plug in here. Per-prompt allocation (`allocate`, see allocate/): a first round
 * of `firstRound` rollouts per fresh prompt, then the rest of the step's budget (groups × G rollouts)
 * split by the allocator and grown onto the same trees in a second round. Hint rescue (`hint`, see
 * hint.ts): all-fail groups regrown with a hint, in a last round.
 */
import { hasError, isComplete, leaves, type RolloutTree } from '../core/tree.js';
import { correctness } from '../filter/constants.js';
import type { Allocator } from './allocate/types.js';
import { rescue, type HintOptions } from './hint.js';
import type { CarriedTree, ControlIO, ControlResult, ControlStrategy, GrowEntry } from './types.js';

export interface FixedBatchOptions {
  kind: 'none';
}

export interface BudgetPlan {
  allocator: Allocator;
  hint: HintOptions;
}

export function fixedBatch(_options: FixedBatchOptions, plan: BudgetPlan): ControlStrategy {
  return {
    kind: 'none',
    async collect(groups: number, carried: CarriedTree[], io: ControlIO): Promise<ControlResult> {
      const ready = carried.filter((c) => c.status === 'ready').map(({ tree, item }) => ({ tree, item }));
      const resumed: GrowEntry[] = carried
        .filter((c) => c.status === 'partial')
        .map(({ tree, item }) => ({ tree, item }));
      const fresh: GrowEntry[] = io.select(Math.max(0, groups - carried.length)).map((item) => ({ item }));
      const grown = await allocateAndGrow(resumed, fresh, plan.allocator, io);
      const toGrow = [...resumed, ...fresh];
      let batch = [...ready, ...grown.trees.map((tree, i) => ({ tree, item: toGrow[i].item }))].filter((b) =>
        isComplete(b.tree),
      );
      const rescued = await rescue(batch, io, plan.hint, grown.rounds);
      batch = rescued.batch;
      const rounds = grown.rounds + (rescued.drawn.length ? 1 : 0);
      return {
        batch,
        drawn: [...grown.trees, ...rescued.drawn],
        carry: [],
        info: { sampling_rounds: rounds, carried_in: carried.length, ...grown.info, ...rescued.info },
      };
    },
  };
}

/**
 * Grow carried partial trees and fresh prompts: one round with the uniform allocator; else a first
 * round of `firstRound` per fresh prompt, then each prompt's extra rollouts (the step's budget of
 * fresh × G rollouts minus the first round) grown onto its tree. Trees in entry order.
 */
export async function allocateAndGrow(
  resumed: GrowEntry[],
  fresh: GrowEntry[],
  allocator: Allocator,
  io: ControlIO,
): Promise<{ trees: RolloutTree[]; rounds: number; info: Record<string, number> }> {
  const entries = [...resumed, ...fresh];
  if (!entries.length) return { trees: [], rounds: 0, info: {} };
  if (allocator.kind === 'uniform' || !fresh.length) return { trees: await io.grow(entries, 0), rounds: 1, info: {} };
  const n0 = allocator.firstRound;
  const first = await io.grow([...resumed, ...fresh.map((e) => ({ ...e, groupSize: n0 }))], 0);
  const freshTrees = first.slice(resumed.length);
  const usable = freshTrees.map((t) => isComplete(t) && !hasError(t));
  const spent = freshTrees.reduce((s, t, i) => s + (usable[i] ? leaves(t).length : 0), 0);
  const budget = Math.max(0, fresh.length * io.groupSize - spent);
  const ids = freshTrees.map((t) => t.itemId);
  const prompts = freshTrees.map((t, i) => {
    const rewards = usable[i] ? leaves(t).map(correctness) : [];
    return {
      firstRound: rewards,
      recent: io.stats.recentWith(ids[i], rewards),
      posterior: io.stats.posteriorWith(ids[i], io.step, rewards),
    };
  });
  const order = usable.map((u, i) => (u ? i : -1)).filter((i) => i >= 0);
  const extraOf = allocator.extra(
    order.map((i) => prompts[i]),
    budget,
  );
  const extra = freshTrees.map(() => 0);
  order.forEach((i, k) => (extra[i] = extraOf[k]));
  const more = freshTrees.map((tree, i) => ({ tree, i })).filter(({ i }) => extra[i] > 0);
  if (more.length)
    await io.grow(
      more.map(({ tree, i }) => ({ item: fresh[i].item, tree, groupSize: leaves(tree).length + extra[i] })),
      1,
    );
  const sizes = freshTrees.map((t) => leaves(t).length);
  return {
    trees: first,
    rounds: more.length ? 2 : 1,
    info: {
      alloc_budget: budget,
      alloc_extra: extra.reduce((a, c) => a + c, 0),
      alloc_rollouts: sizes.reduce((a, c) => a + c, 0),
      alloc_prompts_extra: more.length,
      alloc_max_group: Math.max(0, ...sizes),
      alloc_min_group: sizes.length ? Math.min(...sizes) : 0,
    },
  };
}
