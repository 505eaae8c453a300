/**
 * The embedded engine against transformers' own numbers (../shared/data/hf-reference): for each fixture
 * model (Llama with GQA and an untied head, Qwen3 with q/k norm, explicit head_dim and a tied head, the
 * Llama PEFT LoRA) the logits of every position (through the sampler's decode path), the trainer's
 * per-token log-probs, the loss and the gradient of every parameter (the adapter's only, for the LoRA),
 * in float64 (reference kernels: the formulas) and float32 (WASM kernels: the production path). Used by
 * test/hf/parity.test.ts and `npm run bench -- hf` (hf_parity = the share of comparisons that pass).
 */
import { join } from 'node:path';
import { referenceKernels64 } from '../../src/engine/kernels/reference.js';
import { loadKernels, type Kernels } from '../../src/engine/kernels/index.js';
import { loadHfModel } from '../../src/engine/hf/model.js';
import { loadPeftAdapter } from '../../src/engine/formats/peft.js';
import { DecodeWorkspace, forwardRows } from '../../src/engine/model/decode.js';
import { PagedKVCache } from '../../src/engine/model/kvcache.js';
import type { LoraAdapter } from '../../src/engine/model/lora.js';
import type { NanoModel } from '../../src/engine/model/model.js';
import { NanoTrainer } from '../../src/engine/embedded/trainer.js';
import type { Datum } from '../../src/engine/types.js';
import { compare, readReference, type Comparison, type ReferenceCase, type Tolerance } from './fixtures.js';

/**
 * Tolerances (|Δ| ≤ atol·max|ref| + rtol·|ref|). The references are float64 results stored as float32
 * (relative rounding 6e-8). Float64 here differs from them by that rounding and by transformers' float32
 * rotary tables (mirrored here): observed worst 0.47 of this float64 tolerance (LoRA gradients). Float32
 * WASM accumulates float32 rounding over two layers and 512-wide softmaxes: observed worst 0.10.
 */
export const HF_TOLERANCES: Record<'float64' | 'float32', Tolerance> = {
  float64: { atol: 2e-6, rtol: 2e-6 },
  float32: { atol: 2e-5, rtol: 5e-5 },
};

export const HF_CASES = [
  { label: 'llama-gqa', dir: 'llama-gqa' },
  { label: 'qwen3-tied', dir: 'qwen3-tied' },
  { label: 'llama-gqa+lora', dir: 'llama-gqa', adapter: 'lora-adapter' },
] as const;

/** The reference gradient's key of a parameter (the adapter's carry PEFT's in-model adapter name "default"). */
function gradKey(name: string, adapter: boolean): string {
  return adapter ? `grad.${name.replace(/\.lora_([AB])\.weight$/, '.lora_$1.default.weight')}` : `grad.${name}`;
}

/** The fixtures' loss as datums: mean −log p over tokens at positions ≥ prompt_length, pooled over sequences. */
export function referenceData(ref: ReferenceCase): Datum[] {
  let count = 0;
  ref.sequences.forEach((s, i) => (count += s.length - ref.promptLengths[i]));
  return ref.sequences.map((seq, i) => ({
    inputTokens: seq.slice(0, -1),
    targetTokens: seq.slice(1),
    weights: seq.slice(1).map((_, t) => (t + 1 >= ref.promptLengths[i] ? 1 / count : 0)),
  }));
}

/** Raw logits [T, V] of a whole sequence through the incremental decode path. */
export function decodeLogits(model: NanoModel, tokens: number[], adapter?: LoraAdapter): Float32Array {
  const cache = new PagedKVCache(model.dims.L, model.dims.Ckv, 16);
  const seq = cache.createSequence();
  return forwardRows(
    model,
    cache,
    new DecodeWorkspace(model, adapter),
    tokens.map((token) => ({ seq, token, wantLogits: true })),
  );
}

export interface HfParityRun {
  comparisons: Comparison[];
  /** The raw arrays of one comparison per kind, for tests that perturb them. */
  samples: Array<{ kind: string; name: string; got: Float32Array | number[]; ref: Float32Array; tol: Tolerance }>;
}

/** Every comparison of one case at one precision. */
export async function parityCase(
  root: string,
  c: (typeof HF_CASES)[number],
  precision: 'float64' | 'float32',
): Promise<HfParityRun> {
  const kernels: Kernels =
    precision === 'float64' ? (referenceKernels64 as unknown as Kernels) : await loadKernels({ backend: 'wasm' });
  const dir = join(root, c.dir);
  const withAdapter = 'adapter' in c;
  const ref = readReference(withAdapter ? join(dir, c.adapter) : dir);
  const { model } = await loadHfModel(dir, { kernels });
  const adapter = withAdapter ? loadPeftAdapter(join(dir, c.adapter), model) : undefined;
  const tol = HF_TOLERANCES[precision];
  const name = (what: string) => `${c.label} ${precision} ${what}`;
  const run: HfParityRun = { comparisons: [], samples: [] };
  const add = (what: string, got: Float32Array | number[], expected: Float32Array) => {
    run.comparisons.push(compare(name(what), got, expected, tol));
    const kind = what.split(/[. ]/)[0];
    if (!run.samples.some((s) => s.kind === kind))
      run.samples.push({ kind, name: name(what), got, ref: expected, tol });
  };
  ref.sequences.forEach((seq, i) => add(`logits.${i}`, decodeLogits(model, seq, adapter), ref.tensors[`logits.${i}`]));
  const trainer = new NanoTrainer(model, { adapter });
  const result = await trainer.forwardBackward(referenceData(ref), { kind: 'cross_entropy' });
  result.logprobs.forEach((lp, i) => add(`logprobs.${i}`, lp, ref.tensors[`logprobs.${i}`]));
  add('loss', [result.loss], new Float32Array([ref.loss]));
  const arena = adapter ? adapter.params : model.params;
  const grads = adapter ? adapter.grads : model.grads;
  for (const spec of arena.specs) {
    const expected = ref.tensors[gradKey(spec.name, withAdapter)];
    if (!expected) {
      run.comparisons.push({
        name: name(`grad ${spec.name}`),
        pass: false,
        maxAbs: Infinity,
        worstRatio: Infinity,
        detail: 'no reference gradient',
      });
      continue;
    }
    add(`grad ${spec.name}`, grads.get(spec.name), expected);
  }
  const refGrads = Object.keys(ref.tensors).filter((k) => k.startsWith('grad.')).length;
  if (refGrads !== arena.specs.length)
    run.comparisons.push({
      name: name('gradient count'),
      pass: false,
      maxAbs: Infinity,
      worstRatio: Infinity,
      detail: `${arena.specs.length} parameters, ${refGrads} reference gradients`,
    });
  return run;
}

/** Every case at both precisions. */
export async function hfParity(root: string): Promise<HfParityRun> {
  const all: HfParityRun = { comparisons: [], samples: [] };
  for (const c of HF_CASES) {
    for (const precision of ['float64', 'float32'] as const) {
      const r = await parityCase(root, c, precision);
      all.comparisons.push(...r.comparisons);
      all.samples.push(...r.samples);
    }
  }
  return all;
}
