/**
 * Errors are data in the Generate stage: `growSafely` runs a generator and, when the sampler call
 * fails for a batch of trees, splits the batch in halves and retries each, so one bad prompt (too
 * long, a server rejecting it) costs only its own tree. A tree that still fails alone is returned with
 * an `error` node holding the reason; the step goes on without it. Aborts and fatal environment
 * failures (`EnvironmentError`, not recoverable) pass through unchanged.
 */
import { EnvironmentError } from '../core/errors.js';
import { addNode, createTree, type RolloutTree } from '../core/tree.js';
import { emptyStats, type GenerateContext, type GenerateInput, type GenerateStats, type Generator } from './types.js';

export interface SafeGrowResult {
  trees: RolloutTree[];
  stats: GenerateStats;
  /** Trees that ended with an error node. */
  errors: number;
}

export async function growSafely(
  generator: Generator,
  inputs: GenerateInput[],
  ctx: GenerateContext,
): Promise<SafeGrowResult> {
  try {
    const { trees, stats } = await generator.grow(inputs, ctx);
    return { trees, stats, errors: 0 };
  } catch (error) {
    // an abort, and an environment that cannot recover (its server cannot restart), end the run
    if (ctx.signal?.aborted || (error instanceof EnvironmentError && !error.recoverable)) throw error;
    if (inputs.length === 1) return { trees: [errorTree(inputs[0], ctx, error)], stats: emptyStats(), errors: 1 };
    const half = Math.ceil(inputs.length / 2);
    const a = await growSafely(generator, inputs.slice(0, half), {
      ...ctx,
      treeIdPrefix: `${ctx.treeIdPrefix}a`,
      stopAfterTrees: undefined,
    });
    const b = await growSafely(generator, inputs.slice(half), {
      ...ctx,
      treeIdPrefix: `${ctx.treeIdPrefix}b`,
      stopAfterTrees: undefined,
    });
    const stats = emptyStats();
    for (const s of [a.stats, b.stats])
      for (const k of Object.keys(stats) as Array<keyof GenerateStats>) stats[k] += s[k];
    return { trees: [...a.trees, ...b.trees], stats, errors: a.errors + b.errors };
  }
}

/** The input's tree (or a fresh one) with an error leaf recording why generation failed. */
function errorTree(input: GenerateInput, ctx: GenerateContext, error: unknown): RolloutTree {
  const tree = input.tree ?? createTree(`${ctx.treeIdPrefix}err`, input.item.id, input.promptTokens, {});
  const message = (error as Error)?.message ?? String(error);
  addNode(tree, '0', { tokens: [], finishReason: 'error', error: message });
  if (tree.meta) delete tree.meta.pending;
  return tree;
}
