/**
 * Issue 25 item 6, vLLM's LoRA serving on `arbor serve` (specs/hf-models.md §5): `--lora-modules` and
 * the runtime routes `/v1/load_lora_adapter` / `/v1/unload_lora_adapter` with vLLM's plain-text replies
 * and error statuses; `/v1/models` lists adapters (root = path, parent = base); a request's `model`
 * routes to an adapter (an adapter with non-zero B changes the output, exactly as the engine computes
 * it with that adapter; the reply names the adapter); an unloaded adapter is 404; a bad adapter is 400
 * naming the file and tensor; adapters beyond --max-loras are read again; loading and unloading does
 * not grow the kernels' memory. Also `--skip-tokenizer-init` (token ids in and out) and the CLI flags.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { Rng } from '../../src/core/rng.js';
import { makeHfModel } from '../../src/engine/hf/make.js';
import { loadHfModel } from '../../src/engine/hf/model.js';
import { loadPeftAdapter, savePeftAdapter } from '../../src/engine/formats/peft.js';
import { referenceKernels } from '../../src/engine/kernels/reference.js';
import { LoraAdapter, type LoraModule } from '../../src/engine/model/lora.js';
import type { NanoModel } from '../../src/engine/model/model.js';
import { NanoSampler } from '../../src/engine/embedded/sampler.js';
import { readSafetensors, writeSafetensors } from '../../src/engine/formats/safetensors.js';
import { HFTokenizer } from '../../src/engine/tokenizer/hf.js';
import { loadServeEngine } from '../../src/serve/engine.js';
import { parseLoraModules } from '../../src/serve/vllm/lora.js';
import { takeLoraModules } from '../../src/cli/serve.js';
import { post, serveHf, spawnServe, tinyQwen3 } from '../../testkit/serve/hf-fixture.js';

let root: string;
let dir: string;
let model: NanoModel;
let ids: number[];

/** A PEFT adapter for `model` with A from PEFT's init and B drawn N(0, 0.5²) (so it changes the output). */
function writeAdapter(
  out: string,
  seed: number,
  rank = 4,
  targets: LoraModule[] = ['q_proj', 'v_proj', 'down_proj'],
): LoraAdapter {
  const adapter = new LoraAdapter(model, { rank, alpha: 8, targets }, referenceKernels);
  adapter.initialise(seed);
  const rng = new Rng(seed + 1);
  for (const layer of adapter.layers)
    for (const t of Object.values(layer)) for (let i = 0; i < t.B.length; i++) t.B[i] = rng.normal() * 0.5;
  savePeftAdapter(out, adapter, 'tiny');
  return adapter;
}

before(async () => {
  root = mkdtempSync(join(tmpdir(), 'arbor-serve-lora-'));
  dir = tinyQwen3(root);
  model = (await loadHfModel(dir)).model;
  writeAdapter(join(root, 'a'), 11);
  writeAdapter(join(root, 'b'), 22);
  writeAdapter(join(root, 'rank8'), 33, 8);
  ids = HFTokenizer.fromDirectory(dir).encode('The capital of France is');
});
after(() => rmSync(root, { recursive: true, force: true }));

/** Greedy token ids of `ids` through /v1/completions with `model`. */
async function greedy(
  url: string,
  name: string,
): Promise<{ status: number; ids?: number[]; model?: string; error?: unknown }> {
  const r = await post(`${url}/v1/completions`, {
    model: name,
    prompt: ids,
    max_tokens: 10,
    temperature: 0,
    ignore_eos: true,
    return_token_ids: true,
  });
  const choices = r.json?.choices as Array<{ token_ids: number[] }> | undefined;
  return {
    status: r.status,
    ids: choices?.[0].token_ids,
    model: r.json?.model as string | undefined,
    error: r.json?.error,
  };
}

