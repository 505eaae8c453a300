/**
 * The Tinker trainer, the Tinker sampler and the tinker:// adapter download against fake hosted-Tinker
 * and SkyRL-tx servers that answer with replies recorded in their formats (fixtures/tinker.json,
 * fixtures/skyrl-tx.json): sessions before create_model, model_id from the future, seq_ids, X-API-Key,
 * 408 long polls, failed futures, SkyRL metric names, load_weights only as a fresh model's first request.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { gzipSync } from 'node:zlib';
import YAML from 'yaml';
import { EngineCallError } from '../../src/core/errors.js';
import { engineSchema } from '../../src/engine/config.js';
import { buildRemoteTrainer } from '../../src/engine/remote/build.js';
import { JsonClient } from '../../src/engine/remote/http.js';
import { OpenAICompletionsSampler } from '../../src/engine/remote/openai-completions.js';
import { Secret, tinkerApiKey } from '../../src/core/secret.js';
import { fetchTinkerAdapter, readAdapterDir, writeSafetensors } from '../../src/engine/remote/tinker-archive.js';
import { TinkerSampler } from '../../src/engine/remote/tinker-sampler.js';
import { TinkerSession } from '../../src/engine/remote/tinker-session.js';
import { TinkerTrainer, parseForwardOutput } from '../../src/engine/remote/tinker.js';
import { weightSyncFromSpec } from '../../src/engine/remote/weight-sync.js';
import type { Datum } from '../../src/engine/types.js';
import { fixtures, startFake, type Handler, type Reply } from './fake-server.js';

const skyrl = fixtures('skyrl-tx');
const hosted = fixtures('tinker');
const fast = { pollMinMs: 1, pollMaxMs: 5, heartbeatMs: 0 };
const data: Datum[] = [
  {
    inputTokens: [1, 2, 3],
    targetTokens: [2, 3, 4],
    weights: [1, 1, 1],
    samplingLogprobs: [-0.5, -0.5, -0.5],
    advantages: [1, 1, 1],
  },
  { inputTokens: [1, 2], targetTokens: [2, 5], weights: [1, 1], samplingLogprobs: [-0.5, -0.5], advantages: [-1, -1] },
];

/**
 * A SkyRL tx fake: create_model needs a known session (422 without session_id, 404 unknown), POSTs
 * answer FutureResponse, load_weights is refused after any other request of the model, and each
 * future's result is the fixture for its operation.
 */
function skyrlRoutes(options: { retrieve?: Handler } = {}): Record<string, Handler> {
  const results = new Map<string, Reply>();
  const priorRequests = new Map<string, number>();
  let ids = 0;
  let models = 0;
  const future = (result: Reply): Reply => {
    const id = String(++ids);
    results.set(id, result);
    return { status: 200, json: { future_id: id, status: 'pending', request_id: id } };
  };
  const op =
    (result: Reply): Handler =>
    (r) => {
      priorRequests.set(String(r.body.model_id), (priorRequests.get(String(r.body.model_id)) ?? 0) + 1);
      return future(result);
    };
  return {
    '/api/v1/create_session': () => skyrl.create_session,
    '/api/v1/create_model': (r) => {
      if (r.body.session_id === undefined) return skyrl.create_model_without_session_id;
      if (r.body.session_id !== 'session_1a2b3c4d') return skyrl.create_model_unknown_session;
      const modelId = `model_${++models}`;
      const reply = future({ status: 200, json: { ...(skyrl.create_model_result.json as object), model_id: modelId } });
      return {
        status: 200,
        json: {
          ...(skyrl.create_model.json as object),
          model_id: modelId,
          request_id: (reply.json as { request_id: string }).request_id,
        },
      };
    },
    '/api/v1/forward_backward': op(skyrl.forward_backward_result),
    '/api/v1/forward': op(skyrl.forward_backward_result),
    '/api/v1/optim_step': op(skyrl.optim_step_result),
    '/api/v1/save_weights_for_sampler': op(skyrl.save_weights_for_sampler_result),
    '/api/v1/save_weights': op(skyrl.save_weights_result),
    '/api/v1/load_weights': (r) =>
      (priorRequests.get(String(r.body.model_id)) ?? 0) > 0
        ? skyrl.load_weights_not_first
        : op(skyrl.load_weights_result)(r, 0),
    '/api/v1/retrieve_future':
      options.retrieve ??
      ((r) => results.get(String(r.body.request_id)) ?? { status: 404, json: { detail: 'Future not found' } }),
  };
}

