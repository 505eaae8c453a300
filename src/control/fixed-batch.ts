/**
 * `none`: the plain synchronous batch. Select exactly `groups` new prompts, grow each to completion
 * in one round, and train on all of them (trees that failed are dropped later by the learner). Never
 * carries anything; trees carried by an earlier strategy (after a config change) go first: ready ones
 * as they are, partial ones continued with the fresh prompts.
 */
import { isComplete } from '../core/tree.js';
import type { CarriedTree, ControlIO, ControlResult, ControlStrategy, GrowEntry } from './types.js';

export interface FixedBatchOptions {
  kind: 'none';
}

export function fixedBatch(_options: FixedBatchOptions): ControlStrategy {
  return {
    kind: 'none',
    async collect(groups: number, carried: CarriedTree[], io: ControlIO): Promise<ControlResult> {
      const ready = carried.filter((c) => c.status === 'ready').map(({ tree, item }) => ({ tree, item }));
      const toGrow: GrowEntry[] = [
        ...carried.filter((c) => c.status === 'partial').map(({ tree, item }) => ({ tree, item })),
        ...io.select(Math.max(0, groups - carried.length)).map((item) => ({ item })),
      ];
      const grown = toGrow.length ? await io.grow(toGrow, 0) : [];
      const batch = [...ready, ...grown.map((tree, i) => ({ tree, item: toGrow[i].item }))].filter((b) => isComplete(b.tree));
      return { batch, drawn: grown, carry: [], info: { sampling_rounds: 1, carried_in: carried.length } };
    },
  };
}
