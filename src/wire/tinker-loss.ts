/**
 * Tinker's built-in losses on the wire, in both directions, defined once: the Tinker client
 * (engine/remote/tinker.ts) sends an Arbor LossSpec as `loss_fn` + `loss_fn_config`, and `arbor serve`'s
 * Tinker routes (serve/tinker/service.ts) read them back. Tinker's ppo names the clip bounds as ratio thresholds
 * (`clip_low_threshold` = 1 − clipLow, `clip_high_threshold` = 1 + clipHigh; thinking-machines-lab/tinker
 * types LossFnType and loss_fn_config). Arbor losses Tinker has no built-in for (gspo, dual clip,
 * truncated importance sampling) are refused when sending.
 */
import { z } from 'zod';
import { ArborError } from '../core/errors.js';
import type { LossSpec } from './types.js';

/** The built-in `loss_fn` names both sides speak. */
export const TINKER_LOSS_FNS = ['cross_entropy', 'importance_sampling', 'ppo'] as const;
export type TinkerLossFn = (typeof TINKER_LOSS_FNS)[number];

/** `loss_fn_config` of ppo (absent fields take Tinker's defaults: ε = 0.2 both ways). */
export const ppoLossConfigSchema = z.object({
  clip_low_threshold: z.number().min(0).max(1).default(0.8).describe('1 − clipLow'),
  clip_high_threshold: z.number().min(1).max(1e6).default(1.2).describe('1 + clipHigh'),
});

export interface TinkerLoss {
  loss_fn: TinkerLossFn;
  loss_fn_config?: Record<string, number>;
}

/** Tinker's loss name and config for an Arbor LossSpec (ArborError for a loss Tinker has no built-in for). */
export function lossToTinker(loss: LossSpec): TinkerLoss {
  switch (loss.kind) {
    case 'cross_entropy':
      return { loss_fn: 'cross_entropy' };
    case 'importance_sampling':
      if (loss.truncateAt !== undefined)
        throw new ArborError('tinker: truncated importance sampling is not a Tinker built-in loss');
      return { loss_fn: 'importance_sampling' };
    case 'ppo':
      if (loss.dualClip !== undefined || loss.truncateAt !== undefined)
        throw new ArborError("tinker: dual clip / truncation are not part of Tinker's ppo loss");
      return {
        loss_fn: 'ppo',
        loss_fn_config: { clip_low_threshold: 1 - loss.clipLow, clip_high_threshold: 1 + loss.clipHigh },
      };
    case 'gspo':
      throw new ArborError('tinker: gspo is not a Tinker built-in loss (use ppo or importance_sampling)');
  }
}

/**
 * The Arbor LossSpec of a received `loss_fn` and `loss_fn_config`; a bad one throws `invalid(message)`
 * with the message naming the field (`loss_fn`, `loss_fn_config.clip_low_threshold`, ...).
 */
export function lossFromTinker(name: unknown, config: unknown, invalid: (message: string) => Error): LossSpec {
  switch (name) {
    case 'cross_entropy':
      return { kind: 'cross_entropy' };
    case 'importance_sampling':
      return { kind: 'importance_sampling' };
    case 'ppo': {
      const parsed = ppoLossConfigSchema.safeParse(config ?? {});
      if (!parsed.success) {
        const issue = parsed.error.issues[0];
        throw invalid(`field "loss_fn_config.${issue.path.join('.')}": ${issue.message}`);
      }
      return {
        kind: 'ppo',
        clipLow: 1 - parsed.data.clip_low_threshold,
        clipHigh: parsed.data.clip_high_threshold - 1,
      };
    }
    default:
      throw invalid(`field "loss_fn": unsupported ${JSON.stringify(name)} (${TINKER_LOSS_FNS.join(', ')})`);
  }
}
