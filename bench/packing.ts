/**
 * `npm run bench -- packing [--skip-example] [--skip main,agent,grpo,torch] [--repeats N] [--grpo-repeats N]
 * [--main-steps N] [--agent-steps N] [--threads 1,2]`: tree packing of training batches (NanoTrainer's
 * `packing: 'tree' | 'flat'`, src/engine/model/packing.ts) against the flat layout, on the same datums.
 *
 * Matched control everywhere: ONE NanoTrainer on ONE set of weights, its `packing` switched between runs,
 * the weights restored before every run, the two layouts alternating (flat first on even repetitions,
 * tree first on odd ones) so drift in the machine's load falls on both; a trainer step is forwardBackward
 * + optimStep (what the learner calls per update); medians over the repetitions. Parts:
 * - main job: examples/arith-treepo.yaml (its cached SFT warm start) run through the library for
 *   --main-steps RL steps in a child process; every batch the learner hands trainer.forwardBackward is
 *   captured (datums, loss, the weights at that moment), then timed both ways at the job's engine.threads.
 * - agent: examples/calculator-agent.yaml with turn trees (bench/agent.ts's `uniform` variant: 4 episodes
 *   per prompt, each turn boundary branching in 2 within 8 leaves, fork advantages), captured the same way;
 *   its episodes share the system prompt, the tool schemas and earlier turns. The first run makes the
 *   example's SFT warm start (cached under runs/_sft/ after that).
 * - GRPO group: a SmolLM2-135M-shaped Llama (bench/hf.ts's shape, random weights, cached in
 *   bench/out/models/), a rank-16 LoRA on all seven projections, one group: a 256-token prompt and G = 8
 *   i.i.d. 128-token responses (random ids), PPO with one advantage per response; flat and tree at the
 *   largest --threads, tree alone (once: it only picks the best thread count) at the others, each thread
 *   count in its own child (the trainer's default budget: the group's forest in one pass); then, as a
 *   detail only, the group split into passes of the prompt and two responses (what the former 768 MiB
 *   budget held: each pass recomputes the prompt). The same group
 *   with full-weight training on bench/hf.ts's smoke-sized model checks every weight's gradient.
 * - float64: on a slice of the first main-job and agent batch and on the smoke group, both layouts on
 *   float64 reference kernels too: tree vs flat there shows whether the packing is exact, and each float32
 *   layout against float64 shows whose rounding the float32 difference is.
 * - PyTorch (testkit/reference/hf_torch.py, as bench/hf.ts drives it, OpenBLAS when found): the same
 *   model, adapter and sequence lengths, 8 sequences of 384 tokens (383 trained positions each) trained one
 *   by one (micro-batch 1, as TRL and verl do by default), forward + backward + AdamW, one warm-up step
 *   then one timed, at each thread count. Its token ids are hf_torch.py's own (dense compute does not
 *   depend on them).
 * - HF example: `arbor train examples/hf-qwen3-lora.yaml --force`, its held-out greedy accuracy from
 *   metrics.jsonl (--skip-example: the latest run's metrics as they are, said so in the output).
 *
 * Headline: packed_grad_max_rel_err (the worst parameter's gradient, ‖tree − flat‖ / ‖flat‖ per tensor on
 * float32 WASM kernels, over every matched pair above: GradDiff.normwise_per_tensor; the worst single entry,
 * GradDiff.rel, is beside it), main_job_train_speedup, grpo_group_train_speedup,
 * agent_tree_train_speedup (flat ÷ tree trainer time per step; over several steps, ÷ of the sums of the
 * per-step medians), hf_grpo_train_vs_pytorch (trained tokens/s: Arbor tree at its best thread count ÷
 * PyTorch at its best), hf_example_gain_pts (final − initial eval_greedy_acc, points). Beside it in the
 * JSON: kernel_ratio_flat_vs_pytorch (Arbor flat ÷ PyTorch's best, token for token, as bench/hf.ts's
 * hf_lora_train_vs_pytorch; Arbor flat runs at the largest --threads only), machine_load (load averages at
 * the start and end, steal, cores; each row also has the 1-minute load when its child ended).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Rng } from '../src/core/rng.js';
import { loadHfModel } from '../src/engine/hf/model.js';
import { loadKernels, type Kernels } from '../src/engine/kernels/index.js';
import { referenceKernels64 } from '../src/engine/kernels/reference.js';
import { ALL_LORA_MODULES, LoraAdapter } from '../src/engine/model/lora.js';
import { NanoModel } from '../src/engine/model/model.js';
import type { NanoConfig } from '../src/engine/model/config.js';
import type { ParamArena } from '../src/engine/model/params.js';
import { NanoTrainer, type TrainerPacking } from '../src/engine/embedded/trainer.js';
import type { Datum, ForwardBackwardResult, LossExtras, LossSpec } from '../src/engine/types.js';
import { loadConfig } from '../src/run/config.js';
import { cachedModel, type ModelShape } from './models.js';
import { train } from '../src/run/loop.js';
import { RunDir } from '../src/run/rundir.js';
import { sftCacheDir } from '../src/run/warm-start.js';
import { openblasDir, runHfTorch, torchEnv } from '../testkit/hf/torch.js';
import { cpuTicks, printTable, repoDir, stealSince, writeBenchJson } from './util.js';

type Row = Record<string, string | number | null>;
type Raw = Record<string, unknown>;

const GOALS = {
  packed_grad_max_rel_err: { max: 1e-4 },
  main_job_train_speedup: { min: 1.8 },
  grpo_group_train_speedup: { min: 1.6 },
  agent_tree_train_speedup: { min: 2 },
  hf_grpo_train_vs_pytorch: { min: 1.5 },
  hf_example_gain_pts: {},
} as const;
type HeadlineKey = keyof typeof GOALS;
type Headline = Record<HeadlineKey, number | null>;

/** bench/hf.ts's SmolLM2-135M shape (the same cache key, so either bench reuses the other's model). */
const SMALL_135M: ModelShape = {
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
};
/** bench/hf.ts's smoke shape of the same model: full-weight gradients checked cheaply. */
const SMOKE: ModelShape = {
  ...SMALL_135M,
  hiddenSize: 64,
  layers: 2,
  heads: 4,
  kvHeads: 2,
  intermediateSize: 128,
  vocabSize: 512,
};