test('an adapter named as `model` changes the output exactly as the engine computes it with that adapter; load, reload in place, unload → 404', async () => {
  const s = await serveHf({ checkpoint: dir, name: 'tiny', loraModules: [{ name: 'a', path: join(root, 'a') }] });
  try {
    const base = await greedy(s.url, 'tiny');
    const a = await greedy(s.url, 'a');
    assert.equal(a.model, 'a', 'the reply names the adapter');
    assert.notDeepEqual(a.ids, base.ids, 'non-zero B changes the greedy tokens');
    const expected = async (adapterDir: string) =>
      (
        await new NanoSampler(model, {
          adapter: loadPeftAdapter(adapterDir, model, { kernels: referenceKernels }),
        }).sample([{ tokens: ids, maxTokens: 10, temperature: 0 }])
      )[0].completions[0].tokens;
    assert.deepEqual(a.ids, await expected(join(root, 'a')));
    const [plain] = await new NanoSampler(model).sample([{ tokens: ids, maxTokens: 10, temperature: 0 }]);
    assert.deepEqual(base.ids, plain.completions[0].tokens, 'the base is untouched by the adapter');
    // runtime routes: vLLM's plain-text replies
    const loaded = await post(`${s.url}/v1/load_lora_adapter`, { lora_name: 'b', lora_path: join(root, 'b') });
    assert.deepEqual([loaded.status, loaded.text], [200, "Success: LoRA adapter 'b' added successfully."]);
    assert.deepEqual((await greedy(s.url, 'b')).ids, await expected(join(root, 'b')));
    const twice = await post(`${s.url}/v1/load_lora_adapter`, { lora_name: 'b', lora_path: join(root, 'a') });
    assert.equal(twice.status, 400);
    assert.equal(
      (twice.json!.error as { message: string }).message,
      "The lora adapter 'b' has already been loaded. If you want to load the adapter in place, set 'load_inplace' to True.",
    );
    assert.equal(
      (await post(`${s.url}/v1/load_lora_adapter`, { lora_name: 'b', lora_path: join(root, 'a'), load_inplace: true }))
        .status,
      200,
    );
    assert.deepEqual((await greedy(s.url, 'b')).ids, a.ids, "reloaded in place with a's weights");
    const models = (await (await fetch(`${s.url}/v1/models`)).json()) as {
      data: Array<{ id: string; root: string; parent: string | null }>;
    };
    assert.deepEqual(
      models.data.map((m) => [m.id, m.root, m.parent]),
      [
        ['tiny', dir, null],
        ['a', join(root, 'a'), 'tiny'],
        ['b', join(root, 'a'), 'tiny'],
      ],
    );
    const unloaded = await post(`${s.url}/v1/unload_lora_adapter`, { lora_name: 'b' });
    assert.deepEqual([unloaded.status, unloaded.text], [200, "Success: LoRA adapter 'b' removed successfully."]);
    const gone = await greedy(s.url, 'b');
    assert.deepEqual(
      [gone.status, (gone.error as { message: string }).message],
      [404, 'The model `b` does not exist.'],
    );
    const again = await post(`${s.url}/v1/unload_lora_adapter`, { lora_name: 'b' });
    assert.deepEqual(
      [again.status, (again.json!.error as { message: string }).message],
      [404, "The lora adapter 'b' cannot be found."],
    );
    const empty = await post(`${s.url}/v1/load_lora_adapter`, { lora_name: 'c' });
    assert.deepEqual(
      [empty.status, (empty.json!.error as { message: string }).message],
      [400, "Both 'lora_name' and 'lora_path' must be provided."],
    );
    const missing = await post(`${s.url}/v1/load_lora_adapter`, { lora_name: 'c', lora_path: join(root, 'nothing') });
    assert.deepEqual(
      [missing.status, (missing.json!.error as { message: string }).message],
      [404, `Loading lora c failed: No adapter found for ${join(root, 'nothing')}`],
    );
    const tooBig = await post(`${s.url}/v1/load_lora_adapter`, { lora_name: 'c', lora_path: join(root, 'rank8') });
    assert.equal(tooBig.status, 200, 'rank 8 ≤ the default max 16');
    // the openai client routes by `model` too
    const client = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const viaClient = await client.completions.create({
      model: 'a',
      prompt: ids,
      max_tokens: 10,
      temperature: 0,
      ignore_eos: true,
    } as OpenAI.CompletionCreateParamsNonStreaming & Record<string, unknown>);
    assert.equal(viaClient.model, 'a');
  } finally {
    await s.close();
  }
});

