/**
 * `npm run bench -- curriculum [--seeds 3] [--steps 40] [--every 5] [--eval 600] [--temperature 1] [--reuse]`: DUMP's UCB
 * curriculum (`control.select: { kind: ucb }`, src/replay/ucb.ts) against uniform mixing (`sequential`: the
 * shuffled union of the components) on a task mixture of three arith components from one warm start:
 * - `solved`: 1-digit `+`, already right from the warm start (zero-variance groups, no signal);
 * - `learnable`: 1–2-digit `+`/`−` (the control bench's task, examples/control-mixed.yaml),
 *   warm-started on a careless teacher's demonstrations (70% drop every carry and borrow), so RL has
 *   something to fix;
 * - `hopeless`: 5-digit × 1-digit `*`, whose worked answer (51 tokens) does not fit the 32-token
 *   response budget: every rollout fails, whatever the policy.
 * Each run checkpoints every `--every` steps; held-out accuracy per component is measured afterwards
 * on every checkpoint (and the warm start) in a child process, on the same test items for every run,
 * and set against the tokens the run had decoded by then. Headline: `ucb_learnable_acc_gain`
 * (points of held-out accuracy on the learnable component, UCB minus uniform, at equal tokens: each
 * seed's curves interpolated at the smaller of the two runs' final token counts) and
 * `ucb_share_learnable` (UCB's mean share of prompts on the learnable component; uniform's is 1/3).
 * Writes bench/out/curriculum.json and bench/out/curriculum-learnable.svg.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Rng } from '../src/core/rng.js';
import { buildSamplingEngine } from '../src/engine/build.js';
import { parseConfig } from '../src/run/config.js';
import { evaluate } from '../src/run/evaluate.js';
import { promptEncoder } from '../src/run/prompts.js';
import { lineChart } from '../src/ui/report.js';
import { RunDir } from '../src/run/rundir.js';
import { sftCacheDir } from '../src/run/warm-start.js';
import { getTask } from '../src/tasks/index.js';
import { benchOutDir, printTable, trainInChild, writeBenchJson } from './util.js';

type Raw = Record<string, unknown>;
const COMPONENTS = ['solved', 'learnable', 'hopeless'] as const;
const MIX = [
  { name: 'arith', label: 'solved', options: { digits: 1, ops: ['+'] } },
  { name: 'arith', label: 'learnable', options: { digits: 2, minDigits: 1, ops: ['+', '-'], teacherErrorRate: 0.7 } },
  { name: 'arith', label: 'hopeless', options: { digits: 5, minDigits: 5, ops: ['*'] } },
];
const BASE: Raw = {
  run: {
    name: 'curriculum',
    seed: 0,
    promptsPerStep: 16,
    trainItems: 900,
    evalEvery: 0,
    evalCount: 30,
    evalPassK: 0,
    logTreesEvery: 0,
  },
  task: { mix: MIX },
  model: { dModel: 96, nLayers: 3, nHeads: 4, dFF: 256, contextLength: 64, tieEmbeddings: false },
  sft: { steps: 600, batchSize: 32, learningRate: 0.005, examples: 4000 },
  sampling: { temperature: 1, maxResponseTokens: 32 },
  generate: { kind: 'iid', groupSize: 8 },
  optimize: { advantage: { kind: 'grpo' }, loss: { kind: 'ppo_clip', clipLow: 0.2, clipHigh: 0.28 } },
  trainer: { learningRate: 0.0001, warmupSteps: 5, schedule: 'cosine' },
};
const VARIANTS: Array<{ name: string; select: Raw }> = [
  { name: 'uniform', select: { kind: 'sequential' } },
  { name: 'ucb', select: { kind: 'ucb' } },
];

interface Point {
  step: number;
  tokens: number;
  acc: Record<string, number>;
}
interface RunOut {
  variant: string;
  seed: number;
  curve: Point[];
  shares: Record<string, number>;
  error?: string;
}

function arg(args: string[], name: string, fallback: string): string {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : fallback;
}
const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN);

/** y at x on a piecewise-linear curve (clamped to its ends). */
export function interpolate(curve: Array<[number, number]>, x: number): number {
  if (x <= curve[0][0]) return curve[0][1];
  for (let i = 1; i < curve.length; i++) {
    const [x1, y1] = curve[i];
    if (x <= x1) {
      const [x0, y0] = curve[i - 1];
      return x1 === x0 ? y1 : y0 + ((x - x0) / (x1 - x0)) * (y1 - y0);
    }
  }
  return curve[curve.length - 1][1];
}

