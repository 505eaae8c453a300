/**
 * Arbor's embedded engine against the PyTorch reference (testkit/reference/nano_torch.py), number for
 * number. Builds random models (several shapes, tied and untied heads, non-unit norm gains), writes
 * each as an Arbor checkpoint (config.json + model.safetensors), runs ragged batches through
 * NanoTrainer for every policy loss, two AdamW steps (PyTorch is fed Arbor's gradients, so the
 * optimiser is checked on its own) and NanoSampler under temperature/top-p/
 * top-k, then asks PyTorch for the same quantities and compares:
 *
 *  - float64: Arbor on referenceKernels64 vs PyTorch float64 (formulas: tolerances ~1e-9);
 *  - float32: Arbor on its default kernels (WASM SIMD) vs PyTorch float32 (the production path).
 *
 * Used by test/nano/pytorch-parity.test.ts (one test per comparison) and bench/parity.ts
 * (bench/out/parity.json). Finds PyTorch through ARBOR_TORCH_PYTHON (alone, when set), else
 * /usr/bin/python3, then python3. Debugging: ARBOR_PARITY_DUMP=/tmp/prefix writes each PyTorch job
 * as JSON and keeps the temporary checkpoints, so `nano_torch.py parity < job.json` can be rerun by hand.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Rng } from '../../src/core/rng.js';
import { loadKernels, type Kernels } from '../../src/engine/kernels/index.js';
import { referenceKernels64 } from '../../src/engine/kernels/reference.js';
import type { NanoConfig } from '../../src/engine/model/config.js';
import { arenaTensors } from '../../src/engine/formats/checkpoint.js';
import { NanoModel } from '../../src/engine/model/model.js';
import { NanoSampler } from '../../src/engine/embedded/sampler.js';
import { writeSafetensors } from '../../src/engine/formats/safetensors.js';
import { NanoTrainer } from '../../src/engine/embedded/trainer.js';
import type { AdamParams, Datum, LossExtras, LossSpec, SampleRequest } from '../../src/engine/types.js';

export const REFERENCE_SCRIPT = join(dirname(fileURLToPath(import.meta.url)), 'nano_torch.py');

/** |arbor − torch| ≤ atol·max|torch| + rtol·|torch|, entrywise (atol is relative to the tensor's largest entry). */
export interface Tolerance {
  atol: number;
  rtol: number;
}

/** Tolerances, stated once. Observed worst cases are in scratch/notes/issue-16.md and the parity JSON. */
export const TOLERANCES = {
  /** Same formulas, both in float64: only summation order differs. */
  f64: { logprob: { atol: 1e-11, rtol: 1e-11 }, loss: { atol: 1e-11, rtol: 1e-10 }, grad: { atol: 1e-10, rtol: 1e-8 } },
  /** Arbor's WASM fp32 kernels vs PyTorch fp32 (both have fp32 rounding; differences are sums of two such errors). */
  f32: {
    logprob: { atol: 2e-6, rtol: 2e-6 },
    loss: { atol: 5e-5, rtol: 5e-5 },
    grad: { atol: 2e-5, rtol: 2e-3 },
    adam: { atol: 1e-6, rtol: 1e-5 },
  },
  /** Sampler (fp32 decode with KV cache) vs PyTorch float64 full forward. */
  sampler: { logprob: { atol: 2e-5, rtol: 2e-5 }, entropy: { atol: 2e-5, rtol: 2e-5 }, nucleusSlack: 1e-5 },
} as const;

export interface Comparison {
  name: string;
  /** Largest |arbor − torch|. */
  maxAbs: number;
  /** Largest |arbor − torch| ÷ (atol·max|torch| + rtol·|torch|): ≤ 1 passes. */
  worstRatio: number;
  pass: boolean;
  detail?: string;
}

export interface ParityReport {
  available: boolean;
  reason?: string;
  python?: string;
  torch?: string;
  comparisons: Comparison[];
  seconds: number;
}

