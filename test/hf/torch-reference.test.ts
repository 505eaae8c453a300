/**
 * The PyTorch reference of HF models (testkit/reference/hf_torch.py, written by hand for torch 1.13)
 * against transformers' own float64 numbers: logits, log-probs, loss and every gradient of the Llama
 * (GQA, untied), Qwen3 (q/k norm, head_dim ≠ hidden/heads, tied) and Llama + PEFT LoRA fixtures, in
 * torch float64 and float32 (HF_TOLERANCES). The fixtures have no rope scaling, so Llama 3's rule is
 * checked against the engine's own float64 path on a small random model instead. bench/hf.ts times this
 * reference, so it must be right. Skipped, with the reason, without the fixtures or without torch.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeHfModel } from '../../src/engine/hf/make.js';
import { loadHfModel } from '../../src/engine/hf/model.js';
import type { Kernels } from '../../src/engine/kernels/index.js';
import { referenceKernels64 } from '../../src/engine/kernels/reference.js';
import { compare, hfReferenceDir, type Comparison } from '../../testkit/hf/fixtures.js';
import { decodeLogits, HF_CASES, HF_TOLERANCES } from '../../testkit/hf/parity.js';
import { torchReferenceParity } from '../../testkit/hf/torch-reference.js';
import { runHfTorch } from '../../testkit/hf/torch.js';

const root = hfReferenceDir();
const run = root ? torchReferenceParity(root) : undefined;
const skip = !root ? 'the fixtures ../shared/data/hf-reference are absent' : !run!.available ? run!.reason : undefined;
const show = (c: Comparison) =>
  `${c.name}: max |Δ| ${c.maxAbs.toExponential(2)}, worst ${c.worstRatio.toFixed(3)} of the tolerance` +
  (c.detail ? `; ${c.detail}` : '');

if (skip) {
  test('PyTorch reference of HF models', { skip }, () => {});
} else {
  const { comparisons, samples } = run!;

  test(`PyTorch ${run!.torch} via ${run!.python}: every fixture quantity is compared`, () => {
    // per case and precision: 3 logits + 3 log-probs + loss + gradients + the gradient-set check
    const grads = { 'llama-gqa': 21, 'qwen3-tied': 24, 'llama-gqa+lora': 28 } as const;
    const expected = HF_CASES.reduce((n, c) => n + 2 * (3 + 3 + 1 + grads[c.label] + 1), 0);
    assert.equal(comparisons.length, expected, comparisons.map((c) => c.name).join('\n'));
  });

  for (const c of comparisons) test(c.name, () => assert.ok(c.pass, show(c)));

  test('each comparison can fail: one entry moved by twice its tolerance is rejected', () => {
    // logits, log-probs, loss and a gradient at both precisions
    assert.equal(samples.length, 8, samples.map((s) => s.kind).join(', '));
    for (const s of samples) {
      let scale = 0;
      for (const v of s.ref) scale = Math.max(scale, Math.abs(v));
      const at = s.got.length >> 1;
      const bad = s.got.slice();
      bad[at] = s.ref[at] + 2 * (s.tol.atol * scale + s.tol.rtol * Math.abs(s.ref[at]));
      assert.ok(compare(s.name, s.got, s.ref, s.tol).pass, `${s.name} passes as computed`);
      assert.equal(compare(s.name, bad, s.ref, s.tol).pass, false, `${s.name} must reject the perturbed entry ${at}`);
    }
  });
}

if (!skip) {
  test('llama3 rope scaling: the PyTorch reference and the engine agree in float64, and not without it', async () => {
    const base = mkdtempSync(join(tmpdir(), 'arbor-hf-llama3-'));
    try {
      // head_dim 8, θ 500: wavelengths 2π·θ^(2i/8) = 6.3, 30, 140, 660 against L0/4 = 8 and L0 = 32, so the
      // rule keeps one frequency, smooths one and divides two
      const shape = {
        architecture: 'LlamaForCausalLM',
        hiddenSize: 32,
        layers: 2,
        heads: 4,
        kvHeads: 2,
        intermediateSize: 48,
        vocabSize: 64,
        tieWordEmbeddings: false,
        ropeTheta: 500,
        maxPositionEmbeddings: 128,
        initStd: 0.4,
        seed: 3,
      } as const;
      const llama3 = {
        rope_type: 'llama3',
        factor: 8,
        low_freq_factor: 1,
        high_freq_factor: 4,
        original_max_position_embeddings: 32,
      };
      makeHfModel({ ...shape, out: join(base, 'llama3'), ropeScaling: llama3 });
      makeHfModel({ ...shape, out: join(base, 'plain') });
      const seq = Array.from({ length: 60 }, (_, i) => (i * 17 + 5) % 64);
      const cases = ['llama3', 'plain'].map((d) => ({
        model: join(base, d),
        dtype: 'float64',
        sequences: [seq],
        prompt_lengths: [1],
      }));
      const r = runHfTorch<{ cases: Array<{ logits: number[][] }> }>('reference', { cases });
      assert.ok(r.ok, r.ok ? '' : r.reason);
      const { model } = await loadHfModel(join(base, 'llama3'), { kernels: referenceKernels64 as unknown as Kernels });
      const arbor = decodeLogits(model, seq);
      const tol = HF_TOLERANCES.float64;
      const same = compare('llama3 logits', arbor, r.out.cases[0].logits[0], tol);
      assert.ok(same.pass, show(same));
      const unscaled = compare('llama3 engine vs unscaled reference', arbor, r.out.cases[1].logits[0], tol);
      assert.equal(unscaled.pass, false, 'the scaling must change the logits at these positions');
    } finally {
      rmSync(base, { recursive: true, force: true });
    }
  });
}
