/**
 * Hugging Face models on the embedded engine against transformers 5.17's own numbers
 * (../shared/data/hf-reference, testkit/hf/parity.ts): logits, log-probs, loss and every gradient of a
 * Llama (GQA, untied), a Qwen3 (q/k norm, head_dim ≠ C/NH, tied) and a PEFT LoRA on the Llama, in
 * float64 and float32, within HF_TOLERANCES. Each kind of comparison is also shown to fail on a
 * perturbed input (a 10⁻³ relative change of one entry, or a wrong rotary base). Skipped, saying why,
 * without the shared data.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { hfReferenceDir, compare } from '../../testkit/hf/fixtures.js';
import { HF_CASES, decodeLogits, hfParity, parityCase } from '../../testkit/hf/parity.js';
import { loadHfModel } from '../../src/engine/hf/model.js';
import { referenceKernels64 } from '../../src/engine/kernels/reference.js';
import type { Kernels } from '../../src/engine/kernels/index.js';
import { readReference } from '../../testkit/hf/fixtures.js';

const root = hfReferenceDir();

if (!root) {
  test(
    'HF parity',
    { skip: 'HF parity skipped: ../shared/data/hf-reference not found (set ARBOR_DATA_DIR)' },
    () => {},
  );
} else {
  const run = await hfParity(root);

  test('every fixture quantity is compared: 3 cases × 2 precisions × (3 logits + 3 log-probs + loss + gradients)', () => {
    // llama 2 layers × 9 tensors + embed + norm + lm_head = 21; qwen3 2 × 11 + embed + norm = 24; LoRA 2 × 7 × 2 = 28
    assert.equal(run.comparisons.length, 2 * (7 * 3 + 21 + 24 + 28));
  });

  for (const c of run.comparisons) {
    test(c.name, () =>
      assert.ok(
        c.pass,
        `${c.name}: max |Δ| ${c.maxAbs.toExponential(2)}, worst ${c.worstRatio.toFixed(3)} of the tolerance; ${c.detail ?? ''}`,
      ),
    );
  }

  test('each kind of comparison fails on a perturbed input (a relative change of 1e-3 in one entry)', () => {
    const kinds = new Set<string>();
    for (const s of run.samples) {
      const got = Float64Array.from(s.got);
      let at = 0;
      for (let i = 0; i < got.length; i++) if (Math.abs(s.ref[i]) > Math.abs(s.ref[at])) at = i;
      got[at] = s.ref[at] * (1 + 1e-3);
      assert.equal(compare(s.name, got, s.ref, s.tol).pass, false, `${s.name}: a perturbed entry passes`);
      kinds.add(s.kind);
    }
    assert.deepEqual([...kinds].sort(), ['grad', 'logits', 'logprobs', 'loss']);
  });

  test('a wrong rotary base (rope_theta 1e4 instead of 5e5) fails the logits comparison', async () => {
    const dir = join(root, 'llama-gqa');
    const { model, info } = await loadHfModel(dir, { kernels: referenceKernels64 as unknown as Kernels });
    const ref = readReference(dir);
    const good = compare('good', decodeLogits(model, ref.sequences[1]), ref.tensors['logits.1'], {
      atol: 1e-5,
      rtol: 1e-5,
    });
    assert.ok(good.pass, 'the unchanged model passes');
    // the same weights with another rotary base: only the positions change
    const { NanoModel } = await import('../../src/engine/model/model.js');
    const wrong = NanoModel.createEmpty({ ...info.config, ropeTheta: 10_000 }, model.kernels);
    wrong.params.data.set(model.params.data);
    const bad = compare('bad', decodeLogits(wrong, ref.sequences[1]), ref.tensors['logits.1'], {
      atol: 1e-5,
      rtol: 1e-5,
    });
    assert.equal(bad.pass, false);
  });

  test('the transformers-5 config.json (rope_parameters, layer_types) loads the same model', async () => {
    const { readHfConfig, parseHfConfig } = await import('../../src/engine/formats/hf-config.js');
    const { readFileSync } = await import('node:fs');
    for (const c of HF_CASES.slice(0, 2)) {
      const dir = join(root, c.dir);
      const hub = readHfConfig(dir).config;
      const file = join(dir, 'config.as-saved-by-transformers.json');
      const v5 = parseHfConfig(JSON.parse(readFileSync(file, 'utf8')), file, dir).config;
      assert.deepEqual(v5, hub, c.dir);
    }
  });

  test('parityCase is deterministic (the same comparisons twice)', async () => {
    const again = await parityCase(root, HF_CASES[1], 'float32');
    const first = run.comparisons.filter((c) => c.name.startsWith('qwen3-tied float32'));
    assert.deepEqual(
      again.comparisons.map((c) => c.maxAbs),
      first.map((c) => c.maxAbs),
    );
  });
}