/** Interpreters to try: ARBOR_TORCH_PYTHON alone when set, else Debian's /usr/bin/python3 (not a version manager's shim), then python3. */
export function pythonCandidates(): string[] {
  return process.env.ARBOR_TORCH_PYTHON ? [process.env.ARBOR_TORCH_PYTHON] : ['/usr/bin/python3', 'python3'];
}

/** Whether some candidate imports torch (costs one torch import, a few seconds). */
export function findTorchPython(): { python?: string; reason: string } {
  const tried: string[] = [];
  for (const py of pythonCandidates()) {
    const r = spawnSync(py, ['-c', 'import torch'], { encoding: 'utf8', timeout: 120_000 });
    if (r.status === 0) return { python: py, reason: '' };
    tried.push(`${py}: ${r.error ? r.error.message : (r.stderr || '').trim().split('\n').pop()}`);
  }
  return {
    reason: `PyTorch is not importable (${tried.join('; ')}); install it with \`apt-get install python3-torch\``,
  };
}

// torch needs numpy: an interpreter without either has no usable torch (Debian's python3-torch brings both)
const NO_TORCH = /No module named '?(torch|numpy)'?(?![\w.])|ENOENT/;

/**
 * Run the reference with the first interpreter that has torch. An interpreter without torch (or a
 * missing one) moves on to the next; any other failure is an error (a broken reference must not skip).
 */
export function runTorchFirst(
  pythons: string[],
  mode: 'parity' | 'bench',
  job: unknown,
  env?: Record<string, string>,
): { ok: true; python: string; out: ReturnType<typeof runTorch> } | { ok: false; reason: string } {
  const tried: string[] = [];
  for (const py of pythons) {
    try {
      return { ok: true, python: py, out: runTorch(py, mode, job, env) };
    } catch (e) {
      const msg = (e as Error).message;
      if (!NO_TORCH.test(msg)) throw e;
      tried.push(`${py}: ${msg.match(NO_TORCH)![0]}`);
    }
  }
  return {
    ok: false,
    reason: `PyTorch is not importable (${tried.join('; ')}); install it with \`apt-get install python3-torch\``,
  };
}

interface ModelCase {
  label: string;
  config: NanoConfig;
  /** Ragged sequence lengths of the training batch. */
  lengths: number[];
}

export const MODEL_CASES: ModelCase[] = [
  {
    label: 'tied d16 L2 h2',
    config: {
      vocabSize: 23,
      dModel: 16,
      nLayers: 2,
      nHeads: 2,
      dFF: 24,
      contextLength: 40,
      tieEmbeddings: true,
      ropeTheta: 10000,
      normEps: 1e-5,
    },
    lengths: [7, 3, 12, 1],
  },
  {
    label: 'untied d24 L3 h3',
    config: {
      vocabSize: 37,
      dModel: 24,
      nLayers: 3,
      nHeads: 3,
      dFF: 40,
      contextLength: 48,
      tieEmbeddings: false,
      ropeTheta: 10000,
      normEps: 1e-5,
    },
    lengths: [9, 16, 2, 5, 11],
  },
  {
    label: 'untied d32 L1 h4 theta500',
    config: {
      vocabSize: 50,
      dModel: 32,
      nLayers: 1,
      nHeads: 4,
      dFF: 64,
      contextLength: 64,
      tieEmbeddings: false,
      ropeTheta: 500,
      normEps: 1e-6,
    },
    lengths: [30, 4],
  },
  {
    label: 'tied d32 L2 h2',
    config: {
      vocabSize: 64,
      dModel: 32,
      nLayers: 2,
      nHeads: 2,
      dFF: 48,
      contextLength: 64,
      tieEmbeddings: true,
      ropeTheta: 10000,
      normEps: 1e-5,
    },
    lengths: [20, 13, 6],
  },
];

