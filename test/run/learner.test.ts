/**
 * The learner's one-update fast path: with one optimiser update per step the proximal policy is the
 * current one, so decoupled PPO and TIS are computed as an importance-sampling loss without the extra
 * forward pass. It must give the same loss and the same parameter gradient as the general path
 * (proximal log-probs from a separate forward, datums rewritten by applyCorrection, ppo loss).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Rng } from '../../src/core/rng.js';
import { referenceKernels } from '../../src/engine/kernels/reference.js';
import type { NanoConfig } from '../../src/engine/model/config.js';
import { NanoModel } from '../../src/engine/model/model.js';
import { NanoTrainer } from '../../src/engine/embedded/trainer.js';
import type { Datum } from '../../src/engine/types.js';
import { applyCorrection, type Correction } from '../../src/optimize/index.js';
import { oneUpdateLoss } from '../../src/run/learner.js';

const tiny: NanoConfig = {
  vocabSize: 11,
  dModel: 8,
  nLayers: 2,
  nHeads: 2,
  dFF: 12,
  contextLength: 16,
  tieEmbeddings: false,
  ropeTheta: 10000,
  normEps: 1e-5,
};

function data(rng: Rng, current?: number[][]): Datum[] {
  return [7, 9, 6].map((T, i) => {
    const seq = Array.from({ length: T + 1 }, () => rng.int(11));
    // behaviour log-probs 0.3..2.5 nats away from the current policy, both ways: weights from 0.08 to 12
    const offset = Array.from({ length: T }, (_, t) => (t % 2 ? 1 : -1) * (0.3 + (2.2 * ((t * 7 + i * 3) % 5)) / 4));
    return {
      inputTokens: seq.slice(0, -1),
      targetTokens: seq.slice(1),
      weights: Array.from({ length: T }, (_, t) => (t === 0 ? 0 : 0.05)),
      advantages: Array.from({ length: T }, (_, t) => (t % 3 ? -0.7 : 1.3)),
      samplingLogprobs: Array.from({ length: T }, (_, t) => (current ? current[i][t] + offset[t] : 0)),
    };
  });
}

for (const correction of [
  { kind: 'decoupled', maxWeight: 5 },
  { kind: 'tis', cap: 2 },
] as Array<Exclude<Correction, { kind: 'none' }>>) {
  test(`one-update fast path equals the general path for ${correction.kind} (loss and every gradient)`, async () => {
    const make = () => {
      const m = NanoModel.createSync(tiny, referenceKernels, 5);
      for (let i = 0; i < m.params.data.length; i++) m.params.data[i] *= 6;
      return m;
    };
    const a = make();
    const b = make();
    const ta = new NanoTrainer(a);
    const tb = new NanoTrainer(b);
    const current = await ta.logprobs(data(new Rng(1)));
    const ds = data(new Rng(1), current);
    // general path
    const prox = await ta.logprobs(ds);
    const corrected = applyCorrection(ds, prox, correction);
    const slow = await ta.forwardBackward(corrected.datums, { kind: 'ppo', clipLow: 0.2, clipHigh: 0.28 });
    // fast path
    const fast = await tb.forwardBackward(ds, oneUpdateLoss(correction));
    assert.ok(Math.abs(slow.loss) > 1e-3, 'a non-trivial loss');
    assert.ok(
      Math.abs(fast.loss - slow.loss) <= 1e-9 * Math.abs(slow.loss) + 1e-12,
      `loss ${fast.loss} vs ${slow.loss}`,
    );
    let maxDiff = 0;
    let maxGrad = 0;
    for (let i = 0; i < a.grads.data.length; i++) {
      maxDiff = Math.max(maxDiff, Math.abs(a.grads.data[i] - b.grads.data[i]));
      maxGrad = Math.max(maxGrad, Math.abs(a.grads.data[i]));
    }
    assert.ok(maxGrad > 1e-4, 'gradients are not all zero');
    assert.ok(maxDiff <= 1e-5 * maxGrad, `max gradient difference ${maxDiff} (max gradient ${maxGrad})`);
    if (correction.kind === 'decoupled')
      assert.ok(corrected.metrics.is_filtered_fraction > 0, 'some tokens exceed maxWeight, so the mask is exercised');
    else
      assert.ok(
        corrected.metrics.is_weight_max > correction.cap,
        'some weights exceed the cap, so truncation is exercised',
      );
  });
}
