/**
 * The vLLM and SGLang clients and every weight-sync mode against a fake server that replays replies
 * recorded in the real servers' formats (fixtures/vllm.json, fixtures/sglang.json): parsing, the
 * request bodies sent, plain-text LoRA replies, unload-then-load swaps with no sampling in flight,
 * adapter routing by name, and the config checks that keep names routable.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import YAML from 'yaml';
import { EngineCallError, ConfigError } from '../../src/core/errors.js';
import { engineSchema } from '../../src/engine/config.js';
import { checkWeightSync } from '../../src/engine/remote/build.js';
import { JsonClient } from '../../src/engine/remote/http.js';
import { OpenAICompletionsSampler } from '../../src/engine/remote/openai-completions.js';
import { SGLangSampler } from '../../src/engine/remote/sglang.js';
import { weightSyncFromSpec } from '../../src/engine/remote/weight-sync.js';
import { fixtures, sequence, startFake, type Handler } from './fake-server.js';

const vllm = fixtures('vllm');
const sglang = fixtures('sglang');
const request = { tokens: [1, 2, 3, 4, 5], n: 2, maxTokens: 3, seed: 9, stopTokens: [7], topLogprobs: 2 };

test('vLLM /v1/completions: token_ids, "token_id:N" top-k keys and cached tokens parse exactly', async () => {
  const server = await startFake({ '/v1/completions': () => vllm.completion_with_details });
  try {
    const sampler = new OpenAICompletionsSampler({ servers: [server.url], model: 'Qwen/Qwen3-4B-Instruct-2507' });
    const [r] = await sampler.sample([request]);
    assert.deepEqual(
      r.completions.map((c) => c.tokens),
      [
        [11, 12, 7],
        [14, 15, 16],
      ],
    );
    assert.deepEqual(
      r.completions.map((c) => c.logprobs),
      [
        [-0.25, -1.5, -0.125],
        [-0.5, -0.75, -2.0],
      ],
    );
    assert.deepEqual(
      r.completions.map((c) => c.finishReason),
      ['stop', 'length'],
    );
    assert.deepEqual(r.completions[0].topLogprobs, [
      [
        [11, -0.25],
        [13, -1.75],
      ],
      [
        [12, -1.5],
        [11, -0.5],
      ],
      [
        [7, -0.125],
        [9, -2.5],
      ],
    ]);
    // vLLM counts the prompt once (5, 4 cached); the second choice's fork of it is reused too
    assert.deepEqual(r.usage, { promptTokensComputed: 1, prefixTokensReused: 9, tokensDecoded: 6 });
    const [sent] = server.to('/v1/completions');
    assert.equal(sent.body.model, 'Qwen/Qwen3-4B-Instruct-2507');
    assert.deepEqual(sent.body.prompt, [1, 2, 3, 4, 5]);
    assert.deepEqual(sent.body.stop_token_ids, [7]);
    assert.equal(sent.body.return_token_ids, true);
    assert.equal(sent.body.return_tokens_as_token_ids, true);
  } finally {
    await server.close();
  }
});

test('vLLM without --enable-prompt-tokens-details: ids from "token_id:N" strings, no cached tokens counted', async () => {
  const server = await startFake({ '/v1/completions': () => vllm.completion_without_details });
  try {
    const sampler = new OpenAICompletionsSampler({ servers: [server.url], model: 'm' });
    const [r] = await sampler.sample([{ tokens: [1, 2, 3, 4, 5], maxTokens: 1 }]);
    assert.deepEqual(r.completions[0].tokens, [11]);
    assert.deepEqual(r.usage, { promptTokensComputed: 5, prefixTokensReused: 0, tokensDecoded: 1 });
  } finally {
    await server.close();
  }
});

test('vLLM LoRA replies are plain text: a JSON-only call rejects them, the weight sync accepts them', async () => {
  const server = await startFake({ '/v1/load_lora_adapter': () => vllm.load_lora_ok });
  try {
    const client = new JsonClient({ baseUrl: server.url, retry: { maxAttempts: 1 } });
    await assert.rejects(
      client.call('/v1/load_lora_adapter', { lora_name: 'x', lora_path: '/a' }),
      /reply is not JSON: Success: LoRA adapter/,
    );
    assert.deepEqual(
      await client.call('/v1/load_lora_adapter', { lora_name: 'x', lora_path: '/a' }, { accept: 'text' }),
      { text: "Success: LoRA adapter 'arbor-policy' added successfully." },
    );
    assert.equal(server.requests[0].headers['content-type'], 'application/json');
  } finally {
    await server.close();
  }
});

/**
 * vLLM's LoRA bookkeeping (serving_models.py@0f1457b0): load of a loaded name → 400, unload of an
 * unknown name → 404, a request naming neither the base model nor a loaded adapter → 404.
 */
