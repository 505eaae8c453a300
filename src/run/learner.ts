/**
 * The training side of a step (the learner in the architecture diagram): Optimize → Trainer. Turns a
 * batch of scored trees into advantages and datums, applies the off-policy correction against the
 * recorded behaviour log-probs (decoupled PPO / truncated IS, using the learner's policy before the
 * update as the proximal policy), runs forward/backward and the optimiser step per mini-batch, and
 * measures what async training changes: the staleness of every trained token and the gap between the
 * behaviour log-probs and the current policy's. Publishing the new weights is the caller's job.
 */
import { hasError, type RolloutTree } from '../core/tree.js';
import type { Engine } from '../engine/build.js';
import { NonFiniteLossError, NumericsError } from '../core/errors.js';
import type { LossExtras, LossSpec, Trainer } from '../engine/types.js';
import { buildDatums, computeAdvantages, lossFromConfig, shapingInputs } from '../optimize/index.js';
import { splitByTree } from '../optimize/minibatch.js';
import { applyCorrection, logprobGap, logprobMaxGap, type Correction } from '../optimize/off-policy.js';
import { learningRateAt } from '../optimize/schedule.js';
import { RolloutStore } from '../replay/store.js';
import type { ReplayCorrection } from '../replay/replay.js';
import type { ArborConfig } from './config.js';

export interface LearnerResult {
  /** Per-step metrics (loss, clip_fraction, approx_kl, entropy, grad_norm, lr, staleness_*, logprob_gap, ...). */
  metrics: Record<string, number>;
  /** Staleness (learner version − token version) → policy tokens, over the batch. */
  stalenessHistogram: Record<number, number>;
  /** Optimiser updates taken. */
  updates: number;
  /** Updates skipped because the loss or the gradient was NaN or infinite (the weights kept their last good state). */
  nonFiniteUpdates: number;
}

/**
 * With one update per step the proximal policy IS the current one (u = π_θ/π_prox = 1, never
 * clipped), so decoupled PPO reduces to −w·A with w = exp(lp − behav) (tokens with w > maxWeight
 * masked) and TIS to −min(w, C)·A: the importance-sampling loss, with no extra forward pass. Same
 * value and gradient as the general path (tested).
 */
export function oneUpdateLoss(correction: Exclude<Correction, { kind: 'none' }>): LossSpec {
  return correction.kind === 'decoupled'
    ? { kind: 'importance_sampling', maskAbove: correction.maxWeight }
    : { kind: 'importance_sampling', truncateAt: correction.cap };
}

export class Learner {
  private readonly loss: LossSpec;
  private readonly extras: LossExtras;
  private readonly correction: Correction;

  constructor(
    private readonly engine: Pick<Engine, 'trainer' | 'reference' | 'embedded'>,
    private readonly config: ArborConfig,
  ) {
    ({ loss: this.loss, extras: this.extras, correction: this.correction } = lossFromConfig(config.optimize.loss));
  }

  /** The schedule's learning rate at optimizer step `step`. */
  private learningRate(step: number): number {
    const { trainer, run } = this.config;
    return learningRateAt(step, {
      kind: trainer.schedule,
      learningRate: trainer.learningRate,
      warmupSteps: trainer.warmupSteps,
      totalSteps: run.steps * trainer.updatesPerStep,
      minRatio: trainer.minLearningRateRatio,
    });
  }

  /** One AdamW step at `learningRate` with the config's other optimizer settings. */
  private optimStep(learningRate: number): ReturnType<Trainer['optimStep']> {
    const { trainer } = this.config;
    return this.engine.trainer.optimStep({
      learningRate,
      beta1: trainer.beta1,
      beta2: trainer.beta2,
      eps: trainer.eps,
      weightDecay: trainer.weightDecay,
      gradClipNorm: trainer.gradClipNorm,
    });
  }