test('SkyRL tx refuses a session-less create_model (422, 404); the trainer creates a session and sends session_id + model_seq_id', async () => {
  const server = await startFake(skyrlRoutes());
  try {
    const old = new JsonClient({ baseUrl: server.url, retry: { maxAttempts: 1 } });
    await assert.rejects(
      old.call('/api/v1/create_model', { base_model: 'Qwen/Qwen3-4B-Instruct-2507', lora_config: { rank: 32 } }),
      (e: unknown) => e instanceof EngineCallError && e.details.status === 422,
    );
    await assert.rejects(
      old.call('/api/v1/create_model', { session_id: 'nope', base_model: 'b', lora_config: { rank: 32 } }),
      (e: unknown) => e instanceof EngineCallError && e.details.status === 404 && /Session not found/.test(e.message),
    );
    const trainer = new TinkerTrainer({
      baseUrl: server.url,
      baseModel: 'Qwen/Qwen3-4B-Instruct-2507',
      loraRank: 16,
      ...fast,
    });
    assert.equal(await trainer.ensureModel(), 'model_1');
    const [session] = server.to('/api/v1/create_session');
    assert.deepEqual(session.body, {
      tags: ['arbor'],
      user_metadata: {},
      sdk_version: '0.24.1',
      type: 'create_session',
    });
    const created = server.to('/api/v1/create_model').at(-1)!;
    assert.deepEqual(created.body, {
      session_id: 'session_1a2b3c4d',
      model_seq_id: 0,
      base_model: 'Qwen/Qwen3-4B-Instruct-2507',
      lora_config: { rank: 16 },
      type: 'create_model',
    });
    assert.ok(server.to('/api/v1/retrieve_future').length >= 1, 'create_model waited for its future');
  } finally {
    await server.close();
  }
});

const skyrlRepliesTitle =
  'SkyRL tx replies: loss from elementwise_loss when metrics are empty, grad norm from skyrl.ai/grad_norm, ' +
  'unsupported grad_clip_norm warned once';
test(skyrlRepliesTitle, async () => {
  const server = await startFake(skyrlRoutes());
  const warnings: string[] = [];
  try {
    const trainer = new TinkerTrainer({ baseUrl: server.url, baseModel: 'b', warn: (w) => warnings.push(w), ...fast });
    const fb = await trainer.forwardBackward(data, { kind: 'importance_sampling' });
    assert.equal(fb.loss, 0.5 + 0.25 + 0 + 1 + 0.125);
    assert.deepEqual(fb.logprobs, [
      [-0.5, -0.25, -1.5],
      [-1.0, -0.125],
    ]);
    const step = await trainer.optimStep({ learningRate: 1e-5, gradClipNorm: 1 });
    await trainer.optimStep({ learningRate: 1e-5, gradClipNorm: 1 });
    assert.deepEqual(step, { gradNorm: 0.8125, step: 1 });
    assert.equal(warnings.length, 1);
    assert.match(warnings[0], /gradClipNorm 1 is not supported by SkyRL tx/);
    const saved = await trainer.saveForSampler();
    assert.deepEqual(saved, { weightVersion: 1, path: 'tinker://model_5e6f7a8b/arbor-v1' });
    const seqs = server.requests
      .filter((r) => r.body.seq_id !== undefined)
      .map((r) => [r.path.slice('/api/v1/'.length), r.body.seq_id]);
    assert.deepEqual(seqs, [
      ['forward_backward', 1],
      ['optim_step', 2],
      ['optim_step', 3],
      ['save_weights_for_sampler', 4],
    ]);
    assert.equal(server.to('/api/v1/optim_step')[0].body.type, 'optim_step');
  } finally {
    await server.close();
  }
});

