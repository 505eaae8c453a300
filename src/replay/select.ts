/**
 * The Select stage's difficulty targeting (`select`): which prompts of the data order a step trains
 * on, from each prompt's success posterior (control/prompt-stats.ts: Beta with per-step decay, saved
 * with the run). A window of `window × count` prompts is drawn from the data order and `count` of
 * them kept; the others are passed over this epoch (they come back in the next one).
 * - `sequential`: the data order as it is (default).
 * - `dots` (DOTS, arXiv 2506.05316; ASTRAL-Group/data-efficient-llm-rl): sample without replacement
 *   ∝ softmax(−|p̂ − target| / τ), τ = 1e-3 in the authors' code. Their p̂ is an attention-weighted
 *   average over reference prompts' success rates with frozen embeddings; ours is the prompt's own
 *   posterior mean (an adaptation: the pool here is revisited, so each prompt has its own history).
 * - `vade` (VADE, arXiv 2511.18902; constants unreleased [U]): Thompson sampling — draw p ~ Beta(a, b)
 *   per prompt and keep the `count` draws nearest `target`: uncertain prompts get explored, prompts
 *   known to be solved or hopeless are passed over.
 * Unseen prompts have the prior Beta(prior, prior), mean 0.5, so they are preferred early on.
 * - `ucb` (DUMP, replay/ucb.ts): over the components of a task mixture, not over prompts.
 */
import { z } from 'zod';
import { sampleBeta, type Rng } from '../core/rng.js';
import type { TaskItem } from '../core/types.js';
import type { Posterior } from '../control/prompt-stats.js';
import { ucbSelectSchema } from './ucb.js';

const window = z.number().min(1).max(64).default(4).describe('candidates drawn from the data order per prompt kept');
const target = z
  .number()
  .min(0)
  .max(1)
  .default(0.5)
  .describe('the success rate aimed at (0.5: the most informative groups)');

export const selectOptionsSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('sequential').describe('the data order as it is') }).strict(),
  z
    .object({
      kind: z
        .literal('dots')
        .describe(
          "DOTS: sample ∝ softmax(−|p̂ − target|/τ) from a window of candidates (p̂: the prompt's posterior mean)",
        ),
      window,
      target,
      temperature: z.number().positive().max(10).default(0.001).describe('τ'),
    })
    .strict(),
  z
    .object({
      kind: z
        .literal('vade')
        .describe('VADE-style Thompson sampling: keep the candidates whose drawn success rate is nearest the target'),
      window,
      target,
    })
    .strict(),
  ucbSelectSchema,
]);
export type SelectOptions = z.infer<typeof selectOptionsSchema>;

/** Keep `count` of `take(window·count)` by difficulty; returns the kept items and how many were passed over. */
export function selectByDifficulty(
  take: (n: number) => TaskItem[],
  count: number,
  o: SelectOptions,
  posterior: (id: string) => Posterior,
  rng: Rng,
): { items: TaskItem[]; passed: number } {
  if (o.kind === 'sequential') return { items: take(count), passed: 0 };
  if (o.kind === 'ucb')
    throw new Error(
      'select.kind ucb picks components, not prompts: the producer draws through UcbCurriculum (replay/ucb.ts)',
    );
  const candidates = take(Math.ceil(o.window * count));
  if (candidates.length <= count) return { items: candidates, passed: 0 };
  const chosen =
    o.kind === 'dots'
      ? softmaxDraw(
          candidates.map((c) => -Math.abs(posterior(c.id).mean - o.target) / o.temperature),
          count,
          rng,
        )
      : nearest(
          candidates.map((c) => {
            const p = posterior(c.id);
            return Math.abs(sampleBeta(rng, p.a, p.b) - o.target);
          }),
          count,
        );
  const kept = new Set(chosen);
  return { items: candidates.filter((_, i) => kept.has(i)), passed: candidates.length - count };
}

/** `count` indices drawn without replacement with probabilities ∝ exp(logit) (Gumbel-top-k). */
export function softmaxDraw(logits: number[], count: number, rng: Rng): number[] {
  const keys = logits.map((l, i) => [l - Math.log(-Math.log(Math.max(rng.next(), 1e-300))), i] as const);
  return keys
    .sort((a, b) => b[0] - a[0] || a[1] - b[1])
    .slice(0, count)
    .map(([, i]) => i);
}

function nearest(distances: number[], count: number): number[] {
  return distances
    .map((d, i) => [d, i] as const)
    .sort((a, b) => a[0] - b[0] || a[1] - b[1])
    .slice(0, count)
    .map(([, i]) => i);
}
