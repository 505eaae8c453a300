/**
 * examples/hf-qwen3-lora.yaml end to end, shortened: a random Qwen3 with Qwen3's real tokenizer is made
 * (model.create), warm-started by SFT of every weight through the chat template, then RL trains a LoRA
 * adapter on the frozen warm-started model. Checked: the prompts of SFT and RL are the same token ids
 * (the template's), the warm-start is a model directory that loads, checkpoints are PEFT adapters over
 * it that `arbor eval` loads, RL changes the adapter and never the base, and a run resumed from a
 * checkpoint equals the uninterrupted one bit for bit.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import YAML from 'yaml';
import { parseConfig, type ArborConfig } from '../../src/run/config.js';
import { train } from '../../src/run/loop.js';
import { buildSamplingEngine } from '../../src/engine/build.js';
import { loadHfModel } from '../../src/engine/hf/model.js';
import { readPeftConfig, loadPeftAdapter } from '../../src/engine/formats/peft.js';
import { HFTokenizer } from '../../src/engine/tokenizer/hf.js';
import { sftDatum } from '../../src/engine/embedded/sft.js';
import { promptEncoder } from '../../src/run/prompts.js';
import type { TaskItem } from '../../src/core/types.js';

const root = mkdtempSync(join(tmpdir(), 'arbor-hf-run-'));
process.on('exit', () => rmSync(root, { recursive: true, force: true }));
const example = YAML.parse(readFileSync('examples/hf-qwen3-lora.yaml', 'utf8')) as Record<
  string,
  Record<string, unknown>
>;

function config(name: string, steps = 2): ArborConfig {
  return parseConfig({
    ...example,
    run: {
      ...example.run,
      name,
      outDir: join(root, name),
      steps,
      promptsPerStep: 4,
      evalEvery: 0,
      evalCount: 6,
      checkpointEvery: 1,
      logTreesEvery: 1,
    },
    model: { ...example.model, hf: join(root, 'tiny-qwen3') },
    sft: { ...example.sft, steps: 3, batchSize: 4, examples: 24, checkpoint: join(root, 'warm') },
    generate: { kind: 'iid', groupSize: 4 },
    // a 3-step warm-start earns no reward yet: the entropy bonus gives the adapter a gradient all the same
    optimize: { ...example.optimize, loss: { ...(example.optimize.loss as object), entropyCoef: 0.01 } },
  });
}

const adapterOf = (run: string, step: number) => join(root, run, 'checkpoints', `step-${step}`, 'engine');

test(
  'the example: SFT of every weight through the chat template, then LoRA RL on the frozen model',
  { timeout: 300_000 },
  async () => {
    const summary = await train(config('full'), { quiet: true });
    assert.equal(summary.steps, 2);
    // the warm-start is a whole model directory
    const warm = join(root, 'warm');
    const { model: warmModel } = await loadHfModel(warm);
    const { model: base } = await loadHfModel(join(root, 'tiny-qwen3'));
    const moved = warmModel.params.data.some((x, i) => x !== base.params.data[i]);
    assert.ok(moved, 'SFT changed the weights of the warm-start');
    // checkpoints are PEFT adapters over the warm-start
    const dir = adapterOf('full', 2);
    const peft = readPeftConfig(dir);
    assert.equal(peft.baseModel, resolve(warm));
    assert.deepEqual(peft.settings.targets.slice().sort(), [
      'down_proj',
      'gate_proj',
      'k_proj',
      'o_proj',
      'q_proj',
      'up_proj',
      'v_proj',
    ]);
    assert.equal(peft.settings.rank, (example.model.lora as { rank: number }).rank);
    const adapter = loadPeftAdapter(dir, warmModel);
    let bNorm = 0;
    for (const s of adapter.params.specs)
      if (s.name.endsWith('lora_B.weight')) for (const x of adapter.params.get(s.name)) bNorm += x * x;
    assert.ok(bNorm > 0, 'RL trained the adapter (B was 0 at the start)');
    // RL never wrote the base: the warm-start files are as SFT left them
    const again = await loadHfModel(warm);
    assert.deepEqual(again.model.params.data, warmModel.params.data);
  },
);

test('SFT and RL see the same prompt token ids: the chat template of the model directory', async () => {
  const tokenizer = HFTokenizer.fromDirectory(join(root, 'tiny-qwen3'));
  const encode = promptEncoder(tokenizer, true);
  const prompt = '3+4=';
  const rl = encode({ id: 'x', prompt } as TaskItem);
  const expected = tokenizer.encode('<|im_start|>user\n3+4=<|im_end|>\n<|im_start|>assistant\n');
  assert.deepEqual(rl, expected);
  const d = sftDatum(tokenizer, { prompt, completion: '7' }, (p) => encode({ id: 'x', prompt: p } as TaskItem));
  assert.deepEqual(d.inputTokens.slice(0, rl.length), rl);
  // the completion is trained, then the template's end of turn (<|im_end|>), nothing of the prompt
  const trained = d.targetTokens.filter((_, t) => d.weights[t] > 0);
  assert.deepEqual(trained, [...tokenizer.encode('7'), tokenizer.eos]);
  assert.equal(tokenizer.eos, tokenizer.specialTokens['<|im_end|>']);
  // the run's trees hold exactly these ids as their prompts
  const line = readFileSync(join(root, 'full', 'trees', 'step-1.jsonl'), 'utf8').split('\n')[0];
  const tree = JSON.parse(line) as { itemId: string; nodes: Record<string, { tokens: number[] }> };
  const root0 = tree.nodes['0'].tokens;
  assert.deepEqual(
    root0,
    encode({ id: tree.itemId, prompt: tree.itemId } as TaskItem),
    'the arith item id is its prompt',
  );
  const text = tokenizer.decode(root0, true);
  assert.match(text, /^<\|im_start\|>user\n\d+\+\d+=<\|im_end\|>\n<\|im_start\|>assistant\n$/);
  assert.deepEqual(
    root0,
    encode({ id: 'y', prompt: text.slice('<|im_start|>user\n'.length, text.indexOf('<|im_end|>')) } as TaskItem),
  );
});

test('arbor eval loads a checkpoint adapter over its base (base_model_name_or_path) and its LoRA changes the outputs', async () => {
  const withAdapter = await buildSamplingEngine({ checkpoint: adapterOf('full', 2) });
  assert.match(withAdapter.origin, /LoRA on/);
  const plain = await buildSamplingEngine({ checkpoint: join(root, 'warm') });
  const tokens = withAdapter.tokenizer.encode('<|im_start|>user\n2+2=<|im_end|>\n<|im_start|>assistant\n');
  const a = (await withAdapter.sampler.sample([{ tokens, maxTokens: 4, temperature: 0 }]))[0].completions[0];
  const b = (await plain.sampler.sample([{ tokens, maxTokens: 4, temperature: 0 }]))[0].completions[0];
  assert.notDeepEqual(a.logprobs, b.logprobs, 'the adapter changes the model');
});

test(
  'a LoRA run resumed from a checkpoint equals the uninterrupted run (adapter and moments restored)',
  { timeout: 300_000 },
  async () => {
    await train(config('parts', 1), { quiet: true });
    await train(undefined, { quiet: true, resume: join(root, 'parts'), steps: 2 });
    const full = readFileSync(join(adapterOf('full', 2), 'adapter_model.safetensors'));
    const resumed = readFileSync(join(adapterOf('parts', 2), 'adapter_model.safetensors'));
    assert.ok(full.equals(resumed), 'the adapters after step 2 are identical');
  },
);
