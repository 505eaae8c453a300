/**
 * The sampler on the WASM kernels' decode path: attention over the KV pages in place
 * (pagedDecodeAttention on a cache attached to kernel memory), token choice from samplingStats. Checked:
 * the paged path gives the reference kernels' logits (rows gathered, float64 attention; and the same bits
 * whether the pages live in kernel memory or not); a kernel-path token choice equals the float64 path's
 * token, log-prob and entropy; sampled log-probs agree with the teacher-forced trainer; same seed, same
 * tokens; and a second sampler on the model reuses the pages the first one freed.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createWasmKernels } from '../../src/engine/kernels/wasm.js';
import { referenceKernels } from '../../src/engine/kernels/reference.js';
import type { Kernels } from '../../src/engine/kernels/types.js';
import { NanoModel } from '../../src/engine/model/model.js';
import { NanoSampler } from '../../src/engine/embedded/sampler.js';
import { NanoTrainer } from '../../src/engine/embedded/trainer.js';
import { PagedKVCache } from '../../src/engine/model/kvcache.js';
import { DecodeWorkspace, forwardRows } from '../../src/engine/model/decode.js';
import { chooseToken, rowDistributions } from '../../src/engine/model/sampling.js';
import type { NanoConfig } from '../../src/engine/model/config.js';
import { Rng } from '../../src/core/rng.js';

// GQA (6 query heads over 2 kv heads), a head size of 6 (not a multiple of 4), pages of 4 tokens
const config: NanoConfig = {
  vocabSize: 301,
  dModel: 30,
  nLayers: 2,
  nHeads: 6,
  nKVHeads: 2,
  headDim: 6,
  dFF: 40,
  contextLength: 80,
  tieEmbeddings: true,
  ropeTheta: 10000,
  normEps: 1e-5,
};

async function model(kernels?: Kernels): Promise<NanoModel> {
  const m = NanoModel.createSync(config, kernels ?? (await createWasmKernels()), 3);
  for (let i = 0; i < m.params.data.length; i++) m.params.data[i] *= 6; // a less uniform distribution
  return m;
}

/** Logits of every position of `batch` (prefill, then one decode step per sequence and token). */
function decodeAll(m: NanoModel, cache: PagedKVCache, batch: number[][]): Float32Array[] {
  const ws = new DecodeWorkspace(m);
  const seqs = batch.map(() => cache.createSequence());
  const out = [
    forwardRows(
      m,
      cache,
      ws,
      batch.map((t, b) => ({ seq: seqs[b], token: t[0], wantLogits: true })),
    ),
  ];
  for (let i = 1; i < batch[0].length; i++) {
    out.push(
      forwardRows(
        m,
        cache,
        ws,
        batch.map((t, b) => ({ seq: seqs[b], token: t[i], wantLogits: true })),
      ).slice(),
    );
  }
  return out;
}

test('paged decode attention = the reference row path; pages in or out of kernel memory, same bits', async () => {
  const m = await model();
  const rng = new Rng(5);
  const batch = Array.from({ length: 5 }, () => Array.from({ length: 23 }, () => rng.int(301)));
  const paged = decodeAll(m, new PagedKVCache(config.nLayers, m.dims.Ckv, 4), batch);
  const outside = new PagedKVCache(config.nLayers, m.dims.Ckv, 4);
  assert.equal(outside.kPages.length, 0); // its own storage is chosen before forwardRows could attach it
  const copied = decodeAll(m, outside, batch);
  // the plain-TypeScript reference: each row's positions gathered, attention in float64
  const ref = decodeAll(await model(referenceKernels), new PagedKVCache(2, m.dims.Ckv, 4), batch);
  const scale = Math.max(...ref.map((l) => Math.max(...l.map(Math.abs))));
  let worst = 0;
  paged.forEach((l, i) => {
    for (let j = 0; j < l.length; j++) {
      if (!Object.is(l[j], copied[i][j])) assert.fail(`step ${i} entry ${j}: ${l[j]} vs ${copied[i][j]}`);
      worst = Math.max(worst, Math.abs(l[j] - ref[i][j]));
    }
  });
  // float32 kernels against float64 accumulation: 2e-5 at logits of ±13 (1.5e-6 of the scale)
  assert.ok(worst < 5e-6 * scale, `paged vs reference: ${worst} at logits up to ${scale}`);
  const changed = batch.map((t, b) => (b === 4 ? [...t.slice(0, -1), (t[22] + 1) % 301] : t));
  const wrong = decodeAll(m, new PagedKVCache(2, m.dims.Ckv, 4), changed);
  let moved = 0;
  for (let j = 4 * 301; j < 5 * 301; j++) moved = Math.max(moved, Math.abs(wrong[22][j] - ref[22][j]));
  assert.ok(moved > 5e-6 * scale, `a different last token is caught (${moved})`);
});

