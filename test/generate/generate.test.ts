import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Rng } from '../../src/core/rng.js';
import { leaves, generatedTokenCount, pathTo, prefixTokens } from '../../src/core/tree.js';
import { allocate, generatorFromConfig, type GenerateContext } from '../../src/generate/index.js';
import { ConfigError } from '../../src/core/errors.js';
import { ScriptedTreeSampler } from './scripted.js';
import { NanoModel } from '../../src/engine/model/model.js';
import { NanoSampler } from '../../src/engine/embedded/sampler.js';
import { referenceKernels } from '../../src/engine/kernels/reference.js';
import type { TreeNode } from '../../src/core/tree.js';

const inputs = Array.from({ length: 5 }, (_, i) => ({
  item: { id: `p${i}`, prompt: `p${i}`, answer: '' },
  promptTokens: [1, 10 + i, 11],
}));

function context(sampler: ScriptedTreeSampler | NanoSampler, seed = 1, maxResponseTokens = 40): GenerateContext {
  return {
    sampler,
    rng: new Rng(seed),
    step: 1,
    stopTokens: [2],
    maxResponseTokens,
    temperature: 1,
    topP: 1,
    topK: 0,
    treeIdPrefix: 't',
  };
}

test('iid: a star of G leaves per prompt, one sampler call', async () => {
  const s = new ScriptedTreeSampler(0.1);
  const g = generatorFromConfig({ kind: 'iid', groupSize: 6 });
  const { trees, stats } = await g.grow(inputs, context(s));
  assert.equal(s.calls, 1);
  for (const t of trees) {
    assert.equal(leaves(t).length, 6);
    assert.ok(leaves(t).every((l) => l.parent === '0'));
  }
  assert.equal(stats.trajectories, 30);
  assert.equal(
    stats.tokensDecoded,
    trees.reduce((s2, t) => s2 + generatedTokenCount(t), 0),
  );
});

test('treepo: exactly G leaves per prompt, one call per round for all prompts, depth limit, handles released', async () => {
  for (const stopProbability of [0, 0.05, 0.3, 0.9]) {
    const s = new ScriptedTreeSampler(stopProbability);
    const g = generatorFromConfig({
      kind: 'treepo',
      groupSize: 8,
      segmentLength: 4,
      branchingFactor: 2,
      initialDivergence: 2,
    });
    const { trees, stats } = await g.grow(inputs, context(s));
    for (const t of trees) {
      const ls = leaves(t);
      assert.equal(ls.length, 8, `p=${stopProbability}: ${t.id} has ${ls.length} leaves`);
      assert.ok(ls.every((l) => l.finishReason !== null));
      assert.ok(
        ls.every((l) => l.depth <= 10),
        'depth ≤ ceil(40/4)',
      );
    }
    // every round sent all live paths of all prompts in one call: the first round holds every prompt,
    // a prompt takes part in every round until its tree is done (the rounds it appears in are 0..k-1),
    // each request extends a node of the tree its affinity key names, and every node of every tree
    // was grown by exactly one copy (n) of one request of that tree
    assert.equal(stats.samplerCalls, s.calls);
    assert.deepEqual(
      s.requestsSeen[0].map((r) => r.affinityKey),
      trees.map((t) => t.id),
      'round 0 extends the root of every prompt, in input order',
    );
    for (const t of trees) {
      const rounds = s.requestsSeen
        .map((reqs, r) => (reqs.some((q) => q.affinityKey === t.id) ? r : -1))
        .filter((r) => r >= 0);
      assert.deepEqual(
        rounds,
        rounds.map((_, i) => i),
        `p=${stopProbability}: ${t.id} skipped a round while unfinished: ${rounds}`,
      );
      const mine = s.requestsSeen.flat().filter((q) => q.affinityKey === t.id);
      const prefixes = new Set(
        Object.keys(t.nodes)
          .filter((id) => t.nodes[id].children.length)
          .map((id) => prefixTokens(t, id).join(',')),
      );
      assert.ok(
        mine.every((q) => prefixes.has(q.tokens.join(','))),
        `p=${stopProbability}: a request of ${t.id} does not extend one of its nodes`,
      );
      assert.equal(
        mine.reduce((a, q) => a + (q.n ?? 1), 0),
        Object.keys(t.nodes).length - 1,
        `p=${stopProbability}: ${t.id}: copies requested vs nodes grown`,
      );
    }
    assert.equal(s.live.size, 0, 'all retained handles were released');
    assert.equal(stats.trajectories, 40);
    assert.equal(
      stats.tokensDecoded,
      trees.reduce((s2, t) => s2 + generatedTokenCount(t), 0),
    );
  }
});

