/** Constants of the Filter stage shared by every consumer of rewards. */

/** A reward (or `correct` component) above this counts as a correct answer in accuracies and pass@k. */
export const CORRECT_THRESHOLD = 0.5;