test('a kernel-path token choice = the float64 path: token, log-prob, entropy; one uniform draw each', async () => {
  const m = await model();
  const rng = new Rng(9);
  const R = 40;
  const V = 301;
  const logits = Float32Array.from({ length: R * V }, () => rng.normal() * 3);
  const temperatures = Array.from({ length: R }, (_, r) => [1, 0.7, 1.6, 0][r % 4]);
  const dists = rowDistributions(m.kernels, logits, R, V, temperatures, m.kernels.alloc(R * V))!;
  assert.ok(dists, 'the WASM kernels have samplingStats');
  let worst = 0;
  for (let r = 0; r < R; r++) {
    const o = { temperature: temperatures[r], topP: 1, topK: 0, topLogprobs: 0, forced: r % 5 === 4 ? 7 : undefined };
    const [a, b] = [new Rng(r), new Rng(r)];
    const fast = chooseToken(logits, r * V, V, a, o, dists[r]);
    const slow = chooseToken(logits, r * V, V, b, o);
    assert.equal(fast.token, slow.token, `row ${r}`);
    assert.equal(a.next(), b.next(), `row ${r}: the same draws consumed`);
    worst = Math.max(worst, Math.abs(fast.logprob - slow.logprob), Math.abs(fast.entropy - slow.entropy));
  }
  assert.ok(worst < 1e-5, `log-prob / entropy difference ${worst}`);
  // a distribution from other logits is visible in the log-probs
  const other = rowDistributions(
    m.kernels,
    logits.map((x) => x * 1.01),
    R,
    V,
    temperatures,
    m.kernels.alloc(R * V),
  )!;
  const o = { temperature: 1, topP: 1, topK: 0, topLogprobs: 0, forced: 3 };
  const logprob = (d?: (typeof other)[number]) => chooseToken(logits, 0, V, new Rng(1), o, d).logprob;
  const moved = Math.abs(logprob(other[0]) - logprob());
  assert.ok(moved > 1e-5, `moved ${moved}`);
});

test('kernel-path sampler: log-probs agree with the trainer, same seed same tokens, freed pages reused', async () => {
  const m = await model();
  const requests = [0, 1, 2].map((i) => ({ tokens: [1 + i, 20, 33, 4 + i], n: 3, maxTokens: 17, seed: 11 + i }));
  const s1 = new NanoSampler(m, { pageSize: 4 });
  const r1 = await s1.sample(requests);
  const capacity = s1.cache.kPages.length;
  const r2 = await new NanoSampler(m, { pageSize: 4 }).sample(requests);
  const tokens = (rs: typeof r1) => rs.map((r) => r.completions.map((c) => c.tokens));
  assert.deepEqual(tokens(r2), tokens(r1));
  const s3 = new NanoSampler(m, { pageSize: 4 });
  await s3.sample(requests);
  assert.equal(s3.cache.kPages, s1.cache.kPages, "one page pool for the model's kernels");
  assert.equal(s3.cache.kPages.length, capacity, 'the pool did not grow: freed pages were reused');
  assert.equal(s3.cache.pagesInUse, 0);
  // teacher-forced log-probs (temperature 1)
  const trainer = new NanoTrainer(m);
  let worst = 0;
  for (const [i, r] of r1.entries()) {
    for (const c of r.completions) {
      const full = requests[i].tokens.concat(c.tokens);
      const targets = full.slice(1);
      const datum = { inputTokens: full.slice(0, -1), targetTokens: targets, weights: targets.map(() => 1) };
      const [lp] = await trainer.logprobs([datum]);
      const tf = lp.slice(requests[i].tokens.length - 1);
      c.logprobs.forEach((x, t) => (worst = Math.max(worst, Math.abs(x - tf[t]))));
    }
  }
  assert.ok(worst < 2e-5, `sampler vs trainer log-probs: max difference ${worst}`);
});
