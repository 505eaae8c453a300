/**
 * Hint rescue: a prompt whose whole group failed gives no gradient; regrow it with a hint and train
 * on those samples instead. Two hints:
 * - `gold_prefix` (prefix-guided rollouts, as in Guide's and NuRL's rescue of all-fail prompts, with
 *   the hint taken from the gold demonstration): the response starts with the first `fraction` of
 *   the item's demonstration; the policy continues it. The prefix stays in the training context and
 *   is never trained on, so the sampling and training contexts agree and no correction is needed.
 * - `example` (XRPO's in-context seeding, Guide's hint in the prompt): a solved example (another
 *   prompt of the batch with its demonstration) is shown before the prompt; training drops it, so the
 *   loss's ratio is π_θ(o|q) / π_behaviour(o|q,h), the off-policy form Guide (arXiv 2506.13923) uses,
 *   clipped like any stale token by the configured loss and correction.
 * The hinted tree replaces the failed one in the batch (the failed group had zero advantage anyway).
 */
import { z } from 'zod';
import { hasError, isComplete, leaves, type RolloutTree } from '../core/tree.js';
import type { TaskItem } from '../core/types.js';
import { correctness, isCorrect } from '../filter/constants.js';
import type { ControlIO, PromptHint } from './types.js';

const maxPerStep = z
  .number()
  .int()
  .min(0)
  .max(4096)
  .default(0)
  .describe('most prompts rescued per step (0 = every all-fail prompt)');

export const hintOptionsSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('none').describe('no hint rescue') }).strict(),
  z
    .object({
      kind: z.literal('gold_prefix').describe('regrow all-fail prompts from a prefix of the gold demonstration'),
      fraction: z
        .number()
        .gt(0)
        .lt(1)
        .default(0.5)
        .describe('share of the demonstration (in characters) the response starts with'),
      maxPerStep,
    })
    .strict(),
  z
    .object({
      kind: z
        .literal('example')
        .describe('regrow all-fail prompts with a solved example of the batch in context (dropped for training)'),
      maxPerStep,
    })
    .strict(),
]);
export type HintOptions = z.infer<typeof hintOptionsSchema>;

type Entry = { tree: RolloutTree; item: TaskItem };

/** Success share of a complete, error-free tree's leaves (undefined otherwise). */
function successRate(tree: RolloutTree): number | undefined {
  if (!isComplete(tree) || hasError(tree)) return undefined;
  const ls = leaves(tree);
  return ls.filter((l) => isCorrect(correctness(l))).length / Math.max(1, ls.length);
}

/** The hint for `item`, or undefined when none can be made (no demonstration, no solved example). */
export function makeHint(
  item: TaskItem,
  options: Exclude<HintOptions, { kind: 'none' }>,
  solved: TaskItem | undefined,
): PromptHint | undefined {
  if (options.kind === 'gold_prefix') {
    const demo = item.demonstration ?? '';
    const cut = Math.round(options.fraction * demo.length);
    return cut > 0 ? { kind: 'response', text: demo.slice(0, cut) } : undefined;
  }
  if (!solved) return undefined;
  return { kind: 'context', text: `${solved.prompt}${solved.demonstration ?? solved.answer}\n` };
}

/** Regrow the batch's all-fail prompts with hints; returns the new batch, the hinted trees and counters. */
export async function rescue(
  batch: Entry[],
  io: ControlIO,
  options: HintOptions,
  round: number,
): Promise<{ batch: Entry[]; drawn: RolloutTree[]; info: Record<string, number> }> {
  if (options.kind === 'none') return { batch, drawn: [], info: {} };
  const rates = batch.map((b) => successRate(b.tree));
  const failed = batch.map((_, i) => i).filter((i) => rates[i] === 0);
  const chosen = options.maxPerStep > 0 ? failed.slice(0, options.maxPerStep) : failed;
  // the example: the batch's most-solved prompt (first on ties)
  let best = -1;
  rates.forEach((r, i) => {
    if (r !== undefined && r > 0 && (best < 0 || r > rates[best]!)) best = i;
  });
  const solved = best >= 0 ? batch[best].item : undefined;
  const jobs: Array<{ index: number; tree: RolloutTree }> = [];
  for (const i of chosen) {
    const hint = makeHint(batch[i].item, options, solved);
    if (hint) jobs.push({ index: i, tree: io.hinted(batch[i].item, hint, jobs.length) });
  }
  const info: Record<string, number> = {
    hint_candidates: failed.length,
    hint_trees: jobs.length,
    hint_rescued: 0,
    hint_replaced_leaves: 0,
  };
  if (!jobs.length) return { batch, drawn: [], info };
  const grown = await io.grow(
    jobs.map((j) => ({ item: batch[j.index].item, tree: j.tree })),
    round,
  );
  const out = batch.slice();
  grown.forEach((tree, k) => {
    const rate = successRate(tree);
    if (rate === undefined) return;
    info.hint_replaced_leaves += leaves(batch[jobs[k].index].tree).length;
    out[jobs[k].index] = { tree, item: batch[jobs[k].index].item };
    if (rate > 0) info.hint_rescued++;
  });
  return { batch: out, drawn: grown, info };
}
