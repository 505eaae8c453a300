/**
 * The embedded model at 2 kernel threads against one, bit for bit, on the shape where sampling at 2
 * threads gave NaN log-probs: a Llama-like model with 4 heads of 24, many prompts of 58 and 134 tokens
 * prefilled together and decoded in one batch. The cause was pagedAttention's read-ahead sink: it
 * stores 16 bytes after its scores, and wasm.ts gave each thread only the scores' bytes, so a thread
 * that finished wrote over the start of the next thread's scores while that thread still used them.
 * Checked: memory handed out after a paged attention call is zero (nothing written past its scratch,
 * deterministic); a sampler batch and a trainer forward/backward give the same bits at 2 threads as
 * at one.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createWasmKernels } from '../../src/engine/kernels/wasm.js';
import type { Kernels } from '../../src/engine/kernels/types.js';
import { NanoModel } from '../../src/engine/model/model.js';
import { NanoSampler } from '../../src/engine/embedded/sampler.js';
import { NanoTrainer } from '../../src/engine/embedded/trainer.js';
import type { NanoConfig } from '../../src/engine/model/config.js';
import type { Datum, SampleRequest } from '../../src/engine/types.js';
import { Rng } from '../../src/core/rng.js';

// C = 96, NH = NKV = 4, hd = 24, F = 256, V = 101, L = 3, untied head (the reported model's shape)
const config: NanoConfig = {
  vocabSize: 101,
  dModel: 96,
  nLayers: 3,
  nHeads: 4,
  nKVHeads: 4,
  headDim: 24,
  dFF: 256,
  contextLength: 192,
  tieEmbeddings: false,
  ropeTheta: 10000,
  normEps: 1e-5,
  paramNames: 'hf',
  rope: 'transformers',
};

/** The same seeded model on one and on two kernel threads. */
async function models(): Promise<NanoModel[]> {
  const kernels = await Promise.all([1, 2].map((threads) => createWasmKernels({ threads })));
  return kernels.map((k) => {
    const m = NanoModel.createSync(config, k, 7);
    for (let i = 0; i < m.params.data.length; i++) m.params.data[i] *= 4; // less uniform attention and logits
    return m;
  });
}

/** Random tokens (ids 3..V−1, so none is the stop token). */
function tokens(rng: Rng, n: number): number[] {
  return Array.from({ length: n }, () => 3 + Math.floor(rng.next() * (config.vocabSize - 3)));
}

/** Every element that differs between a and b (as bits), the first few described. */
function mismatches(a: ArrayLike<number>, b: ArrayLike<number>): string[] {
  const out: string[] = [];
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) out.push(`[${i}] ${a[i]} vs ${b[i]}`);
  return out;
}

test('paged decode attention writes nothing past its scratch: memory handed out next is zero', async () => {
  const [L, P, NH, NKV, hd, R] = [1, 16, 4, 4, 24, 8];
  const rng = new Rng(3);
  for (const threads of [1, 2]) {
    const k: Kernels = await createWasmKernels({ threads });
    const rand = (n: number) => {
      const a = k.alloc(n);
      for (let i = 0; i < n; i++) a[i] = rng.normal();
      return a;
    };
    // every row 134 long: the longest row of each thread's share is the call's longest
    const lengths = new Int32Array(R).fill(134);
    const W = Math.ceil(134 / P);
    const pages = Int32Array.from({ length: R * W }, (_, i) => i);
    const kPages = Array.from({ length: R * W }, () => rand(L * P * NKV * hd));
    const vPages = Array.from({ length: R * W }, () => rand(L * P * NKV * hd));
    const q = rand(R * NH * hd);
    const out = k.alloc(R * NH * hd);
    k.pagedDecodeAttention!(out, q, kPages, vPages, pages, W, lengths, R, 0, P, NH, NKV, hd);
    assert.ok(out.every(Number.isFinite));
    // the call's scratch lay right above the heap; alloc zeroes what scratch used and trusts the rest
    const next = k.alloc(1 << 16);
    const dirty = [...next.keys()].filter((i) => next[i] !== 0);
    assert.deepEqual(dirty, [], `${threads} thread(s): non-zero floats handed out at ${dirty.slice(0, 8)}`);
  }
});

test('a sampler batch (prompts of 58 and 134 tokens, head size 24) is bit-identical at 2 threads and one', async () => {
  const samplers = (await models()).map((m) => new NanoSampler(m));
  const rng = new Rng(11);
  for (let round = 0; round < 2; round++) {
    const requests: SampleRequest[] = Array.from({ length: 64 }, (_, i) => ({
      tokens: tokens(rng, i % 2 ? 134 : 58),
      maxTokens: 24,
      temperature: 1,
      stopTokens: [2],
      seed: round * 1000 + i,
    }));
    const one = await samplers[0].sample(requests);
    const two = await samplers[1].sample(requests);
    one.forEach((r, i) => {
      const [a, b] = [r.completions[0], two[i].completions[0]];
      assert.ok(a.logprobs.every(Number.isFinite), `round ${round} request ${i}: 1 thread gave ${a.logprobs}`);
      const bad = mismatches(a.logprobs, b.logprobs);
      assert.deepEqual(bad, [], `round ${round} request ${i}: log-probs at 2 threads differ: ${bad.slice(0, 4)}`);
      assert.deepEqual(b.tokens, a.tokens, `round ${round} request ${i}: tokens`);
    });
  }
});

test('a trainer forward/backward on the same shape gives bit-identical gradients at 2 threads and one', async () => {
  const rng = new Rng(5);
  const data: Datum[] = [134, 58, 134, 134, 58, 191, 134, 58].map((n) => {
    const t = tokens(rng, n + 1);
    const weights = Array.from({ length: n }, () => rng.next());
    return { inputTokens: t.slice(0, n), targetTokens: t.slice(1), weights };
  });
  const results = [];
  for (const m of await models()) {
    const trainer = new NanoTrainer(m);
    const result = await trainer.forwardBackward(data, { kind: 'cross_entropy' });
    results.push({ result, grads: Float32Array.from(m.grads.data) });
  }
  const [one, two] = results;
  assert.ok(one.grads.some((g) => g !== 0) && one.grads.every(Number.isFinite));
  const bad = mismatches(one.grads, two.grads);
  assert.deepEqual(bad, [], `gradients at 2 threads differ in ${bad.length} places: ${bad.slice(0, 4)}`);
  assert.ok(Object.is(two.result.loss, one.result.loss), `loss ${two.result.loss} vs ${one.result.loss}`);
  assert.deepEqual(two.result.logprobs, one.result.logprobs);
});
