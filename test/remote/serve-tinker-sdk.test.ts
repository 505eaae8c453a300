/**
 * `arbor serve` against request bodies shaped exactly as the Tinker Python SDK sends them (sessions,
 * heartbeats, client/config, GET get_server_capabilities, seq_id, sampling sessions, asample), the
 * Tinker trainer and sampler against it (training, sampling, resume, a TreePO run with no sampling
 * server but Tinker's), and usage accounting equal in-process and over HTTP.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NanoModel } from '../../src/engine/model/model.js';
import { NanoSampler } from '../../src/engine/embedded/sampler.js';
import { NanoTrainer } from '../../src/engine/embedded/trainer.js';
import { CharTokenizer } from '../../src/engine/tokenizer/char.js';
import { saveCheckpoint } from '../../src/engine/formats/checkpoint.js';
import { OpenAICompletionsSampler } from '../../src/engine/remote/openai-completions.js';
import { SGLangSampler } from '../../src/engine/remote/sglang.js';
import { TinkerSampler } from '../../src/engine/remote/tinker-sampler.js';
import { TinkerSession } from '../../src/engine/remote/tinker-session.js';
import { TinkerTrainer } from '../../src/engine/remote/tinker.js';
import { ArborServer } from '../../src/serve/server.js';
import { parseConfig } from '../../src/run/config.js';
import { train } from '../../src/run/loop.js';
import { RunDir } from '../../src/run/rundir.js';
import type { SampleRequest } from '../../src/engine/types.js';

async function tinyModel(seed = 3): Promise<NanoModel> {
  return NanoModel.create(
    { vocabSize: new CharTokenizer().vocabSize, dModel: 16, nLayers: 1, nHeads: 2, dFF: 32, contextLength: 48 },
    { seed },
  );
}

async function post(
  url: string,
  path: string,
  body: unknown,
): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(url + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': 'tml-dummy' },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

/** POST then retrieve_future until done, exactly as the SDK's _APIFuture polls. */
async function submit(url: string, path: string, body: unknown): Promise<Record<string, unknown>> {
  const reply = await post(url, path, body);
  assert.equal(reply.status, 200, `${path}: ${JSON.stringify(reply.json)}`);
  for (;;) {
    const r = await post(url, '/api/v1/retrieve_future', {
      request_id: reply.json.request_id,
      allow_metadata_only: false,
    });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    if (r.json.type !== 'try_again') return r.json;
  }
}

