/**
 * Loss configuration → the trainer's LossSpec + LossExtras. Names follow the literature:
 * ppo_clip (clip-higher via clipHigh, optional dual clip), importance_sampling (Tinker's name),
 * gspo (sequence-level ratio); optional truncated IS, k3 KL coefficient and entropy bonus, and the
 * off-policy correction (`off-policy.ts`) applied to the datums before the loss.
 * `policyLossReference` is the plain per-token formula used to hand-check engines in tests.
 */
import { z } from 'zod';
import { configErrorFromIssue } from '../core/errors.js';
import type { LossExtras, LossSpec } from '../engine/types.js';
import { correctionSchema, type Correction } from './off-policy.js';

export const lossOptionsSchema = z
  .object({
    kind: z.enum(['ppo_clip', 'importance_sampling', 'gspo']).default('ppo_clip').describe('policy loss'),
    clipLow: z.number().min(0).max(1).default(0.2).describe('ε_low: ratio lower bound 1 − ε_low'),
    clipHigh: z
      .number()
      .min(0)
      .max(100)
      .default(0.28)
      .describe('ε_high: ratio upper bound 1 + ε_high (DAPO clip-higher)'),
    dualClip: z.number().min(1).max(1e6).optional().describe('dual clip constant c for negative advantages (e.g. 10)'),
    truncateAt: z
      .number()
      .positive()
      .max(1e6)
      .optional()
      .describe('truncated importance sampling: multiply by min(ρ, C)'),
    klCoef: z.number().min(0).max(1e3).default(0).describe('β of the k3 KL to the frozen reference policy'),
    entropyCoef: z.number().min(0).max(1e3).default(0).describe('entropy bonus coefficient'),
    correction: correctionSchema
      .default({ kind: 'none' })
      .describe(
        'off-policy correction against stale or mismatched behaviour log-probs: none | decoupled (AReaL decoupled PPO) | tis (truncated IS)',
      ),
  })
  .strict();
export type LossOptions = z.infer<typeof lossOptionsSchema>;

export function lossFromConfig(spec: unknown): { loss: LossSpec; extras: LossExtras; correction: Correction } {
  const parsed = lossOptionsSchema.safeParse(spec ?? {});
  if (!parsed.success) {
    throw configErrorFromIssue('optimize.loss', parsed.error.issues[0]);
  }
  const o = parsed.data;
  const extras: LossExtras = { klCoef: o.klCoef, entropyCoef: o.entropyCoef };
  const correction = o.correction;
  if (o.kind === 'ppo_clip')
    return {
      loss: { kind: 'ppo', clipLow: o.clipLow, clipHigh: o.clipHigh, dualClip: o.dualClip, truncateAt: o.truncateAt },
      extras,
      correction,
    };
  if (o.kind === 'importance_sampling')
    return { loss: { kind: 'importance_sampling', truncateAt: o.truncateAt }, extras, correction };
  return { loss: { kind: 'gspo', clipLow: o.clipLow, clipHigh: o.clipHigh }, extras, correction };
}

/** Per-token policy loss value: the specification the engines must match (optimize.md). */
export function policyLossReference(
  kind: 'ppo_clip' | 'importance_sampling',
  logprob: number,
  samplingLogprob: number,
  advantage: number,
  clipLow = 0.2,
  clipHigh = 0.28,
  dualClip?: number,
): number {
  const ratio = Math.exp(logprob - samplingLogprob);
  if (kind === 'importance_sampling') return -ratio * advantage;
  let objective = Math.min(ratio * advantage, Math.min(Math.max(ratio, 1 - clipLow), 1 + clipHigh) * advantage);
  if (dualClip !== undefined && advantage < 0) objective = Math.max(objective, dualClip * advantage);
  return -objective;
}