test('an unsupported setting reaches the run log as a warning line (engine built from config)', async () => {
  const server = await startFake(skyrlRoutes());
  const log: string[] = [];
  try {
    const engine = engineSchema.parse({
      kind: 'remote',
      sampler: { api: 'openai', servers: ['http://127.0.0.1:9'], model: 'b' },
      trainer: { url: server.url, baseModel: 'b' },
    });
    const trainer = buildRemoteTrainer(
      engine,
      new OpenAICompletionsSampler({ servers: ['http://127.0.0.1:9'], model: 'b' }),
      (line) => log.push(line),
    );
    await trainer.optimStep({ learningRate: 1e-5, gradClipNorm: 0.5 });
    trainer.session.close();
    assert.deepEqual(log, [
      'warning: tinker: optimizer.gradClipNorm 0.5 is not supported by SkyRL tx (adam_params.grad_clip_norm is ignored); gradients are not clipped',
    ]);
  } finally {
    await server.close();
  }
});

test('retrieve_future: a 408 after a long poll means "poll again", not a failure after retries', async () => {
  let polls = 0;
  const server = await startFake(
    skyrlRoutes({
      retrieve: (r) =>
        ++polls <= 3
          ? { ...skyrl.retrieve_future_timeout, delayMs: 150 }
          : {
              status: 200,
              json: { model_id: 'model_1', base_model: 'b' },
              headers: { 'x-request': String(r.body.request_id) },
            },
    }),
  );
  try {
    // the client's ordinary timeout (100 ms) is shorter than the server's hold (150 ms): polls use their own
    const trainer = new TinkerTrainer({
      baseUrl: server.url,
      baseModel: 'b',
      retry: { timeoutMs: 100, maxAttempts: 2, baseDelayMs: 1 },
      pollTimeoutMs: 2000,
      ...fast,
    });
    assert.equal(await trainer.ensureModel(), 'model_1');
    assert.equal(polls, 4);
    assert.equal(trainer.client.stats.retries, 0, 'no 408 was retried as an error');
    assert.deepEqual(server.to('/api/v1/retrieve_future')[0].body, { request_id: '1', allow_metadata_only: false });
  } finally {
    await server.close();
  }
});

test('retrieve_future: a poll that times out on the client side is asked again, not retried to failure', async () => {
  let polls = 0;
  const server = await startFake(
    skyrlRoutes({
      retrieve: () =>
        ++polls <= 2
          ? { status: 200, json: { model_id: 'late' }, delayMs: 400 }
          : { status: 200, json: { model_id: 'model_1' } },
    }),
  );
  try {
    const trainer = new TinkerTrainer({
      baseUrl: server.url,
      baseModel: 'b',
      retry: { maxAttempts: 2, baseDelayMs: 1 },
      pollTimeoutMs: 100,
      ...fast,
    });
    assert.equal(await trainer.ensureModel(), 'model_1');
    assert.equal(polls, 3);
    assert.equal(trainer.client.stats.retries, 0);
  } finally {
    await server.close();
  }
});

test('retrieve_future 410 (future lost): the original request is sent again', async () => {
  let polls = 0;
  const routes = skyrlRoutes();
  const server = await startFake({
    ...routes,
    '/api/v1/retrieve_future': (r, hits) =>
      ++polls === 2 ? { status: 410, json: { detail: 'Future expired' } } : routes['/api/v1/retrieve_future'](r, hits),
  });
  try {
    const trainer = new TinkerTrainer({ baseUrl: server.url, baseModel: 'b', ...fast });
    const fb = await trainer.forwardBackward(data, { kind: 'importance_sampling' });
    assert.equal(fb.loss, 1.875);
    assert.equal(server.to('/api/v1/forward_backward').length, 2);
    assert.deepEqual(server.to('/api/v1/forward_backward')[1].body, server.to('/api/v1/forward_backward')[0].body);
  } finally {
    await server.close();
  }
});

