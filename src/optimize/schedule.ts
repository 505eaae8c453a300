/**
 * Learning-rate schedules of the Optimize stage: linear warm-up, then constant or cosine decay to a
 * floor. The learner evaluates the schedule per optimiser step and passes the rate to
 * `Trainer.optimStep`; engines only apply the rate they are given.
 */

export interface Schedule {
  kind: 'constant' | 'cosine';
  /** Peak learning rate. */
  learningRate: number;
  /** Linear warm-up steps from 0 to the peak. */
  warmupSteps: number;
  /** Total steps (cosine decays to minRatio·peak at this step). */
  totalSteps: number;
  /** Floor of the cosine, as a fraction of the peak. */
  minRatio: number;
}

/** Learning rate at optimiser step `step` (0-based). */
export function learningRateAt(step: number, s: Schedule): number {
  if (s.warmupSteps > 0 && step < s.warmupSteps) return (s.learningRate * (step + 1)) / s.warmupSteps;
  if (s.kind === 'constant') return s.learningRate;
  const span = Math.max(1, s.totalSteps - s.warmupSteps);
  const progress = Math.min(1, (step - s.warmupSteps) / span);
  return s.learningRate * (s.minRatio + (1 - s.minRatio) * 0.5 * (1 + Math.cos(Math.PI * progress)));
}
