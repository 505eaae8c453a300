/**
 * One step of the quality head inside the producer: the hook a generator calls while trees grow
 * (predictions for value-guided TreePO, prune decisions for ARRoL) and, once the step's trees are
 * scored, the head's out-of-sample calibration on them followed by its update. Calibration is logged
 * twice: over every labelled node (`head_auc`) and over the nodes the head scored when a decision was
 * made (`head_auc_at_decision`: ARRoL's pruning round, value-guided branching). With ARRoL, the raw
 * scores given at the pruning round are fed to the head's histogram calibrator against the labels the
 * nodes got, before the head trains; with `prune.calibrate` the keep probabilities use the calibrated
 * score. Active only when `generate.allocation` is `value` or `prune.kind` is `arrol`.
 */
import { ConfigError } from '../core/errors.js';
import type { Rng } from '../core/rng.js';
import type { RolloutTree } from '../core/tree.js';
import type { QualityHook } from '../generate/types.js';
import { choosePruned, type PruneOptions } from './prune.js';
import {
  auc,
  brier,
  calibrated,
  calibrationExamples,
  feedCalibrator,
  freshCalibrator,
  freshHead,
  headHiddenWidth,
  hiddenFeatures,
  nodeFeatures,
  nodeLabels,
  predict,
  train,
  type HiddenFeatures,
  type QualityHeadOptions,
  type QualityHeadState,
} from './quality-head.js';

export interface QualityStepOptions {
  head: QualityHeadOptions;
  prune: PruneOptions;
  valueAllocation: boolean;
  maxResponseTokens: number;
  /** Width of the hidden state the sampler can return (0 = it cannot); used when `head.hidden`. */
  samplerHiddenSize: number;
  /** The sampler reports per-token entropy (asked for while the head is active). */
  samplerEntropy: boolean;
}

/** Scores the head gave when a decision was made: tree id → node id → predicted success. */
export type DecisionScores = Map<string, Map<string, number>>;

/** Decision-time scores and the labels of the nodes that got one (pruned nodes have none). */
export function decisionPairs(trees: RolloutTree[], decided: DecisionScores): { scores: number[]; labels: number[] } {
  const scores: number[] = [];
  const labels: number[] = [];
  for (const tree of trees) {
    const scored = decided.get(tree.id);
    if (!scored) continue;
    for (const [id, label] of nodeLabels(tree)) {
      const q = scored.get(id);
      if (q === undefined) continue;
      scores.push(q);
      labels.push(label);
    }
  }
  return { scores, labels };
}

/**
 * AUC of the decision-time scores against the labels the nodes got once their trees completed
 * (pruned nodes left the tree and have none); `nodes` counts the labelled decision nodes.
 */
export function decisionAuc(trees: RolloutTree[], decided: DecisionScores): { auc?: number; nodes: number } {
  const { scores, labels } = decisionPairs(trees, decided);
  return { auc: auc(scores, labels), nodes: scores.length };
}

export class QualityStep {
  readonly hook?: QualityHook;
  readonly state?: QualityHeadState;
  private readonly hidden?: HiddenFeatures;
  /** This step's decisions (one QualityStep per step, so nothing outlives the step): raw scores. */
  readonly decided: DecisionScores = new Map();
  /** The raw scores given at ARRoL's pruning round (a subset of `decided`): what the calibrator learns from. */
  readonly decidedAtPrune: DecisionScores = new Map();

  constructor(
    state: QualityHeadState | undefined,
    private readonly o: QualityStepOptions,
    private readonly prior: (itemId: string) => number,
    rng: Rng,
  ) {
    if (!o.valueAllocation && o.prune.kind === 'none') return;
    const hidden = (this.hidden =
      o.head.hidden && o.samplerHiddenSize > 0 ? hiddenFeatures(o.samplerHiddenSize, o.head.hiddenDims) : undefined);
    const width = hidden?.width ?? 0;
    if (state && headHiddenWidth(state) !== width) {
      throw new ConfigError(
        `the saved quality head reads ${headHiddenWidth(state)} hidden-state features, this run's engine and ` +
          `config give ${width} (set qualityHead.hidden and hiddenDims as in the run that saved it)`,
        'qualityHead.hidden',
      );
    }
    const head = (this.state = state ?? freshHead(width));
    const prune = o.prune;
    if (prune.kind === 'arrol') {
      // a head saved before the calibrator existed gets a fresh one
      head.calibration ??= freshCalibrator(prune.calibrationBins);
      if (head.calibration.counts.length !== prune.calibrationBins)
        throw new ConfigError(
          `the saved quality head's calibrator has ${head.calibration.counts.length} bins, this run's config ` +
            `asks for ${prune.calibrationBins} (set prune.calibrationBins as in the run that saved it)`,
          'prune.calibrationBins',
        );
    }
    const ready = () => head.examples >= o.head.warmup;
    const predictAll = (tree: RolloutTree, ids: string[]) =>
      ids.map((id) => predict(head, nodeFeatures(tree, id, o.maxResponseTokens, prior(tree.itemId), hidden)));
    const record = (into: DecisionScores, tree: RolloutTree, ids: string[], q: number[]) => {
      const scored = into.get(tree.id) ?? new Map<string, number>();
      ids.forEach((id, i) => scored.set(id, q[i]));
      into.set(tree.id, scored);
    };
    const decide = (tree: RolloutTree, ids: string[], q: number[]) => {
      record(this.decided, tree, ids, q);
      return q;
    };
    this.hook = {
      wants: { entropy: o.samplerEntropy, hidden: hidden !== undefined },
      predict: (tree, ids) => (ready() ? decide(tree, ids, predictAll(tree, ids)) : undefined),
      prune:
        prune.kind === 'arrol'
          ? (tree, ids, round) => {
              if (round !== prune.atRound || !ready()) return undefined;
              const raw = decide(tree, ids, predictAll(tree, ids));
              record(this.decidedAtPrune, tree, ids, raw);
              const calibrator = head.calibration!;
              const q = prune.calibrate ? raw.map((r) => calibrated(calibrator, r)) : raw;
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
        xs.push(nodeFeatures(tree, id, this.o.maxResponseTokens, this.prior(tree.itemId), this.hidden));
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
    // the decision-time scores come from the same head state (it trains only below)
    const atDecision = decisionAuc(trees, this.decided);
    if (atDecision.nodes) info.head_decision_nodes = atDecision.nodes;
    if (atDecision.auc !== undefined) info.head_auc_at_decision = atDecision.auc;
    if (head.calibration) {
      // what a raw score at the pruning round turned out to mean, learnt before the head itself moves
      const { scores, labels } = decisionPairs(trees, this.decidedAtPrune);
      feedCalibrator(head.calibration, scores, labels);
      info.head_calibration_examples = calibrationExamples(head.calibration);
    }
    train(head, xs, ys, this.o.head);
    return info;
  }
}