test('treepo: budget transfer T = max(n_c, min(G−F, b·f_s + b·n_c)) on the first rounds', async () => {
  const s = new ScriptedTreeSampler(0);
  const g = generatorFromConfig({
    kind: 'treepo',
    groupSize: 16,
    segmentLength: 2,
    branchingFactor: 2,
    initialDivergence: 2,
    maxDepth: 8,
  });
  await g.grow([inputs[0]], context(s, 1, 16));
  // no early stops: 2, 4, 8, 16, then 16 one child each (reference §1.4 example)
  const widths = s.requestsSeen.map((reqs) => reqs.reduce((a, r) => a + (r.n ?? 1), 0));
  assert.deepEqual(widths.slice(0, 6), [2, 4, 8, 16, 16, 16]);
  // fixed_avg split: remainder to the last path, at least one each
  const fake = (n: number) =>
    Array.from({ length: n }, () => ({ logprobs: [-1], entropies: [0.5] }) as unknown as TreeNode);
  assert.deepEqual(allocate(fake(3), 8, { allocation: 'fixed_avg', allocationTemperature: 1 }), [2, 2, 4]);
  const probs = allocate([{ logprobs: [-0.1] }, { logprobs: [-3] }] as unknown as TreeNode[], 6, {
    allocation: 'low_prob',
    allocationTemperature: 1,
  });
  assert.equal(
    probs.reduce((a, b) => a + b, 0),
    6,
  );
  assert.ok(probs[1] > probs[0], 'low-probability path gets more branches');
});

test('treepo: fallback regrows from truncated prefixes when every path stops early', async () => {
  // p = 0.6: paths die in their first segment (truncation to the prompt); one path (b = 1) at p = 0.2:
  // leaves reach depth ≥ 2, so truncation also lands inside the response
  for (const [stopProbability, b, minInside] of [
    [0.6, 2, 0],
    [0.2, 1, 1],
  ] as const) {
    const s = new ScriptedTreeSampler(stopProbability);
    const g = generatorFromConfig({
      kind: 'treepo',
      groupSize: 8,
      segmentLength: 3,
      branchingFactor: b,
      initialDivergence: b,
    });
    const { trees } = await g.grow(inputs, context(s, 3));
    for (const t of trees) assert.equal(leaves(t).length, 8);
    // Replay the rounds: a request of round r normally extends a node grown in round r-1 (or the root in
    // round 0). Any other request is a fallback; it must come after a round in which every path of its
    // tree finished, and grow from a TRUNCATED copy: a strict ancestor (segment boundary, 0 = the prompt)
    // of a naturally finished ('stop') leaf, sending prompt + that ancestor's response tokens.
    const key = (tokens: number[]) => tokens.join(',');
    let fallbacks = 0;
    let inside = 0;
    for (const t of trees) {
      const ids = Object.keys(t.nodes);
      const nodeOf = new Map(ids.map((id) => [key(prefixTokens(t, id)), id]));
      const stopLeaves = leaves(t).filter((l) => l.finishReason === 'stop');
      let grownBefore = new Set([key(t.nodes['0'].tokens)]);
      const finished = new Set<string>();
      s.requestsSeen.forEach((reqs, r) => {
        const mine = reqs.map((q, j) => ({ q, result: s.resultsSeen[r][j] })).filter(({ q }) => q.affinityKey === t.id);
        for (const { q, result } of mine) {
          const id = nodeOf.get(key(q.tokens));
          assert.ok(
            id !== undefined,
            `${t.id} round ${r}: the request's tokens are not prompt + the response of any node`,
          );
          // the new segments hang under the node whose context was sent (no stale context)
          for (const c of result.completions)
            assert.equal(
              t.nodes[nodeOf.get(key(q.tokens.concat(c.tokens))) ?? '']?.parent,
              id,
              `${t.id} round ${r}: a segment grown from ${id} is not its child`,
            );
          if (grownBefore.has(key(q.tokens))) continue;
          fallbacks++;
          if (t.nodes[id].depth > 0) inside++;
          assert.ok(
            [...grownBefore].every((k) => t.nodes[nodeOf.get(k)!].children.length === 0),
            `${t.id} round ${r}: fallback while a path of the previous round was still live`,
          );
          const truncated = stopLeaves.some(
            (l) => finished.has(l.id) && l.id !== id && pathTo(t, l.id).some((n) => n.id === id),
          );
          assert.ok(
            truncated,
            `${t.id} round ${r}: fallback from ${id}, which is not a strict ancestor of a leaf that finished with a stop token before round ${r}`,
          );
          assert.deepEqual(q.tokens, prefixTokens(t, id), 'prompt + the truncated response tokens');
          if (q.cacheHandle)
            assert.deepEqual(
              s.handleContext.get(q.cacheHandle),
              q.tokens,
              `${t.id} round ${r}: the KV handle is the truncated context, not a stale one`,
            );
        }
        grownBefore = new Set(
          mine.flatMap(({ q, result }) => result.completions.map((c) => key(q.tokens.concat(c.tokens)))),
        );
        for (const { q, result } of mine)
          for (const c of result.completions)
            if (c.finishReason === 'stop') finished.add(nodeOf.get(key(q.tokens.concat(c.tokens)))!);
      });
    }
    assert.ok(fallbacks > 0, 'some prompt needed the fallback');
    assert.ok(inside >= minInside, `p=${stopProbability}: ${inside} fallbacks truncated inside the response`);
  }
});