export const LOSS_CASES: Array<{ label: string; loss: LossSpec; extras?: LossExtras }> = [
  { label: 'cross_entropy', loss: { kind: 'cross_entropy' } },
  { label: 'importance_sampling', loss: { kind: 'importance_sampling' } },
  {
    label: 'importance_sampling truncateAt+maskAbove',
    loss: { kind: 'importance_sampling', truncateAt: 1.2, maskAbove: 2.5 },
  },
  { label: 'ppo clips', loss: { kind: 'ppo', clipLow: 0.2, clipHigh: 0.28 } },
  {
    label: 'ppo dual clip + truncateAt',
    loss: { kind: 'ppo', clipLow: 0.2, clipHigh: 0.28, dualClip: 2, truncateAt: 1.5 },
  },
  { label: 'gspo', loss: { kind: 'gspo', clipLow: 0.2, clipHigh: 0.28 } },
  { label: 'ppo + k3 KL', loss: { kind: 'ppo', clipLow: 0.2, clipHigh: 0.28 }, extras: { klCoef: 0.3 } },
  { label: 'cross_entropy + entropy bonus', loss: { kind: 'cross_entropy' }, extras: { entropyCoef: 0.05 } },
  {
    label: 'importance_sampling + k3 KL + entropy bonus',
    loss: { kind: 'importance_sampling' },
    extras: { klCoef: 0.1, entropyCoef: 0.02 },
  },
];

/** The AdamW trajectory compared (two steps: bias correction and moment accumulation both show). */
export const ADAM: { loss: number; params: AdamParams; steps: number } = {
  loss: 3, // ppo clips
  params: { learningRate: 3e-3, beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, gradClipNorm: 0.05 },
  steps: 2,
};

/** Random weights with O(1) activations (init std 0.02 would make every distribution near-uniform). */
function randomise(model: NanoModel, seed: number): void {
  const rng = new Rng(seed);
  for (const s of model.params.specs) {
    const v = model.params.get(s.name);
    if (s.shape.length === 1) for (let i = 0; i < v.length; i++) v[i] = 1 + 0.3 * rng.normal();
    else {
      const std =
        s.name === 'tok_emb' ? 1 : s.name === 'lm_head' ? 2 / Math.sqrt(s.shape[1]) : 1 / Math.sqrt(s.shape[1]);
      for (let i = 0; i < v.length; i++) v[i] = std * rng.normal();
    }
  }
}

function makeData(rng: Rng, V: number, lengths: number[]): Datum[] {
  return lengths.map((T) => {
    const seq = Array.from({ length: T + 1 }, () => rng.int(V));
    const weights = Array.from({ length: T }, (_, t) => (t === 0 && T > 2 ? 0 : 0.25 + rng.next()));
    return { inputTokens: seq.slice(0, -1), targetTokens: seq.slice(1), weights };
  });
}

/** Behaviour/reference log-probs around the current ones so ratios span every clip branch (about 0.2..4.5). */
function addPolicyFields(rng: Rng, data: Datum[], current: number[][]): void {
  data.forEach((d, i) => {
    d.samplingLogprobs = current[i].map((lp) => lp - (3 * rng.next() - 1.5));
    d.referenceLogprobs = current[i].map((lp) => lp + (rng.next() - 0.5));
    d.advantages = current[i].map(() => (rng.next() < 0.5 ? -1 : 1) * (0.2 + rng.next()));
  });
}

function sampleRequests(config: NanoConfig, rng: Rng): SampleRequest[] {
  const V = config.vocabSize;
  const prompt = (n: number) => Array.from({ length: n }, () => rng.int(V));
  return [
    {
      tokens: prompt(5),
      n: 3,
      maxTokens: 12,
      temperature: 0.7,
      topP: 0.9,
      seed: 3,
      returnEntropy: true,
      stopTokens: [],
    },
    {
      tokens: prompt(9),
      n: 2,
      maxTokens: 8,
      temperature: 1.3,
      topP: 0.8,
      topK: 5,
      seed: 4,
      returnEntropy: true,
      stopTokens: [],
    },
    { tokens: prompt(1), n: 1, maxTokens: 10, temperature: 0, seed: 5, returnEntropy: true, stopTokens: [] },
    { tokens: prompt(3), n: 4, maxTokens: 10, temperature: 1, seed: 6, returnEntropy: true, stopTokens: [] },
  ];
}