test('arbor serve accepts the Tinker SDK 0.3–0.24 request bodies: sessions, client/config, capabilities, seq_id, sampling sessions', async () => {
  const model = await tinyModel();
  const server = new ArborServer({
    sampler: new NanoSampler(model),
    trainer: new NanoTrainer(model),
    modelName: 'nano',
    futureWaitMs: 50,
    stateDir: mkdtempSync(join(tmpdir(), 'arbor-serve-')),
  });
  const url = await server.listen();
  try {
    const config = await post(url, '/api/v1/client/config', { sdk_version: '0.24.1' });
    assert.deepEqual(
      [config.status, config.json.proto_write_fwdbwd, config.json.pjwt_auth_enabled],
      [200, false, false],
    );
    const caps = (await (await fetch(`${url}/api/v1/get_server_capabilities`)).json()) as {
      supported_models: Array<{ model_name: string }>;
    };
    assert.deepEqual(caps.supported_models, [{ model_name: 'nano' }]);
    const session = await post(url, '/api/v1/create_session', {
      tags: [],
      user_metadata: { user: 'x' },
      sdk_version: '0.24.1',
      type: 'create_session',
    });
    const sessionId = session.json.session_id as string;
    assert.deepEqual([session.status, session.json.type, typeof sessionId], [200, 'create_session', 'string']);
    assert.deepEqual(
      (await post(url, '/api/v1/session_heartbeat', { session_id: sessionId, type: 'session_heartbeat' })).json,
      { type: 'session_heartbeat' },
    );
    assert.equal(server.tinker.heartbeats(sessionId), 1);
    assert.equal(
      (await post(url, '/api/v1/session_heartbeat', { session_id: 'gone', type: 'session_heartbeat' })).status,
      404,
    );
    assert.equal(
      (
        await post(url, '/api/v1/create_model', {
          session_id: 'gone',
          model_seq_id: 0,
          base_model: 'nano',
          lora_config: { rank: 32 },
          type: 'create_model',
        })
      ).status,
      404,
    );
    const created = await submit(url, '/api/v1/create_model', {
      session_id: sessionId,
      model_seq_id: 0,
      base_model: 'nano',
      lora_config: { rank: 32, train_unembed: true, train_mlp: true, train_attn: true },
      type: 'create_model',
    });
    assert.equal(created.model_id, 'nano');
    const datum = {
      model_input: { chunks: [{ type: 'encoded_text', tokens: [5, 6, 7] }] },
      loss_fn_inputs: {
        target_tokens: { data: [6, 7, 8], dtype: 'int64', shape: [3] },
        weights: { data: [1, 1, 1], dtype: 'float32', shape: [3] },
      },
    };
    const fb = await submit(url, '/api/v1/forward_backward', {
      model_id: 'nano',
      seq_id: 1,
      forward_backward_input: { data: [datum], loss_fn: 'cross_entropy' },
      type: 'forward_backward',
    });
    assert.equal((fb.loss_fn_outputs as unknown[]).length, 1);
    const step = await submit(url, '/api/v1/optim_step', {
      model_id: 'nano',
      seq_id: 2,
      adam_params: { learning_rate: 1e-3, beta1: 0.9, beta2: 0.95, eps: 1e-12, weight_decay: 0, grad_clip_norm: 0 },
      type: 'optim_step',
    });
    assert.equal(typeof (step.metrics as Record<string, number>).grad_norm, 'number');
    const reused = await post(url, '/api/v1/optim_step', {
      model_id: 'nano',
      seq_id: 2,
      adam_params: { learning_rate: 1e-3 },
      type: 'optim_step',
    });
    assert.deepEqual([reused.status, /seq_id/.test(String(reused.json.error))], [409, true]);
    const saved = await submit(url, '/api/v1/save_weights_for_sampler', {
      model_id: 'nano',
      seq_id: 3,
      path: 'step-1',
      type: 'save_weights_for_sampler',
    });
    assert.equal(saved.path, 'tinker://nano/sampler_weights/step-1');
    const sampling = await post(url, '/api/v1/create_sampling_session', {
      session_id: sessionId,
      sampling_session_seq_id: 0,
      model_path: saved.path,
      type: 'create_sampling_session',
    });
    const sample = await submit(url, '/api/v1/asample', {
      sampling_session_id: sampling.json.sampling_session_id,
      seq_id: 0,
      num_samples: 3,
      prompt: { chunks: [{ type: 'encoded_text', tokens: [5, 6, 7] }] },
      sampling_params: { max_tokens: 4, temperature: 1, top_p: 1, top_k: -1, stop: [9], seed: 1 },
      prompt_logprobs: false,
      topk_prompt_logprobs: 0,
      type: 'sample',
    });
    const sequences = sample.sequences as Array<{ tokens: number[]; logprobs: number[]; stop_reason: string }>;
    assert.equal(sequences.length, 3);
    assert.ok(
      sequences.every(
        (s) =>
          s.tokens.length === s.logprobs.length &&
          s.tokens.length >= 1 &&
          s.tokens.length <= 4 &&
          ['stop', 'length'].includes(s.stop_reason),
      ),
    );
    const noMax = await post(url, '/api/v1/asample', {
      sampling_session_id: sampling.json.sampling_session_id,
      seq_id: 1,
      prompt: { chunks: [{ type: 'encoded_text', tokens: [5] }] },
      sampling_params: {},
    });
    assert.deepEqual([noMax.status, /sampling_params.max_tokens/.test(String(noMax.json.error))], [400, true]);
    // SDK ≤ 0.2 traffic (no session, no seq_id) is still accepted
    assert.equal(
      (await submit(url, '/api/v1/create_model', { base_model: 'nano', lora_config: { rank: 32 } })).model_id,
      'nano',
    );
  } finally {
    await server.close();
  }
});