test('treepo: same seed → same trees; different seed → different trees', async () => {
  const g = generatorFromConfig({
    kind: 'treepo',
    groupSize: 8,
    segmentLength: 4,
    branchingFactor: 2,
    initialDivergence: { min: 2, max: 4 },
  });
  const a = await g.grow(inputs, context(new ScriptedTreeSampler(0.1), 5));
  const b = await g.grow(inputs, context(new ScriptedTreeSampler(0.1), 5));
  const c = await g.grow(inputs, context(new ScriptedTreeSampler(0.1), 6));
  assert.deepEqual(a.trees, b.trees);
  assert.notDeepEqual(a.trees, c.trees);
});

test('treepo on the embedded engine decodes fewer tokens than iid for the same number of trajectories', async () => {
  const m = NanoModel.createSync(
    {
      vocabSize: 20,
      dModel: 16,
      nLayers: 1,
      nHeads: 2,
      dFF: 16,
      contextLength: 64,
      tieEmbeddings: true,
      ropeTheta: 10000,
      normEps: 1e-5,
    },
    referenceKernels,
    1,
  );
  // no stop token: every trajectory runs to the full length, so the saving is the shared prefixes
  const iid = await generatorFromConfig({ kind: 'iid', groupSize: 8 }).grow(inputs.slice(0, 2), {
    ...context(new NanoSampler(m), 1, 24),
    stopTokens: [],
  });
  const sampler = new NanoSampler(m);
  const tree = await generatorFromConfig({
    kind: 'treepo',
    groupSize: 8,
    segmentLength: 4,
    branchingFactor: 2,
    initialDivergence: 2,
  }).grow(inputs.slice(0, 2), { ...context(sampler, 1, 24), stopTokens: [] });
  assert.equal(iid.stats.tokensDecoded, 2 * 8 * 24);
  assert.equal(tree.stats.trajectories, iid.stats.trajectories);
  assert.ok(
    tree.stats.tokensDecoded < iid.stats.tokensDecoded,
    `${tree.stats.tokensDecoded} vs ${iid.stats.tokensDecoded}`,
  );
  assert.ok(tree.stats.prefixTokensReused > 0);
  assert.equal(sampler.retainedCount, 0);
  assert.equal(sampler.cache.pagesInUse, 0, 'every KV page was returned');
});

test('generator config errors name the key', () => {
  assert.throws(
    () => generatorFromConfig({ kind: 'beam' }),
    (e: unknown) =>
      e instanceof ConfigError && e.path === 'generate.kind' && /^generate\.kind: .*'iid' \| 'treepo'/.test(e.message),
  );
  assert.throws(
    () => generatorFromConfig({ kind: 'treepo', segmentLenght: 4 }),
    (e: unknown) =>
      e instanceof ConfigError && e.path === 'generate.segmentLenght' && /^generate\.segmentLenght: /.test(e.message),
  );
  assert.throws(
    () => generatorFromConfig({ kind: 'treepo', segmentLength: 0 }),
    (e: unknown) => e instanceof ConfigError && e.path === 'generate.segmentLength',
  );
});
