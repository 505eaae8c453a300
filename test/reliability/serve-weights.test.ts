/**
 * Issue 17, defect 1: a failed `/update_weights_from_disk` must not half-overwrite the served model.
 * The whole checkpoint is read and validated (names, shapes, finite values) before one atomic swap;
 * /health reports the version that is served; loads are restricted to the weight roots, and a path
 * outside them and a missing path get the same 400 with the same text (no existence oracle).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NanoModel } from '../../src/engine/model/model.js';
import { NanoSampler } from '../../src/engine/embedded/sampler.js';
import { CharTokenizer } from '../../src/engine/tokenizer/char.js';
import { arenaTensors, saveCheckpoint } from '../../src/engine/formats/checkpoint.js';
import { writeSafetensors } from '../../src/engine/formats/safetensors.js';
import { ArborServer } from '../../src/serve/server.js';
import { NOT_LOADABLE, nanoWeightLoader } from '../../src/serve/weights.js';

const tokenizer = new CharTokenizer();
const shape = { vocabSize: tokenizer.vocabSize, dModel: 16, nLayers: 2, nHeads: 2, dFF: 32, contextLength: 32 };
const post = async (url: string, body: unknown) => {
  const res = await fetch(url, { method: 'POST', body: JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
};

async function setup() {
  const root = mkdtempSync(join(tmpdir(), 'arbor-serve-weights-'));
  const weights = join(root, 'weights');
  const served = await NanoModel.create(shape, { seed: 1 });
  saveCheckpoint(join(weights, 'served'), served, tokenizer);
  const next = await NanoModel.create(shape, { seed: 2 });
  saveCheckpoint(join(weights, 'next'), next, tokenizer);
  // same embedding and attention shapes, another MLP width: the first tensors match, later ones do not
  saveCheckpoint(join(weights, 'wider-mlp'), await NanoModel.create({ ...shape, dFF: 48 }, { seed: 3 }), tokenizer);
  // a NaN in the last layer's tensor only
  const nan = await NanoModel.create(shape, { seed: 4 });
  nan.params.get('layers.1.w_down')[5] = Number.NaN;
  saveCheckpoint(join(weights, 'nan'), nan, tokenizer);
  // a missing tensor, an unknown tensor
  const tensors = arenaTensors((await NanoModel.create(shape, { seed: 5 })).params);
  mkdirSync(join(weights, 'missing-tensor'), { recursive: true });
  writeSafetensors(
    join(weights, 'missing-tensor', 'model.safetensors'),
    Object.fromEntries(Object.entries(tensors).filter(([k]) => k !== 'final_norm')),
  );
  mkdirSync(join(weights, 'extra-tensor'), { recursive: true });
  writeSafetensors(join(weights, 'extra-tensor', 'model.safetensors'), {
    ...tensors,
    'layers.2.wq': { shape: [16, 16], data: new Float32Array(256) },
  });
  mkdirSync(join(weights, 'truncated'), { recursive: true });
  writeFileSync(join(weights, 'truncated', 'model.safetensors'), Buffer.from([1, 2, 3]));
  // outside the root: a valid checkpoint, and a symlink to it from inside the root
  const outside = join(root, 'elsewhere');
  saveCheckpoint(outside, await NanoModel.create(shape, { seed: 6 }), tokenizer);
  symlinkSync(outside, join(weights, 'link-out'));
  const model = (await import('../../src/engine/formats/checkpoint.js')).loadCheckpoint(join(weights, 'served'));
  const { model: m } = await model;
  const server = new ArborServer({
    sampler: new NanoSampler(m),
    modelName: 'm',
    prepareWeights: nanoWeightLoader(m),
    weightsRoots: [weights],
  });
  const url = await server.listen();
  return { root, weights, outside, model: m, next, server, url };
}

const badCheckpointTitle =
  'a checkpoint of another shape, with NaN, a missing or unknown tensor, or a truncated file: 400, ' +
  'and the served model and version are untouched';
test(badCheckpointTitle, async () => {
  const s = await setup();
  try {
    const before = Float32Array.from(s.model.params.data);
    const greedy = { prompt: [1, 5, 6], max_tokens: 8, temperature: 0, return_token_ids: true };
    const sample0 = (await post(`${s.url}/v1/completions`, greedy)).body;
    const cases: Array<[string, RegExp]> = [
      [
        'wider-mlp',
        /^field "model_path": weights\/wider-mlp\/model\.safetensors: tensor layers\.0\.w_gate has shape \[48,16\], the served model has \[32,16\]$/,
      ],
      [
        'nan',
        /^field "model_path": weights\/nan\/model\.safetensors: tensor layers\.1\.w_down has 1 of 512 values NaN or infinite; refusing to load it$/,
      ],
      ['missing-tensor', /^field "model_path": weights\/missing-tensor\/model\.safetensors lacks tensor final_norm$/],
      [
        'extra-tensor',
        /^field "model_path": weights\/extra-tensor\/model\.safetensors has tensor "layers\.2\.wq", which the served model does not have/,
      ],
      ['truncated', /^field "model_path": weights\/truncated\/model\.safetensors: too short to be a safetensors file$/],
    ];
    for (const [name, message] of cases) {
      const r = await post(`${s.url}/update_weights_from_disk`, { model_path: join(s.weights, name) });
      assert.equal(r.status, 400, name);
      assert.match(String(r.body.error).replace(s.root + '/', ''), message, name);
      assert.deepEqual(s.model.params.data, before, `${name}: not one served weight changed`);
      const health = (await (await fetch(`${s.url}/health`)).json()) as { weight_version: number };
      assert.equal(health.weight_version, 0, `${name}: /health still reports version 0`);
      assert.deepEqual(
        (await post(`${s.url}/v1/completions`, greedy)).body.choices,
        sample0.choices,
        `${name}: same greedy completion as before`,
      );
    }
    // a good checkpoint: swapped in whole, version bumped, /health reports it
    const ok = await post(`${s.url}/update_weights_from_disk`, { model_path: join(s.weights, 'next') });
    assert.equal(ok.status, 200);
    assert.equal(ok.body.weight_version, 1);
    assert.deepEqual(s.model.params.data, s.next.params.data);
    assert.equal(((await (await fetch(`${s.url}/health`)).json()) as { weight_version: number }).weight_version, 1);
    const generated = await post(`${s.url}/generate`, { input_ids: [1, 5], sampling_params: { max_new_tokens: 2 } });
    assert.equal((generated.body.meta_info as { weight_version: number }).weight_version, 1);
  } finally {
    await s.server.close();
  }
});

test('paths outside the weight roots, missing paths and symlinks out: the same 400 and the same text; nothing loaded', async () => {
  const s = await setup();
  try {
    const before = Float32Array.from(s.model.params.data);
    const paths = [
      s.outside,
      '/etc',
      '/',
      join(s.weights, 'no-such-dir'),
      join(s.weights, 'link-out'),
      join(s.weights, '..', 'elsewhere'),
      join(s.weights, 'served', '..', '..', 'elsewhere'),
      '/etc/passwd',
      'relative/nowhere',
      '/proc/self/cwd',
      `${s.weights}/served\u0000x`,
    ];
    for (const model_path of paths) {
      const r = await post(`${s.url}/update_weights_from_disk`, { model_path });
      assert.equal(r.status, 400, model_path);
      assert.deepEqual(r.body, { error: NOT_LOADABLE }, model_path);
    }
    assert.equal(
      NOT_LOADABLE,
      'field "model_path": no loadable checkpoint at that path inside the allowed weight roots (--weights-root)',
    );
    assert.deepEqual(s.model.params.data, before);
    for (const bad of [{}, { model_path: 3 }, { model_path: '' }]) {
      const r = await post(`${s.url}/update_weights_from_disk`, bad);
      assert.equal(r.status, 400);
      assert.equal(r.body.error, 'field "model_path" must be a non-empty string');
    }
    // a server configured without roots loads nothing
    const closed = new ArborServer({
      sampler: new NanoSampler(s.model),
      modelName: 'm',
      prepareWeights: nanoWeightLoader(s.model),
    });
    const r = await closed.handleRequest(
      'POST',
      '/update_weights_from_disk',
      JSON.stringify({ model_path: join(s.weights, 'next') }),
    );
    assert.deepEqual(r, { status: 400, body: { error: NOT_LOADABLE } });
    // inside the root it loads
    assert.equal(
      (await post(`${s.url}/update_weights_from_disk`, { model_path: join(s.weights, 'next') })).status,
      200,
    );
  } finally {
    await s.server.close();
  }
});

test('a weight swap waits for a running sliced request: every slice of it comes from one version', async () => {
  const s = await setup();
  try {
    // record the weight version of every sampler call (a request of 100 × 28 tokens is sampled in slices)
    const inner = new NanoSampler(s.model);
    const versions: number[] = [];
    const sampler = Object.assign(Object.create(inner) as NanoSampler, {
      sample: async (...args: Parameters<NanoSampler['sample']>) => {
        const r = await inner.sample(...args);
        versions.push(r[0].weightVersion);
        return r;
      },
    });
    const server = new ArborServer({
      sampler,
      modelName: 'm',
      prepareWeights: nanoWeightLoader(s.model),
      weightsRoots: [s.weights],
      limits: { sliceTokens: 200 },
    });
    const heavy = server.handleRequest(
      'POST',
      '/v1/completions',
      JSON.stringify({ prompt: [1, 2], n: 100, max_tokens: 28, ignore_eos: true }),
    );
    await new Promise((r) => setImmediate(r));
    const swap = server.handleRequest(
      'POST',
      '/update_weights_from_disk',
      JSON.stringify({ model_path: join(s.weights, 'next') }),
    );
    const [h, w] = await Promise.all([heavy, swap]);
    assert.equal(h.status, 200);
    assert.equal(w.status, 200);
    assert.ok(versions.length >= 10, `${versions.length} slices`);
    assert.deepEqual(new Set(versions), new Set([0]), 'the swap waited for the whole request');
    const after = await server.handleRequest(
      'POST',
      '/generate',
      JSON.stringify({ input_ids: [1], sampling_params: { max_new_tokens: 1 } }),
    );
    assert.equal((after.body as { meta_info: { weight_version: number } }).meta_info.weight_version, 1);
  } finally {
    await s.server.close();
  }
});
