/**
 * `SampleRequest.returnHidden` on the embedded sampler: each continuation's hidden state is the
 * final-norm activation its last token was sampled from. Checked independently of the sampler's own
 * bookkeeping: the hidden state times the output head, log-softmaxed (temperature 1, no truncation),
 * must give exactly the log-prob the sampler recorded for the last token — for continuations that end
 * on their first token (the state comes from the prefill) and later (from a decode step), with and
 * without prefix sharing, and from a retained cache handle.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { NanoModel } from '../../src/engine/model/model.js';
import { NanoSampler } from '../../src/engine/embedded/sampler.js';
import { referenceKernels } from '../../src/engine/kernels/reference.js';
import type { NanoConfig } from '../../src/engine/model/config.js';
import type { SampleCompletion } from '../../src/engine/types.js';

const config: NanoConfig = {
  vocabSize: 23,
  dModel: 16,
  nLayers: 2,
  nHeads: 2,
  dFF: 24,
  contextLength: 96,
  tieEmbeddings: false,
  ropeTheta: 10000,
  normEps: 1e-5,
};

function model(): NanoModel {
  const m = NanoModel.createSync(config, referenceKernels, 7);
  for (let i = 0; i < m.params.data.length; i++) m.params.data[i] *= 3;
  return m;
}

/** log softmax(h · Wᵀ)[token] in float64 (W: the output head, [V, C]). */
function logprobFromHidden(m: NanoModel, hidden: number[], token: number): number {
  const { vocabSize: V, dModel: C } = m.config;
  const W = m.param(m.headName);
  const logits = Array.from({ length: V }, (_, v) => hidden.reduce((a, h, c) => a + h * W[v * C + c], 0));
  const max = Math.max(...logits);
  const lse = max + Math.log(logits.reduce((a, z) => a + Math.exp(z - max), 0));
  return logits[token] - lse;
}

function checkLast(m: NanoModel, c: SampleCompletion, what: string): void {
  assert.ok(c.hidden, `${what}: a hidden state is returned`);
  assert.equal(c.hidden!.length, m.config.dModel, `${what}: one entry per model dimension`);
  const last = c.tokens.length - 1;
  const expected = logprobFromHidden(m, c.hidden!, c.tokens[last]);
  assert.ok(
    Math.abs(expected - c.logprobs[last]) < 1e-4,
    `${what}: log-prob from the hidden state ${expected} vs recorded ${c.logprobs[last]}`,
  );
}

test('returnHidden: the state the last token was sampled from (prefill and decode, shared and unshared prefixes)', async () => {
  const m = model();
  const prompt = [1, 5, 7, 9, 11, 3];
  for (const prefixSharing of [true, false]) {
    const sampler = new NanoSampler(m, { pageSize: 4, prefixSharing });
    assert.equal(sampler.capabilities.hiddenSize, 16);
    const [one, many] = await sampler.sample([
      { tokens: prompt, n: 3, maxTokens: 1, seed: 1, returnHidden: true },
      { tokens: prompt.slice(0, 4), n: 2, maxTokens: 6, seed: 2, returnHidden: true },
    ]);
    one.completions.forEach((c, i) => checkLast(m, c, `sharing ${prefixSharing}, one-token continuation ${i}`));
    many.completions.forEach((c, i) => checkLast(m, c, `sharing ${prefixSharing}, six-token continuation ${i}`));
    assert.deepEqual(
      one.completions[0].hidden,
      one.completions[1].hidden,
      'continuations of one context share its prefill state',
    );
    assert.notDeepEqual(many.completions[0].hidden, one.completions[0].hidden, 'different positions, different states');
  }
});

test('returnHidden from a retained handle equals the state computed from scratch; absent unless asked for', async () => {
  const m = model();
  const sampler = new NanoSampler(m, { pageSize: 4 });
  const prompt = [1, 4, 6, 8];
  const [a] = await sampler.sample([{ tokens: prompt, maxTokens: 5, seed: 3, retain: true }]);
  assert.equal(a.completions[0].hidden, undefined, 'not returned unless requested');
  const ctx = prompt.concat(a.completions[0].tokens);
  const [b] = await sampler.sample([
    { tokens: ctx, cacheHandle: a.completions[0].cacheHandle, maxTokens: 4, seed: 9, returnHidden: true },
  ]);
  const [c] = await new NanoSampler(m, { pageSize: 4 }).sample([
    { tokens: ctx, maxTokens: 4, seed: 9, returnHidden: true },
  ]);
  assert.deepEqual(b.completions[0].tokens, c.completions[0].tokens);
  const diff = Math.max(...b.completions[0].hidden!.map((h, i) => Math.abs(h - c.completions[0].hidden![i])));
  assert.ok(diff < 1e-5, `cached-prefix and recomputed states differ by ${diff}`);
  checkLast(m, b.completions[0], 'continued from a handle');
});