/** Entrywise comparison; `arbor` and `torch` are flat. */
export function compare(name: string, arbor: ArrayLike<number>, torch: ArrayLike<number>, tol: Tolerance): Comparison {
  if (arbor.length !== torch.length)
    return {
      name,
      maxAbs: Infinity,
      worstRatio: Infinity,
      pass: false,
      detail: `length ${arbor.length} vs ${torch.length}`,
    };
  let scale = 0;
  for (let i = 0; i < torch.length; i++) scale = Math.max(scale, Math.abs(torch[i]));
  let maxAbs = 0;
  let worst = 0;
  let at = -1;
  for (let i = 0; i < torch.length; i++) {
    const d = Math.abs(arbor[i] - torch[i]);
    const bound = tol.atol * scale + tol.rtol * Math.abs(torch[i]) || Number.MIN_VALUE;
    const r = Number.isNaN(d) ? Infinity : d / bound;
    if (d > maxAbs || Number.isNaN(d)) maxAbs = Number.isNaN(d) ? Infinity : d;
    if (r > worst) {
      worst = r;
      at = i;
    }
  }
  const c: Comparison = { name, maxAbs, worstRatio: worst, pass: worst <= 1 };
  if (!c.pass) c.detail = `worst at [${at}]: arbor ${arbor[at]} vs torch ${torch[at]} (max|torch| ${scale})`;
  return c;
}

/** Merge comparisons of the same quantity across cases: the worst one speaks for all. */
function worstOf(name: string, cs: Comparison[]): Comparison {
  const worst = cs.reduce((a, b) => (b.worstRatio > a.worstRatio ? b : a));
  return {
    name,
    maxAbs: Math.max(...cs.map((c) => c.maxAbs)),
    worstRatio: worst.worstRatio,
    pass: cs.every((c) => c.pass),
    detail:
      cs
        .filter((c) => !c.pass)
        .map((c) => `${c.name}: ${c.detail}`)
        .join('; ') || undefined,
  };
}

interface TorchCase {
  logprobs: number[][];
  losses: Array<{ loss: number; grads: Record<string, number[]> }>;
  adam?: { grad_norms: number[]; params: Array<Record<string, number[]>> };
  samples: Array<{ logprobs: number[]; entropies: number[]; mass_above: number[]; rank: number[] }>;
}

function runTorch(
  python: string,
  mode: 'parity' | 'bench',
  job: unknown,
  env?: Record<string, string>,
): { torch: string; cases?: TorchCase[] } & Record<string, unknown> {
  if (process.env.ARBOR_PARITY_DUMP)
    writeFileSync(`${process.env.ARBOR_PARITY_DUMP}-${mode}-${Date.now()}.json`, JSON.stringify(job));
  const r = spawnSync(python, [REFERENCE_SCRIPT, mode], {
    input: JSON.stringify(job),
    encoding: 'utf8',
    maxBuffer: 1 << 30,
    timeout: 900_000,
    env: env ? { ...process.env, ...env } : process.env,
  });
  if (r.status !== 0)
    throw new Error(
      `${REFERENCE_SCRIPT} ${mode} failed (${r.error?.message ?? `exit ${r.status}`}): ${(r.stderr || '').slice(-2000)}`,
    );
  return JSON.parse(r.stdout);
}

export { runTorch };

interface ArborSide {
  logprobs: number[][];
  losses: Array<{ loss: number; grads: Record<string, number[]> }>;
}

