/**
 * `npm run bench -- engine`: the embedded engine's throughput on ~1M and ~5M parameter models.
 * Sampling tokens/s at batch 1, 16 and 64 (n continuations of one prompt) with and without prefix
 * sharing; training tokens/s (forward + backward + AdamW on 64 sequences); the fraction of step time
 * spent inside kernels (Kernels wrapped with timers); and prefix_fork_speedup = time to decode 8
 * children of 32 tokens from a shared 512-token prefix without page sharing ÷ with sharing.
 */
import { loadKernels, type Kernels } from '../src/engine/kernels/index.js';
import { NanoModel } from '../src/engine/nano/model.js';
import { NanoSampler } from '../src/engine/nano/sampler.js';
import { NanoTrainer } from '../src/engine/nano/trainer.js';
import type { Datum } from '../src/engine/types.js';
import { printTable, writeBenchJson } from './util.js';

/** Wrap every kernel function to accumulate its wall time. */
function timed(k: Kernels): { kernels: Kernels; ms: () => number; reset: () => void } {
  let total = 0;
  const wrapped = { ...k } as Record<string, unknown>;
  for (const [name, fn] of Object.entries(k)) {
    if (typeof fn !== 'function' || name === 'alloc') continue;
    wrapped[name] = (...args: unknown[]) => {
      const t = performance.now();
      (fn as (...a: unknown[]) => void)(...args);
      total += performance.now() - t;
    };
  }
  return { kernels: wrapped as unknown as Kernels, ms: () => total, reset: () => (total = 0) };
}

const MODELS = {
  '1M': { dModel: 128, nLayers: 5, nHeads: 4, dFF: 384 },
  '5M': { dModel: 256, nLayers: 6, nHeads: 8, dFF: 768 },
};

export async function main(): Promise<void> {
  const base = await loadKernels();
  const rows: Array<Record<string, string | number | null>> = [];
  const headline: Record<string, number | null> = { sample_tokens_per_s_b64: null, train_tokens_per_s: null, prefix_fork_speedup: null };
  for (const [label, size] of Object.entries(MODELS)) {
    const timer = timed(base);
    const model = await NanoModel.create({ ...size, vocabSize: 101, contextLength: 640 }, { seed: 1, kernels: timer.kernels });
    const prompt = Array.from({ length: 32 }, (_, i) => 5 + (i % 90));
    for (const batch of [1, 16, 64]) {
      for (const sharing of [true, false]) {
        const sampler = new NanoSampler(model, { prefixSharing: sharing });
        const maxTokens = batch === 1 ? 64 : 32;
        timer.reset();
        const t = performance.now();
        const [r] = await sampler.sample([{ tokens: prompt, n: batch, maxTokens, seed: 1, stopTokens: [] }]);
        const s = (performance.now() - t) / 1000;
        rows.push({ model: `${label} (${model.parameterCount})`, op: 'sample', batch, prefix_sharing: sharing ? 'yes' : 'no', tokens_per_s: r.usage.tokensDecoded / s, kernel_fraction: timer.ms() / 1000 / s });
        if (label === '1M' && batch === 64 && sharing) headline.sample_tokens_per_s_b64 = r.usage.tokensDecoded / s;
      }
    }
    // training: 64 sequences of 96 tokens
    const trainer = new NanoTrainer(model);
    const data: Datum[] = Array.from({ length: 64 }, (_, b) => {
      const seq = Array.from({ length: 97 }, (_, i) => 5 + ((i * 7 + b) % 90));
      return { inputTokens: seq.slice(0, -1), targetTokens: seq.slice(1), weights: seq.slice(1).map(() => 1 / (64 * 96)), samplingLogprobs: seq.slice(1).map(() => -4.6), advantages: seq.slice(1).map((_, i) => (i % 2 ? 1 : -1)) };
    });
    await trainer.forwardBackward(data.slice(0, 4), { kind: 'ppo', clipLow: 0.2, clipHigh: 0.28 });
    timer.reset();
    const t = performance.now();
    await trainer.forwardBackward(data, { kind: 'ppo', clipLow: 0.2, clipHigh: 0.28 });
    await trainer.optimStep({ learningRate: 1e-4 });
    const s = (performance.now() - t) / 1000;
    const tps = (64 * 96) / s;
    rows.push({ model: `${label} (${model.parameterCount})`, op: 'train (fwd+bwd+adamw)', batch: 64, prefix_sharing: null, tokens_per_s: tps, kernel_fraction: timer.ms() / 1000 / s });
    if (label === '1M') headline.train_tokens_per_s = tps;
    // prefix fork speedup: 8 children × 32 tokens from a shared 512-token prefix
    if (label === '1M') {
      const prefix = Array.from({ length: 512 }, (_, i) => 5 + ((i * 13) % 90));
      const times: Record<string, number> = {};
      for (const sharing of [true, false]) {
        const sampler = new NanoSampler(model, { prefixSharing: sharing });
        const t0 = performance.now();
        await sampler.sample([{ tokens: prefix, n: 8, maxTokens: 32, seed: 2, stopTokens: [] }]);
        times[sharing ? 'shared' : 'unshared'] = performance.now() - t0;
      }
      headline.prefix_fork_speedup = times.unshared / times.shared;
      rows.push({ model: `${label} (${model.parameterCount})`, op: '8 children x 32 tok from 512-tok prefix', batch: 8, prefix_sharing: `${times.shared.toFixed(0)} ms shared vs ${times.unshared.toFixed(0)} ms not`, tokens_per_s: (8 * 32) / (times.shared / 1000), kernel_fraction: null });
    }
  }
  printTable(rows);
  writeBenchJson('engine', headline, { kernels: base.name, rows });
}
