/**
 * stepMetrics' per-step reward components (`reward/<name>`) over hand-built trees: the mean over the
 * scored leaves that carry each component (complete trees, leaves not in error), names bounded and kept
 * apart from the fixed keys, and the cap on distinct names.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { addNode, createTree, type RolloutTree } from '../../src/core/tree.js';
import type { ProducedMeta } from '../../src/run/pipeline.js';
import type { LoopState } from '../../src/run/run-state.js';
import {
  COMPONENT_NAME_MAX,
  COMPONENTS_MAX,
  componentKey,
  rewardComponentMeans,
  stepMetrics,
} from '../../src/run/step-log.js';

type Leaf = { reward: number; components?: Record<string, number>; error?: boolean; unfinished?: boolean };

/** A prompt's tree: one branch node, then one leaf per entry (tokens 1..5). */
function tree(id: string, leaves_L: Leaf[]): RolloutTree {
  const t = createTree(id, `item-${id}`, [1, 2]);
  const branch = addNode(t, '0', { tokens: [3], mask: [1] });
  for (const l of leaves_L) {
    const finishReason = l.error ? 'error' : l.unfinished ? null : 'stop';
    const leaf = addNode(t, branch.id, { tokens: [4, 5], mask: [1, 1], finishReason });
    leaf.reward = l.reward;
    if (l.components) leaf.rewardInfo = { components: l.components };
  }
  return t;
}

function meta(drawn: RolloutTree[], info: Record<string, number> = {}): ProducedMeta {
  return {
    step: 1,
    drawn,
    stats: {
      tokensDecoded: 10,
      prefixTokensReused: 2,
      promptTokensComputed: 8,
      trajectories: 4,
      samplerCalls: 1,
      wallMs: 5,
    },
    info,
    timings: { generate: 1, score: 1, produce: 2 },
    weightVersion: 0,
  };
}

const state = { tokensDecoded: 10 } as LoopState;

test('stepMetrics: reward/<name> is the mean over the scored leaves that carry the component', () => {
  const drawn = [
    tree('a', [
      { reward: 1.5, components: { correct: 1, format: 1 } },
      { reward: 0, components: { correct: 0, format: 0 } },
      // no `format` component: left out of reward/format's mean, not counted as 0
      { reward: 1, components: { correct: 1 } },
      // an error leaf: out of every rollout figure
      { reward: -3, components: { correct: 0, format: 0, judge: 7 }, error: true },
    ]),
    tree('b', [
      { reward: 0.5, components: { correct: 0, format: 1 } },
      { reward: 0, components: { correct: 0, format: 0, judge: Number.NaN } },
      { reward: 1 }, // a leaf without components: counts in reward_mean only
    ]),
    // an incomplete tree (a partial rollout): not scored yet
    tree('c', [
      { reward: 1, components: { correct: 1, format: 1, partial: 1 } },
      { reward: 0, unfinished: true },
    ]),
  ];
  const m = stepMetrics(1, drawn, meta(drawn), undefined, 3, state);
  assert.equal(m['reward/correct'], 2 / 5); // 1, 0, 1, 0, 0
  assert.equal(m['reward/format'], 2 / 4); // 1, 0, 1, 0
  assert.equal(m.reward_mean, 4 / 6); // 1.5, 0, 1, 0.5, 0, 1
  assert.equal('reward/judge' in m, false, 'only the error leaf had a finite judge value');
  assert.equal('reward/partial' in m, false, 'incomplete trees are not scored');
  assert.equal('reward_components_dropped' in m, false);
  assert.deepEqual(
    Object.keys(m).filter((k) => k.startsWith('reward/')),
    ['reward/correct', 'reward/format'],
  );
  // the line is plain JSON: NaN never reaches metrics.jsonl
  assert.deepEqual(JSON.parse(JSON.stringify(m))['reward/format'], 0.5);
});

test('stepMetrics: component names cannot overwrite fixed keys or control counters', () => {
  const drawn = [
    tree('a', [
      { reward: 1, components: { reward_mean: 9, accuracy: 9, step: 9, __proto__x: 2 } },
      { reward: 0, components: { reward_mean: 7, accuracy: 7, step: 7, __proto__x: 4 } },
    ]),
  ];
  const m = stepMetrics(4, drawn, meta(drawn, { 'reward/accuracy': 123, groups_dropped: 1 }), undefined, 3, state);
  assert.equal(m.step, 4);
  assert.equal(m.reward_mean, 0.5);
  assert.equal(m.accuracy, 0.5);
  assert.equal(m.groups_dropped, 1);
  assert.equal(m['reward/reward_mean'], 8);
  assert.equal(m['reward/step'], 8);
  assert.equal(m['reward/accuracy'], 8, 'the measured component wins over a control counter of the same key');
  assert.equal(m['reward/__proto__x'], 3);
});

test('component names: control characters replaced, length bounded, names equal once cut are one', () => {
  assert.equal(componentKey('format'), 'reward/format');
  assert.equal(componentKey('a\nb\u0000c\u009f'), 'reward/a_b_c_');
  assert.equal(componentKey(''), 'reward/_');
  const long = 'x'.repeat(500);
  assert.equal(componentKey(long), 'reward/' + 'x'.repeat(COMPONENT_NAME_MAX));
  // cut by code point, never inside a surrogate pair
  assert.equal(componentKey('😀'.repeat(100)), 'reward/' + '😀'.repeat(COMPONENT_NAME_MAX));
  const { means } = rewardComponentMeans(
    leavesOf([
      { reward: 0, components: { [long + 'a']: 1, [long + 'b']: 3 } },
      { reward: 0, components: { [long + 'b']: 0 } },
    ]),
  );
  // the first name of a leaf wins its key: leaf 1 gives 1, leaf 2 gives 0
  assert.deepEqual(means, { ['reward/' + 'x'.repeat(COMPONENT_NAME_MAX)]: 0.5 });
});

test(`stepMetrics: at most ${COMPONENTS_MAX} components a step; the names past it are counted`, () => {
  const many = Object.fromEntries(Array.from({ length: COMPONENTS_MAX + 3 }, (_, i) => [`c${100 + i}`, i]));
  const drawn = [
    tree('a', [
      { reward: 1, components: many },
      { reward: 1, components: { c100: 2, extra: 1 } },
    ]),
  ];
  const m = stepMetrics(1, drawn, meta(drawn), undefined, 3, state);
  const logged = Object.keys(m).filter((k) => k.startsWith('reward/'));
  assert.equal(logged.length, COMPONENTS_MAX);
  assert.equal(m['reward/c100'], 1); // (0 + 2) / 2
  assert.equal(m['reward/c131'], 31);
  assert.equal('reward/c132' in m, false);
  assert.equal(m.reward_components_dropped, 4); // c132, c133, c134, extra
});

function leavesOf(list: Leaf[]) {
  const t = tree('l', list);
  return t.nodes['0.0'].children.map((id) => t.nodes[id]);
}