/** Child mode: per-component held-out greedy accuracy of each checkpoint directory; prints JSON. */
async function evalChild(file: string): Promise<void> {
  const { dirs, count } = JSON.parse(readFileSync(file, 'utf8')) as { dirs: string[]; count: number };
  const config = parseConfig(BASE);
  const task = getTask(config.task.name, config.task.options);
  const items = task.makeItems('test', count, 0);
  const out: Array<Record<string, number>> = [];
  for (const dir of dirs) {
    const { sampler, tokenizer } = await buildSamplingEngine({ checkpoint: dir });
    const r = await evaluate(items, 0, {
      sampler,
      encodePrompt: promptEncoder(tokenizer, false),
      decode: (t) => tokenizer.decode(t),
      stopTokens: [tokenizer.eos],
      maxResponseTokens: config.sampling.maxResponseTokens,
      reward: task.reward,
      rng: new Rng(0).fork('eval'),
    });
    out.push(Object.fromEntries(Object.entries(r.components ?? {}).map(([k, v]) => [k, v.greedyAccuracy])));
    await sampler.close?.();
  }
  console.log(JSON.stringify(out));
}

function evalInChild(dirs: string[], count: number): Array<Record<string, number>> {
  const file = join(benchOutDir, 'curriculum', `eval-${process.pid}.json`);
  writeFileSync(file, JSON.stringify({ dirs, count }));
  const run = join(fileURLToPath(new URL('.', import.meta.url)), 'run.ts');
  const r = spawnSync(process.execPath, ['--import', 'tsx', run, 'curriculum', '--eval-child', file], {
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  if (r.status !== 0) throw new Error(`evaluation failed (exit ${r.status}):\n${r.stderr.slice(-4000)}`);
  const lines = r.stdout.trim().split('\n');
  return JSON.parse(lines[lines.length - 1]);
}

function runOnce(
  base: Raw,
  variant: (typeof VARIANTS)[number],
  seed: number,
  steps: number,
  every: number,
  evalCount: number,
  warm: string,
  reuse: boolean,
): RunOut {
  const outDir = join(benchOutDir, 'curriculum', `${variant.name}-seed${seed}`);
  const config = {
    ...base,
    run: { ...(base.run as Raw), seed, steps, outDir, checkpointEvery: every },
    control: { ...((base.control as Raw) ?? {}), select: variant.select },
  };
  try {
    // --reuse: a finished run of the same settings in bench/out/curriculum/ is evaluated again, not retrained
    const done =
      reuse &&
      existsSync(join(outDir, 'summary.json')) &&
      (JSON.parse(readFileSync(join(outDir, 'summary.json'), 'utf8')) as { steps: number }).steps === steps;
    if (!done) trainInChild(config, { force: true });
    const metrics = new RunDir(outDir).readMetrics();
    const ckSteps = Array.from({ length: Math.floor(steps / every) }, (_, i) => (i + 1) * every);
    const accs = evalInChild(
      [warm, ...ckSteps.map((s) => join(outDir, 'checkpoints', `step-${s}`, 'engine'))],
      evalCount,
    );
    const tokensAt = (s: number) => (s === 0 ? 0 : (metrics.find((m) => m.step === s)?.tokens_decoded_total as number));
    const curve = [0, ...ckSteps].map((s, i) => ({ step: s, tokens: tokensAt(s), acc: accs[i] }));
    const stepsMs = metrics.filter((m) => m.step > 0);
    // uniform mixing logs no shares: count them from the pool's composition (the data order is a permutation of it)
    const shares = Object.fromEntries(
      COMPONENTS.map((c) => [
        c,
        variant.name === 'ucb' ? mean(stepsMs.map((m) => m[`select/share/${c}`] as number)) : 1 / COMPONENTS.length,
      ]),
    );
    return { variant: variant.name, seed, curve, shares };
  } catch (error) {
    return { variant: variant.name, seed, curve: [], shares: {}, error: (error as Error).message.slice(0, 2000) };
  }
}

export async function main(args: string[]): Promise<void> {
  if (args[0] === '--eval-child') return evalChild(args[1]);
  const seeds = Number(arg(args, 'seeds', '3'));
  const steps = Number(arg(args, 'steps', '40'));
  const every = Number(arg(args, 'every', '5'));
  const evalCount = Number(arg(args, 'eval', '600'));
  const temperature = Number(arg(args, 'temperature', '1'));
  const loaded = parseConfig(BASE);
  const warm = sftCacheDir(loaded);
  const base = {
    ...BASE,
    sft: { ...(BASE.sft as Raw), checkpoint: warm },
    sampling: { ...(BASE.sampling as Raw), temperature },
  };
  const runs: RunOut[] = [];
  for (let s = 0; s < seeds; s++) {
    for (const v of VARIANTS) {
      const t = Date.now();
      const r = runOnce(base, v, s, steps, every, evalCount, warm, args.includes('--reuse'));
      runs.push(r);
      const last = r.curve[r.curve.length - 1];
      console.log(
        r.error
          ? `${v.name} seed ${s}: FAILED ${r.error.split('\n').slice(-3).join(' ')}`
          : `${v.name} seed ${s}: learnable ${(100 * r.curve[0].acc.learnable).toFixed(1)}% → ${(100 * last.acc.learnable).toFixed(1)}%, ${last.tokens} tokens, shares ${COMPONENTS.map((c) => `${c} ${r.shares[c].toFixed(2)}`).join(' ')} (${((Date.now() - t) / 1000).toFixed(0)} s)`,
      );
    }
  }
  report(runs, { seeds, steps, every, evalCount, temperature, warm });
}

function report(runs: RunOut[], setup: Record<string, unknown>): void {
  const ok = (v: string) => runs.filter((r) => r.variant === v && !r.error);
  const gains: number[] = [];
  for (const u of ok('uniform')) {
    const c = ok('ucb').find((r) => r.seed === u.seed);
    if (!c) continue;
    const at = Math.min(u.curve[u.curve.length - 1].tokens, c.curve[c.curve.length - 1].tokens);
    const line = (r: RunOut) => r.curve.map((p) => [p.tokens, p.acc.learnable] as [number, number]);
    gains.push(100 * (interpolate(line(c), at) - interpolate(line(u), at)));
  }
  const rows = VARIANTS.map((v): Record<string, string | number | null> => {
    const rs = ok(v.name);
    const end = (c: string) => 100 * mean(rs.map((r) => r.curve[r.curve.length - 1].acc[c]));
    return {
      variant: v.name,
      seeds_ok: rs.length,
      learnable_start: 100 * mean(rs.map((r) => r.curve[0].acc.learnable)),
      learnable_end: end('learnable'),
      solved_end: end('solved'),
      hopeless_end: end('hopeless'),
      tokens: mean(rs.map((r) => r.curve[r.curve.length - 1].tokens)),
      ...Object.fromEntries(COMPONENTS.map((c) => [`share_${c}`, mean(rs.map((r) => r.shares[c]))])),
    };
  });
  printTable(rows);
  const headline = {
    ucb_learnable_acc_gain: gains.length ? mean(gains) : null,
    ucb_share_learnable: rows[1].seeds_ok ? (rows[1].share_learnable as number) : null,
  };
  console.log(`headline: ${JSON.stringify(headline)} (gain per seed: ${gains.map((g) => g.toFixed(1)).join(', ')})`);
  const series = VARIANTS.map((v, i) => {
    const rs = ok(v.name);
    const n = rs.length ? Math.min(...rs.map((r) => r.curve.length)) : 0;
    return {
      name: v.name,
      color: ['#111827', '#2563eb'][i],
      points: Array.from(
        { length: n },
        (_, k) =>
          [mean(rs.map((r) => r.curve[k].tokens)), 100 * mean(rs.map((r) => r.curve[k].acc.learnable))] as [
            number,
            number,
          ],
      ),
    };
  });
  writeFileSync(
    join(benchOutDir, 'curriculum-learnable.svg'),
    lineChart(
      'learnable component: held-out greedy accuracy (%) vs tokens decoded (mean of seeds)',
      'tokens decoded',
      series,
      760,
      380,
    ),
  );
  writeBenchJson('curriculum', headline, { setup: { ...setup, mix: MIX }, gain_by_seed: gains, variants: rows, runs });
}
