/**
 * Shapes the engine's interfaces share with the wire formats: the loss a trainer computes (sent to a
 * Tinker service as its loss function) and a sampler's compute accounting (the servers' `usage`).
 * engine/types.ts re-exports them; wire/ imports nothing from engine/.
 */

/** Compute accounting for one request. */
export interface SampleUsage {
  /** Context tokens the engine had to compute (prefill). */
  promptTokensComputed: number;
  /** Context tokens served from shared pages / prefix cache instead of recomputed. */
  prefixTokensReused: number;
  /** New tokens decoded. */
  tokensDecoded: number;
}

/** Loss functions the trainer computes per token (then weights and sums). */
export type LossSpec =
  /** -logp(target). */
  | { kind: 'cross_entropy' }
  /**
   * -rho * A with rho = exp(logp - samplingLogp); `truncateAt` C: times min(rho, C)/rho (detached);
   * `maskAbove` M: tokens with rho > M get no loss (decoupled PPO's filter, proximal = current policy).
   */
  | { kind: 'importance_sampling'; truncateAt?: number; maskAbove?: number }
  /** -min(rho*A, clip(rho, 1-clipLow, 1+clipHigh)*A), optional dual clip (for A<0) at `dualClip`. */
  | { kind: 'ppo'; clipLow: number; clipHigh: number; dualClip?: number; truncateAt?: number }
  /** Sequence-level ratio s = exp(weighted-mean_t(logp - samplingLogp)), clipped like ppo. */
  | { kind: 'gspo'; clipLow: number; clipHigh: number };
