/**
 * Unit tests of the embedded engine's pieces that the gradient checks do not cover: policy-loss
 * formulas on hand-computed cases, AdamW against a hand-written update, safetensors
 * and checkpoint round trips (bit-exact) and corrupt-file errors, the character tokenizer, and an SFT
 * run on a tiny synthetic task that must drive the loss near zero.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DataError } from '../../src/core/errors.js';
import { Rng } from '../../src/core/rng.js';
import { referenceKernels } from '../../src/engine/kernels/reference.js';
import { loadKernels } from '../../src/engine/kernels/index.js';
import { AdamW } from '../../src/engine/embedded/adamw.js';
import { loadCheckpoint, saveCheckpoint } from '../../src/engine/formats/checkpoint.js';
import type { NanoConfig } from '../../src/engine/model/config.js';
import { policyTokenLoss } from '../../src/engine/model/losses.js';
import { NanoModel } from '../../src/engine/model/model.js';
import { decodeSafetensors, encodeSafetensors, readSafetensors } from '../../src/engine/formats/safetensors.js';
import { runSft } from '../../src/engine/embedded/sft.js';
import { CharTokenizer } from '../../src/engine/tokenizer/char.js';
import { NanoTrainer } from '../../src/engine/embedded/trainer.js';

const close = (a: number, b: number, tol = 1e-12) => assert.ok(Math.abs(a - b) <= tol, `${a} vs ${b}`);

test('ppo_clip token loss: hand-computed cases (unclipped, clipped high, clipped low, dual clip)', () => {
  const ppo = { kind: 'ppo' as const, clipLow: 0.2, clipHigh: 0.28 };
  const lr = (r: number) => Math.log(r); // log-prob giving ratio r against behaviour 0
  // ratio 1.1, A = 2: inside the clip range → loss −ρA, d/dlogπ = −ρA
  let [loss, grad, clipped] = policyTokenLoss(ppo, lr(1.1), 0, 2);
  close(loss, -2.2, 1e-12);
  close(grad, -2.2, 1e-12);
  assert.equal(clipped, false);
  // ratio 1.5, A = 2: min(3, 1.28·2) = 2.56, clipped, no gradient
  [loss, grad, clipped] = policyTokenLoss(ppo, lr(1.5), 0, 2);
  close(loss, -2.56, 1e-12);
  close(grad, 0);
  assert.equal(clipped, true);
  // ratio 1.5, A = −1: min(−1.5, −1.28) = −1.5, unclipped (pessimistic side), gradient −ρA = 1.5
  [loss, grad, clipped] = policyTokenLoss(ppo, lr(1.5), 0, -1);
  close(loss, 1.5, 1e-12);
  close(grad, 1.5, 1e-12);
  assert.equal(clipped, false);
  // ratio 0.5, A = −1: min(−0.5, −0.8) = −0.8, clipped at 1 − clipLow
  [loss, grad, clipped] = policyTokenLoss(ppo, lr(0.5), 0, -1);
  close(loss, 0.8, 1e-12);
  close(grad, 0);
  assert.equal(clipped, true);
  // dual clip c = 3: ratio 5, A = −1 → objective max(min(−5, −1.28), 3·(−1)) = −3
  [loss, grad, clipped] = policyTokenLoss({ ...ppo, dualClip: 3 }, lr(5), 0, -1);
  close(loss, 3, 1e-12);
  close(grad, 0);
  assert.equal(clipped, true);
  // importance sampling: −ρA, and truncation multiplies by min(ρ, C)/ρ
  [loss, grad] = policyTokenLoss({ kind: 'importance_sampling' }, lr(2), 0, 0.5);
  close(loss, -1, 1e-12);
  close(grad, -1, 1e-12);
  [loss] = policyTokenLoss({ kind: 'importance_sampling', truncateAt: 1.5 }, lr(2), 0, 0.5);
  close(loss, -0.75, 1e-12);
});

test('AdamW: two steps equal a hand-written update (bias correction, decoupled decay, no decay on norms, clipping), reference and WASM kernels', async () => {
  for (const kernels of [referenceKernels, await loadKernels({ backend: 'wasm' })]) {
    const config: NanoConfig = {
      vocabSize: 7,
      dModel: 4,
      nLayers: 1,
      nHeads: 1,
      dFF: 4,
      contextLength: 8,
      tieEmbeddings: true,
      ropeTheta: 10000,
      normEps: 1e-5,
    };
    const model = NanoModel.createSync(config, kernels, 3);
    const arena = model.params;
    const opt = new AdamW(arena, kernels);
    const rng = new Rng(9);
    const x = Float64Array.from(arena.data);
    const m = new Float64Array(x.length);
    const v = new Float64Array(x.length);
    const decays = new Uint8Array(x.length).fill(1);
    for (const spec of arena.specs)
      if (spec.shape.length === 1)
        decays.fill(0, arena.offsets.get(spec.name)!, arena.offsets.get(spec.name)! + spec.shape[0]);
    assert.ok(decays.includes(0), 'the model has 1-D norm gains');
    const p = { learningRate: 0.01, beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, gradClipNorm: 0.5 };
    for (let step = 1; step <= 2; step++) {
      const grads = new Float32Array(x.length).map(() => rng.normal());
      let norm = 0;
      for (const g of grads) norm += g * g;
      norm = Math.sqrt(norm);
      const returned = opt.update(grads, p);
      close(returned, norm, 1e-4);
      const scale = p.gradClipNorm / norm; // norm ≫ 0.5 here
      assert.ok(norm > p.gradClipNorm);
      for (let i = 0; i < x.length; i++) {
        const g = grads[i] * scale;
        m[i] = 0.9 * m[i] + 0.1 * g;
        v[i] = 0.95 * v[i] + 0.05 * g * g;
        const mh = m[i] / (1 - 0.9 ** step);
        const vh = v[i] / (1 - 0.95 ** step);
        x[i] -= p.learningRate * (mh / (Math.sqrt(vh) + p.eps) + (decays[i] ? p.weightDecay * x[i] : 0));
      }
      for (let i = 0; i < x.length; i++) close(arena.data[i], x[i], 1e-6);
    }
  }
});

test('safetensors: encode/decode round trip is bit-exact and keeps metadata', () => {
  const rng = new Rng(1);
  const a = new Float32Array(37).map(() => rng.normal() * 1e3);
  a[0] = -0;
  a[1] = 1e-45; // subnormal
  a[2] = Infinity;
  const b = new Float32Array(6).map((_, i) => i);
  const buf = encodeSafetensors(
    { a: { shape: [37], data: a }, 'layer.0.w': { shape: [2, 3], data: b } },
    { format: 'test' },
  );
  // the header is 8-byte aligned as the format requires
  assert.equal(Number(buf.readBigUInt64LE(0)) % 8, 0);
  const out = decodeSafetensors(buf);
  assert.deepEqual(out.metadata, { format: 'test' });
  assert.deepEqual(out.tensors['layer.0.w'].shape, [2, 3]);
  assert.deepEqual(Buffer.from(out.tensors.a.data.buffer), Buffer.from(a.buffer));
  assert.deepEqual(Array.from(out.tensors['layer.0.w'].data), [0, 1, 2, 3, 4, 5]);
  assert.ok(Object.is(out.tensors.a.data[0], -0));
});

test('safetensors: corrupt files fail with a DataError naming the file (and the tensor)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'arbor-st-'));
  try {
    const good = encodeSafetensors({ w: { shape: [4], data: new Float32Array([1, 2, 3, 4]) } });
    const cases: Array<[string, Buffer, RegExp]> = [
      ['short.safetensors', good.subarray(0, 5), /too short/],
      ['truncated.safetensors', good.subarray(0, good.length - 4), /tensor w offsets/],
      [
        'header.safetensors',
        Buffer.concat([
          good.subarray(0, 8),
          Buffer.from('{not json'.padEnd(Number(good.readBigUInt64LE(0)))),
          good.subarray(8 + Number(good.readBigUInt64LE(0))),
        ]),
        /not valid JSON/,
      ],
      [
        'len.safetensors',
        Buffer.concat([Buffer.from([0xff, 0xff, 0xff, 0, 0, 0, 0, 0]), good.subarray(8)]),
        /header length/,
      ],
    ];
    const bf16 = Buffer.from(good);
    const header = bf16
      .subarray(8, 8 + Number(good.readBigUInt64LE(0)))
      .toString()
      .replace('F32', 'I64');
    bf16.write(header, 8);
    cases.push(['dtype.safetensors', bf16, /dtype I64/]);
    for (const [name, bytes, message] of cases) {
      const file = join(dir, name);
      writeFileSync(file, bytes);
      assert.throws(
        () => readSafetensors(file),
        (e: unknown) => e instanceof DataError && message.test(e.message) && e.message.includes(name),
        name,
      );
    }
    assert.throws(
      () => readSafetensors(join(dir, 'missing.safetensors')),
      (e: unknown) =>
        e instanceof DataError &&
        e.message.includes(join(dir, 'missing.safetensors')) &&
        /cannot read \(ENOENT/.test(e.message),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('checkpoint: save/load round trip is exact (weights, config, tokenizer) and gives identical log-probs', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'arbor-ckpt-'));
  try {
    const tokenizer = new CharTokenizer('0123456789+-=;');
    const config: NanoConfig = {
      vocabSize: tokenizer.vocabSize,
      dModel: 16,
      nLayers: 2,
      nHeads: 2,
      dFF: 32,
      contextLength: 32,
      tieEmbeddings: false,
      ropeTheta: 10000,
      normEps: 1e-5,
    };
    const model = NanoModel.createSync(config, referenceKernels, 5);
    saveCheckpoint(dir, model, tokenizer);
    const loaded = await loadCheckpoint(dir, { kernels: referenceKernels });
    assert.deepEqual(loaded.model.config, model.config);
    assert.deepEqual(
      Buffer.from(
        loaded.model.params.data.buffer,
        loaded.model.params.data.byteOffset,
        loaded.model.params.data.byteLength,
      ),
      Buffer.from(model.params.data.buffer, model.params.data.byteOffset, model.params.data.byteLength),
    );
    assert.deepEqual(loaded.tokenizer.toJSON(), tokenizer.toJSON());
    const datum = { inputTokens: [1, 7, 8, 9], targetTokens: [7, 8, 9, 2], weights: [1, 1, 1, 1] };
    const a = await new NanoTrainer(model).forwardBackward([datum], { kind: 'cross_entropy' });
    const b = await new NanoTrainer(loaded.model).forwardBackward([datum], { kind: 'cross_entropy' });
    assert.deepEqual(b.logprobs, a.logprobs);
    // a checkpoint whose config disagrees with the weights is refused with the tensor named
    const cfg = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...cfg, dModel: 8, dFF: 16 }));
    await assert.rejects(
      loadCheckpoint(dir, { kernels: referenceKernels }),
      (e: unknown) => e instanceof DataError && /has shape/.test(e.message),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('char tokenizer: round trip, specials, unknown characters, JSON validation', () => {
  const tok = new CharTokenizer();
  const text = 'The answer is 42.\n(3*5)+7=22;ans=22';
  assert.equal(tok.decode(tok.encode(text)), text);
  assert.deepEqual([tok.pad, tok.bos, tok.eos, tok.sep, tok.unk], [0, 1, 2, 3, 4]);
  assert.equal(tok.decode([tok.bos, ...tok.encode('ab'), tok.eos]), 'ab');
  assert.equal(tok.decode([tok.bos, ...tok.encode('ab'), tok.eos], true), '<bos>ab<eos>');
  assert.deepEqual(tok.encode('é'), [tok.unk]);
  const again = CharTokenizer.fromJSON(JSON.parse(JSON.stringify(tok.toJSON())));
  assert.deepEqual(again.encode(text), tok.encode(text));
  assert.throws(() => CharTokenizer.fromJSON({ kind: 'bpe' }, 'x/tokenizer.json'), /x\/tokenizer\.json/);
  assert.throws(
    () => CharTokenizer.fromJSON({ kind: 'char', charset: 'ab', specials: ['<pad>'] }),
    (e: unknown) => e instanceof DataError && /^tokenizer\.json: unexpected special tokens \["<pad>"\]/.test(e.message),
  );
});

test('SFT on a tiny synthetic task (reverse three letters) drives the loss near zero', async () => {
  const tokenizer = new CharTokenizer('abcd>');
  const examples = [];
  for (const x of 'abcd')
    for (const y of 'abcd')
      for (const z of 'abcd') examples.push({ prompt: `${x}${y}${z}>`, completion: `${z}${y}${x}` });
  const config: NanoConfig = {
    vocabSize: tokenizer.vocabSize,
    dModel: 32,
    nLayers: 2,
    nHeads: 2,
    dFF: 64,
    contextLength: 16,
    tieEmbeddings: false,
    ropeTheta: 10000,
    normEps: 1e-5,
  };
  const model = NanoModel.createSync(config, await loadKernels(), 1);
  const result = await runSft(model, tokenizer, examples, {
    steps: 300,
    batchSize: 16,
    learningRate: 1e-2,
    heldOutFraction: 0,
    seed: 2,
  });
  const first = result.trainLoss[0];
  const last = result.trainLoss.slice(-10).reduce((a, b) => a + b, 0) / 10;
  assert.ok(first > 1, `initial loss ${first} is near log(vocab)`);
  assert.ok(last < 0.02, `final loss ${last.toFixed(4)} (from ${first.toFixed(3)}) should be near zero`);
});