function statefulVllm(base: string): Record<string, Handler> {
  const loaded = new Set<string>();
  return {
    '/v1/unload_lora_adapter': (r) =>
      loaded.delete(String(r.body.lora_name)) ? vllm.unload_lora_ok : vllm.unload_lora_missing,
    '/v1/load_lora_adapter': (r) => {
      if (loaded.has(String(r.body.lora_name))) return vllm.load_lora_duplicate;
      loaded.add(String(r.body.lora_name));
      return vllm.load_lora_ok;
    },
    '/v1/completions': (r) =>
      r.body.model === base || loaded.has(String(r.body.model)) ? vllm.completion_with_details : vllm.model_not_found,
  };
}

test('vLLM LoRA sync: unload (404 tolerated) then load without load_inplace; requests name the base model, then the adapter', async () => {
  const server = await startFake(statefulVllm('Qwen/Qwen3-4B-Instruct-2507'));
  try {
    // what the old client did: a second load of the same name is refused, and the adapter name is unknown before a load
    const raw = new JsonClient({ baseUrl: server.url, retry: { maxAttempts: 1 } });
    await assert.rejects(
      new OpenAICompletionsSampler({
        servers: [{ baseUrl: server.url, retry: { maxAttempts: 1 } }],
        model: 'arbor-policy',
      }).sample([request]),
      (e: unknown) => e instanceof EngineCallError && e.details.status === 404,
    );
    await raw.call('/v1/load_lora_adapter', { lora_name: 'arbor-policy', lora_path: '/a' }, { accept: 'text' });
    await assert.rejects(
      raw.call(
        '/v1/load_lora_adapter',
        { lora_name: 'arbor-policy', lora_path: '/b', load_inplace: true },
        { accept: 'text' },
      ),
      (e: unknown) => e instanceof EngineCallError && e.details.status === 400,
    );
    await raw.call('/v1/unload_lora_adapter', { lora_name: 'arbor-policy' }, { accept: 'text' });
    server.requests.length = 0;
    const sampler = new OpenAICompletionsSampler({ servers: [server.url], model: 'Qwen/Qwen3-4B-Instruct-2507' });
    const sync = weightSyncFromSpec(
      { kind: 'vllm_load_lora_adapter', servers: [server.url], loraName: 'arbor-policy' },
      { exclusive: (swap) => sampler.gate.exclusive(swap), onAdapterLoaded: (name) => sampler.setModel(name) },
    );
    await sampler.sample([request]);
    await sync.sync('/adapters/arbor-v1', 1);
    await sampler.sample([request]);
    await sync.sync('/adapters/arbor-v2', 2);
    await sampler.sample([request]);
    assert.deepEqual(
      server.requests.map((r) => r.path),
      [
        '/v1/completions',
        '/v1/unload_lora_adapter',
        '/v1/load_lora_adapter',
        '/v1/completions',
        '/v1/unload_lora_adapter',
        '/v1/load_lora_adapter',
        '/v1/completions',
      ],
    );
    assert.deepEqual(
      server.to('/v1/unload_lora_adapter').map((r) => r.body),
      [{ lora_name: 'arbor-policy' }, { lora_name: 'arbor-policy' }],
    );
    assert.deepEqual(
      server.to('/v1/load_lora_adapter').map((r) => r.body),
      [
        { lora_name: 'arbor-policy', lora_path: '/adapters/arbor-v1' },
        { lora_name: 'arbor-policy', lora_path: '/adapters/arbor-v2' },
      ],
    );
    assert.deepEqual(
      server.to('/v1/completions').map((r) => r.body.model),
      ['Qwen/Qwen3-4B-Instruct-2507', 'arbor-policy', 'arbor-policy'],
    );
  } finally {
    await server.close();
  }
});

test('vLLM LoRA sync: a duplicate-load 400 fails at once with the server message', async () => {
  const server = await startFake({
    '/v1/unload_lora_adapter': () => vllm.unload_lora_missing,
    '/v1/load_lora_adapter': () => vllm.load_lora_duplicate,
  });
  try {
    const sync = weightSyncFromSpec({
      kind: 'vllm_load_lora_adapter',
      servers: [server.url],
      loraName: 'arbor-policy',
    });
    await assert.rejects(
      sync.sync('/adapters/arbor-v1', 1),
      (e: unknown) =>
        e instanceof EngineCallError && e.details.status === 400 && /has already been loaded/.test(e.message),
    );
    assert.equal(server.to('/v1/load_lora_adapter').length, 1);
  } finally {
    await server.close();
  }
});

