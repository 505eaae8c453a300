import { test } from 'node:test';
import assert from 'node:assert/strict';
import { NanoModel } from '../../src/engine/model/model.js';
import { NanoSampler } from '../../src/engine/embedded/sampler.js';
import { NanoTrainer } from '../../src/engine/embedded/trainer.js';
import { PagedKVCache } from '../../src/engine/model/kvcache.js';
import { referenceKernels } from '../../src/engine/kernels/reference.js';
import type { NanoConfig } from '../../src/engine/model/config.js';

const config: NanoConfig = {
  vocabSize: 23,
  dModel: 16,
  nLayers: 2,
  nHeads: 2,
  dFF: 24,
  contextLength: 96,
  tieEmbeddings: true,
  ropeTheta: 10000,
  normEps: 1e-5,
};

function model(seed = 1, scale = 20): NanoModel {
  const m = NanoModel.createSync(config, referenceKernels, seed);
  for (let i = 0; i < m.params.data.length; i++) m.params.data[i] *= scale; // peaky distributions
  return m;
}

test('kv cache: refcounts, copy-on-write of the last partial page only, free returns every page', () => {
  const cache = new PagedKVCache(2, 4, 16, 8);
  const parent = cache.createSequence();
  for (let i = 0; i < 1000; i++) cache.appendSlot(parent);
  const pagesBefore = cache.pagesAllocated;
  assert.equal(pagesBefore, Math.ceil(1000 / 16));
  const children = cache.fork(parent, 8);
  assert.equal(cache.pagesAllocated, pagesBefore, 'fork allocates nothing');
  for (const c of children) for (let i = 0; i < 20; i++) cache.appendSlot(c);
  assert.equal(cache.pagesCopied, 8, 'each child copies only the shared partial page');
  // each child: 1 copied partial page + 1 new page for positions 1008..1019
  assert.equal(cache.pagesAllocated, pagesBefore + 8 + 8);
  cache.free(parent);
  for (const c of children) cache.free(c);
  assert.equal(cache.pagesInUse, 0);
});

test('log-probs agree: incremental decode, decode after fork from a cached prefix, teacher-forced trainer', async () => {
  const m = model(2, 4);
  const sampler = new NanoSampler(m, { pageSize: 4 });
  const prompt = [1, 5, 7, 9, 11, 3];
  const [a] = await sampler.sample([{ tokens: prompt, n: 1, maxTokens: 7, seed: 4, retain: true }]);
  const first = a.completions[0];
  // continue from the retained handle with a second segment
  const ctx = prompt.concat(first.tokens);
  const [b] = await sampler.sample([{ tokens: ctx, cacheHandle: first.cacheHandle, maxTokens: 6, seed: 8 }]);
  assert.equal(b.usage.prefixTokensReused, ctx.length - 1, 'all but the pending last token came from the cache');
  assert.equal(b.usage.promptTokensComputed, 1);
  // the same second segment from scratch
  const fresh = new NanoSampler(m, { pageSize: 4 });
  const [c] = await fresh.sample([{ tokens: ctx, maxTokens: 6, seed: 8 }]);
  assert.deepEqual(c.completions[0].tokens, b.completions[0].tokens);
  // teacher-forced log-probs of the whole response
  const full = ctx.concat(b.completions[0].tokens);
  const trainer = new NanoTrainer(m);
  const [lp] = await trainer.logprobs([
    { inputTokens: full.slice(0, -1), targetTokens: full.slice(1), weights: full.slice(1).map(() => 1) },
  ]);
  const sampled = first.logprobs.concat(b.completions[0].logprobs);
  const tf = lp.slice(prompt.length - 1);
  assert.equal(tf.length, sampled.length);
  let maxDiff = 0;
  for (let i = 0; i < tf.length; i++) maxDiff = Math.max(maxDiff, Math.abs(tf[i] - sampled[i]));
  for (let i = 0; i < c.completions[0].logprobs.length; i++)
    maxDiff = Math.max(maxDiff, Math.abs(c.completions[0].logprobs[i] - b.completions[0].logprobs[i]));
  assert.ok(maxDiff < 1e-5, `max log-prob difference ${maxDiff}`);
  assert.ok(
    sampled.some((x) => x < -0.01),
    'sampling was not degenerate',
  );
});

