/**
 * Trajectories → trainer Datums. sequence = prompt ++ response; input = sequence[:-1],
 * target = sequence[1:]. A target position gets weight 0 when it is a prompt token or a masked
 * (environment) token, else the aggregation weight: token_mean 1/(policy tokens in the batch),
 * seq_mean_token_mean 1/(sequences · policy tokens of this sequence), token_sum_norm
 * 1/(sequences · maxResponseTokens). Sampling log-probs and advantages are aligned to targets.
 */
import { z } from 'zod';
import type { Datum } from '../engine/types.js';
import type { AdvantagedTrajectory } from './types.js';

export const aggregationSchema = z
  .enum(['token_mean', 'seq_mean_token_mean', 'token_sum_norm'])
  .default('token_mean')
  .describe('how per-token losses are combined');
export type Aggregation = z.infer<typeof aggregationSchema>;

export function buildDatums(
  items: AdvantagedTrajectory[],
  options: { aggregation: Aggregation; maxResponseTokens: number },
): Datum[] {
  const kept = items.filter((a) => !a.excluded && a.trajectory.tokens.length > 0);
  const policyTokens = kept.map((a) => a.trajectory.mask.reduce((s, m) => s + m, 0));
  const total = policyTokens.reduce((a, b) => a + b, 0);
  return kept.map((a, i) => {
    const tr = a.trajectory;
    const P = tr.promptTokens.length;
    const seq = tr.promptTokens.concat(tr.tokens);
    const T = seq.length - 1;
    const scale =
      options.aggregation === 'token_mean'
        ? 1 / Math.max(1, total)
        : options.aggregation === 'seq_mean_token_mean'
          ? 1 / (kept.length * Math.max(1, policyTokens[i]))
          : 1 / (kept.length * options.maxResponseTokens);
    const weights = new Array<number>(T).fill(0);
    const samplingLogprobs = new Array<number>(T).fill(0);
    const advantages = new Array<number>(T).fill(0);
    for (let t = 0; t < tr.tokens.length; t++) {
      const pos = P - 1 + t; // target index of response token t
      weights[pos] = tr.mask[t] ? scale : 0;
      samplingLogprobs[pos] = tr.logprobs[t];
      advantages[pos] = a.tokenAdvantages ? a.tokenAdvantages[t] : a.advantage;
    }
    return { inputTokens: seq.slice(0, -1), targetTokens: seq.slice(1), weights, samplingLogprobs, advantages };
  });
}
