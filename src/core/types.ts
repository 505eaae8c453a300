/**
 * Shared plain-data types used across stages: task items (prompts with checkable answers) and
 * reward results. Stages import these from core so they never depend on each other.
 */

/** One prompt of a task/dataset. */
export interface TaskItem {
  /** Stable id (unique within the dataset split). */
  id: string;
  /** Prompt text shown to the model (already formatted by the task's template). */
  prompt: string;
  /** Ground-truth answer used by verifiers (text form). */
  answer: string;
  /** Optional demonstration completion for SFT warm-start. */
  demonstration?: string;
  /** Difficulty level (task-specific scale, larger = harder). */
  difficulty?: number;
  /** Extra task data (numbers for countdown, test cases for code...). */
  meta?: Record<string, unknown>;
}

/** The Filter stage's result for one leaf. */
export interface RewardResult {
  /** Scalar reward used for advantages (weighted sum of components). */
  reward: number;
  /** Each component's value before weighting (e.g. { correct: 1, format: 0.5 }). */
  components: Record<string, number>;
  /** Notes: extracted answer, failure reason, timing... */
  info: Record<string, unknown>;
}