test('a failed future fails at once with the server message (hosted RequestFailedResponse, SkyRL 400 detail)', async () => {
  for (const failed of [hosted.request_failed, skyrl.retrieve_future_failed]) {
    let polls = 0;
    const server = await startFake({
      ...skyrlRoutes(),
      '/api/v1/retrieve_future': () => (++polls === 1 ? { status: 200, json: { model_id: 'model_1' } } : failed),
    });
    try {
      const trainer = new TinkerTrainer({ baseUrl: server.url, baseModel: 'b', ...fast });
      await assert.rejects(
        trainer.forwardBackward(data, { kind: 'importance_sampling' }),
        (e: unknown) =>
          e instanceof EngineCallError &&
          !e.isRetryable &&
          /advantages has length 2|exceeds the maximum of 32768/.test(e.message),
      );
      assert.equal(polls, 2);
    } finally {
      await server.close();
    }
  }
});

test('hosted Tinker: model_id from the future, try_again re-polls, X-API-Key on every request, warning_message logged', async () => {
  const results = new Map<string, Reply[]>([
    ['req-create-1', [hosted.try_again, hosted.try_again, hosted.create_model_result]],
  ]);
  const server = await startFake({
    '/api/v1/create_session': () => hosted.create_session,
    '/api/v1/create_model': () => hosted.create_model,
    '/api/v1/retrieve_future': (r) => results.get(String(r.body.request_id))!.shift()!,
  });
  const warnings: string[] = [];
  try {
    const apiKey = tinkerApiKey(undefined, { TINKER_API_KEY: 'tml-from-env' });
    const trainer = new TinkerTrainer({
      baseUrl: server.url,
      baseModel: 'Qwen/Qwen3-4B-Instruct-2507',
      apiKey,
      warn: (w) => warnings.push(w),
      ...fast,
    });
    assert.equal(await trainer.ensureModel(), '3f6c2a9e-5b1d-4e7a-9c0f-8d2e1b4a6c7f:train:0');
    assert.equal(server.to('/api/v1/retrieve_future').length, 3);
    assert.ok(
      server.requests.every((r) => r.headers['x-api-key'] === 'tml-from-env'),
      'every request carries X-API-Key',
    );
    assert.deepEqual(warnings, ['tinker: Your SDK is older than the recommended version.']);
  } finally {
    await server.close();
  }
});

test('hosted forward_backward result: loss from metrics "loss:sum", log-probs per datum; a wrong count names the field', () => {
  const result = hosted.forward_backward_result.json;
  const fb = parseForwardOutput(result, data, (field) => new Error(`missing ${field}`));
  assert.deepEqual(fb, {
    loss: 1.875,
    logprobs: [
      [-0.5, -0.25, -1.5],
      [-1.0, -0.125],
    ],
    metrics: { 'loss:sum': 1.875 },
  });
  assert.throws(
    () => parseForwardOutput(result, data.slice(0, 1), (field) => new Error(`missing ${field}`)),
    /missing loss_fn_outputs/,
  );
});

