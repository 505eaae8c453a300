/**
 * Off-policy correction as a datum rewrite: the ordinary ppo loss of the embedded trainer on the
 * rewritten datums must equal the decoupled-PPO / TIS objective computed by hand from the current
 * log-probs (value, and parameter gradient by finite differences), masking must not change the other
 * tokens' weights, 'none' is the identity, and the metrics are exact on a hand example.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError, NumericsError } from '../../src/core/errors.js';
import { Rng } from '../../src/core/rng.js';
import { referenceKernels } from '../../src/engine/kernels/reference.js';
import type { NanoConfig } from '../../src/engine/model/config.js';
import { NanoModel } from '../../src/engine/model/model.js';
import { NanoTrainer } from '../../src/engine/embedded/trainer.js';
import type { Datum } from '../../src/engine/types.js';
import {
  applyCorrection,
  correctionSchema,
  logprobGap,
  lossFromConfig,
  type Correction,
} from '../../src/optimize/index.js';

const close = (a: number, b: number, tol = 1e-12) =>
  assert.ok(Math.abs(a - b) <= tol * Math.max(1, Math.abs(b)), `${a} vs ${b}`);
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
const PPO = { kind: 'ppo' as const, clipLow: 0.2, clipHigh: 0.28 };
// target ratios u = π_θ/π_prox (in and out of [0.8, 1.28], away from the edges) and behaviour weights w
const U = [1.1, 1.5, 0.6, 0.95, 1.45, 0.65, 1.05];
const W = [0.5, 1.2, 1.8, 3, 0.8, 7, 2.5, 1.0];

function model(): NanoModel {
  const m = NanoModel.createSync(tiny, referenceKernels, 3);
  // larger weights than the default init so gradients are well above float32 rounding
  for (let i = 0; i < m.params.data.length; i++) m.params.data[i] *= 8;
  return m;
}

function baseData(rng: Rng): Datum[] {
  const lengths = [6, 8, 5];
  const policy = lengths.reduce((s, T) => s + T - 1, 0);
  return lengths.map((T) => {
    const seq = Array.from({ length: T + 1 }, () => rng.int(11));
    return {
      inputTokens: seq.slice(0, -1),
      targetTokens: seq.slice(1),
      weights: Array.from({ length: T }, (_, t) => (t === 0 ? 0 : 1 / policy)),
      advantages: Array.from({ length: T }, (_, t) => (t % 2 ? -1 : 1) * (0.5 + rng.next())),
      samplingLogprobs: new Array<number>(T).fill(0),
    };
  });
}

/** prox := current − log u, behav := prox − log w, per policy token (cycling through U and W). */
function setup(current: number[][], data: Datum[]): { data: Datum[]; prox: number[][]; u: number[][]; w: number[][] } {
  let k = 0;
  const u: number[][] = [];
  const w: number[][] = [];
  const prox: number[][] = [];
  const out = data.map((d, i) => {
    const ui = d.weights.map((x) => (x === 0 ? 1 : U[k % U.length]));
    const wi = d.weights.map((x) => (x === 0 ? 1 : W[k++ % W.length]));
    const pi = current[i].map((c, t) => c - Math.log(ui[t]));
    u.push(ui);
    w.push(wi);
    prox.push(pi);
    return { ...d, samplingLogprobs: pi.map((p, t) => p - Math.log(wi[t])) };
  });
  return { data: out, prox, u, w };
}

/** −Σ weight·M·c·min(u·A, clip(u)·A) with u from `current`, c = w (decoupled, M = [w ≤ max]) or min(w, C). */
function handObjective(data: Datum[], current: number[][], prox: number[][], correction: Correction): number {
  let total = 0;
  data.forEach((d, i) => {
    for (let t = 0; t < d.weights.length; t++) {
      if (d.weights[t] === 0) continue;
      const w = Math.exp(prox[i][t] - d.samplingLogprobs![t]);
      if (correction.kind === 'decoupled' && w > correction.maxWeight) continue;
      const c = correction.kind === 'tis' ? Math.min(w, correction.cap) : w;
      const u = Math.exp(current[i][t] - prox[i][t]);
      const A = d.advantages![t];
      total += d.weights[t] * -c * Math.min(u * A, Math.min(Math.max(u, 1 - PPO.clipLow), 1 + PPO.clipHigh) * A);
    }
  });
  return total;
}