  /** Train on `trees` (error trees dropped) at learner weight version `version`; `optimizerStep` drives the schedule; `replay` corrects replayed trees. */
  async train(
    trees: RolloutTree[],
    version: number,
    optimizerStep: number,
    replay?: ReplayCorrection,
  ): Promise<LearnerResult> {
    const { config } = this;
    const usable = trees.filter((t) => !hasError(t));
    const stalenessHistogram = RolloutStore.stalenessHistogram(usable, version);
    // the ace shaping term reads sequence log-probs under the current and the reference policy ({} otherwise)
    const shaping = await shapingInputs(usable, config.optimize.advantage.shaping, {
      policy: this.engine.trainer,
      reference: this.engine.reference,
    });
    const advantaged = computeAdvantages(usable, config.optimize.advantage, shaping);
    const chunks = splitByTree(advantaged, config.trainer.updatesPerStep);
    const sums: Record<string, number> = {};
    const add = (k: string, v: number) => (sums[k] = (sums[k] ?? 0) + v / chunks.length);
    let loss = 0;
    let gradNorm = 0;
    let lr = 0;
    let updates = 0;
    let nonFinite = 0;
    let nonFiniteDatums = 0;
    let firstGapMax: number | undefined;
    for (const chunk of chunks) {
      let datums = buildDatums(chunk, {
        aggregation: config.optimize.aggregation,
        maxResponseTokens: config.sampling.maxResponseTokens,
      });
      if (!datums.length) continue;
      // the reference also exists for the ace shaping term alone (klCoef 0): no KL, no forward then
      if (this.engine.reference && this.extras.klCoef) {
        const ref = await this.engine.reference.logprobs(datums);
        datums.forEach((d, i) => (d.referenceLogprobs = ref[i]));
      }
      // replayed trees (src/replay/replay.ts): importance-weighted against their behaviour log-probs, stale tokens dropped
      if (replay) datums = await replay.correct(chunk, datums, (d) => this.engine.trainer.logprobs(d));
      const fast = this.correction.kind !== 'none' && chunks.length === 1 && this.engine.embedded !== undefined;
      if (this.correction.kind !== 'none' && !fast) {
        // proximal policy = the learner's policy before this update (one extra forward, no backward)
        const proximal = await this.engine.trainer.logprobs(datums);
        const corrected = applyCorrection(datums, proximal, this.correction);
        datums = corrected.datums;
        for (const [k, v] of Object.entries(corrected.metrics)) add(k, v);
      }
      // sampled log-probs that are NaN or infinite make the datum useless: it is left out and counted
      const finite = datums.filter((d) => !d.samplingLogprobs || d.samplingLogprobs.every(Number.isFinite));
      nonFiniteDatums += datums.length - finite.length;
      datums = finite;
      if (!datums.length) continue;
      let out: Awaited<ReturnType<Trainer['forwardBackward']>>;
      try {
        out = await this.engine.trainer.forwardBackward(
          datums,
          fast ? oneUpdateLoss(this.correction) : this.loss,
          this.extras,
        );
      } catch (error) {
        if (!(error instanceof NonFiniteLossError)) throw error;
        this.engine.trainer.zeroGrad?.();
        nonFinite++;
        continue;
      }
      if (!Number.isFinite(out.loss)) {
        // a trainer that cannot discard what it accumulated (a remote service) would apply it next time
        if (!this.engine.trainer.zeroGrad)
          throw new NumericsError(
            `the trainer's loss is ${out.loss} and it cannot discard the accumulated gradients; stopping`,
          );
        this.engine.trainer.zeroGrad();
        nonFinite++;
        continue;
      }
      if (fast)
        for (const [k, v] of Object.entries(applyCorrection(datums, out.logprobs, this.correction).metrics)) add(k, v);
      else if (this.correction.kind === 'none') {
        add('logprob_gap', logprobGap(datums, out.logprobs));
        // before the first update of the step the trainer holds the weights that sampled a fresh batch
        if (updates === 0) firstGapMax = logprobMaxGap(datums, out.logprobs);
      }
      loss += out.loss;
      for (const [k, v] of Object.entries(out.metrics)) add(k, v);
      lr = this.learningRate(optimizerStep + updates);
      const r = await this.optimStep(lr);
      if (r.skipped || !Number.isFinite(r.gradNorm)) {
        nonFinite++;
        continue;
      }
      gradNorm = r.gradNorm;
      updates++;
    }
    const tokens = Object.values(stalenessHistogram).reduce((a, b) => a + b, 0);
    const staleSum = Object.entries(stalenessHistogram).reduce((a, [s, n]) => a + Number(s) * n, 0);
    const metrics: Record<string, number> = {
      ...sums,
      loss,
      grad_norm: gradNorm,
      lr,
      response_length: advantaged.length
        ? advantaged.reduce((a, x) => a + x.trajectory.tokens.length, 0) / advantaged.length
        : 0,
      trees_trained: usable.length,
      staleness_mean: tokens ? staleSum / tokens : 0,
      staleness_max: Math.max(0, ...Object.keys(stalenessHistogram).map(Number)),
      nonfinite_updates: nonFinite,
      nonfinite_datums: nonFiniteDatums,
      // largest |sampler − trainer| log-prob of the step's first update (staleness 0: the token-exactness check)
      ...(firstGapMax !== undefined ? { logprob_gap_max: firstGapMax } : {}),
    };
    delete metrics.tokens;
    return { metrics, stalenessHistogram, updates, nonFiniteUpdates: nonFinite };
  }
}