test('LoRA swap: waits for the sampling request in flight, and holds requests made during the swap', async () => {
  const answered: number[] = [];
  const server = await startFake({
    '/v1/unload_lora_adapter': () => vllm.unload_lora_ok,
    '/v1/load_lora_adapter': () => ({ ...vllm.load_lora_ok, delayMs: 50 }),
    '/v1/completions': (_r, hits) => {
      setTimeout(() => answered.push(Date.now()), hits === 1 ? 150 : 0);
      return { ...vllm.completion_with_details, delayMs: hits === 1 ? 150 : 0 };
    },
  });
  try {
    const sampler = new OpenAICompletionsSampler({ servers: [server.url], model: 'base' });
    const sync = weightSyncFromSpec(
      { kind: 'vllm_load_lora_adapter', servers: [server.url], loraName: 'arbor-policy' },
      { exclusive: (swap) => sampler.gate.exclusive(swap), onAdapterLoaded: (name) => sampler.setModel(name) },
    );
    const slow = sampler.sample([request]);
    await new Promise((r) => setTimeout(r, 20));
    const swap = sync.sync('/adapters/arbor-v1', 1);
    await new Promise((r) => setTimeout(r, 20));
    const during = sampler.sample([request]);
    await Promise.all([slow, swap, during]);
    const [first, second] = server.to('/v1/completions');
    const [unload] = server.to('/v1/unload_lora_adapter');
    const [load] = server.to('/v1/load_lora_adapter');
    assert.ok(
      unload.at >= first.at + 140,
      `the swap started ${unload.at - first.at} ms after the request in flight, before its reply`,
    );
    assert.ok(second.at >= load.at + 40, 'the request made during the swap was sent only after the load answered');
    assert.deepEqual([first.body.model, second.body.model], ['base', 'arbor-policy']);
  } finally {
    await server.close();
  }
});

test('SGLang /generate: meta_info logprobs, finish reasons and cached tokens parse exactly', async () => {
  const server = await startFake({ '/generate': () => sglang.generate_n2 });
  try {
    const sampler = new SGLangSampler({ servers: [server.url] });
    const [r] = await sampler.sample([{ ...request, returnEntropy: true }]);
    assert.deepEqual(
      r.completions.map((c) => c.tokens),
      [
        [11, 7],
        [14, 15, 16],
      ],
    );
    assert.deepEqual(
      r.completions.map((c) => c.finishReason),
      ['stop', 'length'],
    );
    assert.deepEqual(r.completions[1].topLogprobs, [
      [
        [14, -0.5],
        [11, -1.0],
      ],
      [
        [15, -0.75],
        [16, -1.25],
      ],
      [
        [16, -2.0],
        [7, -0.25],
      ],
    ]);
    assert.deepEqual(r.usage, { promptTokensComputed: 6, prefixTokensReused: 4, tokensDecoded: 5 });
    const [sent] = server.to('/generate');
    assert.deepEqual(sent.body.input_ids, [
      [1, 2, 3, 4, 5],
      [1, 2, 3, 4, 5],
    ]);
    assert.equal(sent.body.lora_path, undefined, 'no adapter before the first sync');
  } finally {
    await server.close();
  }
});

test('SGLang LoRA sync: unload (400 "not loaded" tolerated) then load; requests then carry lora_path', async () => {
  const server = await startFake({
    '/unload_lora_adapter': sequence(sglang.unload_lora_missing, sglang.unload_lora_ok),
    '/load_lora_adapter': () => sglang.load_lora_ok,
    '/generate': () => sglang.generate_n2,
  });
  try {
    const sampler = new SGLangSampler({ servers: [server.url] });
    const sync = weightSyncFromSpec(
      { kind: 'sglang_load_lora_adapter', servers: [server.url], loraName: 'arbor-policy' },
      { exclusive: (swap) => sampler.gate.exclusive(swap), onAdapterLoaded: (name) => sampler.setLoraName(name) },
    );
    await sync.sync('/adapters/arbor-v1', 1);
    await sync.sync('/adapters/arbor-v2', 2);
    await sampler.sample([request]);
    assert.deepEqual(
      server.requests.map((r) => r.path),
      ['/unload_lora_adapter', '/load_lora_adapter', '/unload_lora_adapter', '/load_lora_adapter', '/generate'],
    );
    assert.deepEqual(
      server.to('/load_lora_adapter').map((r) => r.body),
      [
        { lora_name: 'arbor-policy', lora_path: '/adapters/arbor-v1' },
        { lora_name: 'arbor-policy', lora_path: '/adapters/arbor-v2' },
      ],
    );
    assert.deepEqual(server.to('/generate')[0].body.lora_path, ['arbor-policy', 'arbor-policy']);
  } finally {
    await server.close();
  }
});

