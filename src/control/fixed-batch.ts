/**
 * `none`: the plain synchronous batch. Select exactly `groups` new prompts, grow each to completion
 * in one round, and train on all of them (trees that failed are dropped later by the learner). Never
 * carries anything; trees carried by an earlier strategy (after a config change) go first.
 */
import { isComplete } from '../core/tree.js';
import type { CarriedTree, ControlIO, ControlResult, ControlStrategy } from './types.js';

export interface FixedBatchOptions {
  kind: 'none';
}

export function fixedBatch(_options: FixedBatchOptions): ControlStrategy {
  return {
    kind: 'none',
    async collect(groups: number, carried: CarriedTree[], io: ControlIO): Promise<ControlResult> {
      const entries = [...carried.map((c) => ({ item: c.item, tree: c.status === 'partial' ? c.tree : undefined, ready: c.status === 'ready' ? c.tree : undefined }))];
      const fresh = io.select(Math.max(0, groups - entries.length)).map((item) => ({ item, tree: undefined, ready: undefined }));
      const all = [...entries, ...fresh];
      const toGrow = all.filter((e) => !e.ready);
      const grown = toGrow.length ? await io.grow(toGrow.map(({ item, tree }) => ({ item, tree })), 0) : [];
      const byEntry = new Map(toGrow.map((e, i) => [e, grown[i]]));
      const batch = all.map((e) => ({ tree: e.ready ?? byEntry.get(e)!, item: e.item })).filter((b) => isComplete(b.tree));
      return { batch, drawn: grown, carry: [], info: { sampling_rounds: 1, carried_in: carried.length } };
    },
  };
}
