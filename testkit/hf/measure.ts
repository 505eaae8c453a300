/**
 * The two timed workloads of `npm run bench -- hf` on an HF model directory, each meant to run alone in
 * its own process (bench/hf.ts starts one per measurement) so that its peak RSS is the model's own:
 * sampling (B prompts of P tokens, N new tokens each at temperature 1, no stop token) and LoRA training
 * (rank r on all seven linear layers of every block, PPO loss, forward + backward + AdamW on the adapter).
 * Token rows follow `benchTokens`, the same formula as hf_torch.py's, so PyTorch sees the same inputs.
 */
import { loadHfModel } from '../../src/engine/hf/model.js';
import { loadKernels } from '../../src/engine/kernels/index.js';
import { ALL_LORA_MODULES, LoraAdapter } from '../../src/engine/model/lora.js';
import { NanoSampler } from '../../src/engine/embedded/sampler.js';
import { NanoTrainer } from '../../src/engine/embedded/trainer.js';
import type { Datum, SampleRequest } from '../../src/engine/types.js';
import { KernelProfiler, profileDecodeStep, type DecodeStepProfile, type ProfileSnapshot } from './profile.js';

export interface SampleWorkload {
  /** B: prompts, one continuation each. */
  batch: number;
  /** P: tokens per prompt. */
  promptLength: number;
  /** N: new tokens per prompt. */
  maxTokens: number;
}

export interface TrainWorkload {
  /** Sequences per step. */
  batch: number;
  /** Tokens per sequence (inputs; targets are the next tokens). */
  seqLength: number;
  rank: number;
  alpha: number;
}

export interface SampleJob {
  kind: 'sample';
  dir: string;
  threads: number;
  /** Cap the model's context when loading (the Qwen3-0.6B shape uses 256). */
  contextLength?: number;
  sample: SampleWorkload;
  repeats: number;
  /** Batched decode steps profiled after the timed runs (0: none). */
  decodeSteps: number;
}

export interface TrainJob {
  kind: 'train';
  dir: string;
  threads: number;
  train: TrainWorkload;
  repeats: number;
}

export interface MeasureResult {
  /** Per timed run: new tokens per second (sampling), trained tokens per second (training). */
  tokensPerS: number[];
  /** Per timed run: time inside kernels over wall time. */
  kernelFraction: number[];
  /** Peak resident set of the process (MB): process.resourceUsage().maxRSS. */
  maxRssMb: number;
  loadSeconds: number;
  parameterCount: number;
  /** The kernel backend's name (e.g. wasm-simd-fma-2t). */
  kernels: string;
  /** The last timed run (sampling: the whole sample() call; training: one step). */
  profile: ProfileSnapshot;
  /** Sampling: one batched decode forward (no token choice), averaged over decodeSteps. */
  decodeStep?: DecodeStepProfile;
  /** Training: trained (adapter) parameters. */
  adapterParameters?: number;
}

/** Token rows: row b, position i → 5 + (31·b + 7·i + salt) mod (V − 5) (hf_torch.py's bench_tokens). */
export function benchTokens(batch: number, length: number, V: number, salt: number): number[][] {
  const row = (b: number) => Array.from({ length }, (_, i) => 5 + ((31 * b + 7 * i + salt) % (V - 5)));
  return Array.from({ length: batch }, (_, b) => row(b));
}

async function load(dir: string, threads: number, contextLength?: number) {
  const t0 = performance.now();
  const profiler = new KernelProfiler(await loadKernels({ threads }));
  const { model } = await loadHfModel(dir, { kernels: profiler.kernels, contextLength });
  return { profiler, model, loadSeconds: (performance.now() - t0) / 1000 };
}

export async function measureSampling(job: SampleJob): Promise<MeasureResult> {
  const { profiler, model, loadSeconds } = await load(job.dir, job.threads, job.contextLength);
  const { batch, promptLength, maxTokens } = job.sample;
  const prompts = benchTokens(batch, promptLength, model.dims.V, 0);
  const requests: SampleRequest[] = prompts.map((tokens, b) => ({
    tokens,
    n: 1,
    maxTokens,
    temperature: 1,
    seed: b,
    stopTokens: [],
  }));
  const tokensPerS: number[] = [];
  const kernelFraction: number[] = [];
  let profile = profiler.snapshot(0);
  for (let i = 0; i < job.repeats; i++) {
    const sampler = new NanoSampler(model);
    profiler.reset();
    const t = performance.now();
    const out = await sampler.sample(requests);
    const ms = performance.now() - t;
    tokensPerS.push(out.reduce((n, r) => n + r.usage.tokensDecoded, 0) / (ms / 1000));
    profile = profiler.snapshot(ms);
    kernelFraction.push(profile.kernelMs / ms);
  }
  // peak RSS of the sampling runs alone: the decode-step profile below builds a second KV cache
  const maxRssMb = process.resourceUsage().maxRSS / 1024;
  const decodeStep = job.decodeSteps > 0 ? profileDecodeStep(model, profiler, prompts, job.decodeSteps) : undefined;
  const { parameterCount } = model;
  const kernels = profiler.kernels.name;
  return { tokensPerS, kernelFraction, maxRssMb, loadSeconds, parameterCount, kernels, profile, decodeStep };
}

export async function measureTraining(job: TrainJob): Promise<MeasureResult> {
  const { batch, seqLength, rank, alpha } = job.train;
  const { profiler, model, loadSeconds } = await load(job.dir, job.threads, seqLength);
  const adapter = new LoraAdapter(model, { rank, alpha, targets: ALL_LORA_MODULES });
  adapter.initialise(1);
  const trainer = new NanoTrainer(model, { adapter });
  const data: Datum[] = benchTokens(batch, seqLength + 1, model.dims.V, 3).map((seq) => ({
    inputTokens: seq.slice(0, -1),
    targetTokens: seq.slice(1),
    weights: seq.slice(1).map(() => 1 / (batch * seqLength)),
    samplingLogprobs: seq.slice(1).map(() => -11),
    advantages: seq.slice(1).map((_, i) => (i % 2 ? 1 : -1)),
  }));
  const ppo = { kind: 'ppo', clipLow: 0.2, clipHigh: 0.28 } as const;
  const step = async () => {
    await trainer.forwardBackward(data, ppo);
    await trainer.optimStep({ learningRate: 1e-4 });
  };
  await step(); // warm-up (buffers sized, code optimised), as PyTorch's first step is
  const tokensPerS: number[] = [];
  const kernelFraction: number[] = [];
  let profile = profiler.snapshot(0);
  for (let i = 0; i < job.repeats; i++) {
    profiler.reset();
    const t = performance.now();
    await step();
    const ms = performance.now() - t;
    tokensPerS.push((batch * seqLength) / (ms / 1000));
    profile = profiler.snapshot(ms);
    kernelFraction.push(profile.kernelMs / ms);
  }
  const maxRssMb = process.resourceUsage().maxRSS / 1024;
  const { parameterCount } = model;
  const adapterParameters = adapter.parameterCount;
  const kernels = profiler.kernels.name;
  return { tokensPerS, kernelFraction, maxRssMb, loadSeconds, parameterCount, kernels, profile, adapterParameters };
}
