/**
 * Issue 25 item 6, the Tinker side of `arbor serve` on a Hugging Face model (specs/hf-models.md §6):
 * create_model with a LoRA config trains a PEFT-initialised adapter over the frozen base (the same
 * numbers as an in-process NanoTrainer), save_weights_for_sampler writes it, the archive route serves it
 * in Tinker's layout (302 → tar with adapter_config.json, adapter_model.safetensors and an empty
 * checkpoint_complete), Arbor's own `fetchTinkerAdapter` downloads and converts it unchanged (it failed
 * with `checkpoint archive not found ... HTTP 404` before), weights_info describes it, a sampling
 * session of its model_path samples with it, and save/load of the trainer state restores it.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadHfModel } from '../../src/engine/hf/model.js';
import { loadPeftAdapter } from '../../src/engine/formats/peft.js';
import { referenceKernels } from '../../src/engine/kernels/reference.js';
import { LoraAdapter, ALL_LORA_MODULES } from '../../src/engine/model/lora.js';
import { NanoModel } from '../../src/engine/model/model.js';
import { NanoSampler } from '../../src/engine/embedded/sampler.js';
import { NanoTrainer } from '../../src/engine/embedded/trainer.js';
import { CharTokenizer } from '../../src/engine/tokenizer/char.js';
import { saveCheckpoint } from '../../src/engine/formats/checkpoint.js';
import { fetchTinkerAdapter, untar } from '../../src/engine/remote/tinker-archive.js';
import { TinkerSampler } from '../../src/engine/remote/tinker-sampler.js';
import { TinkerSession } from '../../src/engine/remote/tinker-session.js';
import { TinkerTrainer } from '../../src/engine/remote/tinker.js';
import { TINKER_LORA_ALPHA } from '../../src/serve/tinker/service.js';
import { post, serveHf, tinyQwen3 } from '../../testkit/serve/hf-fixture.js';

let root: string;
let dir: string;

before(() => {
  root = mkdtempSync(join(tmpdir(), 'arbor-serve-tinker-'));
  dir = tinyQwen3(root);
});
after(() => rmSync(root, { recursive: true, force: true }));

const datum = {
  inputTokens: [16, 17, 10, 18, 19, 28],
  targetTokens: [17, 10, 18, 19, 28, 19],
  weights: [0, 0, 0, 1, 1, 1],
};
const adam = { learningRate: 0.05 };

const loraOverTinkerTitle =
  'LoRA training over Tinker: the adapter trained by arbor serve equals an in-process one; ' +
  'archive, conversion, weights_info, sampling sessions';
test(loraOverTinkerTitle, async () => {
  const stateDir = join(root, 'state');
  const s = await serveHf({ checkpoint: dir, name: 'tiny', stateDir });
  try {
    const session = new TinkerSession({ baseUrl: s.url, pollMinMs: 1, heartbeatMs: 0 });
    const sampler = new TinkerSampler({ session, baseModel: 'tiny' });
    const trainer = new TinkerTrainer({
      baseUrl: s.url,
      session,
      baseModel: 'tiny',
      loraRank: 4,
      onSamplerWeights: (path, version) => sampler.useWeights(path, version),
    });
    const [base] = await sampler.sample([{ tokens: datum.inputTokens, maxTokens: 6, temperature: 0 }]);
    for (let step = 0; step < 2; step++) {
      await trainer.forwardBackward([datum], { kind: 'cross_entropy' });
      await trainer.optimStep(adam);
    }
    const published = await trainer.saveForSampler();
    const run = /^tinker:\/\/(tiny-[0-9a-f]{8})\/sampler_weights\/arbor-v1$/.exec(published.path!)?.[1];
    assert.ok(run, `${published.path}: a model id of its own (Tinker's are unique)`);
    const saved = join(stateDir, 'sampler_weights', run, 'arbor-v1');
    assert.ok(existsSync(join(saved, 'adapter_config.json')) && existsSync(join(saved, 'adapter_model.safetensors')));
    // the same two steps in process: LoRA rank 4, Tinker's alpha, every linear layer, seed 0
    const { model } = await loadHfModel(dir);
    const adapter = new LoraAdapter(model, { rank: 4, alpha: TINKER_LORA_ALPHA, targets: [...ALL_LORA_MODULES] });
    adapter.initialise(0);
    const local = new NanoTrainer(model, { adapter });
    for (let step = 0; step < 2; step++) {
      await local.forwardBackward([datum], { kind: 'cross_entropy' });
      await local.optimStep({ ...adam, beta1: 0.9, beta2: 0.95, eps: 1e-12 });
    }
    // Arbor's client downloads the archive and converts it to PEFT, unchanged
    const converted = await fetchTinkerAdapter(published.path!, {
      baseUrl: s.url,
      cacheDir: join(root, 'adapters'),
      baseModel: dir,
    });
    const served = loadPeftAdapter(converted, model, { kernels: referenceKernels });
    let maxDiff = 0;
    let maxB = 0;
    for (const spec of adapter.params.specs) {
      const a = adapter.params.get(spec.name);
      const b = served.params.get(spec.name);
      for (let i = 0; i < a.length; i++) maxDiff = Math.max(maxDiff, Math.abs(a[i] - b[i]));
      if (spec.name.endsWith('lora_B.weight')) for (const x of b) maxB = Math.max(maxB, Math.abs(x));
    }
    assert.ok(maxB > 1e-3, `B trained away from PEFT's zero init (max |B| ${maxB})`);
    assert.ok(maxDiff < 1e-6, `the served adapter differs from the in-process one by ${maxDiff}`);
    const other = new LoraAdapter(model, adapter.settings, referenceKernels);
    other.initialise(1);
    assert.ok(
      Math.abs(other.params.data[0] - served.params.data[0]) > 1e-6,
      'the comparison tells another adapter apart',
    );
    const config = JSON.parse(readFileSync(join(converted, 'adapter_config.json'), 'utf8')) as Record<string, unknown>;
    assert.deepEqual([config.r, config.lora_alpha, config.base_model_name_or_path], [4, TINKER_LORA_ALPHA, dir]);
    // the base model did not train: the base sampler answers as before
    const [after] = await new TinkerSampler({ session, baseModel: 'tiny' }).sample([
      { tokens: datum.inputTokens, maxTokens: 6, temperature: 0 },
    ]);
    assert.deepEqual(after.completions[0].tokens, base.completions[0].tokens);
    // the sampling session of the saved weights samples with the adapter
    const [tuned] = await sampler.sample([{ tokens: datum.inputTokens, maxTokens: 6, temperature: 0 }]);
    const [direct] = await new NanoSampler(model, { adapter: served }).sample([
      { tokens: datum.inputTokens, maxTokens: 6, temperature: 0 },
    ]);
    assert.deepEqual(tuned.completions[0].tokens, direct.completions[0].tokens);
    assert.ok(tuned.completions[0].logprobs.every((lp, i) => Math.abs(lp - direct.completions[0].logprobs[i]) < 1e-5));
    assert.ok(
      tuned.completions[0].logprobs.some((lp, i) => Math.abs(lp - base.completions[0].logprobs[i]) > 1e-4) ||
        tuned.completions[0].tokens.join() !== base.completions[0].tokens.join(),
      'the adapter changed what is sampled',
    );
    // weights_info
    const info = await post(`${s.url}/api/v1/weights_info`, { tinker_path: published.path });
    assert.deepEqual(info.json, {
      type: 'weights_info',
      base_model: 'tiny',
      is_lora: true,
      lora_rank: 4,
      train_unembed: false,
      train_mlp: true,
      train_attn: true,
    });
    assert.equal(
      (await post(`${s.url}/api/v1/weights_info`, { tinker_path: `tinker://${run}/sampler_weights/nope` })).status,
      404,
    );
    // resume: save the trainer state, load it into a fresh model (create_model + load_weights), publish again
    await trainer.saveState(join(root, 'resume'));
    await trainer.loadState(join(root, 'resume'));
    const again = await trainer.saveForSampler();
    const run2 = /^tinker:\/\/([^/]+)\/sampler_weights\/arbor-v2$/.exec(again.path!)![1];
    assert.notEqual(run2, run, 'the resumed model is a new model');
    const reloaded = loadPeftAdapter(join(stateDir, 'sampler_weights', run2, 'arbor-v2'), model, {
      kernels: referenceKernels,
    });
    assert.deepEqual(reloaded.params.data, served.params.data, `${again.path}: the restored adapter`);
  } finally {
    await s.close();
  }
});

test("the archive route: 302 with Location and Expires, then a tar in Tinker's layout; a new model starts from PEFT init; lora_config checks", async () => {
  const stateDir = join(root, 'state2');
  const s = await serveHf({ checkpoint: dir, name: 'org/tiny model', stateDir });
  const call = async (path: string, body: Record<string, unknown>) => {
    const r = await post(`${s.url}/api/v1/${path}`, body);
    assert.equal(r.status, 200, r.text);
    for (;;) {
      const f = await post(`${s.url}/api/v1/retrieve_future`, { request_id: r.json!.request_id });
      if (f.json!.type !== 'try_again') return f.json!;
    }
  };
  try {
    const created = await call('create_model', {
      base_model: 'org/tiny model',
      lora_config: { rank: 2, train_mlp: false, seed: 5 },
    });
    let id = created.model_id as string;
    assert.match(id, /^org-tiny-model-[0-9a-f]{8}$/, 'the model id: the name made path-safe and a unique suffix');
    const d = {
      model_input: { chunks: [{ tokens: datum.inputTokens }] },
      loss_fn_inputs: { target_tokens: { data: datum.targetTokens }, weights: { data: datum.weights } },
    };
    const logprobs = async () =>
      (
        (await call('forward', { model_id: id, forward_input: { data: [d] } })).loss_fn_outputs as Array<{
          logprobs: { data: number[] };
        }>
      )[0].logprobs.data;
    const fresh = await logprobs();
    await call('forward_backward', { model_id: id, forward_backward_input: { loss_fn: 'cross_entropy', data: [d] } });
    await call('optim_step', { model_id: id, adam_params: { learning_rate: 0.05 } });
    assert.ok(
      (await logprobs()).some((x, i) => Math.abs(x - fresh[i]) > 1e-4),
      'the adapter trained',
    );
    const saved = await call('save_weights_for_sampler', { model_id: id, path: 'step1' });
    assert.equal(saved.path, `tinker://${id}/sampler_weights/step1`);
    const route = `${s.url}/api/v1/training_runs/${id}/checkpoints/sampler_weights/step1/archive`;
    const redirect = await fetch(route, { redirect: 'manual', headers: { accept: 'application/json' } });
    assert.equal(redirect.status, 302);
    assert.ok(Date.parse(redirect.headers.get('expires')!) > Date.now(), 'Expires is an HTTP date in the future');
    const tar = Buffer.from(await (await fetch(new URL(redirect.headers.get('location')!, route))).arrayBuffer());
    const files = untar(tar);
    assert.deepEqual([...files.keys()], ['adapter_config.json', 'adapter_model.safetensors', 'checkpoint_complete']);
    assert.equal(files.get('checkpoint_complete')!.length, 0);
    assert.deepEqual(JSON.parse(files.get('adapter_config.json')!.toString()).target_modules, [
      'k_proj',
      'o_proj',
      'q_proj',
      'v_proj',
    ]);
    assert.equal((await fetch(route.replace('step1', 'nope'), { redirect: 'manual' })).status, 404);
    // a second create_model of the same shape: a fresh PEFT-initialised adapter (B = 0: the base's log-probs)
    const first = id;
    id = (
      await call('create_model', { base_model: 'org/tiny model', lora_config: { rank: 2, train_mlp: false, seed: 5 } })
    ).model_id as string;
    assert.notEqual(id, first);
    assert.deepEqual(await logprobs(), fresh);
    assert.equal(
      (await fetch(route, { redirect: 'manual' })).status,
      302,
      "an earlier model's sampler weights stay downloadable",
    );
    const bad: Array<[Record<string, unknown>, string]> = [
      [{ lora_config: { rank: 0 } }, 'field "lora_config.rank" must be an integer in [1, 64], got 0'],
      [{ rank: 65 }, 'field "rank" must be an integer in [1, 64], got 65'],
      [
        { lora_config: { rank: 2, train_attn: false, train_mlp: false } },
        'field "lora_config": train_attn and train_mlp are both false (the unembedding LoRA alone is not supported)',
      ],
      [{ lora_config: 'big' }, 'field "lora_config" must be an object'],
    ];
    for (const [body, error] of bad)
      assert.deepEqual((await post(`${s.url}/api/v1/create_model`, body)).json, { error }, JSON.stringify(body));
    // without lora_config the whole model trains (the base a LoRA trainer had frozen thaws)
    id = (await call('create_model', { base_model: 'org/tiny model' })).model_id as string;
    await call('forward_backward', { model_id: id, forward_backward_input: { loss_fn: 'cross_entropy', data: [d] } });
    await call('optim_step', { model_id: id, adam_params: { learning_rate: 0.01 } });
    const model = (s.server.options.sampler as NanoSampler).model;
    assert.ok(model.hasGrads && !model.frozen, 'the base weights have gradients');
    assert.ok(
      (await logprobs()).some((x, i) => Math.abs(x - fresh[i]) > 1e-4),
      'the base model trained',
    );
    const archive = await post(`${s.url}/api/v1/save_weights_for_sampler`, { model_id: id, path: 'full' });
    assert.equal(archive.status, 200);
  } finally {
    await s.close();
  }
});

test('a nano server keeps full fine-tuning: no archive (404 saying why), sampling sessions use the current weights', async () => {
  const { ArborServer } = await import('../../src/serve/server.js');
  const tokenizer = new CharTokenizer();
  const model = await NanoModel.create(
    { vocabSize: tokenizer.vocabSize, dModel: 16, nLayers: 1, nHeads: 2, dFF: 32, contextLength: 32 },
    { seed: 1 },
  );
  saveCheckpoint(join(root, 'nano'), model, tokenizer);
  const server = new ArborServer({
    sampler: new NanoSampler(model),
    trainer: new NanoTrainer(model),
    modelName: 'nano',
    stateDir: join(root, 'nano-state'),
  });
  const url = await server.listen();
  try {
    const session = new TinkerSession({ baseUrl: url, pollMinMs: 1, heartbeatMs: 0 });
    const trainer = new TinkerTrainer({ baseUrl: url, session, baseModel: 'nano', loraRank: 8 });
    await trainer.forwardBackward([{ inputTokens: [5, 6], targetTokens: [6, 7], weights: [1, 1] }], {
      kind: 'cross_entropy',
    });
    await trainer.optimStep({ learningRate: 1e-3 });
    const { path } = await trainer.saveForSampler();
    assert.ok(model.hasGrads, 'the whole model trained (lora_config is ignored for nano)');
    const r = await fetch(`${url}/api/v1/training_runs/nano/checkpoints/sampler_weights/arbor-v1/archive`, {
      redirect: 'manual',
    });
    assert.equal(r.status, 404);
    assert.match(
      ((await r.json()) as { error: string }).error,
      /this server trains the whole nano model; only LoRA sampler weights have archives/,
    );
    await assert.rejects(
      fetchTinkerAdapter(path!, { baseUrl: url, cacheDir: join(root, 'nano-adapters'), baseModel: 'nano' }),
      /checkpoint archive not found/,
    );
    assert.deepEqual((await post(`${url}/api/v1/weights_info`, { tinker_path: path })).json, {
      type: 'weights_info',
      base_model: 'nano',
      is_lora: false,
    });
  } finally {
    await server.close();
  }
});