test('Tinker trainer and sampler over arbor serve: one session, model_id, seq_ids, sampling from the saved weights, resume into a fresh model', async () => {
  const model = await tinyModel();
  const server = new ArborServer({
    sampler: new NanoSampler(model),
    trainer: new NanoTrainer(model),
    modelName: 'nano',
    futureWaitMs: 50,
    stateDir: mkdtempSync(join(tmpdir(), 'arbor-serve-')),
  });
  const url = await server.listen();
  try {
    const session = new TinkerSession({ baseUrl: url, pollMinMs: 1, heartbeatMs: 0 });
    const sampler = new TinkerSampler({ session, baseModel: 'nano' });
    const trainer = new TinkerTrainer({
      baseUrl: url,
      session,
      baseModel: 'nano',
      onSamplerWeights: (path, version) => sampler.useWeights(path, version),
    });
    const datum = { inputTokens: [5, 6, 7], targetTokens: [6, 7, 8], weights: [1, 1, 1] };
    const fb = await trainer.forwardBackward([datum], { kind: 'cross_entropy' });
    assert.ok(Number.isFinite(fb.loss) && fb.loss > 0);
    await trainer.optimStep({ learningRate: 1e-3 });
    assert.deepEqual(await trainer.saveForSampler(), {
      weightVersion: 1,
      path: 'tinker://nano/sampler_weights/arbor-v1',
    });
    const [r] = await sampler.sample([{ tokens: [5, 6, 7], n: 2, maxTokens: 3, seed: 4 }]);
    const [direct] = await new NanoSampler(model).sample([{ tokens: [5, 6, 7], n: 2, maxTokens: 3, seed: 4 }]);
    assert.deepEqual(
      r.completions.map((c) => c.tokens),
      direct.completions.map((c) => c.tokens),
      'the served engine sampled what an in-process copy samples',
    );
    assert.equal(r.weightVersion, 1);
    const dir = join(mkdtempSync(join(tmpdir(), 'arbor-tinker-state-')), 'engine');
    await trainer.saveState(dir);
    await trainer.loadState(dir);
    await trainer.optimStep({ learningRate: 1e-3 });
    assert.equal(server.counters['/api/v1/create_session'], 1, 'trainer and sampler share one session');
    assert.equal(server.counters['/api/v1/create_model'], 2, 'resume created a fresh model');
    // the first published weights, then the resumed model's, published again under the same version
    assert.equal(server.counters['/api/v1/create_sampling_session'], 2, 'a sampling session per published weights');
    const [again] = await sampler.sample([{ tokens: [5, 6, 7], n: 1, maxTokens: 2, seed: 4 }]);
    assert.equal(again.weightVersion, 1);
  } finally {
    await server.close();
  }
});

