/**
 * Issue 17, numerics guarantee: a NaN or infinite loss, gradient or sampled log-prob is detected; the
 * update is skipped and reported (`nonfinite_updates`, `nonfinite_datums`), the weights keep their
 * last good state, the run continues, and repeated failure stops it with a clear error.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DataError, NonFiniteLossError, NumericsError } from '../../src/core/errors.js';
import { arenaTensors, loadArena } from '../../src/engine/formats/checkpoint.js';
import { writeSafetensors } from '../../src/engine/formats/safetensors.js';
import { referenceKernels } from '../../src/engine/kernels/reference.js';
import { NanoModel } from '../../src/engine/model/model.js';
import { NanoTrainer } from '../../src/engine/embedded/trainer.js';
import { parseConfig } from '../../src/run/config.js';
import { train } from '../../src/run/loop.js';
import { RunDir } from '../../src/run/rundir.js';
import { tinyRun } from '../../testkit/reliability/tiny-run.js';

test('a NaN gradient is never applied: weights, moments and the step count stay; the next finite step applies', async () => {
  const m = NanoModel.createSync(
    {
      vocabSize: 11,
      dModel: 8,
      nLayers: 1,
      nHeads: 2,
      dFF: 12,
      contextLength: 16,
      tieEmbeddings: false,
      ropeTheta: 10000,
      normEps: 1e-5,
    },
    referenceKernels,
    1,
  );
  const trainer = new NanoTrainer(m);
  const before = m.params.data.slice();
  m.grads.data.fill(0.01);
  m.grads.data[5] = NaN;
  const r = await trainer.optimStep({ learningRate: 0.1 });
  assert.equal(r.skipped, true);
  assert.ok(Number.isNaN(r.gradNorm));
  assert.equal(r.step, 0, 'no optimiser step counted');
  assert.deepEqual(m.params.data, before, 'weights unchanged');
  assert.equal(
    m.grads.data.findIndex((g) => g !== 0),
    -1,
    'gradients discarded',
  );
  m.grads.data.fill(0.01);
  m.grads.data[3] = Infinity;
  assert.equal((await trainer.optimStep({ learningRate: 0.1 })).skipped, true, 'infinite too');
  m.grads.data.fill(0.01);
  const ok = await trainer.optimStep({ learningRate: 0.1 });
  assert.equal(ok.skipped, undefined);
  assert.equal(ok.step, 1);
  assert.notDeepEqual(m.params.data, before);
});

const root = mkdtempSync(join(tmpdir(), 'arbor-numerics-'));
const config = (name: string, maxFailedSteps = 3) =>
  parseConfig(tinyRun(root, name, { seed: 2, steps: 5, maxFailedSteps }));

/** Make the embedded trainer's loss non-finite on the given (1-based) RL forward/backward calls (SFT's are not counted). */
async function withPoisonedLoss<T>(calls: (n: number) => boolean, body: () => Promise<T>): Promise<T> {
  const original = NanoTrainer.prototype.forwardBackward;
  let n = 0;
  NanoTrainer.prototype.forwardBackward = async function (this: NanoTrainer, ...args: Parameters<typeof original>) {
    if (args[1].kind !== 'cross_entropy' && calls(++n)) throw new NonFiniteLossError(`loss is NaN`);
    return original.apply(this, args);
  };
  try {
    return await body();
  } finally {
    NanoTrainer.prototype.forwardBackward = original;
  }
}