test('trainer.apiKey: used before $TINKER_API_KEY, and never in the resolved config, inspect output or errors', async () => {
  const config = engineSchema.parse({
    kind: 'remote',
    sampler: { api: 'tinker' },
    trainer: { url: 'http://127.0.0.1:1', apiKey: 'tml-config-secret' },
  });
  assert.ok(config.trainer?.apiKey instanceof Secret);
  assert.equal(tinkerApiKey(config.trainer?.apiKey, { TINKER_API_KEY: 'tml-env' })?.reveal(), 'tml-config-secret');
  assert.equal(tinkerApiKey(undefined, {}), undefined);
  for (const text of [
    YAML.stringify(config),
    JSON.stringify(config),
    inspect(config, { depth: 9 }),
    String(config.trainer?.apiKey),
  ])
    assert.ok(!text.includes('tml-config-secret'), text);
  // what the run directory keeps parses back (the key then comes from $TINKER_API_KEY)
  assert.equal(engineSchema.parse(YAML.parse(YAML.stringify(config))).trainer?.apiKey, undefined);
  const server = await startFake({ '/api/v1/create_session': () => hosted.unauthorized });
  try {
    const trainer = new TinkerTrainer({ baseUrl: server.url, baseModel: 'b', apiKey: config.trainer?.apiKey, ...fast });
    await assert.rejects(
      trainer.ensureModel(),
      (e: unknown) =>
        e instanceof EngineCallError &&
        e.details.status === 401 &&
        !inspect(e).includes('tml-config-secret') &&
        !JSON.stringify(e.details).includes('tml-config-secret'),
    );
    assert.equal(server.requests[0].headers['x-api-key'], 'tml-config-secret');
  } finally {
    await server.close();
  }
});

test('resume: load_weights (optimizer: true) is the first request of a fresh model; the state file names the tinker:// path', async () => {
  const server = await startFake(skyrlRoutes());
  const dir = join(mkdtempSync(join(tmpdir(), 'arbor-tinker-')), 'engine');
  try {
    const trainer = new TinkerTrainer({ baseUrl: server.url, baseModel: 'b', ...fast });
    await trainer.forwardBackward(data, { kind: 'importance_sampling' });
    await trainer.optimStep({ learningRate: 1e-5 });
    await trainer.saveState(dir);
    const state = JSON.parse(readFileSync(join(dir, 'tinker-state.json'), 'utf8'));
    assert.deepEqual(state, {
      modelId: 'model_1',
      path: 'tinker://model_5e6f7a8b/weights/arbor-state',
      steps: 1,
      version: 0,
      baseModel: 'b',
    });
    // loading into the model that already trained is what both servers refuse
    const refused = await fetch(`${server.url}/api/v1/load_weights`, {
      method: 'POST',
      body: JSON.stringify({ model_id: 'model_1', path: state.path, optimizer: true }),
    });
    assert.equal(refused.status, 400);
    await trainer.loadState(dir);
    const [load] = server.to('/api/v1/load_weights').slice(-1);
    assert.deepEqual(load.body, {
      model_id: 'model_2',
      seq_id: 1,
      path: 'tinker://model_5e6f7a8b/weights/arbor-state',
      optimizer: true,
      type: 'load_weights',
    });
    assert.deepEqual(
      server.to('/api/v1/create_model').map((r) => r.body.model_seq_id),
      [0, 1],
    );
    // the loaded weights are published again as the checkpoint's version (the samplers may hold a later one)
    const [republish] = server.to('/api/v1/save_weights_for_sampler').slice(-1);
    assert.deepEqual(
      [republish.body.model_id, republish.body.seq_id, republish.body.path],
      ['model_2', 2, 'arbor-v0-resumed'],
    );
    await trainer.optimStep({ learningRate: 1e-5 });
    assert.deepEqual(server.to('/api/v1/optim_step').at(-1)!.body.model_id, 'model_2');
    assert.equal(server.to('/api/v1/optim_step').at(-1)!.body.seq_id, 3);
  } finally {
    await server.close();
  }
});

test('the session heartbeat runs every heartbeatMs and stops on close', async () => {
  const server = await startFake({
    '/api/v1/create_session': () => skyrl.create_session,
    '/api/v1/session_heartbeat': () => ({ status: 200, json: { type: 'session_heartbeat' } }),
  });
  try {
    const session = new TinkerSession({ baseUrl: server.url, heartbeatMs: 20 });
    await session.ensure();
    await new Promise((r) => setTimeout(r, 150));
    session.close();
    await new Promise((r) => setTimeout(r, 30)); // a heartbeat sent just before close may still arrive
    const beats = server.to('/api/v1/session_heartbeat');
    assert.ok(beats.length >= 2, `${beats.length} heartbeats`);
    assert.deepEqual(beats[0].body, { session_id: 'session_1a2b3c4d', type: 'session_heartbeat' });
    await new Promise((r) => setTimeout(r, 80));
    assert.equal(server.to('/api/v1/session_heartbeat').length, beats.length, 'no heartbeat after close');
  } finally {
    await server.close();
  }
});

