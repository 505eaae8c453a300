import { test } from 'node:test';
import assert from 'node:assert/strict';
import { NanoModel } from '../../src/engine/nano/model.js';
import { NanoTrainer } from '../../src/engine/nano/trainer.js';
import { referenceKernels } from '../../src/engine/kernels/reference.js';
import { loadKernels, type Kernels } from '../../src/engine/kernels/index.js';
import { Rng } from '../../src/core/rng.js';
import type { Datum, LossExtras, LossSpec } from '../../src/engine/types.js';
import type { NanoConfig } from '../../src/engine/nano/config.js';

const tiny: NanoConfig = { vocabSize: 11, dModel: 8, nLayers: 2, nHeads: 2, dFF: 12, contextLength: 16, tieEmbeddings: false, ropeTheta: 10000, normEps: 1e-5 };

function makeData(rng: Rng, withPolicy: boolean): Datum[] {
  return [5, 3].map((T) => {
    const seq = Array.from({ length: T + 1 }, () => rng.int(11));
    const d: Datum = { inputTokens: seq.slice(0, -1), targetTokens: seq.slice(1), weights: Array.from({ length: T }, (_, t) => (t === 0 ? 0 : 0.5 + rng.next())) };
    if (withPolicy) {
      d.samplingLogprobs = Array.from({ length: T }, () => -2.4 + 0.6 * rng.normal());
      d.advantages = Array.from({ length: T }, () => rng.normal());
      d.referenceLogprobs = Array.from({ length: T }, () => -2.4 + 0.3 * rng.normal());
    }
    return d;
  });
}

async function check(name: string, loss: LossSpec, extras: LossExtras, tied: boolean, kernels: Kernels = referenceKernels): Promise<void> {
  const model = NanoModel.createSync({ ...tiny, tieEmbeddings: tied }, kernels, 3);
  // larger weights than the default init so every gradient is well above rounding noise
  for (let i = 0; i < model.params.data.length; i++) model.params.data[i] *= 8;
  for (const s of model.params.specs) if (s.init === 'ones') model.params.get(s.name).fill(1).forEach((_, i, a) => (a[i] = 1 + 0.1 * Math.sin(i)));
  const trainer = new NanoTrainer(model);
  const data = makeData(new Rng(9), loss.kind !== 'cross_entropy');
  await trainer.forwardBackward(data, loss, extras);
  const analytic = Float64Array.from(model.grads.data);
  const lossAt = async () => (await new NanoTrainer(model).run_(data, loss, extras));
  const rng = new Rng(5);
  let worst = 0;
  let checked = 0;
  for (const spec of model.params.specs) {
    const view = model.params.get(spec.name);
    const offset = model.params.offsets.get(spec.name)!;
    for (let k = 0; k < 6; k++) {
      const i = rng.int(view.length);
      const orig = view[i];
      const h = 1e-2;
      view[i] = orig + h;
      const lp = await lossAt();
      view[i] = orig - h;
      const lm = await lossAt();
      view[i] = orig;
      const numeric = (lp - lm) / (2 * h);
      const a = analytic[offset + i];
      const err = Math.abs(a - numeric) / (1e-3 + Math.abs(numeric));
      worst = Math.max(worst, err);
      checked++;
      assert.ok(Math.abs(a - numeric) <= 2e-3 + 3e-2 * Math.abs(numeric), `${name}: d/d${spec.name}[${i}] analytic ${a} vs numeric ${numeric}`);
    }
  }
  assert.ok(checked > 50);
}

// helper: loss only (no backward), via logprobs path
declare module '../../src/engine/nano/trainer.js' {
  interface NanoTrainer {
    run_(data: Datum[], loss: LossSpec, extras: LossExtras): Promise<number>;
  }
}
NanoTrainer.prototype.run_ = async function (this: NanoTrainer, data, loss, extras) {
  const saved = Float32Array.from(this.model.grads.data);
  const r = await this.forwardBackward(data, loss, extras);
  this.model.grads.data.set(saved);
  return r.loss;
};

test('gradient check: cross-entropy, untied head (every parameter tensor)', () => check('ce', { kind: 'cross_entropy' }, {}, false));
test('gradient check: cross-entropy, tied head', () => check('ce-tied', { kind: 'cross_entropy' }, {}, true));
test('gradient check: ppo clip + KL + entropy bonus', () => check('ppo', { kind: 'ppo', clipLow: 0.2, clipHigh: 0.28 }, { klCoef: 0.1, entropyCoef: 0.01 }, false));
test('gradient check: importance sampling', () => check('is', { kind: 'importance_sampling' }, {}, true));
test('gradient check: gspo', () => check('gspo', { kind: 'gspo', clipLow: 0.2, clipHigh: 0.2 }, {}, false));
test('gradient check on the WASM kernels: ppo, untied and tied', async () => {
  const wasm = await loadKernels({ backend: 'wasm' });
  await check('ppo-wasm', { kind: 'ppo', clipLow: 0.2, clipHigh: 0.28 }, {}, false, wasm);
  await check('ce-wasm-tied', { kind: 'cross_entropy' }, {}, true, wasm);
});