test(
  'a non-finite loss on one step: that update is skipped and reported, the run goes on to the end',
  { timeout: 300_000 },
  async () => {
    // the clean run's updates, in order: poison the first after the first one that has something to apply
    const losses: number[] = [];
    const original = NanoTrainer.prototype.forwardBackward;
    NanoTrainer.prototype.forwardBackward = async function (this: NanoTrainer, ...args: Parameters<typeof original>) {
      const out = await original.apply(this, args);
      if (args[1].kind !== 'cross_entropy') losses.push(out.loss); // RL updates, not the warm start's SFT
      return out;
    };
    try {
      await train(config('clean'), { quiet: true });
    } finally {
      NanoTrainer.prototype.forwardBackward = original;
    }
    const call = losses.findIndex((l, i) => i >= 1 && l !== 0) + 1;
    assert.ok(call >= 2, `the clean run updates after its first step (losses ${losses.join(', ')})`);
    await withPoisonedLoss(
      (n) => n === call,
      () => train(config('one-bad'), { quiet: true }),
    );
    const clean = new RunDir(join(root, 'clean')).readMetrics().filter((m) => m.step > 0);
    const bad = new RunDir(join(root, 'one-bad')).readMetrics().filter((m) => m.step > 0);
    assert.equal(bad.length, 5, 'every step ran');
    const s = bad.findIndex((m) => m.nonfinite_updates === 1);
    assert.ok(s >= 1, 'the poisoned update is after the first step');
    assert.deepEqual(
      bad.map((m) => m.nonfinite_updates),
      bad.map((_, i) => (i === s ? 1 : 0)),
    );
    for (let i = 0; i < s; i++) assert.equal(bad[i].loss, clean[i].loss, `step ${i + 1} as in the clean run`);
    assert.ok((clean[s].grad_norm as number) > 0, `the clean run does update at step ${s + 1} (the test can tell)`);
    assert.equal(bad[s].grad_norm, 0, `nothing applied at step ${s + 1}`);
    // the next step samples from the weights before the skipped update, so it differs from the clean run's
    if (s + 1 < bad.length)
      assert.notDeepEqual(
        [bad[s + 1].tokens_decoded, bad[s + 1].loss],
        [clean[s + 1].tokens_decoded, clean[s + 1].loss],
      );
  },
);

test(
  'repeated non-finite losses stop the run after run.maxFailedSteps consecutive steps, saying why',
  { timeout: 300_000 },
  async () => {
    await assert.rejects(
      withPoisonedLoss(
        (n) => n >= 2,
        () => train(config('all-bad', 2), { quiet: true }),
      ),
      (e: unknown) =>
        e instanceof NumericsError &&
        /stopping: 2 consecutive steps whose updates were all NaN or infinite \(run\.maxFailedSteps 2\)/.test(
          e.message,
        ),
    );
    assert.deepEqual(
      new RunDir(join(root, 'all-bad'))
        .readMetrics()
        .filter((m) => m.step > 0)
        .map((m) => m.nonfinite_updates),
      [0, 1, 1],
    );
  },
);

test('a checkpoint holding NaN is refused naming the tensor, and nothing of it is loaded', async () => {
  const cfg = {
    vocabSize: 11,
    dModel: 8,
    nLayers: 1,
    nHeads: 2,
    dFF: 12,
    contextLength: 16,
    tieEmbeddings: false,
    ropeTheta: 10000,
    normEps: 1e-5,
  };
  const source = NanoModel.createSync(cfg, referenceKernels, 3);
  const dir = mkdtempSync(join(tmpdir(), 'arbor-nan-ckpt-'));
  const w = source.params.get('layers.0.wq');
  w[7] = NaN;
  writeSafetensors(join(dir, 'model.safetensors'), arenaTensors(source.params));
  const target = NanoModel.createSync(cfg, referenceKernels, 9);
  const before = target.params.data.slice();
  assert.throws(
    () => loadArena(target.params, join(dir, 'model.safetensors')),
    (e: unknown) =>
      e instanceof DataError &&
      e.field === 'layers.0.wq' &&
      /model\.safetensors has NaN or infinite weights in 1 tensor\(s\): layers\.0\.wq \(1 of 64\); a checkpoint with NaN/.test(
        e.message,
      ),
  );
  assert.deepEqual(target.params.data, before, 'no tensor was copied');
});

test('loadState checks weights, moments and counters before replacing anything', async () => {
  const cfg = {
    vocabSize: 11,
    dModel: 8,
    nLayers: 1,
    nHeads: 2,
    dFF: 12,
    contextLength: 16,
    tieEmbeddings: false,
    ropeTheta: 10000,
    normEps: 1e-5,
  };
  const dir = mkdtempSync(join(tmpdir(), 'arbor-loadstate-'));
  await new NanoTrainer(NanoModel.createSync(cfg, referenceKernels, 3)).saveState(dir);
  writeSafetensors(join(dir, 'optimizer.safetensors'), { 'm.tok_emb': { shape: [1], data: new Float32Array(1) } });
  const target = new NanoTrainer(NanoModel.createSync(cfg, referenceKernels, 9));
  const model = (target as unknown as { model: NanoModel }).model;
  const before = model.params.data.slice();
  await assert.rejects(
    target.loadState(dir),
    (e: unknown) => e instanceof DataError && /optimizer\.safetensors: m\.tok_emb has 1 values/.test(e.message),
  );
  assert.deepEqual(model.params.data, before, 'the weights were not touched');
});
