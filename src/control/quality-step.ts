/**
 * One step of the quality head inside the producer: the hook a generator calls while trees grow
 * (predictions for value-guided TreePO, prune decisions for ARRoL) and, once the step's trees are
 * scored, the head's out-of-sample calibration on them followed by its update. Active only when
 * `generate.allocation` is `value` or `prune.kind` is `arrol`.
 */
import type { Rng } from '../core/rng.js';
import type { RolloutTree } from '../core/tree.js';
import type { QualityHook } from '../generate/types.js';
import { choosePruned, type PruneOptions } from './prune.js';
import { auc, brier, freshHead, nodeFeatures, nodeLabels, predict, train, type QualityHeadOptions, type QualityHeadState } from './quality-head.js';

export interface QualityStepOptions {
  head: QualityHeadOptions;
  prune: PruneOptions;
  valueAllocation: boolean;
  maxResponseTokens: number;
}

export class QualityStep {
  readonly hook?: QualityHook;
  readonly state?: QualityHeadState;

  constructor(state: QualityHeadState | undefined, private readonly o: QualityStepOptions, private readonly prior: (itemId: string) => number, rng: Rng) {
    if (!o.valueAllocation && o.prune.kind === 'none') return;
    const head = (this.state = state ?? freshHead());
    const ready = () => head.examples >= o.head.warmup;
    const predictAll = (tree: RolloutTree, ids: string[]) => ids.map((id) => predict(head, nodeFeatures(tree, id, o.maxResponseTokens, prior(tree.itemId))));
    const prune = o.prune;
    this.hook = {
      predict: (tree, ids) => (ready() ? predictAll(tree, ids) : undefined),
      prune:
        prune.kind === 'arrol'
          ? (tree, ids, round) => {
              if (round !== prune.atRound || !ready()) return undefined;
              const q = predictAll(tree, ids);
              ids.forEach((id, i) => (tree.nodes[id].value = q[i]));
              return choosePruned(q, prune, rng);
            }
          : undefined,
    };
  }

  /** Calibration of the head on the step's complete trees (before it sees them), then its update. */
  learn(trees: RolloutTree[]): Record<string, number> {
    const head = this.state;
    if (!head) return {};
    const xs: number[][] = [];
    const ys: number[] = [];
    for (const tree of trees) {
      for (const [id, label] of nodeLabels(tree)) {
        xs.push(nodeFeatures(tree, id, this.o.maxResponseTokens, this.prior(tree.itemId)));
        ys.push(label);
      }
    }
    const info: Record<string, number> = { head_examples: head.examples };
    if (head.examples > 0 && xs.length) {
      const p = xs.map((x) => predict(head, x));
      const a = auc(p, ys);
      const b = brier(p, ys);
      if (a !== undefined) info.head_auc = a;
      if (b !== undefined) info.head_brier = b;
    }
    train(head, xs, ys, { learningRate: this.o.head.learningRate, epochs: this.o.head.epochs });
    return info;
  }
}
