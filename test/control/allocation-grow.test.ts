/**
 * Per-prompt allocation through real generators (iid and treepo) and a scripted sampler: the first
 * round gives every prompt `firstRound` leaves, the second grows each tree by its allocated extra,
 * and a step spends exactly prompts × G rollouts when the allocator uses the whole budget.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Rng } from '../../src/core/rng.js';
import { leaves, type RolloutTree } from '../../src/core/tree.js';
import type { TaskItem } from '../../src/core/types.js';
import { allocateOptionsSchema, allocatorFromConfig } from '../../src/control/allocate/index.js';
import { allocateAndGrow } from '../../src/control/fixed-batch.js';
import { PromptStats, promptStatsSchema } from '../../src/control/prompt-stats.js';
import type { ControlIO, GrowEntry } from '../../src/control/types.js';
import { generatorFromConfig } from '../../src/generate/index.js';
import { ScriptedTreeSampler } from '../generate/scripted.js';

const items: TaskItem[] = Array.from({ length: 4 }, (_, i) => ({ id: `p${i}`, prompt: `p${i}`, answer: '' }));

/** io.grow through a real generator; a leaf is correct when its first token is below 5 + k (prompt k is easier with larger k). */
function io(
  generate: Record<string, unknown>,
  stats: PromptStats,
  log: Array<{ round: number; sizes: Array<number | undefined> }>,
): ControlIO {
  const generator = generatorFromConfig(generate);
  const sampler = new ScriptedTreeSampler(0.2);
  return {
    select: () => [],
    hinted: () => {
      throw new Error('not used');
    },
    stats,
    step: 1,
    groupSize: generator.groupSize,
    async grow(entries: GrowEntry[], round: number): Promise<RolloutTree[]> {
      log.push({ round, sizes: entries.map((e) => e.groupSize) });
      const { trees } = await generator.grow(
        entries.map((e, i) => ({ item: e.item, promptTokens: [1, 20 + i], tree: e.tree, groupSize: e.groupSize })),
        {
          sampler,
          rng: new Rng(round + 1),
          step: 1,
          stopTokens: [2],
          maxResponseTokens: 12,
          temperature: 1,
          topP: 1,
          topK: 0,
          treeIdPrefix: `r${round}p`,
        },
      );
      for (const t of trees) {
        const k = Number(t.itemId.slice(1));
        for (const l of leaves(t))
          if (l.reward === undefined) l.reward = (t.nodes[l.id].tokens[0] ?? 99) < 7 + 2 * k ? 1 : 0;
      }
      return trees;
    },
  };
}

for (const generate of [
  { kind: 'iid', groupSize: 8 },
  { kind: 'treepo', groupSize: 8, segmentLength: 3, branchingFactor: 2, initialDivergence: 2 },
]) {
  test(`${generate.kind}: knapsack's two rounds spend exactly prompts × G rollouts, grown onto the same trees`, async () => {
    const stats = new PromptStats(promptStatsSchema.parse({}));
    const log: Array<{ round: number; sizes: Array<number | undefined> }> = [];
    const allocator = allocatorFromConfig(
      allocateOptionsSchema.parse({ kind: 'knapsack', firstRound: 2, maxPerPrompt: 16 }),
      8,
    );
    const out = await allocateAndGrow(
      [],
      items.map((item) => ({ item })),
      allocator,
      io(generate, stats, log),
    );
    assert.equal(log[0].round, 0);
    assert.deepEqual(log[0].sizes, [2, 2, 2, 2], 'first round: firstRound leaves per prompt');
    assert.equal(out.rounds, 2);
    const sizes = out.trees.map((t) => leaves(t).length);
    assert.equal(
      sizes.reduce((a, c) => a + c, 0),
      32,
      'the whole budget of 4 × 8 rollouts',
    );
    assert.deepEqual(
      log[1].sizes,
      out.trees.map((t, i) => sizes[i]).filter((_, i) => sizes[i] > 2),
      'second round asks each grown tree for its final size',
    );
    assert.equal(out.info.alloc_budget, 24);
    assert.equal(out.info.alloc_extra, 24);
    assert.equal(out.info.alloc_max_group, Math.max(...sizes));
    assert.ok(
      new Set(out.trees.map((t) => t.id)).size === 4 && out.trees.every((t) => t.id.startsWith('r0p')),
      'trees keep their first-round ids',
    );
    // every leaf of the first round is still there (grown onto, never replaced)
    for (const t of out.trees) assert.ok(leaves(t).every((l) => l.reward !== undefined));
  });
}

test('uniform allocation is one round of G leaves (the old behaviour)', async () => {
  const stats = new PromptStats(promptStatsSchema.parse({}));
  const log: Array<{ round: number; sizes: Array<number | undefined> }> = [];
  const out = await allocateAndGrow(
    [],
    items.map((item) => ({ item })),
    allocatorFromConfig({ kind: 'uniform' }, 8),
    io({ kind: 'iid', groupSize: 8 }, stats, log),
  );
  assert.deepEqual(log, [{ round: 0, sizes: [undefined, undefined, undefined, undefined] }]);
  assert.deepEqual(
    out.trees.map((t) => leaves(t).length),
    [8, 8, 8, 8],
  );
});