for (const correction of [
  { kind: 'decoupled', maxWeight: 5 },
  { kind: 'tis', cap: 2 },
] as Correction[]) {
  test(`${correction.kind}: ppo on the rewritten datums = the hand objective (value and gradient)`, async () => {
    const m = model();
    const trainer = new NanoTrainer(m);
    const base = baseData(new Rng(4));
    const current = await trainer.logprobs(base);
    const { data, prox, u, w } = setup(current, base);
    // the example covers clipped and unclipped tokens, and (decoupled) a masked and a capped one
    let clipped = 0;
    let unclipped = 0;
    data.forEach((d, i) =>
      d.weights.forEach((x, t) => {
        if (x === 0) return;
        const A = d.advantages![t];
        if ((u[i][t] > 1 + PPO.clipHigh && A > 0) || (u[i][t] < 1 - PPO.clipLow && A < 0)) clipped++;
        else unclipped++;
      }),
    );
    assert.ok(clipped >= 3 && unclipped >= 3, `clipped ${clipped}, unclipped ${unclipped}`);
    assert.ok(w.flat().some((x) => x > 5) && w.flat().some((x) => x > 2 && x <= 5));

    const { datums } = applyCorrection(data, prox, correction);
    const out = await trainer.forwardBackward(datums, PPO);
    const hand = handObjective(data, current, prox, correction);
    close(out.loss, hand, 1e-10);
    // the correction matters: naive ppo against the behaviour log-probs gives a different loss
    const naive = await new NanoTrainer(model()).forwardBackward(data, PPO);
    assert.ok(Math.abs(naive.loss - hand) > 1e-3, `naive ${naive.loss} vs corrected ${hand}`);
    assert.ok(out.metrics.clip_fraction > 0 && out.metrics.clip_fraction < 1);

    // parameter gradient: analytic (trainer) vs central differences of the hand objective
    const analytic = Float64Array.from(m.grads.data);
    const rng = new Rng(7);
    let checked = 0;
    let large = 0;
    for (const spec of m.params.specs) {
      const view = m.params.get(spec.name);
      const offset = m.params.offsets.get(spec.name)!;
      for (let k = 0; k < 4; k++) {
        const i = rng.int(view.length);
        const orig = view[i];
        const h = 1e-3; // small enough that no token's ratio crosses a clip edge
        view[i] = orig + h;
        const lp = handObjective(data, await trainer.logprobs(data), prox, correction);
        view[i] = orig - h;
        const lm = handObjective(data, await trainer.logprobs(data), prox, correction);
        view[i] = orig;
        const numeric = (lp - lm) / (2 * h);
        const a = analytic[offset + i];
        assert.ok(
          Math.abs(a - numeric) <= 2e-4 + 3e-2 * Math.abs(numeric),
          `${correction.kind}: d/d${spec.name}[${i}] analytic ${a} vs numeric ${numeric}`,
        );
        checked++;
        if (Math.abs(numeric) > 1e-2) large++;
      }
    }
    assert.ok(checked > 30 && large > 10, `checked ${checked}, large ${large}`);
  });
}

test('decoupled masking: w > maxWeight zeroes that token only; other weights (the denominator) unchanged; inputs untouched', () => {
  const base = baseData(new Rng(2));
  const current = base.map((d) => d.targetTokens.map(() => -2));
  const { data, prox, w } = setup(current, base);
  const snapshot = structuredClone(data);
  const proxSnapshot = structuredClone(prox);
  const { datums, metrics } = applyCorrection(data, prox, { kind: 'decoupled', maxWeight: 5 });
  assert.deepEqual(data, snapshot);
  assert.deepEqual(prox, proxSnapshot);
  let masked = 0;
  let policy = 0;
  datums.forEach((d, i) => {
    assert.notEqual(d, data[i]);
    assert.deepEqual(d.inputTokens, data[i].inputTokens);
    assert.deepEqual(d.targetTokens, data[i].targetTokens);
    assert.deepEqual(d.samplingLogprobs, prox[i]);
    for (let t = 0; t < d.weights.length; t++) {
      if (data[i].weights[t] === 0) {
        assert.equal(d.weights[t], 0);
        assert.equal(d.advantages![t], data[i].advantages![t]);
        continue;
      }
      policy++;
      if (w[i][t] > 5) {
        masked++;
        assert.equal(d.weights[t], 0);
        assert.equal(d.advantages![t], 0);
      } else {
        assert.equal(d.weights[t], data[i].weights[t]);
        close(d.advantages![t], w[i][t] * data[i].advantages![t], 1e-9);
      }
    }
  });
  assert.ok(masked >= 1);
  close(metrics.is_filtered_fraction, masked / policy);
  // TIS: no masking, weights identical, advantages scaled by min(w, 2)
  const tis = applyCorrection(data, prox, { kind: 'tis', cap: 2 });
  tis.datums.forEach((d, i) => {
    assert.deepEqual(d.weights, data[i].weights);
    d.weights.forEach((x, t) => {
      if (x !== 0) close(d.advantages![t], Math.min(w[i][t], 2) * data[i].advantages![t], 1e-9);
    });
  });
  assert.equal(tis.metrics.is_filtered_fraction, 0);
});