test('seeds: same seed same samples (also batched with others), different seeds differ', async () => {
  const m = model(3);
  const s1 = new NanoSampler(m);
  const s2 = new NanoSampler(m);
  const req = { tokens: [1, 2, 3], n: 4, maxTokens: 12, seed: 99, temperature: 1.5 };
  const [a] = await s1.sample([req]);
  const [, b] = await s2.sample([{ tokens: [4, 4, 4, 4, 4], n: 2, maxTokens: 5, seed: 1 }, req]);
  assert.deepEqual(
    a.completions.map((c) => c.tokens),
    b.completions.map((c) => c.tokens),
  );
  const [c] = await s1.sample([{ ...req, seed: 100 }]);
  assert.notDeepEqual(
    a.completions.map((x) => x.tokens),
    c.completions.map((x) => x.tokens),
  );
  // continuations of one request differ from each other
  assert.ok(new Set(a.completions.map((x) => x.tokens.join(','))).size > 1);
});

test('greedy = top-k 1; forced tokens; stop tokens; usage accounting', async () => {
  const m = model(4);
  const s = new NanoSampler(m);
  const [g] = await s.sample([{ tokens: [1, 2], maxTokens: 8, temperature: 0 }]);
  const [k1] = await s.sample([{ tokens: [1, 2], maxTokens: 8, topK: 1, seed: 5 }]);
  assert.deepEqual(g.completions[0].tokens, k1.completions[0].tokens);
  const [f] = await s.sample([
    { tokens: [1, 2], n: 3, maxTokens: 4, forcedTokens: [7, 8, 9], seed: 1, returnEntropy: true, topLogprobs: 3 },
  ]);
  assert.deepEqual(
    f.completions.map((c) => c.tokens[0]),
    [7, 8, 9],
  );
  assert.equal(f.completions[0].entropies!.length, f.completions[0].tokens.length);
  assert.equal(f.completions[0].topLogprobs![0].length, 3);
  assert.equal(f.usage.promptTokensComputed, 2);
  assert.equal(f.usage.prefixTokensReused, 4, 'two extra continuations reuse the 2-token prompt');
  assert.equal(
    f.usage.tokensDecoded,
    f.completions.reduce((a, c) => a + c.tokens.length, 0),
  );
  // stop token: force it
  const [st] = await s.sample([{ tokens: [1], maxTokens: 10, forcedTokens: [6], stopTokens: [6] }]);
  assert.deepEqual(st.completions[0].tokens, [6]);
  assert.equal(st.completions[0].finishReason, 'stop');
  assert.equal(k1.completions[0].finishReason, 'length');
  // context limit clamps generation
  const [cl] = await s.sample([{ tokens: Array(90).fill(3), maxTokens: 50, seed: 2 }]);
  assert.equal(cl.completions[0].tokens.length, 6);
  assert.equal(s.cache.sequenceCount, 0, 'nothing retained leaks');
});

test('fork of a 1,000-token prefix into 8 continuations: no recomputation, ≤ 8 page copies', async () => {
  const m = NanoModel.createSync({ ...config, contextLength: 1100 }, referenceKernels, 5);
  const s = new NanoSampler(m, { pageSize: 16 });
  const prompt = Array.from({ length: 1000 }, (_, i) => 1 + (i % 20));
  const [a] = await s.sample([{ tokens: prompt, maxTokens: 1, retain: true, seed: 1 }]);
  const handle = a.completions[0].cacheHandle!;
  const ctx = prompt.concat(a.completions[0].tokens);
  const copiesBefore = s.cache.pagesCopied;
  const [b] = await s.sample([{ tokens: ctx, cacheHandle: handle, n: 8, maxTokens: 5, seed: 3 }]);
  assert.equal(b.usage.promptTokensComputed, 1, 'only the pending token is computed');
  assert.ok(s.cache.pagesCopied - copiesBefore <= 8, `copied ${s.cache.pagesCopied - copiesBefore} pages`);
  s.release([handle]);
  assert.equal(s.cache.pagesInUse, 0);
});

test('weight update invalidates retained handles', async () => {
  const m = model(6);
  const s = new NanoSampler(m);
  const [a] = await s.sample([{ tokens: [1, 2, 3], maxTokens: 3, retain: true, seed: 1 }]);
  m.weightVersion++;
  const ctx = [1, 2, 3].concat(a.completions[0].tokens);
  const [b] = await s.sample([{ tokens: ctx, cacheHandle: a.completions[0].cacheHandle, maxTokens: 2, seed: 1 }]);
  assert.equal(b.usage.prefixTokensReused, 0);
  assert.equal(b.usage.promptTokensComputed, ctx.length);
  assert.equal(b.weightVersion, 1);
  assert.equal(s.retainedCount, 0);
});
