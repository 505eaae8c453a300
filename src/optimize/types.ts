/**
 * Optimize-stage types: a trajectory with its advantage (one scalar, optionally per-token values)
 * and whether it is excluded from the loss (MC-GRPO's median pivot).
 */
import type { Trajectory } from '../core/tree.js';

export interface AdvantagedTrajectory {
  trajectory: Trajectory;
  /** Scalar advantage applied to every policy token (unless tokenAdvantages is set). */
  advantage: number;
  /** Per-response-token advantages (segment-level estimators); shape [T]. */
  tokenAdvantages?: number[];
  /** True when the trajectory carries no gradient (e.g. the MC-GRPO median pivot). */
  excluded: boolean;
}