test('usage accounting is defined once: the same engine reports the same usage in-process and over /v1/completions and /generate', async () => {
  const model = await tinyModel(5);
  const requests: SampleRequest[] = [
    { tokens: [5, 6, 7, 8, 9, 10], n: 3, maxTokens: 4, seed: 2 },
    { tokens: [5, 6, 7, 8, 9, 10, 11], n: 3, maxTokens: 4, seed: 3 },
  ];
  const direct = new NanoSampler(model);
  const expected = [];
  for (const r of requests) expected.push((await direct.sample([r]))[0].usage);
  assert.ok(
    expected.some((u) => u.prefixTokensReused > 6),
    'the case has more reused than prompt tokens (n forks of one prefix)',
  );
  const served = new ArborServer({ sampler: new NanoSampler(model), modelName: 'nano' });
  const url = await served.listen();
  try {
    const client = new OpenAICompletionsSampler({ servers: [url], model: 'nano' });
    for (let i = 0; i < requests.length; i++)
      assert.deepEqual((await client.sample([requests[i]]))[0].usage, expected[i], `request ${i} over /v1/completions`);
  } finally {
    await served.close();
  }
  const single = { tokens: [5, 6, 7, 8], n: 1, maxTokens: 3, seed: 1 };
  const [inProcess] = await new NanoSampler(model).sample([single]);
  const sg = new ArborServer({ sampler: new NanoSampler(model), modelName: 'nano' });
  const sgUrl = await sg.listen();
  try {
    const [viaGenerate] = await new SGLangSampler({ servers: [sgUrl] }).sample([single]);
    assert.deepEqual(viaGenerate.usage, inProcess.usage);
  } finally {
    await sg.close();
  }
});

test(
  'arbor train with the Tinker sampler (no sampling server of its own) runs TreePO against a Tinker service',
  { timeout: 120_000 },
  async () => {
    const root = mkdtempSync(join(tmpdir(), 'arbor-tinker-run-'));
    const model = await tinyModel(7);
    const ckpt = join(root, 'ckpt');
    saveCheckpoint(ckpt, model, new CharTokenizer());
    const server = new ArborServer({
      sampler: new NanoSampler(model),
      trainer: new NanoTrainer(model),
      modelName: 'arbor-nano',
      futureWaitMs: 200,
      stateDir: join(root, 'state'),
    });
    const url = await server.listen();
    try {
      await train(
        parseConfig({
          run: {
            name: 'tinker',
            outDir: join(root, 'run'),
            seed: 1,
            steps: 2,
            promptsPerStep: 2,
            evalEvery: 0,
            evalCount: 4,
            checkpointEvery: 0,
            logTreesEvery: 0,
            trainItems: 8,
          },
          task: { name: 'arith', options: { digits: 1, ops: ['+'] } },
          sft: { enabled: false },
          sampling: { maxResponseTokens: 6 },
          generate: { kind: 'treepo', groupSize: 4, segmentLength: 3, branchingFactor: 2, initialDivergence: 2 },
          optimize: { advantage: { kind: 'tree' } },
          trainer: { learningRate: 0.001 },
          engine: {
            kind: 'remote',
            sampler: { api: 'tinker' },
            trainer: { url, baseModel: 'arbor-nano', apiKey: 'tml-secret-in-config' },
            tokenizer: ckpt,
          },
        }),
        { quiet: true },
      );
      const files = readdirSync(join(root, 'run'), { recursive: true, withFileTypes: true }).filter((f) => f.isFile());
      assert.ok(files.length > 3);
      for (const f of files)
        assert.ok(
          !readFileSync(join(f.parentPath ?? f.path, f.name), 'utf8').includes('tml-secret-in-config'),
          `${f.name} holds the API key`,
        );
      assert.match(readFileSync(join(root, 'run', 'config.resolved.yaml'), 'utf8'), /apiKey: null/);
      const metrics = new RunDir(join(root, 'run')).readMetrics().filter((m) => m.step > 0);
      assert.equal(metrics.length, 2);
      assert.ok(
        metrics.every((m) => (m.trajectories as number) === 8),
        JSON.stringify(metrics.map((m) => m.trajectories)),
      );
      assert.ok(
        (server.counters['/api/v1/asample'] ?? 0) > 2 &&
          server.counters['/api/v1/optim_step'] === 2 &&
          server.counters['/v1/completions'] === undefined,
      );
      assert.equal(server.counters['/api/v1/create_session'], 1, 'the Tinker sampler and trainer share one session');
      assert.equal(
        server.counters['/api/v1/create_sampling_session'],
        4,
        'the base model (step-0 eval), then one per published version (start, step 1, step 2)',
      );
    } finally {
      await server.close();
    }
  },
);