test("a bad adapter is a 400 naming the file and the tensor (another base's shapes, a layer the base lacks, rank over --max-lora-rank)", async () => {
  const s = await serveHf({ checkpoint: dir, name: 'tiny', enableLora: true, maxLoraRank: 4 });
  try {
    const load = (name: string, path: string) =>
      post(`${s.url}/v1/load_lora_adapter`, { lora_name: name, lora_path: path });
    // another base: its down_proj takes 96 inputs, not 128
    const other = join(root, 'other-base');
    cpSync(join(root, 'a'), other, { recursive: true });
    const file = join(other, 'adapter_model.safetensors');
    const { tensors } = readSafetensors(file);
    const down = 'base_model.model.model.layers.1.mlp.down_proj.lora_A.weight';
    tensors[down] = { shape: [4, 96], data: new Float32Array(4 * 96) };
    writeSafetensors(file, tensors);
    const r = await load('o', other);
    assert.equal(r.status, 400);
    assert.equal(
      (r.json!.error as { message: string }).message,
      `Loading lora o failed: ${file}: tensor ${down} has shape [4,96], this base model needs [4,128] (an adapter for another base model?)`,
    );
    // a layer the base does not have
    const deep = join(root, 'deep');
    cpSync(join(root, 'a'), deep, { recursive: true });
    const deepFile = join(deep, 'adapter_model.safetensors');
    const more = readSafetensors(deepFile).tensors;
    more['base_model.model.model.layers.7.self_attn.q_proj.lora_A.weight'] = {
      shape: [4, 64],
      data: new Float32Array(256),
    };
    writeSafetensors(deepFile, more);
    const r2 = await load('d', deep);
    assert.equal(r2.status, 400);
    assert.match(
      (r2.json!.error as { message: string }).message,
      new RegExp(
        `^Loading lora d failed: ${deepFile}: tensor ` +
          `base_model\\.model\\.model\\.layers\\.7\\.self_attn\\.q_proj\\.lora_A\\.weight: ` +
          `module model\\.layers\\.7\\.self_attn\\.q_proj is not in this base model`,
      ),
    );
    const r3 = await load('big', join(root, 'rank8'));
    assert.deepEqual(
      [r3.status, (r3.json!.error as { message: string }).message],
      [400, 'Loading lora big failed: LoRA rank 8 is greater than max_lora_rank 4 (--max-lora-rank)'],
    );
    assert.equal((await greedy(s.url, 'o')).status, 404, 'nothing was registered');
    // a good one still loads after the failures
    assert.equal((await load('a', join(root, 'a'))).status, 200);
  } finally {
    await s.close();
  }
  const plain = await serveHf({ checkpoint: dir, name: 'tiny' });
  try {
    const r = await post(`${plain.url}/v1/load_lora_adapter`, { lora_name: 'a', lora_path: join(root, 'a') });
    assert.equal(r.status, 404, 'runtime LoRA routes are off without --enable-lora');
  } finally {
    await plain.close();
  }
});

test("adapters beyond --max-loras are read again when used; load/unload cycles and adapter sampling do not grow the kernels' memory", async () => {
  const engine = await loadServeEngine({ checkpoint: dir, name: 'tiny', enableLora: true, maxLoras: 1 });
  const lora = engine.options.lora!;
  const { ArborServer } = await import('../../src/serve/server.js');
  const server = new ArborServer(engine.options);
  const url = await server.listen();
  try {
    lora.load('a', join(root, 'a'));
    lora.load('b', join(root, 'b'));
    assert.equal(lora.held, 1);
    const a1 = await greedy(url, 'a');
    const b1 = await greedy(url, 'b');
    const a2 = await greedy(url, 'a');
    assert.deepEqual(a2.ids, a1.ids);
    assert.notDeepEqual(a1.ids, b1.ids);
    assert.equal(lora.loads, 5, 'a and b loaded, then a, b, a each read again: the other had taken the one slot');
    // the kernels' arena is a bump allocator: the next allocation's offset shows whatever was allocated in between
    const kernels = engine.model.kernels;
    assert.match(kernels.name, /^wasm/, 'the WASM kernels (the arena that never frees) are in use');
    const before = kernels.alloc(4).byteOffset;
    for (let i = 0; i < 12; i++) {
      assert.equal(
        (await post(`${url}/v1/load_lora_adapter`, { lora_name: 'c', lora_path: join(root, i % 2 ? 'a' : 'b') }))
          .status,
        200,
      );
      assert.equal((await greedy(url, 'c')).status, 200);
      assert.equal((await post(`${url}/v1/unload_lora_adapter`, { lora_name: 'c' })).status, 200);
    }
    const grown = kernels.alloc(4).byteOffset - before;
    assert.ok(grown <= 64, `kernel memory grew by ${grown} bytes over 12 load/sample/unload cycles`);
    // the check can fail: an ordinary sampler allocates its workspace in the kernels' arena
    const probe = new NanoSampler(engine.model);
    await probe.sample([{ tokens: ids, maxTokens: 2 }]);
    assert.ok(kernels.alloc(4).byteOffset - before > 4096, 'an ordinary sampler over the model allocates in the arena');
  } finally {
    await server.close();
  }
});

const skipTokenizerInitTitle =
  '--skip-tokenizer-init: a directory without a tokenizer is served with token ids in and out; ' +
  'text, chat and /tokenize are refused as vLLM does';