/** Everything both engines produced, before comparison. */
export interface ParityRun {
  available: boolean;
  reason?: string;
  python?: string;
  torch?: string;
  seconds: number;
  arbor: Record<'float32' | 'float64', ArborSide[]>;
  adamArbor: Array<{ norms: number[]; params: Array<Record<string, number[]>> }>;
  sampleArbor: Array<
    Array<{ request: SampleRequest; tokens: number[]; start: number; logprobs: number[]; entropies: number[] }>
  >;
  out32: TorchCase[];
  out64: TorchCase[];
  /** The training batch of each model case (with behaviour/reference log-probs and advantages). */
  data: Datum[][];
}

/** Collect and compare. */
export async function runParity(options: { kernels?: Kernels } = {}): Promise<ParityReport> {
  const run = await collectParity(options);
  if (!run.available) return { available: false, reason: run.reason, comparisons: [], seconds: run.seconds };
  return {
    available: true,
    python: run.python,
    torch: run.torch,
    comparisons: evaluateParity(run),
    seconds: run.seconds,
  };
}

/**
 * Run Arbor and PyTorch on the same models and batches. `kernels` overrides the fp32 kernels
 * (default: loadKernels(), i.e. WASM SIMD).
 */
export async function collectParity(options: { kernels?: Kernels } = {}): Promise<ParityRun> {
  const t0 = performance.now();
  const pythons = pythonCandidates();
  const kernels32 = options.kernels ?? (await loadKernels());
  const kernels64 = referenceKernels64 as unknown as Kernels;
  const dir = mkdtempSync(join(tmpdir(), 'arbor-parity-'));
  try {
    const jobs: Record<'float32' | 'float64', unknown[]> = { float32: [], float64: [] };
    const arbor: Record<'float32' | 'float64', ArborSide[]> = { float32: [], float64: [] };
    const adamArbor: ParityRun['adamArbor'] = [];
    const sampleArbor: ParityRun['sampleArbor'] = [];
    const datas: Datum[][] = [];
    for (const [ci, mc] of MODEL_CASES.entries()) {
      const rng = new Rng(1000 + ci);
      const m32 = NanoModel.createSync(mc.config, kernels32, 0);
      randomise(m32, 77 + ci);
      const ckpt = join(dir, `case${ci}`);
      mkdirSync(ckpt, { recursive: true });
      writeSafetensors(join(ckpt, 'model.safetensors'), arenaTensors(m32.params), { format: 'arbor-nano' });
      writeFileSync(join(ckpt, 'config.json'), JSON.stringify(mc.config));
      const m64 = NanoModel.createSync(mc.config, kernels64, 0);
      m64.params.data.set(m32.params.data);
      const data = makeData(rng, mc.config.vocabSize, mc.lengths);
      const current = await new NanoTrainer(m64).logprobs(data);
      addPolicyFields(rng, data, current);
      datas.push(data);
      for (const [prec, model] of [
        ['float32', m32],
        ['float64', m64],
      ] as const) {
        const trainer = new NanoTrainer(model);
        const side: ArborSide = { logprobs: [], losses: [] };
        for (const [li, lc] of LOSS_CASES.entries()) {
          trainer.zeroGrad();
          const out = await trainer.forwardBackward(data, lc.loss, lc.extras);
          if (li === 0) side.logprobs = out.logprobs;
          const grads: Record<string, number[]> = {};
          for (const s of model.grads.specs) grads[s.name] = Array.from(model.grads.get(s.name));
          side.losses.push({ loss: out.loss, grads });
        }
        trainer.zeroGrad();
        arbor[prec].push(side);
        jobs[prec].push({
          checkpoint: ckpt,
          dtype: prec,
          data,
          losses: LOSS_CASES.map((l) => ({ loss: l.loss, extras: l.extras ?? {} })),
          adam: null,
          samples: [],
        });
      }
      // AdamW trajectory on the fp32 model (a copy: the sampler below uses the original weights)
      {
        const m = NanoModel.createSync(mc.config, kernels32, 0);
        m.params.data.set(m32.params.data);
        const trainer = new NanoTrainer(m);
        const norms: number[] = [];
        const params: Array<Record<string, number[]>> = [];
        const grads: Array<Record<string, number[]>> = [];
        for (let s = 0; s < ADAM.steps; s++) {
          await trainer.forwardBackward(data, LOSS_CASES[ADAM.loss].loss, LOSS_CASES[ADAM.loss].extras);
          const g: Record<string, number[]> = {};
          for (const spec of m.grads.specs) g[spec.name] = Array.from(m.grads.get(spec.name));
          grads.push(g);
          norms.push((await trainer.optimStep(ADAM.params)).gradNorm);
          const snap: Record<string, number[]> = {};
          for (const spec of m.params.specs) snap[spec.name] = Array.from(m.params.get(spec.name));
          params.push(snap);
        }
        adamArbor.push({ norms, params });
        (jobs.float32[ci] as { adam: unknown }).adam = { params: ADAM.params, grads };
      }
      // sampler on the fp32 model; PyTorch scores the same tokens in float64
      const requests = sampleRequests(mc.config, rng);
      const results = await new NanoSampler(m32, { pageSize: 4 }).sample(requests);
      const samples: (typeof sampleArbor)[number] = [];
      results.forEach((r, i) => {
        for (const c of r.completions)
          samples.push({
            request: requests[i],
            tokens: requests[i].tokens.concat(c.tokens),
            start: requests[i].tokens.length,
            logprobs: c.logprobs,
            entropies: c.entropies ?? [],
          });
      });
      sampleArbor.push(samples);
      (jobs.float64[ci] as { samples: unknown[] }).samples = samples.map((s) => ({
        tokens: s.tokens,
        start: s.start,
        temperature: s.request.temperature ?? 1,
      }));
    }
    // one PyTorch process for everything (importing torch alone takes seconds)
    const n = MODEL_CASES.length;
    const torchOut = runTorchFirst(pythons, 'parity', { threads: 1, cases: [...jobs.float32, ...jobs.float64] });
    const seconds = (performance.now() - t0) / 1000;
    if (!torchOut.ok)
      return {
        available: false,
        reason: torchOut.reason,
        seconds,
        arbor,
        adamArbor,
        sampleArbor,
        out32: [],
        out64: [],
        data: datas,
      };
    const cases = torchOut.out.cases!;
    return {
      available: true,
      python: torchOut.python,
      torch: torchOut.out.torch,
      seconds,
      arbor,
      adamArbor,
      sampleArbor,
      out32: cases.slice(0, n),
      out64: cases.slice(n),
      data: datas,
    };
  } finally {
    if (!process.env.ARBOR_PARITY_DUMP) rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Compare a collected run, quantity by quantity (the worst case over models speaks for each).
 * `tamper` may perturb Arbor's numbers first (the test uses it to prove each comparison can fail);
 * it receives copies.
 */
export function evaluateParity(
  run: ParityRun,
  tamper: (what: string, values: number[]) => void = () => {},
): Comparison[] {
  const { arbor, adamArbor, sampleArbor } = run;
  const out32 = { cases: run.out32 };
  const out64 = { cases: run.out64 };
  {
    const comparisons: Comparison[] = [];
    for (const [prec, out] of [
      ['float32', out32],
      ['float64', out64],
    ] as const) {
      const tol = prec === 'float32' ? TOLERANCES.f32 : TOLERANCES.f64;
      const tag = prec === 'float32' ? 'fp32 WASM' : 'fp64 reference';
      const lpCmp: Comparison[] = [];
      const lossCmp: Comparison[][] = LOSS_CASES.map(() => []);
      const gradCmp: Comparison[][] = LOSS_CASES.map(() => []);
      out.cases!.forEach((tc, ci) => {
        const a = arbor[prec][ci];
        const lps = a.logprobs.flat().slice();
        tamper(`${prec}:logprobs`, lps);
        lpCmp.push(compare(MODEL_CASES[ci].label, lps, tc.logprobs.flat(), tol.logprob));
        LOSS_CASES.forEach((lc, li) => {
          const loss = [a.losses[li].loss];
          tamper(`${prec}:loss:${lc.label}`, loss);
          lossCmp[li].push(compare(MODEL_CASES[ci].label, loss, [tc.losses[li].loss], tol.loss));
          for (const name of Object.keys(tc.losses[li].grads)) {
            const g = (a.losses[li].grads[name] ?? []).slice();
            tamper(`${prec}:grad:${lc.label}:${name}`, g);
            gradCmp[li].push(compare(`${MODEL_CASES[ci].label} ${name}`, g, tc.losses[li].grads[name], tol.grad));
          }
        });
      });
      comparisons.push(worstOf(`${tag}: per-token log-probs`, lpCmp));
      LOSS_CASES.forEach((lc, li) => {
        comparisons.push(worstOf(`${tag}: loss ${lc.label}`, lossCmp[li]));
        comparisons.push(worstOf(`${tag}: gradients ${lc.label}`, gradCmp[li]));
      });
    }
    // AdamW
    const adamCmp: Comparison[] = [];
    out32.cases!.forEach((tc, ci) => {
      const a = adamArbor[ci];
      const norms = a.norms.slice();
      tamper('adam:norms', norms);
      adamCmp.push(compare(`${MODEL_CASES[ci].label} grad norms`, norms, tc.adam!.grad_norms, TOLERANCES.f32.loss));
      tc.adam!.params.forEach((snap, s) => {
        for (const name of Object.keys(snap)) {
          const v = a.params[s][name].slice();
          tamper(`adam:${name}`, v);
          adamCmp.push(compare(`${MODEL_CASES[ci].label} step ${s + 1} ${name}`, v, snap[name], TOLERANCES.f32.adam));
        }
      });
    });
    comparisons.push(
      worstOf('fp32 WASM: AdamW (torch.optim.AdamW, 2 steps, decay on matrices only, clipping)', adamCmp),
    );
    // sampler
    const lpS: Comparison[] = [];
    const entS: Comparison[] = [];
    const nucleus: Comparison[] = [];
    out64.cases!.forEach((tc, ci) => {
      const samples = sampleArbor[ci];
      samples.forEach((s, si) => {
        const t = tc.samples[si];
        const label = `${MODEL_CASES[ci].label} sample ${si} (T=${s.request.temperature}, top-p ${s.request.topP ?? 1}, top-k ${s.request.topK ?? 0})`;
        const lp = s.logprobs.slice();
        tamper('sampler:logprobs', lp);
        lpS.push(compare(label, lp, t.logprobs, TOLERANCES.sampler.logprob));
        const ent = s.entropies.slice();
        tamper('sampler:entropies', ent);
        entS.push(compare(label, ent, t.entropies, TOLERANCES.sampler.entropy));
        // each sampled token lies inside the truncation PyTorch computes: the mass of strictly more
        // likely tokens is below top-p, the rank is below top-k, greedy picks the argmax
        const topP = s.request.topP ?? 1;
        const topK = s.request.topK ?? 0;
        let bad = 0;
        let detail = '';
        t.mass_above.forEach((mass, j) => {
          const okP = topP >= 1 || mass < topP + TOLERANCES.sampler.nucleusSlack;
          const okK = !(topK > 0) || t.rank[j] < topK;
          const okG = (s.request.temperature ?? 1) > 0 || mass < TOLERANCES.sampler.nucleusSlack;
          if (!(okP && okK && okG)) {
            bad++;
            detail ||= `token ${j}: mass above ${mass}, rank ${t.rank[j]}`;
          }
        });
        nucleus.push({
          name: label,
          maxAbs: bad,
          worstRatio: bad ? Infinity : 0,
          pass: bad === 0,
          detail: detail || undefined,
        });
      });
    });
    comparisons.push(worstOf('sampler: log-probs under temperature/top-p/top-k vs PyTorch', lpS));
    comparisons.push(worstOf('sampler: entropies vs PyTorch', entS));
    comparisons.push(worstOf('sampler: every sampled token inside PyTorch top-p/top-k/greedy set', nucleus));
    return comparisons;
  }
}
