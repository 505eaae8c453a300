/**
 * The embedded engine against PyTorch autograd (testkit/reference/nano_torch.py), number for number:
 * per-token log-probs, every policy loss (cross-entropy, IS with truncateAt/maskAbove, PPO with clips
 * and dual clip, GSPO, k3 KL, entropy bonus) and every parameter's gradient on random models (four
 * shapes, tied and untied heads, ragged batches), in float64 (Arbor's reference kernels vs torch
 * float64: formulas) and float32 (Arbor's WASM kernels vs torch float32: the production path); two
 * AdamW steps vs torch.optim.AdamW; sampler log-probs/entropies under temperature/top-p/top-k vs
 * PyTorch on the same tokens. Tolerances: TOLERANCES in testkit/reference/parity.ts.
 *
 * Skipped, with the reason, where no python3 imports torch (`apt-get install python3-torch`).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  collectParity,
  evaluateParity,
  LOSS_CASES,
  MODEL_CASES,
  type Comparison,
} from '../../testkit/reference/parity.js';

const run = await collectParity();

if (!run.available) {
  test('PyTorch parity', { skip: `PyTorch parity skipped: ${run.reason}` }, () => {});
} else {
  const comparisons = evaluateParity(run);
  const show = (c: Comparison) =>
    `${c.name}: max |Δ| ${c.maxAbs.toExponential(2)}, worst ${c.worstRatio.toFixed(3)} of the tolerance${c.detail ? `; ${c.detail}` : ''}`;

  test(`PyTorch ${run.torch} via ${run.python}: every comparison is present`, () => {
    // 2 precisions × (log-probs + per loss: loss and gradients) + AdamW + 3 sampler checks
    assert.equal(comparisons.length, 2 * (1 + 2 * LOSS_CASES.length) + 1 + 3);
    assert.equal(run.out32.length, MODEL_CASES.length);
    assert.equal(run.out64.length, MODEL_CASES.length);
  });

  for (const c of comparisons) {
    test(c.name, () => assert.ok(c.pass, show(c)));
  }

  test('the batches exercise every branch: ratios below/inside/above the clip range, masked, dual-clipped; top-p sampling not greedy', () => {
    const count = { low: 0, inside: 0, high: 0, masked: 0, dual: 0 };
    run.data.forEach((data, ci) => {
      data.forEach((d, i) => {
        run.arbor.float64[ci].logprobs[i].forEach((lp, t) => {
          if (d.weights[t] === 0) return;
          const r = Math.exp(lp - d.samplingLogprobs![t]);
          if (r < 0.8) count.low++;
          else if (r <= 1.28) count.inside++;
          else count.high++;
          if (r > 2.5) count.masked++;
          if (r > 2 && d.advantages![t] < 0) count.dual++;
        });
      });
    });
    for (const [k, v] of Object.entries(count)) assert.ok(v >= 3, `only ${v} tokens ${k}: ${JSON.stringify(count)}`);
    const truncated = run.sampleArbor.flat().filter((s) => (s.request.topP ?? 1) < 1);
    assert.ok(
      truncated.some((s) => s.logprobs.some((lp) => lp < -0.05)),
      'top-p requests sampled something other than a near-certain token',
    );
  });

  test('each comparison can fail: perturbing one Arbor number by a little more than its tolerance fails exactly that comparison', () => {
    // log-probs, a loss, a gradient entry, an AdamW parameter, a sampler log-prob
    const targets: Array<[string, string, number]> = [
      ['float32:logprobs', 'fp32 WASM: per-token log-probs', 1e-4],
      ['float64:logprobs', 'fp64 reference: per-token log-probs', 1e-9],
      ['float64:loss:gspo', 'fp64 reference: loss gspo', 1e-8],
      ['float32:grad:ppo dual clip + truncateAt:layers.0.wq', 'fp32 WASM: gradients ppo dual clip + truncateAt', 1e-2],
      [
        'float64:grad:cross_entropy + entropy bonus:final_norm',
        'fp64 reference: gradients cross_entropy + entropy bonus',
        1e-6,
      ],
      ['adam:layers.0.w_up', 'fp32 WASM: AdamW (torch.optim.AdamW, 2 steps, decay on matrices only, clipping)', 1e-4],
      ['sampler:logprobs', 'sampler: log-probs under temperature/top-p/top-k vs PyTorch', 1e-3],
    ];
    for (const [what, name, delta] of targets) {
      const tampered = evaluateParity(run, (w, values) => {
        if (w === what && values.length) values[0] += delta * Math.max(1, Math.abs(values[0]));
      });
      const failed = tampered.filter((c) => !c.pass).map((c) => c.name);
      assert.deepEqual(failed, [name], `perturbing ${what}`);
    }
  });
}