test('SGLang update_weights_from_disk: full checkpoints load; a 400 fails with the message; a tinker:// adapter is refused', async () => {
  const server = await startFake({
    '/update_weights_from_disk': sequence(sglang.update_weights_ok, sglang.update_weights_failed),
  });
  try {
    const sync = weightSyncFromSpec({ kind: 'sglang_update_weights_from_disk', servers: [server.url] });
    await sync.sync('/checkpoints/step-1', 1);
    // weight_version: SGLang then reports it in every reply (a restarted server reports another)
    assert.deepEqual(server.to('/update_weights_from_disk')[0].body, {
      model_path: '/checkpoints/step-1',
      weight_version: 'arbor-v1',
    });
    await assert.rejects(
      sync.sync('/checkpoints/step-2', 2),
      (e: unknown) =>
        e instanceof EngineCallError && e.details.status === 400 && /Failed to get weights iterator/.test(e.message),
    );
    await assert.rejects(
      sync.sync('tinker://model_5e6f7a8b/arbor-v3', 3),
      /full checkpoints only; use weightSync.kind sglang_load_lora_adapter/,
    );
    assert.equal(server.to('/update_weights_from_disk').length, 2, 'the tinker:// path never reached the server');
  } finally {
    await server.close();
  }
});

test('weight sync none sends nothing', async () => {
  const server = await startFake({});
  try {
    await weightSyncFromSpec({ kind: 'none' }).sync('/anything', 1);
    assert.equal(server.requests.length, 0);
  } finally {
    await server.close();
  }
});

test('config: LoRA sync names must route (loraName differs from sampler.model, sync kind fits the sampler api)', () => {
  const engine = (over: Record<string, unknown>) =>
    engineSchema.parse({
      kind: 'remote',
      sampler: { api: 'openai', servers: ['http://127.0.0.1:8000'], model: 'Qwen/Qwen3-4B-Instruct-2507' },
      trainer: { url: 'http://127.0.0.1:8001' },
      ...over,
    });
  const ok = engine({ weightSync: { kind: 'vllm_load_lora_adapter' } });
  assert.equal(ok.weightSync.loraName, 'arbor-policy');
  assert.doesNotThrow(() => checkWeightSync(ok));
  const same = engine({
    sampler: { api: 'openai', servers: ['http://127.0.0.1:8000'], model: 'policy' },
    weightSync: { kind: 'vllm_load_lora_adapter', loraName: 'policy' },
  });
  assert.throws(
    () => checkWeightSync(same),
    (e: unknown) => e instanceof ConfigError && e.path === 'engine.weightSync.loraName',
  );
  const wrongApi = engine({ weightSync: { kind: 'sglang_load_lora_adapter' } });
  assert.throws(
    () => checkWeightSync(wrongApi),
    (e: unknown) =>
      e instanceof ConfigError &&
      e.path === 'engine.weightSync.kind' &&
      /needs engine.sampler.api sglang/.test(e.message),
  );
  const tinker = engine({ sampler: { api: 'tinker' }, weightSync: { kind: 'vllm_load_lora_adapter' } });
  assert.throws(
    () => checkWeightSync(tinker),
    (e: unknown) => e instanceof ConfigError && e.path === 'engine.weightSync.kind',
  );
});

test('the vLLM and SGLang examples carry the launch flags the clients rely on', () => {
  const example = readFileSync(new URL('../../examples/remote-vllm-tinker.yaml', import.meta.url), 'utf8');
  for (const flag of [
    '--enable-prompt-tokens-details',
    '--logprobs-mode processed_logprobs',
    '--enable-lora',
    'VLLM_ALLOW_RUNTIME_LORA_UPDATING=True',
    '--enable-deterministic-inference',
  ]) {
    assert.ok(example.includes(flag), `examples/remote-vllm-tinker.yaml mentions ${flag}`);
  }
  assert.doesNotThrow(() => checkWeightSync(engineSchema.parse(parseYamlEngine(example))));
});

function parseYamlEngine(text: string): unknown {
  // the example's engine section, through the same YAML parser the CLI uses
  return (YAML.parse(text) as { engine: unknown }).engine;
}
