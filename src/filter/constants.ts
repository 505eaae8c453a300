/** Constants of the Filter stage shared by every consumer of rewards. */

/** A reward (or `correct` component) above this counts as a correct answer in accuracies and pass@k. */
export const CORRECT_THRESHOLD = 0.5;

/** Whether a reward counts as a correct answer (the one comparison every consumer uses). */
export function isCorrect(reward: number): boolean {
  return reward > CORRECT_THRESHOLD;
}

/** The value a leaf's correctness is judged on: its `correct` component when the reward has one, else its reward. */
export function correctness(leaf: { reward?: number; rewardInfo?: { components: Record<string, number> } }): number {
  return leaf.rewardInfo?.components.correct ?? leaf.reward ?? 0;
}