test(skipTokenizerInitTitle, async () => {
  const bare = join(root, 'bare');
  makeHfModel({
    out: bare,
    architecture: 'Qwen3ForCausalLM',
    hiddenSize: 64,
    layers: 1,
    heads: 4,
    kvHeads: 2,
    headDim: 16,
    intermediateSize: 128,
    vocabSize: 512,
    seed: 3,
    maxPositionEmbeddings: 128,
  });
  await assert.rejects(
    loadServeEngine({ checkpoint: bare }),
    /tokenizer\.json/,
    'without the flag the missing tokenizer is an error naming the file',
  );
  const s = await serveHf({ checkpoint: bare, name: 'bare', skipTokenizerInit: true });
  try {
    const ok = await post(`${s.url}/v1/completions`, {
      prompt: [1, 2, 3],
      max_tokens: 4,
      return_token_ids: true,
      logprobs: 1,
      return_tokens_as_token_ids: true,
    });
    assert.equal(ok.status, 200);
    const choice = (
      ok.json!.choices as Array<{ text: string; token_ids: number[]; logprobs: { tokens: string[] } }>
    )[0];
    assert.equal(choice.text, '');
    assert.equal(choice.token_ids.length, 4);
    assert.deepEqual(
      choice.logprobs.tokens,
      choice.token_ids.map((t) => `token_id:${t}`),
    );
    const noTok = 'Tokenizer not available when `skip_tokenizer_init=True`';
    const refusals: Array<[string, unknown, string]> = [
      ['/v1/completions', { prompt: 'hello' }, `field "prompt": ${noTok}`],
      ['/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }] }, `field "messages": ${noTok}`],
      ['/tokenize', { prompt: 'hello' }, `field "prompt": ${noTok}`],
      ['/detokenize', { tokens: [1, 2] }, `field "tokens": ${noTok}`],
      [
        '/v1/completions',
        { prompt: [1, 2], logprobs: 1 },
        'field "skip_tokenizer_init": Unable to get tokenizer because `skip_tokenizer_init=True`',
      ],
      ['/v1/completions', { prompt: [1, 2], stop: ['x'] }, `field "stop": stop strings need the tokenizer (${noTok})`],
    ];
    for (const [route, body, message] of refusals) {
      const r = await post(`${s.url}${route}`, body);
      assert.deepEqual([r.status, (r.json!.error as { message: string }).message], [400, message], route);
    }
  } finally {
    await s.close();
  }
});

const loraCliTitle =
  'the CLI: --lora-modules takes several NAME=DIR or JSON values after one flag; ' +
  '--enable-lora, --max-lora-rank, --skip-tokenizer-init, --max-model-len';
test(loraCliTitle, async () => {
  assert.deepEqual(
    takeLoraModules([
      '--checkpoint',
      'x',
      '--lora-modules',
      'a=/p',
      '{"name":"b","path":"/q","base_model_name":"m"}',
      '--enable-lora',
    ]),
    {
      rest: ['--checkpoint', 'x', '--enable-lora'],
      items: ['a=/p', '{"name":"b","path":"/q","base_model_name":"m"}'],
    },
  );
  assert.deepEqual(parseLoraModules(['a=/p', '{"name":"b","path":"/q","base_model_name":"m"}']), [
    { name: 'a', path: '/p' },
    { name: 'b', path: '/q', baseModelName: 'm' },
  ]);
  assert.throws(() => parseLoraModules(['{"name":"b"}']), /needs string fields "name" and "path"/);
  assert.throws(
    () => takeLoraModules(['--lora-modules', '--enable-lora']),
    /--lora-modules needs at least one NAME=DIR value/,
  );
  const cli = await spawnServe([
    '--checkpoint',
    dir,
    '--name',
    'tiny',
    '--lora-modules',
    `a=${join(root, 'a')}`,
    `{"name":"b","path":"${join(root, 'b')}"}`,
    '--max-lora-rank',
    '8',
    '--max-model-len',
    '64',
    '--skip-tokenizer-init',
  ]);
  try {
    const models = (await (await fetch(`${cli.url}/v1/models`)).json()) as {
      data: Array<{ id: string; max_model_len: number | null }>;
    };
    assert.deepEqual(
      models.data.map((m) => [m.id, m.max_model_len]),
      [
        ['tiny', 64],
        ['a', null],
        ['b', null],
      ],
    );
    assert.match(cli.output(), /LoRA adapters: a, b/);
    const over = await post(`${cli.url}/v1/completions`, { prompt: Array(64).fill(5) });
    assert.deepEqual(
      [over.status, (over.json!.error as { message: string }).message],
      [400, 'field "prompt": 64 tokens leave no room in the context length of 64'],
    );
    assert.equal((await post(`${cli.url}/v1/completions`, { prompt: 'text' })).status, 400, 'no tokenizer');
  } finally {
    await cli.stop();
  }
});
