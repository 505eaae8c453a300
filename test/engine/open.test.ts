/**
 * engine/open.ts, the one place a model is opened: a nano checkpoint, a Hugging Face directory and a
 * PEFT adapter over its base open to the same model and give the same log-probs as their own loaders;
 * the kernel options reach the model (and the rollout worker's sampler) at the configured thread count;
 * arbor serve refuses an adapter directory as its checkpoint, naming the flags to use.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openModel } from '../../src/engine/open.js';
import { buildSamplingEngine, buildWorkerSampler } from '../../src/engine/build.js';
import { NanoModel } from '../../src/engine/model/model.js';
import { saveCheckpoint } from '../../src/engine/formats/checkpoint.js';
import { CharTokenizer } from '../../src/engine/tokenizer/char.js';
import { LoraAdapter } from '../../src/engine/model/lora.js';
import { savePeftAdapter } from '../../src/engine/formats/peft.js';
import { loadServeEngine } from '../../src/serve/engine.js';
import { ConfigError } from '../../src/core/errors.js';
import { tinyQwen3 } from '../../testkit/serve/hf-fixture.js';
import type { NanoSampler } from '../../src/engine/embedded/sampler.js';

const root = mkdtempSync(join(tmpdir(), 'arbor-open-'));
test.after(() => rmSync(root, { recursive: true, force: true }));

const nanoConfig = {
  vocabSize: new CharTokenizer().vocabSize,
  dModel: 16,
  nLayers: 1,
  nHeads: 2,
  dFF: 32,
  contextLength: 32,
};

test('a nano checkpoint, an HF directory and a PEFT adapter open here, with their tokenizers and adapter', async () => {
  const nanoDir = join(root, 'nano');
  const nano = await NanoModel.create(nanoConfig, { seed: 3 });
  saveCheckpoint(nanoDir, nano, new CharTokenizer());
  const a = await openModel(nanoDir);
  assert.equal(a.kind, 'nano');
  assert.deepEqual(a.model.params.data, nano.params.data);
  assert.equal(a.tokenizer?.decode(a.tokenizer.encode('12+3')), '12+3');

  const hfDir = tinyQwen3(root);
  const b = await openModel(hfDir, { contextLength: 64 });
  assert.equal(b.kind, 'hf');
  assert.equal(b.info?.architecture, 'Qwen3ForCausalLM');
  assert.equal(b.model.config.contextLength, 64);
  assert.ok(b.tokenizer && b.tokenizer.encode('hello world').length > 0);
  assert.equal((await openModel(hfDir, { skipTokenizer: true })).tokenizer, undefined);

  // a PEFT adapter over the HF base: the base opened from base_model_name_or_path, the adapter loaded
  const adapter = new LoraAdapter(b.model, { rank: 2, alpha: 4, targets: ['q_proj', 'v_proj'] });
  adapter.initialise(5);
  for (let i = 0; i < adapter.params.data.length; i++) adapter.params.data[i] += 0.01 * Math.sin(i);
  const peftDir = join(root, 'peft');
  savePeftAdapter(peftDir, adapter, hfDir);
  const c = await openModel(peftDir);
  assert.equal(c.baseDir, hfDir);
  assert.deepEqual(c.adapter?.params.data, adapter.params.data);
  // its sampler samples through the adapter: log-probs equal a sampler given the adapter by hand
  const req = [{ tokens: b.tokenizer!.encode('hello'), n: 1, maxTokens: 4, seed: 1, temperature: 0 }];
  const [viaOpen] = await c.sampler().sample(req);
  const [byHand] = await b.sampler({ adapter }).sample(req);
  assert.deepEqual(viaOpen.completions[0].logprobs, byHand.completions[0].logprobs);
  const [plain] = await b.sampler().sample(req);
  assert.notDeepEqual(plain.completions[0].logprobs, byHand.completions[0].logprobs);

  await assert.rejects(
    loadServeEngine({ checkpoint: peftDir }),
    (e: unknown) => e instanceof ConfigError && /--enable-lora --lora-modules/.test((e as Error).message),
  );
});

test('the kernel options reach every path: openModel, arbor eval (buildSamplingEngine) and the rollout worker', async () => {
  const nanoDir = join(root, 'nano-threads');
  saveCheckpoint(nanoDir, await NanoModel.create(nanoConfig, { seed: 4 }), new CharTokenizer());
  const name = (s: unknown) => (s as NanoSampler).model.kernels.name;
  assert.match((await openModel(nanoDir, { kernels: { threads: 2 } })).model.kernels.name, /-2t$/);
  assert.doesNotMatch((await openModel(nanoDir, { kernels: { threads: 1 } })).model.kernels.name, /-\dt$/);
  assert.equal((await openModel(nanoDir, { kernels: { backend: 'reference' } })).model.kernels.name, 'reference');
  const evalEngine = await buildSamplingEngine({ checkpoint: nanoDir, kernels: { threads: 2 } });
  assert.match(name(evalEngine.sampler), /-2t$/);
  const worker = await buildWorkerSampler({
    model: {
      kind: 'nano',
      config: { ...nanoConfig, tieEmbeddings: false, ropeTheta: 10000, normEps: 1e-5 },
      tokenizer: new CharTokenizer().toJSON(),
    },
    kernels: 'auto',
    threads: 2,
    pageSize: 16,
  });
  assert.match(name(worker.sampler), /-2t$/);
});
