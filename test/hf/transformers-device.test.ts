/**
 * Arbor against transformers 5.17 on what the shared fixtures do not cover, with numbers transformers
 * made (testkit/hf/transformers-fixtures, from testkit/device/check_hf.py on a machine with transformers):
 * Llama 3.1's llama3 rope scaling, Qwen2's q/k/v biases with linear scaling and a single KV head, Qwen3
 * with yarn scaling, and a BF16 checkpoint in three shards — all models Arbor wrote, loaded by
 * transformers. Checked: the rotary frequencies and attention factor bit for bit, and the float64
 * logits of sequences that run past the scaled ropes' original context. Each comparison is shown to
 * fail on a perturbed input.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { referenceKernels64 } from '../../src/engine/kernels/reference.js';
import type { Kernels } from '../../src/engine/kernels/types.js';
import { loadHfModel } from '../../src/engine/hf/model.js';
import { hfRopeFrequencies } from '../../src/engine/model/ops/rope.js';
import { readSafetensors } from '../../src/engine/formats/safetensors.js';
import { compare } from '../../testkit/hf/fixtures.js';
import { decodeLogits, HF_TOLERANCES } from '../../testkit/hf/parity.js';

const dir = 'testkit/hf/transformers-fixtures';
const manifest = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8')) as {
  sequences: Record<string, number[][]>;
  versions: Record<string, string>;
};

for (const [name, sequences] of Object.entries(manifest.sequences)) {
  test(`${name}: rotary frequencies and float64 logits equal transformers ${manifest.versions.transformers}'s`, async () => {
    const ref = readSafetensors(join(dir, name, 'transformers.safetensors')).tensors;
    const { model } = await loadHfModel(join(dir, name), { kernels: referenceKernels64 as unknown as Kernels });
    const c = model.config;
    const { invFreq, attentionFactor } = hfRopeFrequencies(model.dims.hd, c.ropeTheta, c.ropeScaling);
    assert.deepEqual(Array.from(invFreq, Math.fround), Array.from(ref.inv_freq.data), 'inv_freq');
    assert.equal(Math.fround(attentionFactor), ref.attention_scaling.data[0], 'attention factor');
    sequences.forEach((seq, i) => {
      const expected = ref[`logits.${i}`].data;
      const got = decodeLogits(model, seq);
      const c64 = compare(`${name} logits.${i}`, got, expected, HF_TOLERANCES.float64);
      assert.ok(c64.pass, `${c64.name}: worst ${c64.worstRatio.toFixed(3)} of the tolerance; ${c64.detail}`);
      // the same comparison rejects a 1e-3 relative change of one entry
      const bad = Float64Array.from(got);
      bad[7] = expected[7] * (1 + 1e-3) + 1e-3;
      assert.equal(compare('perturbed', bad, expected, HF_TOLERANCES.float64).pass, false);
    });
  });
}

test('the scalings are exercised: sequences run past the original context, and the scaled frequencies differ from unscaled ones', async () => {
  for (const name of ['llama-llama3-rope', 'qwen2-bias-linear', 'qwen3-yarn']) {
    const { model } = await loadHfModel(join(dir, name));
    const scaling = model.config.ropeScaling;
    assert.ok(scaling, `${name} has a rope scaling`);
    const original = 'originalMaxPositionEmbeddings' in scaling ? scaling.originalMaxPositionEmbeddings : 0;
    assert.ok(Math.max(...manifest.sequences[name].map((s) => s.length)) > original, name);
    const scaled = hfRopeFrequencies(model.dims.hd, model.config.ropeTheta, scaling).invFreq;
    const plain = hfRopeFrequencies(model.dims.hd, model.config.ropeTheta).invFreq;
    assert.ok(
      scaled.some((x, i) => x !== plain[i]),
      `${name}: scaling changes inv_freq`,
    );
  }
});