interface GroupShape {
  prompt: number;
  group: number;
  response: number;
}
const GROUP: GroupShape = { prompt: 256, group: 8, response: 128 };
const LORA = { rank: 16, alpha: 32 };
const PPO: LossSpec = { kind: 'ppo', clipLow: 0.2, clipHigh: 0.28 };
/** The learning rate of the timed optimiser steps (the weights are restored before every run anyway). */
const TIMED_LR = 1e-4;

/** bench/agent.ts's `uniform` variant: turn trees. */
const AGENT_TREES: Raw = {
  generate: { branching: 'uniform', rootCopies: 4, branchFactor: 2 },
  optimize: { advantage: { kind: 'fork' } },
};

// ------------------------------------------------------------------------------------------------
// small helpers

function median(xs: number[]): number {
  const s = xs.slice().sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

const fixed = (xs: number[], digits = 0) => xs.map((x) => x.toFixed(digits)).join(' ');
const log = (line: string) => console.error(line);

/** How far one gradient is from another (`b`, the flat layout's or the float64 one). */
interface GradDiff {
  /**
   * The worst entry's |a − b| / max(|b|, 1e-3 · max|b|), max|b| over the whole
   * gradient: an entry a thousand times below the largest is compared against a thousandth of it, so the
   * rounding of a near-zero entry (a cancellation) is not read as a large relative error.
   */
  rel: number;
  /** The same with max|b| taken over the entry's own tensor (stricter for tensors of small gradients). */
  rel_per_tensor: number;
  /** ‖a − b‖₂ / ‖b‖₂ over the whole gradient. */
  normwise: number;
  /** The tensor holding the worst entry of `rel`. */
  worst_tensor: string;
  /**
   * The headline's measure: the worst parameter's gradient, ‖a − b‖₂ / ‖b‖₂ over each tensor (max over
   * tensors; a tensor whose `b` is all zero counts only if `a` differs from it).
   */
  normwise_per_tensor: number;
  /** The tensor of the worst normwise_per_tensor. */
  worst_tensor_normwise: string;
}

function gradDiff(a: ArrayLike<number>, b: ArrayLike<number>, arena: ParamArena): GradDiff {
  let globalMax = 0;
  let diff2 = 0;
  let norm2 = 0;
  for (let i = 0; i < b.length; i++) {
    globalMax = Math.max(globalMax, Math.abs(b[i]));
    diff2 += (a[i] - b[i]) ** 2;
    norm2 += b[i] ** 2;
  }
  const ratio = (d: number, floor: number) => (d === 0 ? 0 : floor > 0 ? d / floor : Infinity);
  let rel = 0;
  let relPerTensor = 0;
  let worstTensor = '';
  let normwisePerTensor = 0;
  let worstNormwise = '';
  for (const spec of arena.specs) {
    const o = arena.offsets.get(spec.name)!;
    const n = arena.get(spec.name).length;
    let tensorMax = 0;
    let tDiff2 = 0;
    let tNorm2 = 0;
    for (let i = o; i < o + n; i++) {
      tensorMax = Math.max(tensorMax, Math.abs(b[i]));
      tDiff2 += (a[i] - b[i]) ** 2;
      tNorm2 += b[i] ** 2;
    }
    const tensorNormwise = tDiff2 === 0 ? 0 : tNorm2 > 0 ? Math.sqrt(tDiff2 / tNorm2) : Infinity;
    if (tensorNormwise > normwisePerTensor) [normwisePerTensor, worstNormwise] = [tensorNormwise, spec.name];
    for (let i = o; i < o + n; i++) {
      const d = Math.abs(a[i] - b[i]);
      const e = ratio(d, Math.max(Math.abs(b[i]), 1e-3 * globalMax));
      if (e > rel) [rel, worstTensor] = [e, spec.name];
      relPerTensor = Math.max(relPerTensor, ratio(d, Math.max(Math.abs(b[i]), 1e-3 * (tensorMax || globalMax))));
    }
  }
  const normwise = norm2 > 0 ? Math.sqrt(diff2 / norm2) : diff2 > 0 ? Infinity : 0;
  return {
    rel,
    rel_per_tensor: relPerTensor,
    normwise,
    worst_tensor: worstTensor,
    normwise_per_tensor: normwisePerTensor,
    worst_tensor_normwise: worstNormwise,
  };
}

// ------------------------------------------------------------------------------------------------
// the matched timing of one batch

type Mode = TrainerPacking;

/** One batch timed both ways (or tree alone); times are trainer steps (forwardBackward + optimStep), ms. */
interface TimedBatch {
  datums: number;
  /** Positions trained (the flat layout's rows). */
  tokens: number;
  /** Rows the tree layout computed (train_token_ratio × tokens). */
  rows: number;
  flat_ms: number[];
  tree_ms: number[];
  /**
   * CPU time of the same steps (the whole process: kernel threads included), ms: on a machine other jobs
   * load, the wall time grows with the CPU share it gets, the CPU time much less.
   */
  flat_cpu_ms: number[];
  tree_cpu_ms: number[];
  /** gradDiff(tree, flat) of the first repetition; null when flat was not run. */
  grad: GradDiff | null;
  /** |loss_tree − loss_flat| / |loss_flat| and the largest |Δ log-prob| of any position. */
  loss_rel_diff: number | null;
  logprob_max_diff: number | null;
}

/**
 * Times `datums` on `trainer` in `modes` for `repeats` repetitions each (alternating which goes first),
 * restoring the trained weights to `snapshot` before every run. `warm`: 'both' runs each mode once
 * untimed first; a datum list warms up on that batch (tree) and discards its gradients.
 */
async function timeBatch(
  trainer: NanoTrainer,
  snapshot: Float32Array,
  datums: Datum[],
  loss: LossSpec,
  extras: LossExtras | undefined,
  modes: Mode[],
  repeats: number,
  warm: 'both' | Datum[] | 'none',
): Promise<TimedBatch> {
  const trained = trainer.adapter ?? trainer.model;
  const run = async (mode: Mode, keep: boolean) => {
    trained.params.data.set(snapshot);
    trainer.packing = mode;
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    const out = await trainer.forwardBackward(datums, loss, extras);
    const t1 = performance.now();
    const c1 = process.cpuUsage(c0);
    const grads = keep ? Float32Array.from(trained.grads.data) : undefined;
    const c2 = process.cpuUsage();
    const t2 = performance.now();
    await trainer.optimStep({ learningRate: TIMED_LR });
    const ms = t1 - t0 + (performance.now() - t2);
    const c3 = process.cpuUsage(c2);
    const cpuMs = (c1.user + c1.system + c3.user + c3.system) / 1000;
    return { ms, cpuMs, out, grads };
  };
  if (warm === 'both') for (const m of modes) await run(m, false);
  else if (warm !== 'none') {
    trainer.packing = 'tree';
    await trainer.forwardBackward(warm, loss, extras);
    trainer.zeroGrad();
  }
  const ms: Record<Mode, number[]> = { flat: [], tree: [] };
  const cpu: Record<Mode, number[]> = { flat: [], tree: [] };
  const first: Partial<Record<Mode, { out: ForwardBackwardResult; grads?: Float32Array }>> = {};
  let rows = NaN;
  for (let r = 0; r < repeats; r++) {
    for (const mode of r % 2 ? [...modes].reverse() : modes) {
      const res = await run(mode, r === 0);
      ms[mode].push(res.ms);
      cpu[mode].push(res.cpuMs);
      if (r === 0) first[mode] = res;
      if (mode === 'tree') rows = res.out.metrics.train_token_ratio * res.out.metrics.tokens;
      log(`    ${mode} ${res.ms.toFixed(0)} ms (CPU ${res.cpuMs.toFixed(0)} ms)`);
    }
  }
  trainer.packing = 'tree';
  const tokens = datums.reduce((s, d) => s + d.inputTokens.length, 0);
  const f = first.flat;
  const t = first.tree;
  let lpDiff: number | null = null;
  if (f && t) {
    lpDiff = 0;
    f.out.logprobs.forEach((lps, i) =>
      lps.forEach((lp, j) => (lpDiff = Math.max(lpDiff!, Math.abs(lp - t.out.logprobs[i][j])))),
    );
  }
  return {
    datums: datums.length,
    tokens,
    rows: Number.isNaN(rows) ? tokens : Math.round(rows),
    flat_ms: ms.flat,
    tree_ms: ms.tree,
    flat_cpu_ms: cpu.flat,
    tree_cpu_ms: cpu.tree,
    grad: f && t ? gradDiff(t.grads!, f.grads!, trained.params) : null,
    loss_rel_diff: f && t ? Math.abs(t.out.loss - f.out.loss) / Math.max(Math.abs(f.out.loss), 1e-30) : null,
    logprob_max_diff: lpDiff,
  };
}

/** Each layout on float64 reference kernels and on the float32 WASM ones, on the same datums and weights. */
interface Float64Check {
  datums: number;
  /** The packing's exactness: only float64 rounding separates the layouts (~1e-12 when exact). */
  tree_vs_flat_f64: GradDiff;
  /** Each float32 layout's own rounding, against the float64 flat gradient. */
  flat_f32_vs_f64: GradDiff;
  tree_f32_vs_f64: GradDiff;
  /** What the headline measures, on these datums. */
  tree_vs_flat_f32: GradDiff;
  seconds: number;
}

/**
 * The float64 check of a full-model batch: `make` builds the model (its weights set) on the given kernels;
 * `trainer` is the float32 one, whose weights are restored to `snapshot` first. The plain-TS float64
 * kernels are slow: callers pass a slice of a batch.
 */
async function float64Check(
  make: (kernels: Kernels) => Promise<NanoModel>,
  trainer: NanoTrainer,
  snapshot: Float32Array,
  datums: Datum[],
  loss: LossSpec,
  extras: LossExtras | undefined,
): Promise<Float64Check> {
  const t0 = performance.now();
  const gradsOf = async (t: NanoTrainer, mode: Mode) => {
    if (t === trainer) t.model.params.data.set(snapshot);
    t.packing = mode;
    await t.forwardBackward(datums, loss, extras);
    const g = Float64Array.from(t.model.grads.data);
    t.zeroGrad();
    return g;
  };
  const f32 = { flat: await gradsOf(trainer, 'flat'), tree: await gradsOf(trainer, 'tree') };
  trainer.packing = 'tree';
  const model64 = await make(referenceKernels64 as unknown as Kernels);
  const trainer64 = new NanoTrainer(model64);
  const f64 = { flat: await gradsOf(trainer64, 'flat'), tree: await gradsOf(trainer64, 'tree') };
  const arena = trainer.model.params;
  return {
    datums: datums.length,
    tree_vs_flat_f64: gradDiff(f64.tree, f64.flat, arena),
    flat_f32_vs_f64: gradDiff(f32.flat, f64.flat, arena),
    tree_f32_vs_f64: gradDiff(f32.tree, f64.flat, arena),
    tree_vs_flat_f32: gradDiff(f32.tree, f32.flat, arena),
    seconds: (performance.now() - t0) / 1000,
  };
}

// ------------------------------------------------------------------------------------------------
// child jobs (each in its own process: a fresh WASM memory, the model's own threads)

interface CaptureJob {
  kind: 'capture';
  label: string;
  config: string;
  overrides: Raw;
  steps: number;
  repeats: number;
  /** Datums of the first batch checked on float64 kernels (0: none). */
  float64Datums: number;
}

interface CaptureResult {
  label: string;
  threads: number;
  kernels: string;
  run_s: number;
  batches: TimedBatch[];
  float64: Float64Check | null;
}

interface GrpoJob {
  kind: 'grpo';
  label: string;
  dir: string;
  threads: number;
  modes: Mode[];
  repeats: number;
  lora: { rank: number; alpha: number } | null;
  shape: GroupShape;
  /** Full weights only: check the group on float64 kernels too. */
  float64: boolean;
  /** NanoTrainer's maxRowsPerPass (default: the trainer's own budget). */
  maxRowsPerPass?: number;
}

interface GrpoResult {
  label: string;
  threads: number;
  kernels: string;
  trained_parameters: number;
  batch: TimedBatch;
  float64: Float64Check | null;
}

type Job = CaptureJob | GrpoJob;

/** A run of `job.config` for `job.steps` RL steps, its forwardBackward batches captured, then each timed. */
async function captureChild(job: CaptureJob): Promise<CaptureResult> {
  const out = mkdtempSync(join(tmpdir(), 'arbor-bench-packing-run-'));
  const quick = { evalEvery: 0, evalCount: 8, evalPassK: 0, checkpointEvery: 0, logTreesEvery: 0, outDir: out };
  const overrides = { ...job.overrides, run: { ...((job.overrides.run as Raw) ?? {}), ...quick, steps: job.steps } };
  const config = loadConfig(job.config, overrides);
  type Captured = { datums: Datum[]; loss: LossSpec; extras?: LossExtras; params: Float32Array; config: NanoConfig };
  const captured: Captured[] = [];
  const original = NanoTrainer.prototype.forwardBackward;
  // the learner's RL updates only: the SFT warm start calls the same method with cross-entropy
  NanoTrainer.prototype.forwardBackward = function (this: NanoTrainer, data, loss, extras) {
    if (loss.kind !== 'cross_entropy') {
      if (this.adapter) throw new Error(`${job.config}: a LoRA run; this bench captures full-model runs`);
      captured.push({
        datums: structuredClone(data),
        loss: structuredClone(loss),
        extras: structuredClone(extras),
        params: Float32Array.from(this.model.params.data),
        config: this.model.config,
      });
    }
    return original.call(this, data, loss, extras);
  };
  const t0 = performance.now();
  try {
    await train(config, { force: true, quiet: true });
  } finally {
    NanoTrainer.prototype.forwardBackward = original;
    rmSync(out, { recursive: true, force: true });
  }
  const runS = (performance.now() - t0) / 1000;
  if (!captured.length) throw new Error(`${job.config}: the run made no RL update to capture`);
  const threads = config.engine.threads;
  const kernels = await loadKernels({ backend: config.engine.kernels, threads });
  const model = NanoModel.createEmpty(captured[0].config, kernels);
  const trainer = new NanoTrainer(model);
  const batches: TimedBatch[] = [];
  for (const [i, c] of captured.entries()) {
    log(`  ${job.label} step ${i + 1}/${captured.length}: ${c.datums.length} datums`);
    const warm = i === 0 ? 'both' : 'none';
    batches.push(await timeBatch(trainer, c.params, c.datums, c.loss, c.extras, ['flat', 'tree'], job.repeats, warm));
  }
  let float64: Float64Check | null = null;
  if (job.float64Datums > 0) {
    const [c] = captured;
    const slice = c.datums.slice(0, job.float64Datums);
    log(`  ${job.label}: float64 check on the first ${slice.length} datums of step 1`);
    const make = (k: Kernels) => {
      const m = NanoModel.createEmpty(c.config, k);
      m.params.data.set(c.params);
      return Promise.resolve(m);
    };
    float64 = await float64Check(make, trainer, c.params, slice, c.loss, c.extras);
  }
  return { label: job.label, threads, kernels: kernels.name, run_s: runS, batches, float64 };
}

/** One GRPO group: a shared random prompt, G i.i.d. random responses, one advantage per response (as buildDatums lays it out). */
function groupDatums(V: number, shape: GroupShape, seed: number): Datum[] {
  const rng = new Rng(seed);
  const id = () => 5 + rng.int(V - 5);
  const prompt = Array.from({ length: shape.prompt }, id);
  const rewards = Array.from({ length: shape.group }, (_, g) => (g % 3 === 0 ? 1 : 0) + 0.1 * rng.next());
  const mean = rewards.reduce((a, b) => a + b, 0) / rewards.length;
  const std = Math.sqrt(rewards.reduce((a, b) => a + (b - mean) ** 2, 0) / rewards.length) || 1;
  const P = shape.prompt;
  return rewards.map((reward) => {
    const seq = prompt.concat(Array.from({ length: shape.response }, id));
    const T = seq.length - 1;
    const weights = new Array<number>(T).fill(0);
    const samplingLogprobs = new Array<number>(T).fill(0);
    const advantages = new Array<number>(T).fill(0);
    for (let t = 0; t < shape.response; t++) {
      weights[P - 1 + t] = 1 / (shape.group * shape.response); // token_mean
      samplingLogprobs[P - 1 + t] = -Math.log(V) + 0.3 * rng.normal(); // a random model's log-probs are near −log V
      advantages[P - 1 + t] = (reward - mean) / std;
    }
    return { inputTokens: seq.slice(0, -1), targetTokens: seq.slice(1), weights, samplingLogprobs, advantages };
  });
}

async function grpoChild(job: GrpoJob): Promise<GrpoResult> {
  const kernels = await loadKernels({ threads: job.threads });
  const length = job.shape.prompt + job.shape.response;
  const { model } = await loadHfModel(job.dir, { kernels, contextLength: length });
  let trainer: NanoTrainer;
  let trainedParameters: number;
  if (job.lora) {
    const adapter = new LoraAdapter(model, { ...job.lora, targets: ALL_LORA_MODULES });
    adapter.initialise(1);
    // B ≠ 0 (PEFT starts it at 0): every adapter weight then has a gradient to compare
    const rng = new Rng(2);
    for (const layer of adapter.layers)
      for (const t of Object.values(layer)) for (let i = 0; i < t.B.length; i++) t.B[i] = 0.01 * rng.normal();
    trainer = new NanoTrainer(model, { adapter, maxRowsPerPass: job.maxRowsPerPass });
    trainedParameters = adapter.parameterCount;
  } else {
    trainer = new NanoTrainer(model, { maxRowsPerPass: job.maxRowsPerPass });
    trainedParameters = model.parameterCount;
  }
  const trained = trainer.adapter ?? model;
  const snapshot = Float32Array.from(trained.params.data);
  const datums = groupDatums(model.dims.V, job.shape, 7);
  log(`  ${job.label} at ${job.threads} thread(s): ${job.modes.join(' + ')}, ${job.repeats} repetition(s)`);
  const warm = datums.slice(0, 2); // sizes the buffers of a 2-datum tree pass, tiers the WASM up
  const batch = await timeBatch(trainer, snapshot, datums, PPO, undefined, job.modes, job.repeats, warm);
  let float64: Float64Check | null = null;
  if (job.float64 && !job.lora) {
    log(`  ${job.label}: float64 check`);
    const make = async (k: Kernels) => (await loadHfModel(job.dir, { kernels: k, contextLength: length })).model;
    float64 = await float64Check(make, trainer, snapshot, datums, PPO, undefined);
  }
  const result = {
    label: job.label,
    threads: job.threads,
    kernels: kernels.name,
    trained_parameters: trainedParameters,
  };
  return { ...result, batch, float64 };
}

/** One job in a fresh Node process (`npm run bench -- packing --child FILE`); its progress goes to stderr. */
function inChild<T>(job: Job): T & { load: [number, number] } {
  const file = join(mkdtempSync(join(tmpdir(), 'arbor-bench-packing-')), 'job.json');
  writeFileSync(file, JSON.stringify(job));
  const runner = join(dirname(fileURLToPath(import.meta.url)), 'run.ts');
  const before = loadavg()[0];
  const r = spawnSync(process.execPath, ['--import', 'tsx', runner, 'packing', '--child', file], {
    encoding: 'utf8',
    maxBuffer: 256 << 20,
    stdio: ['ignore', 'pipe', 'inherit'],
    cwd: repoDir,
  });
  rmSync(dirname(file), { recursive: true, force: true });
  if (r.status !== 0)
    throw new Error(`bench packing: ${job.kind} child "${job.label}" failed (exit ${r.status ?? r.signal})`);
  const lines = r.stdout.trim().split('\n');
  return { ...(JSON.parse(lines[lines.length - 1]) as T), load: [before, loadavg()[0]] };
}

// ------------------------------------------------------------------------------------------------
// options and machine state

interface Options {
  skipExample: boolean;
  skip: Set<string>;
  repeats: number;
  grpoRepeats: number;
  mainSteps: number;
  agentSteps: number;
  threads: number[];
}

const PARTS = ['main', 'agent', 'grpo', 'torch'];

function parseArgs(args: string[]): Options {
  const value = (flag: string) => {
    const i = args.indexOf(flag);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const int = (flag: string, fallback: number, min = 1) => {
    const v = Number(value(flag) ?? fallback);
    if (!Number.isInteger(v) || v < min) throw new Error(`${flag}: an integer ≥ ${min}, got ${value(flag)}`);
    return v;
  };
  const cores = availableParallelism();
  const threads =
    value('--threads')?.split(',').map(Number) ?? Array.from({ length: Math.min(cores, 2) }, (_, i) => i + 1);
  if (threads.some((t) => !Number.isInteger(t) || t < 1 || t > cores)) {
    throw new Error(`--threads: integers from 1 to ${cores}, got ${value('--threads')}`);
  }
  const skip = new Set((value('--skip') ?? '').split(',').filter(Boolean));
  for (const s of skip) if (!PARTS.includes(s)) throw new Error(`--skip: unknown part ${s} (${PARTS.join(', ')})`);
  return {
    skipExample: args.includes('--skip-example'),
    skip,
    repeats: int('--repeats', 5),
    grpoRepeats: int('--grpo-repeats', 2),
    mainSteps: int('--main-steps', 4),
    agentSteps: int('--agent-steps', 2),
    threads: [...new Set(threads)].sort((a, b) => a - b),
  };
}

// ------------------------------------------------------------------------------------------------
// the parts

type Details = Record<string, unknown>;

interface Collected {
  rows: Row[];
  gradErrs: Array<{ where: string } & GradDiff>;
  float64: Array<{ where: string } & Float64Check>;
}

function batchRow(part: string, model: string, threads: number, b: TimedBatch, load: number): Row {
  const flat = b.flat_ms.length ? median(b.flat_ms) : null;
  const tree = median(b.tree_ms);
  return {
    part,
    model,
    threads,
    datums: b.datums,
    tokens: b.tokens,
    tree_rows: b.rows,
    flat_ms: flat,
    tree_ms: tree,
    speedup: flat === null ? null : flat / tree,
    cpu_speedup: flat === null ? null : median(b.flat_cpu_ms) / median(b.tree_cpu_ms),
    grad_rel_err: b.grad?.normwise_per_tensor ?? null,
    load_1min: load,
  };
}

/** A captured run's part: per-step rows and flat ÷ tree of the mean step time. */
function capturePart(job: CaptureJob, c: Collected, details: Details): number {
  log(`\n${job.label}: ${job.config} for ${job.steps} RL steps, each batch timed ${job.repeats}× both ways`);
  const res = inChild<CaptureResult>(job);
  res.batches.forEach((b, i) => {
    c.rows.push(batchRow(`${job.label} step ${i + 1}`, 'nano', res.threads, b, res.load[1]));
    if (b.grad) c.gradErrs.push({ where: `${job.label} step ${i + 1}`, ...b.grad });
  });
  if (res.float64) c.float64.push({ where: `${job.label} step 1`, ...res.float64 });
  const flat = res.batches.reduce((s, b) => s + median(b.flat_ms), 0);
  const tree = res.batches.reduce((s, b) => s + median(b.tree_ms), 0);
  const tokens = res.batches.reduce((s, b) => s + b.tokens, 0);
  const rows = res.batches.reduce((s, b) => s + b.rows, 0);
  const speedup = flat / tree;
  const cpu = (k: 'flat_cpu_ms' | 'tree_cpu_ms') => res.batches.reduce((s, b) => s + median(b[k]), 0);
  const summary = {
    ...res,
    flat_ms_per_step: flat / res.batches.length,
    tree_ms_per_step: tree / res.batches.length,
    speedup,
    cpu_speedup: cpu('flat_cpu_ms') / cpu('tree_cpu_ms'),
    train_token_ratio: rows / tokens,
  };
  details[job.label] = summary;
  const perStep = `${summary.flat_ms_per_step.toFixed(1)} → ${summary.tree_ms_per_step.toFixed(1)} ms per step`;
  log(`${job.label}: ${perStep}, ${speedup.toFixed(2)}× (token ratio ${(rows / tokens).toFixed(3)})`);
  return speedup;
}

interface GrpoOut {
  speedup: number | null;
  /** The same from CPU times (details only). */
  cpuSpeedup: number | null;
  /** Trained tokens/s per thread count: tree, and flat where it ran. */
  tree: Map<number, number>;
  flat: Map<number, number>;
  dir: string;
}

/** A cached random model's directory (bench/models.ts), saying when it had to be made. */
function benchModel(shape: ModelShape): string {
  const { dir, note } = cachedModel(shape);
  if (note !== 'cached') log(`${dir}: ${note}`);
  return dir;
}

function grpoPart(o: Options, c: Collected, details: Details): GrpoOut {
  const res: GrpoOut = { speedup: null, cpuSpeedup: null, tree: new Map(), flat: new Map(), dir: '' };
  // full-weight gradients of every tensor (embeddings, norms, attention, MLP) on a smoke-sized model
  const smoke = benchModel(SMOKE);
  log(`\nGRPO group (prompt ${GROUP.prompt}, G ${GROUP.group}, responses ${GROUP.response}) on ${smoke}, full weights`);
  const s = inChild<GrpoResult>({
    kind: 'grpo',
    label: 'grpo smoke full-weight',
    dir: smoke,
    threads: 1,
    modes: ['flat', 'tree'],
    repeats: 1,
    lora: null,
    shape: GROUP,
    float64: true,
  });
  c.rows.push(batchRow('grpo group, full weights', 'hf smoke', 1, s.batch, s.load[1]));
  c.gradErrs.push({ where: 'grpo group, smoke model, full weights', ...s.batch.grad! });
  if (s.float64) c.float64.push({ where: 'grpo group, smoke model, full weights', ...s.float64 });
  res.dir = benchModel(SMALL_135M);
  log(`GRPO group on ${res.dir}, rank-${LORA.rank} LoRA`);
  const runs: GrpoResult[] = [];
  const top = o.threads[o.threads.length - 1];
  // the matched flat/tree pair at the largest thread count first, then tree alone at the others (once:
  // they only pick the best thread count)
  for (const threads of [top, ...o.threads.filter((t) => t !== top)]) {
    const modes: Mode[] = threads === top ? ['flat', 'tree'] : ['tree'];
    const label = `grpo 135m lora ${threads}t`;
    const r = inChild<GrpoResult>({
      kind: 'grpo',
      label,
      dir: res.dir,
      threads,
      modes,
      repeats: threads === top ? o.grpoRepeats : 1,
      lora: LORA,
      shape: GROUP,
      float64: false,
    });
    runs.push(r);
    c.rows.push(batchRow('grpo group, lora', 'hf 135m', threads, r.batch, r.load[1]));
    if (r.batch.grad) c.gradErrs.push({ where: `grpo group, 135M LoRA, ${threads}t`, ...r.batch.grad });
    res.tree.set(threads, r.batch.tokens / (median(r.batch.tree_ms) / 1000));
    if (r.batch.flat_ms.length) {
      res.flat.set(threads, r.batch.tokens / (median(r.batch.flat_ms) / 1000));
      res.speedup = median(r.batch.flat_ms) / median(r.batch.tree_ms);
      res.cpuSpeedup = median(r.batch.flat_cpu_ms) / median(r.batch.tree_cpu_ms);
    }
  }
  // Not a headline figure: the group split across passes. The trainer's default budget (passBytes) holds
  // the group's forest in one pass at this shape; a smaller budget (768 MiB, the former default, holds two
  // leaves and the prompt) splits it, and every pass recomputes the shared prompt. This run shows what that
  // costs (tree alone, in its own child: indicative against the matched flat median).
  const rows = GROUP.prompt + 2 * GROUP.response;
  const split = inChild<GrpoResult>({
    kind: 'grpo',
    label: `grpo 135m lora ${top}t split`,
    dir: res.dir,
    threads: top,
    modes: ['tree'],
    repeats: 1,
    lora: LORA,
    shape: GROUP,
    float64: false,
    maxRowsPerPass: rows,
  });
  c.rows.push(batchRow(`grpo group, lora, ${rows}-row passes`, 'hf 135m', top, split.batch, split.load[1]));
  const matched = runs.find((r) => r.threads === top)!;
  const indicative = median(matched.batch.flat_ms) / median(split.batch.tree_ms);
  log(`${rows}-row passes: ${indicative.toFixed(2)}× the matched flat median (indicative, another process)`);
  const cpuIndicative = median(matched.batch.flat_cpu_ms) / median(split.batch.tree_cpu_ms);
  const splitOut = {
    max_rows_per_pass: rows,
    ...split,
    speedup_vs_matched_flat_indicative: indicative,
    cpu_speedup_vs_matched_flat_indicative: cpuIndicative,
  };
  details.grpo = {
    shape: GROUP,
    lora: LORA,
    loss: PPO,
    model: SMALL_135M,
    smoke_model: SMOKE,
    smoke: s,
    runs,
    speedup: res.speedup,
    cpu_speedup: res.cpuSpeedup,
    split_passes: splitOut,
  };
  return res;
}

/** PyTorch on the same model, adapter and sequence lengths, one sequence per forward/backward pass. */
function torchPart(g: GrpoOut, o: Options, details: Details): Map<number, number> | null {
  const seqLength = GROUP.prompt + GROUP.response - 1;
  const perThreads = new Map<number, number>();
  const runs: Details = {};
  if (!openblasDir()) {
    log('\nnote: no OpenBLAS (apt-get install libopenblas0-pthread, or set ARBOR_TORCH_BLAS_DIR):');
    log('      PyTorch uses the system libblas.so.3 (Debian default: the slow reference BLAS)');
  }
  for (const threads of o.threads) {
    log(`\nPyTorch: ${GROUP.group} sequences of ${seqLength + 1} tokens one by one at ${threads} thread(s)`);
    const job = { model: g.dir, threads, batch: GROUP.group, seqLength, ...LORA, microBatch: 1, repeats: 1 };
    const before = loadavg()[0];
    const r = runHfTorch<{ tokens_per_s: number[]; adapter_parameters: number }>('train', job, torchEnv(threads, true));
    if (!r.ok) {
      log(`PyTorch not measured: ${r.reason}`);
      details.pytorch = { available: false, reason: r.reason };
      return null;
    }
    perThreads.set(threads, median(r.out.tokens_per_s));
    runs[threads] = { ...r.out, python: r.python, load: [before, loadavg()[0]] };
    log(`  ${fixed(r.out.tokens_per_s, 1)} tokens/s`);
  }
  details.pytorch = {
    available: true,
    openblas_dir: openblasDir() ?? null,
    micro_batch: 1,
    seq_length: seqLength,
    runs,
  };
  return perThreads;
}

/** The HF example's held-out greedy gain (points) from its metrics.jsonl; runs it first unless skipped. */
function examplePart(o: Options, details: Details): number | null {
  const file = 'examples/hf-qwen3-lora.yaml';
  let dir = join('runs', 'hf-qwen3-lora');
  let steps: number | null = null;
  try {
    const config = loadConfig(file);
    dir = config.run.outDir ?? join('runs', config.run.name);
    steps = config.run.steps;
  } catch (error) {
    log(`note: ${file} does not load now (${(error as Error).message.split('\n')[0]}); reading ${dir}`);
  }
  const out: Details = { config: file, run_dir: dir, ran_now: !o.skipExample };
  details.hf_example = out;
  if (!o.skipExample) {
    log(`\nHF example: arbor train ${file} --force (this takes a while)`);
    const t0 = performance.now();
    const r = spawnSync(process.execPath, [join(repoDir, 'bin', 'arbor.mjs'), 'train', file, '--force'], {
      cwd: repoDir,
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    out.run_s = (performance.now() - t0) / 1000;
    if (r.status !== 0) {
      const why = `exit ${r.status ?? r.signal}`;
      out.error = why;
      log(`HF example failed (${why}): no gain recorded`);
      return null;
    }
  }
  const metrics = join(repoDir, dir, 'metrics.jsonl');
  if (!existsSync(metrics)) {
    out.error = `${metrics} absent`;
    log(`HF example: ${metrics} absent (run it, or leave out --skip-example): no gain recorded`);
    return null;
  }
  const evals = new RunDir(join(repoDir, dir)).readMetrics().filter((m) => typeof m.eval_greedy_acc === 'number');
  if (evals.length < 2) {
    const why = `${metrics} holds ${evals.length} evaluation(s)`;
    out.error = why;
    log(`HF example: ${why}: no gain recorded`);
    return null;
  }
  const [first, last] = [evals[0], evals[evals.length - 1]];
  const gain = 100 * ((last.eval_greedy_acc as number) - (first.eval_greedy_acc as number));
  Object.assign(out, {
    metrics_file: metrics,
    metrics_mtime: statSync(metrics).mtime.toISOString(),
    first: { step: first.step, eval_greedy_acc: first.eval_greedy_acc },
    last: { step: last.step, eval_greedy_acc: last.eval_greedy_acc },
    complete: steps === null ? null : last.step === steps,
  });
  const reused = o.skipExample
    ? ` (--skip-example: the latest run's metrics, written ${out.metrics_mtime as string})`
    : '';
  const partial = out.complete === false ? `; the run stopped at step ${String(last.step)} of ${steps}` : '';
  log(
    `HF example${reused}: greedy ${pct(first.eval_greedy_acc)} → ${pct(last.eval_greedy_acc)}, ${gain.toFixed(1)} points${partial}`,
  );
  return gain;
}

const pct = (x: unknown) => `${(100 * (x as number)).toFixed(1)}%`;

// ------------------------------------------------------------------------------------------------

export async function main(args: string[]): Promise<void> {
  if (args[0] === '--child') {
    const job = JSON.parse(readFileSync(args[1], 'utf8')) as Job;
    console.log(JSON.stringify(job.kind === 'capture' ? await captureChild(job) : await grpoChild(job)));
    return;
  }
  const o = parseArgs(args);
  const ticks = cpuTicks();
  const loadStart = loadavg();
  const started = performance.now();
  const headline = Object.fromEntries(Object.keys(GOALS).map((k) => [k, null])) as Headline;
  const details: Details = {
    options: { ...o, skip: [...o.skip] },
    goals: GOALS,
    grad_rel_err_definition:
      "headline: normwise_per_tensor, the worst parameter tensor's ‖tree − flat‖ / ‖flat‖; beside it rel, the " +
      'worst entry of |tree − flat| / max(|flat|, 1e-3 · max|flat|) over the whole gradient (float32 flat is itself ' +
      "that far from float64: see float64_checks); rel_per_tensor: max|flat| over the entry's tensor; " +
      'normwise: ‖tree − flat‖ / ‖flat‖ over the whole gradient',
  };
  const c: Collected = { rows: [], gradErrs: [], float64: [] };
  console.log(`bench packing: threads ${o.threads.join(',')}; load average ${fixed(loadStart, 2)}`);

  if (!o.skip.has('main')) {
    headline.main_job_train_speedup = capturePart(
      {
        kind: 'capture',
        label: 'main job',
        config: 'examples/arith-treepo.yaml',
        overrides: {},
        steps: o.mainSteps,
        repeats: o.repeats,
        float64Datums: 32,
      },
      c,
      details,
    );
  }
  if (!o.skip.has('agent')) {
    const config = 'examples/calculator-agent.yaml';
    const sft = sftCacheDir(loadConfig(config, AGENT_TREES));
    if (!existsSync(sft))
      log(`\nnote: ${config}'s warm start is not cached: its SFT runs first (then cached in ${sft})`);
    const job: CaptureJob = {
      kind: 'capture',
      label: 'agent',
      config,
      overrides: AGENT_TREES,
      steps: o.agentSteps,
      repeats: o.repeats,
      float64Datums: 16,
    };
    headline.agent_tree_train_speedup = capturePart(job, c, details);
  }
  let grpo: GrpoOut | undefined;
  if (!o.skip.has('grpo')) {
    grpo = grpoPart(o, c, details);
    headline.grpo_group_train_speedup = grpo.speedup;
  }
  headline.packed_grad_max_rel_err = c.gradErrs.length
    ? Math.max(...c.gradErrs.map((g) => g.normwise_per_tensor))
    : null;
  details.packed_grad_max_entry_rel_err = c.gradErrs.length ? Math.max(...c.gradErrs.map((g) => g.rel)) : null;
  details.grad_checks = c.gradErrs;
  details.float64_checks = c.float64;

  const speedRows: Row[] = [];
  if (grpo) {
    const torch = o.skip.has('torch') ? null : torchPart(grpo, o, details);
    for (const [t, v] of grpo.tree) speedRows.push({ engine: 'arbor', layout: 'tree', threads: t, tokens_per_s: v });
    for (const [t, v] of grpo.flat) speedRows.push({ engine: 'arbor', layout: 'flat', threads: t, tokens_per_s: v });
    for (const [t, v] of torch ?? [])
      speedRows.push({ engine: 'pytorch', layout: 'one by one', threads: t, tokens_per_s: v });
    if (torch) {
      const best = (m: Map<number, number>) => [...m.entries()].reduce((a, e) => (e[1] > a[1] ? e : a));
      const [treeT, tree] = best(grpo.tree);
      const [flatT, flat] = best(grpo.flat);
      const [torchT, torchBest] = best(torch);
      headline.hf_grpo_train_vs_pytorch = tree / torchBest;
      details.kernel_ratio_flat_vs_pytorch = flat / torchBest;
      details.best_threads = { arbor_tree: treeT, arbor_flat: flatT, pytorch: torchT };
    } else if (o.skip.has('torch')) details.pytorch = { available: false, reason: '--skip torch' };
  }
  const benchS = (performance.now() - started) / 1000;
  headline.hf_example_gain_pts = examplePart(o, details);

  const loadEnd = loadavg();
  const steal = stealSince(ticks);
  details.machine_load = {
    loadavg_start: loadStart,
    loadavg_end: loadEnd,
    steal_fraction: steal,
    cores: availableParallelism(),
  };
  details.rows = c.rows;
  details.speed_rows = speedRows;
  details.bench_seconds_without_example = benchS;

  console.log('\ntrainer step (forwardBackward + optimStep), flat vs tree on the same datums and weights; medians, ms');
  printTable(c.rows);
  if (c.gradErrs.length) {
    console.log(
      '\ngradients, tree vs flat, float32 WASM kernels (normwise_per_tensor: the headline measure, see grad_rel_err_definition)',
    );
    printTable(
      c.gradErrs.map(({ where, normwise_per_tensor, worst_tensor_normwise, rel, rel_per_tensor, normwise }) => ({
        where,
        normwise_per_tensor,
        worst_tensor_normwise,
        normwise,
        rel,
        rel_per_tensor,
      })),
    );
  }
  if (c.float64.length) {
    console.log(
      '\nthe same against float64 reference kernels (normwise_per_tensor; worst entry rel in brackets): is the packing exact, whose rounding is it?',
    );
    const both = (g: GradDiff) => `${g.normwise_per_tensor.toExponential(2)} (${g.rel.toExponential(1)})`;
    printTable(
      c.float64.map((f) => ({
        where: f.where,
        datums: f.datums,
        tree_vs_flat_f64: both(f.tree_vs_flat_f64),
        flat_f32_vs_f64: both(f.flat_f32_vs_f64),
        tree_f32_vs_f64: both(f.tree_f32_vs_f64),
        tree_vs_flat_f32: both(f.tree_vs_flat_f32),
      })),
    );
  }
  if (speedRows.length) {
    console.log(
      `\nGRPO group: trained tokens/s (${GROUP.group} × ${GROUP.prompt + GROUP.response - 1} positions per step)`,
    );
    printTable(speedRows);
    if (typeof details.kernel_ratio_flat_vs_pytorch === 'number')
      console.log(
        `kernel ratio (Arbor flat ÷ PyTorch, token for token): ${details.kernel_ratio_flat_vs_pytorch.toFixed(3)}`,
      );
  }
  const stolen = steal === null ? '' : `; steal ${(100 * steal).toFixed(1)}%`;
  console.log(`\nload average ${fixed(loadStart, 2)} at the start, ${fixed(loadEnd, 2)} at the end${stolen}`);
  console.log(`bench time without the example run: ${benchS.toFixed(0)} s`);
  for (const [k, goal] of Object.entries(GOALS) as Array<[HeadlineKey, { min?: number; max?: number }]>) {
    const v = headline[k];
    if (v === null) console.log(`${k}: not measured`);
    else if (goal.min !== undefined && v < goal.min)
      console.log(`${k}: ${v.toPrecision(4)} misses its goal ≥ ${goal.min}`);
    else if (goal.max !== undefined && v > goal.max)
      console.log(`${k}: ${v.toPrecision(4)} misses its goal ≤ ${goal.max}`);
  }
  console.log(JSON.stringify(headline));
  writeBenchJson('packing', headline, details);
}