test("'none' returns the same datum objects and only logprob_gap", () => {
  const data = baseData(new Rng(3));
  const prox = data.map((d) => d.targetTokens.map((_, t) => -0.5 * t));
  const { datums, metrics } = applyCorrection(data, prox, { kind: 'none' });
  assert.equal(datums, data);
  datums.forEach((d, i) => assert.equal(d, data[i]));
  assert.deepEqual(Object.keys(metrics), ['logprob_gap']);
  close(metrics.logprob_gap, logprobGap(data, prox));
  assert.ok(metrics.logprob_gap > 0);
});

test('metrics and rewrite are exact on a hand example; non-policy tokens are ignored', () => {
  const ln = Math.log;
  const d: Datum = {
    inputTokens: [1, 2, 3, 4],
    targetTokens: [2, 3, 4, 5],
    weights: [0, 0.5, 0.5, 0.5],
    samplingLogprobs: [-1, -1, -1, -1],
    advantages: [9, 1, -2, 3],
  };
  // w = 2, 0.5, 8 on the policy tokens; the prompt token has a huge gap that must not count
  const prox = [[60, -1 + ln(2), -1 + ln(0.5), -1 + ln(8)]];
  const dec = applyCorrection([d], prox, { kind: 'decoupled', maxWeight: 5 });
  close(dec.metrics.is_weight_mean, 3.5);
  close(dec.metrics.is_weight_max, 8);
  close(dec.metrics.is_filtered_fraction, 1 / 3);
  close(dec.metrics.logprob_gap, (5 * ln(2)) / 3);
  assert.deepEqual(dec.datums[0].weights, [0, 0.5, 0.5, 0]);
  assert.deepEqual(dec.datums[0].samplingLogprobs, prox[0]);
  const a = dec.datums[0].advantages!;
  assert.equal(a[0], 9);
  close(a[1], 2);
  close(a[2], -1);
  assert.equal(a[3], 0);
  const tis = applyCorrection([d], prox, { kind: 'tis', cap: 2 });
  assert.deepEqual(tis.metrics, {
    is_weight_mean: tis.metrics.is_weight_mean,
    is_weight_max: tis.metrics.is_weight_max,
    is_filtered_fraction: 0,
    logprob_gap: tis.metrics.logprob_gap,
  });
  close(tis.metrics.is_weight_mean, 3.5);
  close(tis.metrics.is_weight_max, 8);
  assert.deepEqual(tis.datums[0].weights, d.weights);
  const b = tis.datums[0].advantages!;
  assert.equal(b[0], 9);
  close(b[1], 2);
  close(b[2], -1);
  close(b[3], 6);
  close(logprobGap([d], [[5, -1.5, -0.25, -1]]), (0.5 + 0.75 + 0) / 3);
  // no policy tokens: zeros, not NaN
  const empty = applyCorrection([{ ...d, weights: [0, 0, 0, 0] }], prox, { kind: 'tis', cap: 2 });
  assert.deepEqual(empty.metrics, { is_weight_mean: 0, is_weight_max: 0, is_filtered_fraction: 0, logprob_gap: 0 });
});

test('shape and field errors', () => {
  const d: Datum = {
    inputTokens: [1, 2],
    targetTokens: [2, 3],
    weights: [1, 1],
    samplingLogprobs: [-1, -1],
    advantages: [1, 1],
  };
  assert.throws(() => applyCorrection([d], [[-1]], { kind: 'tis', cap: 2 }), NumericsError);
  assert.throws(() => applyCorrection([d], [], { kind: 'none' }), NumericsError);
  assert.throws(
    () => applyCorrection([{ ...d, advantages: undefined }], [[-1, -1]], { kind: 'decoupled', maxWeight: 5 }),
    NumericsError,
  );
  assert.throws(() => logprobGap([{ ...d, samplingLogprobs: undefined }], [[-1, -1]]), NumericsError);
});

test('config: schema defaults, bounds, and lossFromConfig returns the correction', () => {
  assert.deepEqual(correctionSchema.parse({ kind: 'decoupled' }), { kind: 'decoupled', maxWeight: 5 });
  assert.deepEqual(correctionSchema.parse({ kind: 'tis' }), { kind: 'tis', cap: 2 });
  assert.deepEqual(correctionSchema.parse({ kind: 'none' }), { kind: 'none' });
  assert.equal(correctionSchema.safeParse({ kind: 'decoupled', maxWeight: 1 }).success, false);
  assert.equal(correctionSchema.safeParse({ kind: 'tis', cap: 0 }).success, false);
  assert.equal(correctionSchema.safeParse({ kind: 'tis', maxWeight: 3 }).success, false);
  assert.deepEqual(lossFromConfig({}).correction, { kind: 'none' });
  const r = lossFromConfig({ correction: { kind: 'decoupled', maxWeight: 3 } });
  assert.deepEqual(r.correction, { kind: 'decoupled', maxWeight: 3 });
  assert.deepEqual(r.loss, { kind: 'ppo', clipLow: 0.2, clipHigh: 0.28, dualClip: undefined, truncateAt: undefined });
  assert.throws(() => lossFromConfig({ correction: { kind: 'icepop' } }), ConfigError);
});
