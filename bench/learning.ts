/**
 * `npm run bench -- learning [config] [--seeds 3] [--steps N] [--eval-count 500]`: iid-GRPO vs TreePO training runs from
 * the same warm start (the config's SFT stage, cached), several seeds each; records held-out greedy
 * accuracy against cumulative tokens decoded and reports, per generator, the tokens needed to first
 * reach a target accuracy (start + 10 points by default, --gain 0.1). Headline: tokens_to_target_iid_over_treepo, the
 * ratio of mean tokens needed over all seeds, a seed that never reached the target counting with all the
 * tokens it decoded (a lower bound). Also writes an SVG
 * plot (bench/out/learning.svg). Evaluations use 500 held-out problems, greedy only (pass@k off), so one
 * accuracy has a standard error of about 2 points against the 10-point target.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig, type ArborConfig } from '../src/run/config.js';
import { sftCacheDir } from '../src/run/warm-start.js';
import { lineChart } from '../src/ui/report.js';
import { RunDir } from '../src/run/rundir.js';
import { benchOutDir, printTable, trainInChild, writeBenchJson } from './util.js';

function arg(args: string[], name: string, fallback: number): number {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : fallback;
}

export async function main(args: string[]): Promise<void> {
  const file = args.find((a) => a.endsWith('.yaml') || a.endsWith('.json')) ?? 'examples/arith-treepo.yaml';
  const base = loadConfig(file);
  const seeds = arg(args, 'seeds', 3);
  const steps = arg(args, 'steps', base.run.steps);
  const gain = arg(args, 'gain', 0.1);
  const evalCount = arg(args, 'eval-count', 500);
  const variants: Array<{ name: string; patch: (c: ArborConfig) => ArborConfig }> = [
    {
      name: 'iid',
      patch: (c) => ({
        ...c,
        generate: { kind: 'iid', groupSize: c.generate.groupSize },
        optimize: { ...c.optimize, advantage: { ...c.optimize.advantage, kind: 'grpo' } },
      }),
    },
    { name: 'treepo', patch: (c) => c },
  ];
  const rows: Array<Record<string, string | number | null>> = [];
  const curves: Record<string, Array<[number, number]>> = {};
  const reached: Record<string, number[]> = { iid: [], treepo: [] };
  for (const v of variants) {
    for (let s = 0; s < seeds; s++) {
      const outDir = join(benchOutDir, 'learning', `${v.name}-seed${s}`);
      // same warm start for every run: the base config's own SFT cache (keyed by its task, model, SFT
      // options and seed, so a changed config never reuses a stale warm start), shared with `arbor train`
      const config = v.patch({
        ...base,
        run: {
          ...base.run,
          seed: s,
          steps,
          outDir,
          evalEvery: Math.max(1, Math.floor(steps / 8)),
          evalCount,
          evalPassK: 0,
          logTreesEvery: 0,
          checkpointEvery: 0,
        },
        sft: { ...base.sft, checkpoint: base.sft.checkpoint ?? sftCacheDir(base) },
      });
      const summary = trainInChild(config, { force: true }) as unknown as {
        heldout_acc_start: number;
        heldout_acc_end: number;
        tokens_decoded: number;
        wall_s: number;
      };
      const evals = new RunDir(outDir).readMetrics().filter((m) => typeof m.eval_greedy_acc === 'number');
      const target = summary.heldout_acc_start + gain;
      const hit = evals.find((m) => (m.eval_greedy_acc as number) >= target && m.step > 0);
      if (hit) reached[v.name].push(hit.tokens_decoded_total as number);
      curves[`${v.name} seed ${s}`] = evals.map((m) => [m.tokens_decoded_total as number, m.eval_greedy_acc as number]);
      rows.push({
        generator: v.name,
        seed: s,
        acc_start: summary.heldout_acc_start,
        acc_end: summary.heldout_acc_end,
        tokens_decoded: summary.tokens_decoded,
        tokens_to_target: hit ? (hit.tokens_decoded_total as number) : null,
        wall_s: summary.wall_s,
      });
      console.log(
        `${v.name} seed ${s}: ${summary.heldout_acc_start} → ${summary.heldout_acc_end}, ${summary.tokens_decoded} tokens`,
      );
    }
  }
  printTable(rows);
  const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : null);
  // a seed that never reached the target counts with all the tokens it decoded (a lower bound on what it
  // needs), so a generator is not flattered by averaging only its lucky seeds
  const needed = (name: string) =>
    rows.filter((r) => r.generator === name).map((r) => (r.tokens_to_target ?? r.tokens_decoded) as number);
  const iid = mean(needed('iid'));
  const tree = mean(needed('treepo'));
  console.log(
    `seeds reaching start+${gain}: iid ${reached.iid.length}/${seeds}, treepo ${reached.treepo.length}/${seeds}; mean tokens needed (unreached seeds counted at their total): iid ${iid?.toFixed(0)}, treepo ${tree?.toFixed(0)}`,
  );
  const colors = ['#dc2626', '#ef4444', '#f87171', '#2563eb', '#3b82f6', '#60a5fa'];
  const svg = lineChart(
    'Held-out greedy accuracy vs tokens decoded',
    'tokens decoded',
    Object.entries(curves).map(([name, points], i) => ({ name, color: colors[i % colors.length], points })),
    720,
    360,
  );
  writeFileSync(join(benchOutDir, 'learning.svg'), svg);
  writeBenchJson(
    'learning',
    { tokens_to_target_iid_over_treepo: iid !== null && tree !== null ? iid / tree : null },
    {
      config: file,
      seeds,
      steps,
      eval_count: evalCount,
      target_gain: gain,
      reached,
      rows,
      plot: 'bench/out/learning.svg',
    },
  );
}
