/**
 * Fabricated bench snapshots for the results-table tests (scripts/results-table.ts), and a recording
 * learner with tiny GRPO groups for the matched-control tests. The figures are made up: they only pin
 * which row, spread and verdict each shape of bench JSON produces. No bench runs here.
 */
import { addNode, createTree, type RolloutTree } from '../../src/core/tree.js';
import type { Snapshot } from '../../scripts/results-table.js';

const C1 = '1'.repeat(40);
const C2 = '2'.repeat(40);

/** Four snapshots: clean, dirty, without a commit, and one whose code changed during the run. */
export function fabricatedSnapshots(): Snapshot[] {
  return [
    {
      file: 'bench/results/replay.json',
      json: {
        commit: C2,
        dirty: true,
        date: '2026-11-02T00:00:00.000Z',
        headline: { replay_matched_tokens_to_target_gain: 1, replay_tokens_to_target_gain: 1.68, export_roundtrip: 1 },
        headline_seeds: { replay_matched_tokens_to_target_gain: [0.9, 1.1, 1] },
      },
    },
    {
      file: 'bench/results/control.json',
      json: {
        commit: C1,
        dirty: false,
        date: '2026-11-01T00:00:00.000Z',
        headline: {
          allocation_matched_tokens_to_target_gain: 1.4,
          allocation_tokens_to_target_gain: 2.26,
          pruning_final_acc_delta: -4,
          treepo_tokens_to_target_gain: null,
          shaping_entropy_tokens_to_target_gain: 1.05,
        },
        headline_seeds: {
          allocation_matched_tokens_to_target_gain: [1.2, 1.4, 1.6],
          pruning_final_acc_delta: [-3, -4, -5],
          shaping_entropy_tokens_to_target_gain: [1.05],
        },
      },
    },
    {
      file: 'bench/results/latr.json',
      json: { commit: null, dirty: null, headline: { latr_distinct_sibling_gain: 1.3 } },
    },
    {
      file: 'bench/results/scratchpad.json',
      json: {
        commit: C1,
        dirty: false,
        code_changed_during_run: true,
        task: 'scratchpad (3×2 digits)',
        date: '2026-11-03T00:00:00.000Z',
        headline: { fapo_flawed_positive_rate_delta: -0.1 },
        headline_seeds: { fapo_flawed_positive_rate_delta: [-0.08, -0.1, -0.12] },
      },
    },
  ];
}

/** A GRPO group: one tree, one 2-token leaf per reward. */
export function group(id: string, rewards: number[]): RolloutTree {
  const tree = createTree(id, id.split('/')[1] ?? id, [1, 2]);
  rewards.forEach((reward, k) => {
    const node = addNode(tree, '0', { tokens: [3 + k, 4], logprobs: [-1, -1], weightVersion: 0, finishReason: 'stop' });
    node.reward = reward;
  });
  return tree;
}

/** A learner that records the tree ids of each update it is asked for. */
export function recordingLearner() {
  const updates: string[][] = [];
  return {
    updates,
    train(trees: RolloutTree[]) {
      updates.push(trees.map((t) => t.id));
      return Promise.resolve({ metrics: {}, stalenessHistogram: {}, updates: 1, nonFiniteUpdates: 0 });
    },
  };
}