test('Tinker sampler: sampling session from the base model, then from each saved path; ModelInput chunks, num_samples, stop tokens, seq_ids', async () => {
  const results = new Map<string, Reply>();
  let ids = 0;
  let sessions = 0;
  const server = await startFake({
    '/api/v1/create_session': () => hosted.create_session,
    '/api/v1/create_sampling_session': () => ({
      status: 200,
      json: { type: 'create_sampling_session', sampling_session_id: `s${++sessions}` },
    }),
    '/api/v1/asample': () => {
      const id = `req-${++ids}`;
      results.set(id, hosted.sample_result);
      return { status: 200, json: { request_id: id } };
    },
    '/api/v1/retrieve_future': (r) => results.get(String(r.body.request_id))!,
  });
  try {
    const session = new TinkerSession({ baseUrl: server.url, ...fast });
    const sampler = new TinkerSampler({ session, baseModel: 'Qwen/Qwen3-4B-Instruct-2507' });
    const [r] = await sampler.sample([
      { tokens: [1, 2, 3, 4, 5], n: 2, maxTokens: 3, seed: 9, stopTokens: [7], temperature: 0.7 },
    ]);
    assert.deepEqual(r.completions, [
      { tokens: [11, 7], logprobs: [-0.25, -0.125], finishReason: 'stop' },
      { tokens: [14, 15, 16], logprobs: [-0.5, -0.75, -2.0], finishReason: 'length' },
    ]);
    assert.deepEqual(r.usage, { promptTokensComputed: 5, prefixTokensReused: 0, tokensDecoded: 5 });
    await sampler.sample([{ tokens: [1, 2, 3, 4, 5], n: 2, maxTokens: 3 }]);
    await sampler.useWeights('tinker://run/sampler_weights/arbor-v1', 1);
    const [after] = await sampler.sample([{ tokens: [1, 2, 3, 4, 5], n: 2, maxTokens: 3 }]);
    assert.equal(after.weightVersion, 1);
    assert.deepEqual(
      server.to('/api/v1/create_sampling_session').map((x) => x.body),
      [
        {
          session_id: '3f6c2a9e-5b1d-4e7a-9c0f-8d2e1b4a6c7f',
          sampling_session_seq_id: 0,
          base_model: 'Qwen/Qwen3-4B-Instruct-2507',
          type: 'create_sampling_session',
        },
        {
          session_id: '3f6c2a9e-5b1d-4e7a-9c0f-8d2e1b4a6c7f',
          sampling_session_seq_id: 1,
          model_path: 'tinker://run/sampler_weights/arbor-v1',
          type: 'create_sampling_session',
        },
      ],
    );
    const asks = server.to('/api/v1/asample');
    assert.deepEqual(asks[0].body, {
      sampling_session_id: 's1',
      seq_id: 0,
      num_samples: 2,
      prompt: { chunks: [{ type: 'encoded_text', tokens: [1, 2, 3, 4, 5] }] },
      sampling_params: { max_tokens: 3, temperature: 0.7, top_p: 1, top_k: -1, stop: [7], seed: 9 },
      prompt_logprobs: false,
      topk_prompt_logprobs: 0,
      type: 'sample',
    });
    assert.deepEqual(
      asks.map((a) => [a.body.sampling_session_id, a.body.seq_id]),
      [
        ['s1', 0],
        ['s1', 1],
        ['s2', 0],
      ],
    );
    await assert.rejects(
      sampler.sample([{ tokens: [1], n: 3, maxTokens: 3 }]),
      /expected 3 sequences \(num_samples\), got 2/,
    );
  } finally {
    await server.close();
  }
});

