/**
 * Gradient checks of the nano model's backward pass (forward.ts, ops/, losses.ts) by central finite
 * differences in float64: the model runs on referenceKernels64, so every arena is a Float64Array and
 * the check can demand |analytic − numeric| ≤ ATOL + RTOL·|numeric| for EVERY entry of every
 * parameter tensor. The WASM kernels are float32 only; their gradients are checked against the
 * float64 ones on identical weights, with float32 tolerances.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { NanoModel } from '../../src/engine/model/model.js';
import { NanoTrainer } from '../../src/engine/embedded/trainer.js';
import { TrainingGraph } from '../../src/engine/model/forward.js';
import { computeLoss } from '../../src/engine/model/losses.js';
import { referenceKernels64 } from '../../src/engine/kernels/reference.js';
import { loadKernels, type Kernels } from '../../src/engine/kernels/index.js';
import { Rng } from '../../src/core/rng.js';
import type { Datum, LossExtras, LossSpec } from '../../src/engine/types.js';
import type { NanoConfig } from '../../src/engine/model/config.js';

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

/** Central-difference step. Truncation error ~H²·f‴/6 ≈ 1e-11; rounding ~2e-16·|loss|/H ≈ 1e-10. */
const H = 1e-5;
/** Float64 tolerance: |analytic − numeric| ≤ ATOL + RTOL·|numeric|. */
const RTOL = 1e-6;
const ATOL = 1e-8;
/** WASM (float32) vs float64 gradients: |g32 − g64| ≤ WASM_ATOL·max|g64| + WASM_RTOL·|g64| (observed ≲ 1e-7·max|g64|). */
const WASM_ATOL = 1e-6;
const WASM_RTOL = 1e-5;

/**
 * The model code is typed for Float32Array arenas but only indexes, views (subarray), copies (set)
 * and fills them, which Float64Array does identically; `float64Model` asserts the arenas are float64.
 */
const kernels64 = referenceKernels64 as unknown as Kernels;

function makeData(rng: Rng, withPolicy: boolean): Datum[] {
  return [5, 3].map((T) => {
    const seq = Array.from({ length: T + 1 }, () => rng.int(11));
    const d: Datum = {
      inputTokens: seq.slice(0, -1),
      targetTokens: seq.slice(1),
      weights: Array.from({ length: T }, (_, t) => (t === 0 ? 0 : 0.5 + rng.next())),
    };
    if (withPolicy) {
      d.samplingLogprobs = Array.from({ length: T }, () => -2.4 + 0.6 * rng.normal());
      d.advantages = Array.from({ length: T }, () => rng.normal());
      d.referenceLogprobs = Array.from({ length: T }, () => -2.4 + 0.3 * rng.normal());
    }
    return d;
  });
}

/** Seeded weights, scaled up from the default init so attention and softmax rows are far from uniform. */
function makeModel(kernels: Kernels, tied: boolean): NanoModel {
  const model = NanoModel.createSync({ ...tiny, tieEmbeddings: tied }, kernels, 3);
  for (const s of model.params.specs) {
    const v = model.params.get(s.name);
    for (let i = 0; i < v.length; i++) v[i] = s.init === 'ones' ? 1 + 0.1 * Math.sin(i) : 8 * v[i];
  }
  return model;
}

function float64Model(tied: boolean): NanoModel {
  const model = makeModel(kernels64, tied);
  assert.ok(model.params.data instanceof Float64Array && model.grads.data instanceof Float64Array, 'float64 arenas');
  return model;
}

/** Analytic gradient of the total loss (a copy of model.grads after one forwardBackward). */
async function analyticGradient(
  model: NanoModel,
  data: Datum[],
  loss: LossSpec,
  extras: LossExtras,
): Promise<Float64Array> {
  model.grads.data.fill(0);
  await new NanoTrainer(model).forwardBackward(data, loss, extras);
  return Float64Array.from(model.grads.data);
}

function lossCase(loss: LossSpec): Datum[] {
  return makeData(new Rng(9), loss.kind !== 'cross_entropy');
}

async function check(name: string, loss: LossSpec, extras: LossExtras, tied: boolean): Promise<void> {
  const model = float64Model(tied);
  const data = lossCase(loss);
  const analytic = await analyticGradient(model, data, loss, extras);
  // the loss alone: forward + computeLoss, never touching model.grads
  const graph = new TrainingGraph(model);
  const lossAt = (): number => {
    graph.forward({ sequences: data.map((d) => d.inputTokens) });
    return computeLoss(graph, data, loss, extras).loss;
  };
  const failures: string[] = [];
  let worst = 0;
  for (const spec of model.params.specs) {
    const view = model.params.get(spec.name);
    const offset = model.params.offsets.get(spec.name)!;
    for (let i = 0; i < view.length; i++) {
      const orig = view[i];
      view[i] = orig + H;
      const lp = lossAt();
      view[i] = orig - H;
      const lm = lossAt();
      view[i] = orig;
      const numeric = (lp - lm) / (2 * H);
      const a = analytic[offset + i];
      const ratio = Math.abs(a - numeric) / (ATOL + RTOL * Math.abs(numeric));
      worst = Math.max(worst, ratio);
      if (ratio > 1) failures.push(`d/d${spec.name}[${i}]: analytic ${a} vs numeric ${numeric}`);
    }
  }
  assert.deepEqual(
    failures.slice(0, 8),
    [],
    `${name}: ${failures.length} of ${model.params.size} gradients off (worst at ${worst.toFixed(2)}× tolerance)`,
  );
}

test('gradient check: cross-entropy, untied head (every parameter entry)', () =>
  check('ce', { kind: 'cross_entropy' }, {}, false));
test('gradient check: cross-entropy, tied head', () => check('ce-tied', { kind: 'cross_entropy' }, {}, true));
test('gradient check: ppo clip + KL + entropy bonus', () =>
  check('ppo', { kind: 'ppo', clipLow: 0.2, clipHigh: 0.28 }, { klCoef: 0.1, entropyCoef: 0.01 }, false));
test('gradient check: importance sampling', () => check('is', { kind: 'importance_sampling' }, {}, true));
test('gradient check: gspo', () => check('gspo', { kind: 'gspo', clipLow: 0.2, clipHigh: 0.2 }, {}, false));

test('WASM kernel gradients match the float64 reference: ppo untied, cross-entropy tied', async () => {
  const wasm = await loadKernels({ backend: 'wasm' });
  const cases: Array<[LossSpec, LossExtras, boolean]> = [
    [{ kind: 'ppo', clipLow: 0.2, clipHigh: 0.28 }, {}, false],
    [{ kind: 'cross_entropy' }, {}, true],
  ];
  for (const [loss, extras, tied] of cases) {
    const model32 = makeModel(wasm, tied);
    const model64 = float64Model(tied);
    model64.params.data.set(model32.params.data); // identical (float32-representable) weights
    const data = lossCase(loss);
    const g32 = await analyticGradient(model32, data, loss, extras);
    const g64 = await analyticGradient(model64, data, loss, extras);
    let scale = 0;
    for (const g of g64) scale = Math.max(scale, Math.abs(g));
    for (let i = 0; i < g64.length; i++) {
      const tolerance = WASM_ATOL * scale + WASM_RTOL * Math.abs(g64[i]);
      assert.ok(
        Math.abs(g32[i] - g64[i]) <= tolerance,
        `${loss.kind}${tied ? ' tied' : ''}: grad[${i}] wasm ${g32[i]} vs float64 ${g64[i]}`,
      );
    }
  }
});
