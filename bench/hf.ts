/**
 * `npm run bench -- hf [--smoke] [--threads 1,2] [--repeats N] [--skip parity,torch,small,qwen3]`:
 * Hugging Face models on the embedded engine against PyTorch 1.13 on the same shapes.
 * hf_parity: the share of testkit/hf/parity.ts's fixture comparisons that pass. A SmolLM2-135M-shaped
 * Llama (random weights, cached in bench/out/models/) samples (16 prompts × 64 tokens, 128 new each,
 * temperature 1, no stop) and LoRA-trains (rank 16, all linear layers, PPO, 16 × 192 tokens, forward +
 * backward + AdamW) at each kernel thread count up to os.availableParallelism(), each in a child process
 * (peak RSS = the model's own memory), with a per-kernel profile of a training and a decode step.
 * PyTorch (testkit/reference/hf_torch.py, checked against the fixtures first; OpenBLAS when found) runs
 * the same at the same thread counts; ratios compare each engine's best. A Qwen3-0.6B-shaped model (BF16
 * on disk) samples at batch 16 in a child for its peak RSS. `--smoke`: tiny shapes (hf-smoke.json).
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { hfReferenceDir } from '../testkit/hf/fixtures.js';
import {
  measureSampling,
  measureTraining,
  type MeasureResult,
  type SampleJob,
  type SampleWorkload,
  type TrainJob,
  type TrainWorkload,
} from '../testkit/hf/measure.js';
import { hfParity } from '../testkit/hf/parity.js';
import type { ProfileSnapshot } from '../testkit/hf/profile.js';
import { torchReferenceParity } from '../testkit/hf/torch-reference.js';
import { openblasDir, runHfTorch, torchEnv } from '../testkit/hf/torch.js';
import { cachedModel, type ModelShape } from './models.js';
import { cpuTicks, printTable, stealSince, writeBenchJson } from './util.js';

type Row = Record<string, string | number | null>;

interface Plan {
  small: ModelShape;
  large: ModelShape;
  sample: SampleWorkload;
  train: TrainWorkload;
  /** Context of the large model when loaded (the issue: 256). */
  largeContext: number;
  /** Decode steps profiled after the timed sampling runs. */
  decodeSteps: number;
  /**
   * PyTorch's sequences per forward/backward pass (gradients accumulate): the order of Arbor's own passes
   * (576 rows here); the whole batch at once took 12.8 GB and ran no faster.
   */
  torchMicroBatch: number;
}

const FULL: Plan = {
  // SmolLM2-135M: Llama, hidden 576, 30 layers, 9 heads / 3 KV heads, FFN 1536, vocab 49152, tied
  small: {
    architecture: 'LlamaForCausalLM',
    hiddenSize: 576,
    layers: 30,
    heads: 9,
    kvHeads: 3,
    intermediateSize: 1536,
    vocabSize: 49152,
    tieWordEmbeddings: true,
    ropeTheta: 100000,
    rmsNormEps: 1e-5,
    maxPositionEmbeddings: 8192,
    dtype: 'F32',
    seed: 1,
  },
  // Qwen3-0.6B: hidden 1024, 28 layers, 16 heads / 8 KV heads, head_dim 128, FFN 3072, vocab 151936, tied
  large: {
    architecture: 'Qwen3ForCausalLM',
    hiddenSize: 1024,
    layers: 28,
    heads: 16,
    kvHeads: 8,
    headDim: 128,
    intermediateSize: 3072,
    vocabSize: 151936,
    tieWordEmbeddings: true,
    maxPositionEmbeddings: 40960,
    dtype: 'BF16',
    seed: 1,
  },
  sample: { batch: 16, promptLength: 64, maxTokens: 128 },
  train: { batch: 16, seqLength: 192, rank: 16, alpha: 32 },
  largeContext: 256,
  decodeSteps: 4,
  torchMicroBatch: 4,
};