/** A ustar archive of the given files (what the checkpoint archive endpoint serves). */
function tar(files: Record<string, Buffer>): Buffer {
  const blocks: Buffer[] = [];
  for (const [name, data] of Object.entries(files)) {
    const header = Buffer.alloc(512);
    header.write(name, 0);
    header.write('0000644\0', 100);
    header.write('0000000\0', 108);
    header.write('0000000\0', 116);
    header.write(data.length.toString(8).padStart(11, '0') + '\0', 124);
    header.write('00000000000\0', 136);
    header.write('0', 156);
    header.write('ustar\0', 257);
    header.write('00', 263);
    header.write('        ', 148);
    let sum = 0;
    for (const b of header) sum += b;
    header.write(sum.toString(8).padStart(6, '0') + '\0 ', 148);
    blocks.push(header, data, Buffer.alloc((512 - (data.length % 512)) % 512));
  }
  return Buffer.concat([...blocks, Buffer.alloc(1024)]);
}

const f32 = (...xs: number[]) => Buffer.from(new Float32Array(xs).buffer);

/** A Tinker adapter as saved: base_model.model.* keys, unembed_tokens, 3-D expert tensors. */
function tinkerAdapter(): Buffer {
  const tensors = new Map([
    [
      'base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight',
      { dtype: 'F32', shape: [1, 2], data: f32(1, 2) },
    ],
    [
      'base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight',
      { dtype: 'F32', shape: [2, 1], data: f32(3, 4) },
    ],
    ['base_model.model.model.unembed_tokens.lora_A.weight', { dtype: 'F32', shape: [1, 2], data: f32(5, 6) }],
    ['base_model.model.model.unembed_tokens.lora_B.weight', { dtype: 'F32', shape: [3, 1], data: f32(7, 8, 9) }],
    [
      'base_model.model.model.layers.0.mlp.experts.w1.lora_A.weight',
      { dtype: 'F32', shape: [2, 1, 2], data: f32(10, 11, 12, 13) },
    ],
    [
      'base_model.model.model.layers.0.mlp.experts.w1.lora_B.weight',
      { dtype: 'F32', shape: [2, 2, 1], data: f32(14, 15, 16, 17) },
    ],
  ]);
  return writeSafetensors(tensors);
}

