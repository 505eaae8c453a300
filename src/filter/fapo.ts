/**
 * FAPO (arXiv 2510.22543; yyDing1/FAPO@e6d1164 `fapo/fapo_reasoning/reward_fn.py`): a flawed-positive
 * penalty R = R_outcome − λ·1[flawed], flawed = the outcome is correct but the judge finds a wrong step.
 * The judge here is a program, the task's `firstWrongStep` (a model judge stays with `kind: judge`).
 * Choices that are ours where the paper is silent or differs: outcome rewards are the task's 0/1 (the
 * paper's ±1), so λ = 0.5 places a flawed positive midway as the paper's λ = 1 does on ±1; the judge
 * runs on every correct leaf, evaluation included (the paper skips the test split; Arbor evaluates with
 * the task verifier alone, so accuracies are unaffected); the `correct` component stays the outcome.
 */
import type { TaskItem } from '../core/types.js';
import { isCorrect } from './constants.js';
import type { RewardFunction } from './types.js';

/** A step judge: index of the first wrong step, null when all are right, −1 when unparseable. */
export type StepJudge = (item: TaskItem, response: string) => number | null;

export interface FapoOptions {
  /** λ: subtracted from the outcome reward of a flawed positive. */
  lambda: number;
  /** Whether a correct response the judge cannot parse (−1) counts as flawed (the paper: no). */
  unparseableIsFlawed: boolean;
}

/** flawed(o) = the outcome is correct and the judge names a wrong step (−1 counts only if asked). */
export function isFlawed(outcome: number, firstWrong: number | null, unparseableIsFlawed: boolean): boolean {
  if (!isCorrect(outcome) || firstWrong === null) return false;
  return firstWrong >= 0 || unparseableIsFlawed;
}

/**
 * R_FAPO = R_outcome − λ·1[flawed]. Components: `correct` (the outcome, read by accuracies), `flawed`
 * (0/1, its batch mean is the flawed-positive ratio); info: the judge's `firstWrongStep`.
 */
export function fapoReward(outcome: RewardFunction, judge: StepJudge, options: FapoOptions): RewardFunction {
  return {
    name: 'fapo',
    async score(input, context) {
      const result = await outcome.score(input, context);
      // the judge is asked about correct leaves only, as in the paper
      const firstWrong = isCorrect(result.reward) ? judge(input.item, input.response) : null;
      const flawed = isFlawed(result.reward, firstWrong, options.unparseableIsFlawed) ? 1 : 0;
      return {
        reward: result.reward - options.lambda * flawed,
        components: { ...result.components, correct: result.components.correct ?? result.reward, flawed },
        info: { ...result.info, firstWrongStep: firstWrong },
      };
    },
  };
}