const SMOKE: Plan = {
  small: { ...FULL.small, hiddenSize: 64, layers: 2, heads: 4, kvHeads: 2, intermediateSize: 128, vocabSize: 512 },
  large: {
    ...FULL.large,
    hiddenSize: 64,
    layers: 2,
    heads: 4,
    kvHeads: 2,
    headDim: 32,
    intermediateSize: 128,
    vocabSize: 1024,
  },
  sample: { batch: 4, promptLength: 8, maxTokens: 8 },
  train: { batch: 4, seqLength: 16, rank: 4, alpha: 8 },
  largeContext: 64,
  decodeSteps: 2,
  torchMicroBatch: 2,
};

const HEADLINE_KEYS = [
  'hf_parity',
  'hf_sample_tok_s',
  'hf_lora_train_tok_s',
  'hf_lora_train_rss_mb',
  'hf_sample_vs_pytorch',
  'hf_lora_train_vs_pytorch',
  'hf_qwen3_06b_sample_rss_mb',
  'hf_qwen3_06b_sample_tok_s',
] as const;
type Headline = Record<(typeof HEADLINE_KEYS)[number], number | null>;

function median(xs: number[]): number {
  const s = xs.slice().sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

const fixed = (xs: number[], digits = 0) => xs.map((x) => x.toFixed(digits)).join(' ');

// ------------------------------------------------------------------------------------------------
// cached random models and child processes

type ChildResult = MeasureResult & { load: [number, number] };

/** One measurement in a fresh Node process (`npm run bench -- hf --child FILE`); `load`: 1-min load before/after. */
function inChild(job: SampleJob | TrainJob): ChildResult {
  const file = join(mkdtempSync(join(tmpdir(), 'arbor-bench-hf-')), 'job.json');
  writeFileSync(file, JSON.stringify(job));
  const runner = join(dirname(fileURLToPath(import.meta.url)), 'run.ts');
  const before = loadavg()[0];
  const r = spawnSync(process.execPath, ['--import', 'tsx', runner, 'hf', '--child', file], {
    encoding: 'utf8',
    maxBuffer: 256 << 20,
  });
  rmSync(dirname(file), { recursive: true, force: true });
  if (r.status !== 0) {
    const why = `exit ${r.status ?? r.signal}`;
    const stderr = (r.stderr || '').slice(-4000);
    throw new Error(`bench hf: ${job.kind} child at ${job.threads} threads failed (${why}):\n${stderr}`);
  }
  const lines = r.stdout.trim().split('\n');
  return { ...(JSON.parse(lines[lines.length - 1]) as MeasureResult), load: [before, loadavg()[0]] };
}

// ------------------------------------------------------------------------------------------------
// options and machine state

interface Options {
  smoke: boolean;
  threads: number[];
  repeats: number;
  skip: Set<string>;
}

const PARTS = ['parity', 'torch', 'small', 'qwen3'];

function parseArgs(args: string[]): Options {
  const value = (flag: string) => {
    const i = args.indexOf(flag);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const cores = availableParallelism();
  const threads = value('--threads')?.split(',').map(Number) ?? Array.from({ length: cores }, (_, i) => i + 1);
  if (threads.some((t) => !Number.isInteger(t) || t < 1 || t > cores)) {
    throw new Error(`--threads: integers from 1 to ${cores}, got ${value('--threads')}`);
  }
  const repeats = Number(value('--repeats') ?? 3);
  if (!Number.isInteger(repeats) || repeats < 1) {
    throw new Error(`--repeats: a positive integer, got ${value('--repeats')}`);
  }
  const skip = new Set((value('--skip') ?? '').split(',').filter(Boolean));
  for (const s of skip) if (!PARTS.includes(s)) throw new Error(`--skip: unknown part ${s} (${PARTS.join(', ')})`);
  return { smoke: args.includes('--smoke'), threads, repeats, skip };
}

/** A hash of HEAD, the uncommitted changes and the untracked files' names: did the tree change mid-run? */
function treeState(): string | null {
  const parts = [
    ['rev-parse', 'HEAD'],
    ['diff', 'HEAD'],
    ['status', '--porcelain'],
  ].map((a) => spawnSync('git', a, { encoding: 'utf8', maxBuffer: 1 << 28 }));
  if (parts.some((r) => r.status !== 0)) return null;
  return createHash('sha256')
    .update(parts.map((r) => r.stdout).join('\0'))
    .digest('hex')
    .slice(0, 16);
}

// ------------------------------------------------------------------------------------------------
// the parts of the bench

type Details = Record<string, unknown>;

/** hf_parity (testkit/hf/parity.ts), then the PyTorch reference on the same fixtures; returns whether torch runs. */
async function parityPart(root: string | undefined, o: Options, headline: Headline, details: Details) {
  if (!root) {
    details.parity = { available: false, reason: 'fixtures ../shared/data/hf-reference absent (set ARBOR_DATA_DIR)' };
    return !o.skip.has('torch');
  }
  if (!o.skip.has('parity')) {
    const { comparisons } = await hfParity(root);
    const passed = comparisons.filter((c) => c.pass).length;
    headline.hf_parity = passed / comparisons.length;
    const worst = comparisons.reduce((a, c) => (c.worstRatio > a.worstRatio ? c : a));
    const failed = comparisons.filter((c) => !c.pass).map((c) => `${c.name}: ${c.detail ?? c.worstRatio}`);
    const worstEntry = { name: worst.name, of_tolerance: worst.worstRatio };
    details.parity = { comparisons: comparisons.length, passed, failed, worst: worstEntry };
    console.log(`\nhf_parity: ${passed}/${comparisons.length} comparisons within tolerance`);
    console.log(`  worst: ${worst.worstRatio.toFixed(3)} of its tolerance (${worst.name})`);
  }
  if (o.skip.has('torch')) return false;
  const ref = torchReferenceParity(root);
  if (!ref.available) {
    details.pytorch = { available: false, reason: ref.reason };
    console.log(`PyTorch not measured: ${ref.reason}`);
    return false;
  }
  const passed = ref.comparisons.filter((c) => c.pass).length;
  const worst = Math.max(...ref.comparisons.map((c) => c.worstRatio));
  details.pytorch_reference_parity = { comparisons: ref.comparisons.length, passed, worst_of_tolerance: worst };
  console.log(`PyTorch reference vs transformers: ${passed}/${ref.comparisons.length} comparisons within tolerance`);
  if (passed !== ref.comparisons.length) {
    throw new Error('hf_torch.py disagrees with the fixtures (see test/hf/torch-reference.test.ts): not timing it');
  }
  return true;
}

function row(engine: string, op: string, threads: number, tokensPerS: number[], rssMb: number, extra: Row): Row {
  return { engine, op, threads, tokens_per_s: median(tokensPerS), runs: fixed(tokensPerS, 1), rss_mb: rssMb, ...extra };
}

interface SmallResults {
  sample: Map<number, ChildResult>;
  train: Map<number, ChildResult>;
  torchSample: Map<number, number>;
  torchTrain: Map<number, number>;
  rows: Row[];
}

/** The 135M-shaped model: Arbor at each thread count, each measurement in a child. */
function arborPart(dir: string, plan: Plan, o: Options, res: SmallResults): void {
  for (const threads of o.threads) {
    const decodeSteps = threads === o.threads[0] ? plan.decodeSteps : 0;
    const s = inChild({ kind: 'sample', dir, threads, sample: plan.sample, repeats: o.repeats, decodeSteps });
    const t = inChild({ kind: 'train', dir, threads, train: plan.train, repeats: o.repeats });
    res.sample.set(threads, s);
    res.train.set(threads, t);
    for (const [op, r] of [
      ['sample', s],
      ['lora train', t],
    ] as const) {
      res.rows.push(
        row('arbor', op, threads, r.tokensPerS, r.maxRssMb, {
          kernel_fraction: median(r.kernelFraction),
          load_1min: r.load[0],
        }),
      );
      console.log(JSON.stringify(res.rows[res.rows.length - 1]));
    }
  }
}

/** The same model, workloads and thread counts in PyTorch (OpenBLAS when found). */
function torchPart(dir: string, plan: Plan, o: Options, res: SmallResults, details: Details): void {
  const torch: Details = { available: true, openblas_dir: openblasDir() ?? null, runs: {} };
  if (!openblasDir()) {
    console.log('note: no OpenBLAS (apt-get install libopenblas0-pthread, or set ARBOR_TORCH_BLAS_DIR):');
    console.log('      PyTorch uses the system libblas.so.3 (Debian default: the slow reference BLAS)');
  }
  type Speed = { tokens_per_s: number[]; adapter_parameters?: number };
  for (const threads of o.threads) {
    const env = torchEnv(threads, true);
    const s = runHfTorch<Speed>('sample', { model: dir, threads, ...plan.sample, repeats: o.repeats }, env);
    const trainJob = { model: dir, threads, ...plan.train, microBatch: plan.torchMicroBatch, repeats: o.repeats };
    const t = runHfTorch<Speed>('train', trainJob, env);
    if (!s.ok || !t.ok) throw new Error(`PyTorch vanished between runs: ${!s.ok ? s.reason : !t.ok ? t.reason : ''}`);
    Object.assign(torch, { blas: s.out.blas, version: s.out.torch, adapter_parameters: t.out.adapter_parameters });
    (torch.runs as Details)[threads] = { sample: s.out, train: t.out };
    res.torchSample.set(threads, median(s.out.tokens_per_s));
    res.torchTrain.set(threads, median(t.out.tokens_per_s));
    const extra = { kernel_fraction: null, load_1min: loadavg()[0] };
    res.rows.push(row('pytorch', 'sample', threads, s.out.tokens_per_s, s.out.max_rss_mb, extra));
    res.rows.push(row('pytorch', 'lora train', threads, t.out.tokens_per_s, t.out.max_rss_mb, extra));
    console.log(JSON.stringify(res.rows.slice(-2)));
  }
  details.pytorch = torch;
}

/** The thread count with the best median and that median. */
function bestOf(m: Map<number, number>): [number, number] {
  return [...m.entries()].reduce((a, e) => (e[1] > a[1] ? e : a));
}

const medians = (m: Map<number, ChildResult>) => new Map([...m].map(([t, c]) => [t, median(c.tokensPerS)]));

/** Runs the 135M-shaped part and fills its headline keys; returns Arbor's best sampling thread count. */
function smallModelPart(plan: Plan, o: Options, torchOk: boolean, headline: Headline, details: Details): number {
  const small = cachedModel(plan.small);
  console.log(`\nmodel ${small.dir} (${small.note})`);
  const res: SmallResults = {
    sample: new Map(),
    train: new Map(),
    torchSample: new Map(),
    torchTrain: new Map(),
    rows: [],
  };
  arborPart(small.dir, plan, o, res);
  if (torchOk) torchPart(small.dir, plan, o, res, details);
  const [sampleThreads, sample] = bestOf(medians(res.sample));
  const [trainThreads, train] = bestOf(medians(res.train));
  headline.hf_sample_tok_s = sample;
  headline.hf_lora_train_tok_s = train;
  headline.hf_lora_train_rss_mb = res.train.get(trainThreads)!.maxRssMb;
  const best: Details = { arbor_sample: sampleThreads, arbor_train: trainThreads };
  if (torchOk) {
    const [ts, torchSample] = bestOf(res.torchSample);
    const [tt, torchTrain] = bestOf(res.torchTrain);
    headline.hf_sample_vs_pytorch = sample / torchSample;
    headline.hf_lora_train_vs_pytorch = train / torchTrain;
    Object.assign(best, { pytorch_sample: ts, pytorch_train: tt });
  }
  console.log('');
  printTable(res.rows);
  const runs = (m: Map<number, ChildResult>) =>
    Object.fromEntries([...m].map(([t, c]) => [t, { ...c, profile: undefined, decodeStep: undefined }]));
  const arbor = { sample: runs(res.sample), train: runs(res.train) };
  Object.assign(details, { best_threads: best, rows: res.rows, arbor });
  const first = o.threads[0];
  details.where_time_goes = whereTimeGoes(res.sample.get(first)!, res.train.get(first)!, o.threads, torchOk);
  return sampleThreads;
}

type GemmShape = { op: string; M: number; K: number; N: number; ms: number; gflops: number; where: string };

/** Every GEMM shape taking ≥ 1% of its step (the 24 slowest), with PyTorch's GFLOP/s at each thread count. */
function gemmVersusTorch(profiles: Array<[ProfileSnapshot, string]>, threads: number[], torchOk: boolean): Row[] {
  const shapes = new Map<string, GemmShape>();
  for (const [p, where] of profiles) {
    for (const g of p.gemm) {
      const key = `${g.op} ${g.M} ${g.K} ${g.N}`;
      if (g.ms >= 0.01 * p.wallMs && !((shapes.get(key)?.ms ?? -Infinity) > g.ms)) shapes.set(key, { ...g, where });
    }
  }
  const top = [...shapes.values()].sort((a, b) => b.ms - a.ms).slice(0, 24);
  const torch = new Map<number, number[]>();
  for (const t of torchOk && top.length ? threads : []) {
    const job = { threads: t, shapes: top.map(({ op, M, K, N }) => ({ op, M, K, N })) };
    const r = runHfTorch<{ shapes: Array<{ gflops: number }> }>('gemm', job, torchEnv(t, true));
    if (r.ok)
      torch.set(
        t,
        r.out.shapes.map((s) => s.gflops),
      );
  }
  return top.map((s, i) => ({
    where: s.where,
    kernel: `${s.op} ${s.M}×${s.K}×${s.N}`,
    ms: s.ms,
    arbor_gflops: s.gflops,
    ...Object.fromEntries(threads.map((t) => [`pytorch_${t}t_gflops`, torch.get(t)?.[i] ?? null])),
  }));
}

/** Per-kernel tables of a training step and a decode step (at the first thread count) and the GEMM comparison. */
function whereTimeGoes(sample: ChildResult, train: ChildResult, threads: number[], torchOk: boolean): Details {
  const decode = sample.decodeStep!;
  const tp = train.profile;
  const gemm = gemmVersusTorch(
    [
      [tp, 'train step'],
      [decode, 'decode step'],
    ],
    threads,
    torchOk,
  );
  const table = (p: ProfileSnapshot) => [
    ...p.kernels.map((k) => ({ ...k, share: k.ms / p.wallMs })),
    { kernel: '(outside kernels)', calls: null, ms: p.otherMs, share: p.otherMs / p.wallMs },
  ];
  const rate = (p: ProfileSnapshot) =>
    `GEMMs ${p.gemmGflop.toPrecision(4)} GFLOP, ${p.gemmGflopsOverWall.toFixed(1)} GFLOP/s over it`;
  console.log(`\nwhere the time goes at ${threads[0]} thread(s)`);
  console.log(`one LoRA training step: ${tp.wallMs.toFixed(0)} ms; ${rate(tp)}`);
  printTable(table(tp));
  console.log(`\none decode forward of ${decode.rows} rows: ${decode.wallMs.toFixed(1)} ms; ${rate(decode)}`);
  const kv = `KV gather ${decode.kvGatherMs.toFixed(1)} ms, KV write ${decode.kvWriteMs.toFixed(1)} ms`;
  console.log(`  of the ${decode.otherMs.toFixed(1)} ms outside kernels: ${kv}`);
  printTable(table(decode));
  const run = sample.profile;
  console.log(`\none whole sampling run: ${run.wallMs.toFixed(0)} ms (prefill, decode and choosing tokens)`);
  printTable(table(run));
  console.log('\nGEMM shapes (≥ 1% of their step): Arbor GFLOP/s vs PyTorch');
  printTable(gemm);
  const sampleRun = sample.profile;
  return { threads: threads[0], train_step: tp, decode_step: decode, sample_run: sampleRun, gemm_vs_pytorch: gemm };
}

/** The Qwen3-0.6B-shaped model: one sampling run in a child (its peak RSS and tokens/s). */
function qwen3Part(plan: Plan, threads: number, headline: Headline, details: Details): void {
  const large = cachedModel(plan.large);
  console.log(`\nmodel ${large.dir} (${large.note}); sampling at ${threads} threads ...`);
  const q = inChild({
    kind: 'sample',
    dir: large.dir,
    threads,
    contextLength: plan.largeContext,
    sample: plan.sample,
    repeats: 1,
    decodeSteps: 2,
  });
  headline.hf_qwen3_06b_sample_rss_mb = q.maxRssMb;
  headline.hf_qwen3_06b_sample_tok_s = q.tokensPerS[0];
  details.qwen3_06b = { dir: large.dir, threads, ...q };
  console.log(`Qwen3-0.6B shape: ${q.tokensPerS[0].toFixed(1)} tokens/s, peak RSS ${q.maxRssMb.toFixed(0)} MB`);
  console.log(`  (${q.parameterCount} parameters, loaded in ${q.loadSeconds.toFixed(1)} s)`);
}

// ------------------------------------------------------------------------------------------------

export async function main(args: string[]): Promise<void> {
  if (args[0] === '--child') {
    const job = JSON.parse(readFileSync(args[1], 'utf8')) as SampleJob | TrainJob;
    console.log(JSON.stringify(job.kind === 'sample' ? await measureSampling(job) : await measureTraining(job)));
    return;
  }
  const o = parseArgs(args);
  const plan = o.smoke ? SMOKE : FULL;
  const ticks = cpuTicks();
  const loadStart = loadavg();
  const headline = Object.fromEntries(HEADLINE_KEYS.map((k) => [k, null])) as Headline;
  const treeAtStart = treeState();
  // commit, dirty, node and date: the provenance writeBenchJson adds (bench/util.ts)
  const details: Details = { smoke: o.smoke, plan, threads: o.threads, repeats: o.repeats };
  const what = `threads ${o.threads.join(',')}, ${o.repeats} repeats`;
  console.log(`bench hf${o.smoke ? ' (smoke shapes)' : ''}: ${what}; load average ${fixed(loadStart, 2)}`);

  const torchOk = await parityPart(hfReferenceDir(), o, headline, details);
  let sampleThreads = o.threads[o.threads.length - 1];
  if (!o.skip.has('small')) sampleThreads = smallModelPart(plan, o, torchOk, headline, details);
  if (!o.skip.has('qwen3')) qwen3Part(plan, sampleThreads, headline, details);

  const treeAtEnd = treeState();
  details.working_tree = { at_start: treeAtStart, at_end: treeAtEnd, changed_during_run: treeAtStart !== treeAtEnd };
  if (treeAtStart !== treeAtEnd) console.log('\nwarning: the working tree changed during the run');
  const loadEnd = loadavg();
  const steal = stealSince(ticks);
  const cores = availableParallelism();
  details.machine_load = { loadavg_start: loadStart, loadavg_end: loadEnd, steal_fraction: steal, cores };
  const stolen = steal === null ? '' : `; steal ${(100 * steal).toFixed(1)}%`;
  console.log(`\nload average ${fixed(loadStart, 2)} at the start, ${fixed(loadEnd, 2)} at the end${stolen}`);
  console.log(JSON.stringify(headline));
  writeBenchJson(o.smoke ? 'hf-smoke' : 'hf', headline, details);
}