test('tinker:// adapter: archive downloaded (302, key not forwarded), extracted and converted to the PEFT layout, then hot-loaded on vLLM', async () => {
  const archive = gzipSync(
    tar({
      'adapter_model.safetensors': tinkerAdapter(),
      'adapter_config.json': Buffer.from(JSON.stringify({ r: 1, lora_alpha: 32 })),
      checkpoint_complete: Buffer.alloc(0),
    }),
  );
  const server = await startFake({
    '/api/v1/training_runs/run-1/checkpoints/sampler_weights/arbor-v1/archive': () => ({
      status: 302,
      headers: { location: '/signed/run-1-arbor-v1.tar.gz?X-Amz-Signature=abc' },
    }),
    '/signed/run-1-arbor-v1.tar.gz': () => ({
      status: 200,
      bytes: archive,
      headers: { 'content-type': 'application/octet-stream' },
    }),
    '/v1/unload_lora_adapter': () => fixtures('vllm').unload_lora_missing,
    '/v1/load_lora_adapter': () => fixtures('vllm').load_lora_ok,
  });
  try {
    const cacheDir = mkdtempSync(join(tmpdir(), 'arbor-adapters-'));
    const resolvePath = (path: string) =>
      fetchTinkerAdapter(path, {
        baseUrl: server.url,
        apiKey: new Secret('tml-k'),
        cacheDir,
        baseModel: 'Qwen/Qwen3-30B-A3B',
      });
    const sync = weightSyncFromSpec(
      { kind: 'vllm_load_lora_adapter', servers: [server.url], loraName: 'arbor-policy' },
      { resolvePath },
    );
    await sync.sync('tinker://run-1/sampler_weights/arbor-v1', 1);
    const [load] = server.to('/v1/load_lora_adapter');
    const dir = String(load.body.lora_path);
    assert.ok(dir.startsWith(cacheDir), dir);
    const { config, tensors } = readAdapterDir(dir);
    assert.deepEqual([...tensors.keys()].sort(), [
      'base_model.model.lm_head.lora_A.weight',
      'base_model.model.lm_head.lora_B.weight',
      'base_model.model.model.layers.0.mlp.experts.0.gate_proj.lora_A.weight',
      'base_model.model.model.layers.0.mlp.experts.0.gate_proj.lora_B.weight',
      'base_model.model.model.layers.0.mlp.experts.1.gate_proj.lora_A.weight',
      'base_model.model.model.layers.0.mlp.experts.1.gate_proj.lora_B.weight',
      'base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight',
      'base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight',
    ]);
    const expert1B = tensors.get('base_model.model.model.layers.0.mlp.experts.1.gate_proj.lora_B.weight')!;
    assert.deepEqual(
      [
        expert1B.shape,
        [
          ...new Float32Array(
            expert1B.data.buffer.slice(expert1B.data.byteOffset, expert1B.data.byteOffset + expert1B.data.length),
          ),
        ],
      ],
      [
        [2, 1],
        [16, 17],
      ],
    );
    assert.deepEqual(
      {
        peft_type: config.peft_type,
        r: config.r,
        lora_alpha: config.lora_alpha,
        task_type: config.task_type,
        base: config.base_model_name_or_path,
        targets: config.target_modules,
      },
      {
        peft_type: 'LORA',
        r: 1,
        lora_alpha: 32,
        task_type: 'CAUSAL_LM',
        base: 'Qwen/Qwen3-30B-A3B',
        targets: ['gate_proj', 'lm_head', 'q_proj'],
      },
    );
    const [archiveRequest] = server.to('/api/v1/training_runs/run-1/checkpoints/sampler_weights/arbor-v1/archive');
    const [download] = server.to('/signed/run-1-arbor-v1.tar.gz');
    assert.equal(archiveRequest.headers['x-api-key'], 'tml-k');
    assert.equal(download.headers['x-api-key'], undefined, 'the key is not sent to the signed URL');
  } finally {
    await server.close();
  }
});

const skyrlAdapterTitle =
  'tinker:// adapter from SkyRL tx (tinker://<model>/<name>, archive at checkpoints/<name>/archive); ' +
  'tied embeddings map unembed to embed_tokens';
test(skyrlAdapterTitle, async () => {
  const archive = gzipSync(
    tar({
      'adapter_model.safetensors': tinkerAdapter(),
      'adapter_config.json': Buffer.from(JSON.stringify({ r: 1, lora_alpha: 32 })),
    }),
  );
  const server = await startFake({
    '/api/v1/training_runs/model_5e6f7a8b/checkpoints/arbor-v1/archive': () => ({
      status: 302,
      headers: { location: '/api/v1/training_runs/model_5e6f7a8b/checkpoints/arbor-v1/download' },
    }),
    '/api/v1/training_runs/model_5e6f7a8b/checkpoints/arbor-v1/download': () => ({
      status: 200,
      bytes: archive,
      headers: { 'content-type': 'application/octet-stream' },
    }),
  });
  try {
    const dir = await fetchTinkerAdapter('tinker://model_5e6f7a8b/arbor-v1', {
      baseUrl: server.url,
      cacheDir: mkdtempSync(join(tmpdir(), 'arbor-adapters-')),
      baseModel: 'b',
      tiedEmbeddings: true,
    });
    assert.ok(readAdapterDir(dir).tensors.has('base_model.model.model.embed_tokens.lora_A.weight'));
    assert.equal(server.requests.length, 2);
  } finally {
    await server.close();
  }
});
