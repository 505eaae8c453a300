/**
 * `npm run bench -- runtime [--seeds 3] [--only balanced,main,april,resume] [--april-config F] [--name N]`: the
 * runtime issue's
 * evidence, every run from the same cached warm-start per config, on this machine.
 * - balanced (examples/runtime-balanced.yaml, where sampling and training take comparable time in the
 *   synchronous loop) and main (examples/arith-treepo.yaml): sync vs async (maxStaleness 1, decoupled
 *   PPO) for the same optimiser steps; wall time of the step loop (held-out evaluations excluded) and
 *   final held-out greedy accuracy; the staleness histogram and the behaviour/current log-prob gap.
 * - april (examples/runtime-longtail.yaml, long-tailed response lengths, or `--april-config`): partial rollouts
 *   vs the synchronous batch; finished trajectories per second of generation, accuracy against wall time;
 *   `april_throughput_gain` is the mean over seeds of APRIL's rate ÷ the batch's (per seed in headline_seeds).
 * - resume: an async run with partial rollouts stopped at a checkpoint and resumed equals the
 *   uninterrupted run (1) or not (0).
 * Headline: async_step_speedup, async_main_job_speedup, async_final_acc_delta (main job, points),
 * async_balanced_acc_delta, april_throughput_gain, resume_exact. Plots: bench/out/runtime-*.svg.
 */
import { writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { loadConfig, type ArborConfig } from '../src/run/config.js';
import { lineChart } from '../src/ui/report.js';
import { RunDir, type StepMetrics } from '../src/run/rundir.js';
import { sftCacheDir } from '../src/run/warm-start.js';
import { benchOutDir, printTable, trainInChild, writeBenchJson } from './util.js';

type Patch = (c: ArborConfig) => ArborConfig;
interface RunOut {
  metrics: StepMetrics[];
  loopSeconds: number;
  finalAcc: number;
  startAcc: number;
}

function arg(args: string[], name: string, fallback: string): string {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : fallback;
}

const asyncMode: Patch = (c) => ({
  ...c,
  run: { ...c.run, mode: 'async', maxStaleness: 1 },
  optimize: { ...c.optimize, loss: { ...c.optimize.loss, correction: { kind: 'decoupled', maxWeight: 5 } } },
});
const april: Patch = (c) => ({ ...c, control: { ...c.control, kind: 'april', overProvision: 1.5, maxCarries: 2 } });
const same: Patch = (c) => c;

/** One run of `base` patched, seed s, all evaluations greedy-only; the loop's wall time excludes evaluations. */
async function run(base: ArborConfig, name: string, seed: number, patch: Patch, evalEvery: number): Promise<RunOut> {
  const outDir = join(benchOutDir, 'runtime', `${name}-seed${seed}`);
  const config = patch({
    ...base,
    run: { ...base.run, seed, outDir, evalEvery, evalPassK: 0, logTreesEvery: 0, checkpointEvery: 0 },
    sft: { ...base.sft, checkpoint: base.sft.checkpoint ?? sftCacheDir(base) },
  });
  const summary = trainInChild(config, { force: true }) as unknown as {
    heldout_acc_end: number;
    heldout_acc_start: number;
  };
  const metrics = new RunDir(outDir).readMetrics().filter((m) => m.step > 0);
  const last = metrics[metrics.length - 1];
  const evalMs = metrics.reduce((a, m) => a + ((m.ms_eval as number) ?? 0), 0);
  return {
    metrics,
    loopSeconds: (last.wall_s as number) - evalMs / 1000,
    finalAcc: summary.heldout_acc_end,
    startAcc: summary.heldout_acc_start,
  };
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
const sum = (ms: StepMetrics[], k: string) => ms.reduce((a, m) => a + ((m[k] as number) ?? 0), 0);

/** Sync vs async on one config: wall of the step loop, final accuracy, staleness, log-prob gap. */
async function syncVsAsync(
  label: string,
  file: string,
  seeds: number,
  rows: Array<Record<string, string | number | null>>,
  details: Record<string, unknown>,
) {
  const base = loadConfig(file);
  const out: Record<string, RunOut[]> = { sync: [], async: [] };
  for (let s = 0; s < seeds; s++) {
    for (const [mode, patch] of [
      ['sync', same],
      ['async', asyncMode],
    ] as const) {
      const r = await run(base, `${label}-${mode}`, s, patch, base.run.evalEvery);
      out[mode].push(r);
      const ms = r.metrics;
      rows.push({
        config: label,
        mode,
        seed: s,
        steps: ms.length,
        loop_s: r.loopSeconds,
        s_per_step: r.loopSeconds / ms.length,
        gen_s: sum(ms, 'ms_generate') / 1000,
        train_s: sum(ms, 'ms_train') / 1000,
        wait_s: sum(ms, 'ms_wait') / 1000,
        acc_start: r.startAcc,
        acc_end: r.finalAcc,
        staleness: mean(ms.map((m) => m.staleness_mean as number)),
        logprob_gap: mean(ms.map((m) => m.logprob_gap as number)),
      });
      console.log(
        `${label} ${mode} seed ${s}: loop ${r.loopSeconds.toFixed(1)} s, ${(100 * r.startAcc).toFixed(1)}% → ${(100 * r.finalAcc).toFixed(1)}%`,
      );
    }
  }
  const hist: Record<string, number> = {};
  for (const r of out.async)
    for (const m of r.metrics)
      for (const [k, v] of Object.entries(JSON.parse((m.staleness_hist as string) ?? '{}')))
        hist[k] = (hist[k] ?? 0) + (v as number);
  const speedup = mean(out.sync.map((r) => r.loopSeconds)) / mean(out.async.map((r) => r.loopSeconds));
  const accDelta = 100 * (mean(out.async.map((r) => r.finalAcc)) - mean(out.sync.map((r) => r.finalAcc)));
  const gap = {
    sync: mean(out.sync.flatMap((r) => r.metrics.map((m) => m.logprob_gap as number))),
    async: mean(out.async.flatMap((r) => r.metrics.map((m) => m.logprob_gap as number))),
  };
  details[label] = {
    config: file,
    seeds,
    speedup,
    acc_delta_points: accDelta,
    async_staleness_histogram_tokens: hist,
    logprob_gap: gap,
  };
  plot(`runtime-${label}`, `${label}: held-out greedy accuracy vs wall time (s)`, out);
  return { speedup, accDelta };
}

function plot(name: string, title: string, runs: Record<string, RunOut[]>) {
  const colors: Record<string, string[]> = {
    sync: ['#dc2626', '#ef4444', '#f87171'],
    async: ['#2563eb', '#3b82f6', '#60a5fa'],
    april: ['#2563eb', '#3b82f6', '#60a5fa'],
  };
  const series = Object.entries(runs).flatMap(([mode, rs]) =>
    rs.map((r, i) => ({
      name: `${mode} seed ${i}`,
      color: colors[mode]?.[i % 3] ?? '#555',
      points: [
        [0, r.startAcc] as [number, number],
        ...r.metrics
          .filter((m) => typeof m.eval_greedy_acc === 'number')
          .map(
            (m) =>
              [(m.wall_s as number) - sumUntil(r.metrics, m.step), m.eval_greedy_acc as number] as [number, number],
          ),
      ],
    })),
  );
  writeFileSync(
    join(benchOutDir, `${name}.svg`),
    lineChart(title, 'seconds of the step loop (evaluations excluded)', series, 720, 360),
  );
}

/** Evaluation seconds up to and including `step`. */
function sumUntil(ms: StepMetrics[], step: number): number {
  return ms.filter((m) => m.step <= step).reduce((a, m) => a + ((m.ms_eval as number) ?? 0), 0) / 1000;
}

async function aprilVsSync(
  seeds: number,
  rows: Array<Record<string, string | number | null>>,
  details: Record<string, unknown>,
  file = 'examples/runtime-longtail.yaml',
) {
  const base = loadConfig(file);
  // the default config's runs keep their names; another config's are named after its file
  const label = file === 'examples/runtime-longtail.yaml' ? 'longtail' : basename(file).replace(/\.ya?ml$/, '');
  const out: Record<string, RunOut[]> = { sync: [], april: [] };
  for (let s = 0; s < seeds; s++) {
    for (const [mode, patch] of [
      ['sync', same],
      ['april', april],
    ] as const) {
      const r = await run(base, `${label}-${mode}`, s, patch, base.run.evalEvery);
      out[mode].push(r);
      const ms = r.metrics;
      const perSecond = sum(ms, 'trajectories') / (sum(ms, 'ms_generate') / 1000);
      rows.push({
        config: label,
        mode,
        seed: s,
        steps: ms.length,
        loop_s: r.loopSeconds,
        s_per_step: r.loopSeconds / ms.length,
        gen_s: sum(ms, 'ms_generate') / 1000,
        train_s: sum(ms, 'ms_train') / 1000,
        wait_s: 0,
        acc_start: r.startAcc,
        acc_end: r.finalAcc,
        staleness: mean(ms.map((m) => m.staleness_mean as number)),
        logprob_gap: mean(ms.map((m) => m.logprob_gap as number)),
        traj_per_s: perSecond,
      });
      console.log(
        `${label} ${mode} seed ${s}: ${perSecond.toFixed(1)} finished trajectories/s of generation, ${(100 * r.startAcc).toFixed(1)}% → ${(100 * r.finalAcc).toFixed(1)}%`,
      );
    }
  }
  const perRun = (r: RunOut) => sum(r.metrics, 'trajectories') / (sum(r.metrics, 'ms_generate') / 1000);
  const rate = (rs: RunOut[]) => mean(rs.map(perRun));
  // seed by seed (same warm start, prompts and steps): APRIL's finished trajectories per second ÷ the batch's
  const perSeed = out.april.map((r, i) => perRun(r) / perRun(out.sync[i]));
  const gain = mean(perSeed);
  details.april = {
    config: file,
    task: base.task.name,
    per_seed_gain: perSeed,
    seeds,
    trajectories_per_s: { sync: rate(out.sync), april: rate(out.april) },
    gain,
    acc_end: { sync: out.sync.map((r) => r.finalAcc), april: out.april.map((r) => r.finalAcc) },
    loop_s: { sync: out.sync.map((r) => r.loopSeconds), april: out.april.map((r) => r.loopSeconds) },
  };
  plot('runtime-april', 'long-tail task: held-out greedy accuracy vs wall time (s)', out);
  return gain;
}

/** 1 when an async run with partial rollouts, stopped at a checkpoint and resumed, equals the uninterrupted run. */
async function resumeExact(): Promise<number> {
  const base = loadConfig('examples/runtime-longtail.yaml');
  const cfg = (name: string) =>
    april(
      asyncMode({
        ...base,
        run: {
          ...base.run,
          steps: 8,
          checkpointEvery: 4,
          evalEvery: 0,
          evalCount: 50,
          evalPassK: 0,
          logTreesEvery: 0,
          outDir: join(benchOutDir, 'runtime', name),
        },
        sft: { ...base.sft, checkpoint: base.sft.checkpoint ?? sftCacheDir(base) },
      }),
    );
  trainInChild(cfg('resume-full'), { force: true });
  trainInChild(cfg('resume-parts'), { force: true, steps: 4 });
  trainInChild(null, { resume: join(benchOutDir, 'runtime', 'resume-parts'), steps: 8 });
  const keys = ['reward_mean', 'loss', 'grad_norm', 'tokens_decoded', 'staleness_mean', 'logprob_gap', 'carried_out'];
  const pick = (name: string) =>
    JSON.stringify(
      new RunDir(join(benchOutDir, 'runtime', name))
        .readMetrics()
        .filter((m) => m.step > 0)
        .map((m) => keys.map((k) => m[k])),
    );
  return pick('resume-full') === pick('resume-parts') ? 1 : 0;
}

export async function main(args: string[]): Promise<void> {
  const seeds = Number(arg(args, 'seeds', '3'));
  const only = arg(args, 'only', 'balanced,main,april,resume').split(',');
  // `--april-config F --name N`: APRIL against the synchronous batch on another config, into bench/out/N.json
  const aprilConfig = arg(args, 'april-config', 'examples/runtime-longtail.yaml');
  const name = arg(args, 'name', 'runtime');
  if (!/^[a-z0-9-]+$/.test(name)) throw new Error(`--name must match [a-z0-9-]+ (got ${JSON.stringify(name)})`);
  const rows: Array<Record<string, string | number | null>> = [];
  const details: Record<string, unknown> = {};
  const headline: Record<string, number | null> = {
    async_step_speedup: null,
    async_main_job_speedup: null,
    async_final_acc_delta: null,
    async_balanced_acc_delta: null,
    april_throughput_gain: null,
    resume_exact: null,
  };
  if (only.includes('balanced')) {
    const r = await syncVsAsync('balanced', 'examples/runtime-balanced.yaml', seeds, rows, details);
    headline.async_step_speedup = r.speedup;
    headline.async_balanced_acc_delta = r.accDelta;
  }
  if (only.includes('main')) {
    const r = await syncVsAsync('main', 'examples/arith-treepo.yaml', seeds, rows, details);
    headline.async_main_job_speedup = r.speedup;
    headline.async_final_acc_delta = r.accDelta;
  }
  if (only.includes('april')) headline.april_throughput_gain = await aprilVsSync(seeds, rows, details, aprilConfig);
  const april = details.april as { per_seed_gain: number[]; task: string; config: string } | undefined;
  if (only.includes('resume')) headline.resume_exact = await resumeExact();
  printTable(rows.map((r) => ({ traj_per_s: null, ...r })));
  console.log(JSON.stringify(headline));
  // only the parts that ran (`--only`) have headline figures
  const ran = Object.fromEntries(Object.entries(headline).filter(([, v]) => v !== null));
  writeBenchJson(name, ran, {
    seeds,
    // the results table's task and per-seed values (APRIL's rows; the other headlines have none)
    ...(april && only.length === 1 ? { task: `${april.task} (${april.config})` } : {}),
    headline_seeds: april ? { april_throughput_gain: april.per_seed_gain } : {},
    rows,
    ...details,
    plots: ['bench/out/runtime-balanced.svg', 'bench/out/runtime-main.svg', 'bench/out/runtime-april.svg'],
  });
}
