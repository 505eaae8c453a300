/**
 * `npm run bench -- agent [--seeds 3] [--steps 40] [--variants iid,uniform,trace]`: multi-turn tool use
 * on the built-in calculator environment (examples/calculator-agent.yaml: the model multiplies 2-3 by
 * 1-2 digit numbers and may call `calc`), from the same warm start, >= 3 seeds:
 * - `iid`: G = 8 independent episodes per prompt, GRPO over the episodes (multi-turn GRPO);
 * - `uniform`: turn trees, 4 episodes from the prompt, each turn boundary branching in 2 within the
 *   budget of 8 leaves, PORTool fork advantages (`optimize.advantage.kind: fork`);
 * - `trace`: the same budget spent on the anchors the quality head predicts nearest p = 0.5.
 * Held-out greedy success every 2 steps (300 problems) against tokens decoded, against loop seconds
 * and against tool calls executed in training, the tool-call rate and success rate of the greedy episodes at the start
 * and the end, and the token-exactness check of every step (sync training: before its first update the
 * trainer holds the weights that sampled the batch, so its log-probs of the sampled tokens must equal
 * the sampler's; `logprob_gap_max`). Writes bench/out/agent.json and SVG curves.
 *
 * Headline: `tree_vs_iid_success_at_equal_tokens` (points: the better tree variant's mean success
 * curve minus iid's, both read at the smaller of their final token counts), `tool_success_rate_end`
 * (iid's greedy episodes at the end), `heldout_success_gain` (iid: end − start, points), `token_exact`
 * (1 when every step of every run had logprob_gap_max ≤ 1e-4: float32 rounding between the sampler's
 * and the trainer's kernels is ~1e-5, a token the sampler did not sample is ~1 nat off; the test suite
 * checks 1e-5 on the reference kernels, test/generate/agent-token-exact.test.ts; the measured maximum
 * is in the details).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig } from '../src/run/config.js';
import { RunDir } from '../src/run/rundir.js';
import { lineChart } from '../src/ui/report.js';
import { sftCacheDir } from '../src/run/warm-start.js';
import { COLORS, mean, meanCurve, metricMean, runOnce, type Raw, type RunOut, type Variant } from './control.js';
import { benchOutDir, printTable, writeBenchJson } from './util.js';

// float32 log-probs from two kernel paths (the sampler's paged decode, the trainer's batched forward)
// differ by rounding, ~1e-5 here; a misplaced or retokenised token differs by ~1 nat
const TOLERANCE = 1e-4;
const tree =
  (branching: 'uniform' | 'trace') =>
  (c: Raw): Raw => ({
    ...c,
    generate: { ...(c.generate as Raw), branching, rootCopies: 4, branchFactor: 2 },
    optimize: { ...(c.optimize as Raw), advantage: { kind: 'fork' } },
  });
const VARIANTS: Variant[] = [
  { name: 'iid', family: 'agent', patch: (c) => c },
  { name: 'uniform', family: 'agent', patch: tree('uniform') },
  { name: 'trace', family: 'agent', patch: tree('trace') },
];

function arg(args: string[], name: string, fallback: string): string {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : fallback;
}

/** The mean curve's y at x (linear between points; the last y beyond the end). */
function at(curve: Array<[number, number]>, x: number): number | null {
  if (!curve.length) return null;
  for (let i = 1; i < curve.length; i++) {
    const [x0, y0] = curve[i - 1];
    const [x1, y1] = curve[i];
    if (x <= x1) return x1 === x0 ? y1 : y0 + ((x - x0) / (x1 - x0)) * (y1 - y0);
  }
  return curve[curve.length - 1][1];
}

/** A metric of the run's first (step 0) or last evaluation row, read from its metrics.jsonl. */
function evalMetric(r: RunOut, key: string, which: 'first' | 'last'): number {
  const rows = new RunDir(join(benchOutDir, 'agent', `${r.variant}-seed${r.seed}`))
    .readMetrics()
    .filter((m) => typeof m[key] === 'number');
  const row = which === 'last' ? rows[rows.length - 1] : rows[0];
  return row ? (row[key] as number) : NaN;
}

export async function main(args: string[]): Promise<void> {
  const seeds = Number(arg(args, 'seeds', '3'));
  const steps = Number(arg(args, 'steps', '40'));
  const names = arg(args, 'variants', '').split(',').filter(Boolean);
  const loaded = loadConfig('examples/calculator-agent.yaml');
  const base = JSON.parse(
    JSON.stringify({ ...loaded, sft: { ...loaded.sft, checkpoint: loaded.sft.checkpoint ?? sftCacheDir(loaded) } }),
  ) as Raw;
  const variants = VARIANTS.filter((v) => !names.length || names.includes(v.name));
  const byVariant = new Map<string, RunOut[]>();
  for (let s = 0; s < seeds; s++) {
    for (const v of variants) {
      const r = runOnce(base, v, s, steps, 'agent');
      byVariant.set(v.name, [...(byVariant.get(v.name) ?? []), r]);
      console.log(
        r.error
          ? `${v.name} seed ${s}: FAILED ${r.error.split('\n').slice(-3).join(' ')}`
          : `${v.name} seed ${s}: ${(100 * r.start).toFixed(1)}% → ${(100 * r.end).toFixed(1)}%, ${r.tokens} tokens`,
      );
    }
  }
  const rows: Array<Record<string, string | number | null>> = [];
  const summary: Record<string, Record<string, number | null | string>> = {};
  let gapMax = 0;
  for (const v of variants) {
    const runs = byVariant.get(v.name) ?? [];
    const ok = runs.filter((r) => !r.error);
    const ms = ok.flatMap((r) => r.metrics);
    for (const m of ms) if (typeof m.logprob_gap_max === 'number') gapMax = Math.max(gapMax, m.logprob_gap_max);
    const row = {
      variant: v.name,
      seeds_ok: ok.length,
      success_start: mean(ok.map((r) => r.start)),
      success_end: mean(ok.map((r) => r.end)),
      tokens: mean(ok.map((r) => r.tokens)),
      tool_calls: mean(ok.map((r) => r.metrics.reduce((a, m) => a + ((m.agent_tool_calls as number) ?? 0), 0))),
      tool_call_rate_start: mean(ok.map((r) => evalMetric(r, 'eval_tool_call_rate', 'first'))),
      tool_success_rate_start: mean(ok.map((r) => evalMetric(r, 'eval_tool_success_rate', 'first'))),
      tool_call_rate_end: mean(ok.map((r) => evalMetric(r, 'eval_tool_call_rate', 'last'))),
      tool_success_rate_end: mean(ok.map((r) => evalMetric(r, 'eval_tool_success_rate', 'last'))),
      train_tool_success_rate: metricMean(ms, 'agent_tool_success_rate'),
      turns_per_episode: metricMean(ms, 'agent_turns_per_episode'),
      informative_groups: metricMean(ms, 'informative_groups'),
      logprob_gap_max: ms.length ? Math.max(...ms.map((m) => (m.logprob_gap_max as number) ?? 0)) : null,
    };
    rows.push(
      Object.fromEntries(
        Object.entries(row).map(([k, x]) => [k, typeof x === 'number' && !Number.isFinite(x) ? null : x]),
      ),
    );
    summary[v.name] = {
      ...rows[rows.length - 1],
      errors:
        runs
          .filter((r) => r.error)
          .map((r) => r.error)
          .join(' | ') || null,
    };
  }
  printTable(rows);
  const get = (name: string, key: string) =>
    typeof summary[name]?.[key] === 'number' ? (summary[name][key] as number) : null;
  const iidRuns = byVariant.get('iid')?.filter((r) => !r.error) ?? [];
  const iidCurve = meanCurve(iidRuns, 'byTokens');
  const iidEnd = iidCurve.length ? iidCurve[iidCurve.length - 1] : undefined;
  // each tree variant against iid at the same tokens: the smaller of the two runs' final token counts,
  // both mean curves interpolated there (inside both measured ranges)
  const treeVsIid = Object.fromEntries(
    ['uniform', 'trace']
      .filter((n) => byVariant.has(n))
      .map((n) => {
        const curve = meanCurve(
          byVariant.get(n)!.filter((r) => !r.error),
          'byTokens',
        );
        if (!curve.length || !iidEnd) return [n, null];
        const x = Math.min(iidEnd[0], curve[curve.length - 1][0]);
        const tree = at(curve, x);
        const iid = at(iidCurve, x);
        return [n, tree !== null && iid !== null ? { tokens: x, tree, iid, points: 100 * (tree - iid) } : null];
      }),
  ) as Record<string, { tokens: number; tree: number; iid: number; points: number } | null>;
  const bestTree = Object.entries(treeVsIid).reduce<string | null>(
    (b, [n, v]) => (v !== null && (b === null || v.points > (treeVsIid[b]?.points ?? -Infinity)) ? n : b),
    null,
  );
  const allOk = [...byVariant.values()]
    .flat()
    .every((r) => !r.error && r.metrics.every((m) => typeof m.logprob_gap_max === 'number'));
  const headline = {
    tree_vs_iid_success_at_equal_tokens: bestTree ? treeVsIid[bestTree]!.points : null,
    tool_success_rate_end: get('iid', 'tool_success_rate_end'),
    heldout_success_gain:
      get('iid', 'success_end') !== null && get('iid', 'success_start') !== null
        ? 100 * (get('iid', 'success_end')! - get('iid', 'success_start')!)
        : null,
    token_exact: allOk ? (gapMax <= TOLERANCE ? 1 : 0) : null,
  };
  // held-out success against tool calls executed in training (cumulative), at each evaluation
  const byCalls = (r: RunOut): Array<[number, number]> => {
    let calls = 0;
    const out: Array<[number, number]> = [[0, r.start]];
    for (const m of r.metrics) {
      calls += (m.agent_tool_calls as number) ?? 0;
      if (typeof m.eval_greedy_acc === 'number') out.push([calls, m.eval_greedy_acc]);
    }
    return out;
  };
  const callCurves = variants.map((v, i) => {
    const runs = (byVariant.get(v.name) ?? []).filter((r) => !r.error).map(byCalls);
    const n = runs.length ? Math.min(...runs.map((c) => c.length)) : 0;
    return {
      name: v.name,
      color: COLORS[i % COLORS.length],
      points: Array.from(
        { length: n },
        (_, k) => [mean(runs.map((c) => c[k][0])), mean(runs.map((c) => c[k][1]))] as [number, number],
      ),
    };
  });
  writeFileSync(
    join(benchOutDir, 'agent-toolcalls.svg'),
    lineChart(
      'calculator agent: held-out success vs tool calls executed in training (mean of seeds)',
      'tool calls',
      callCurves,
      760,
      380,
    ),
  );
  const series = (key: 'byTokens' | 'bySeconds') =>
    variants.map((v, i) => ({
      name: v.name,
      color: COLORS[i % COLORS.length],
      points: meanCurve(byVariant.get(v.name) ?? [], key),
    }));
  writeFileSync(
    join(benchOutDir, 'agent-tokens.svg'),
    lineChart(
      'calculator agent: held-out success vs tokens decoded (mean of seeds)',
      'tokens decoded',
      series('byTokens'),
      760,
      380,
    ),
  );
  writeFileSync(
    join(benchOutDir, 'agent-wall.svg'),
    lineChart(
      'calculator agent: held-out success vs seconds (evaluations excluded)',
      'seconds of the step loop',
      series('bySeconds'),
      760,
      380,
    ),
  );
  const toolCurves = variants.map((v, i) => {
    const runs = (byVariant.get(v.name) ?? []).filter((r) => !r.error);
    const n = runs.length ? Math.min(...runs.map((r) => r.metrics.length)) : 0;
    return {
      name: v.name,
      color: COLORS[i % COLORS.length],
      points: Array.from(
        { length: n },
        (_, s) =>
          [s + 1, mean(runs.map((r) => (r.metrics[s].agent_tool_call_rate as number) ?? 0))] as [number, number],
      ),
    };
  });
  writeFileSync(
    join(benchOutDir, 'agent-tool-rate.svg'),
    lineChart('calculator agent: share of training episodes that call the tool', 'step', toolCurves, 760, 380),
  );
  console.log(JSON.stringify({ headline, best_tree: bestTree, logprob_gap_max: gapMax }, null, 2));
  writeBenchJson('agent', headline, {
    config: 'examples/calculator-agent.yaml',
    seeds,
    steps,
    best_tree: bestTree,
    tree_vs_iid: treeVsIid,
    iid_final: iidEnd ?? null,
    logprob_gap_max: gapMax,
    tolerance: TOLERANCE,
    variants: summary,
    curves: Object.fromEntries(
      variants.map((v, i) => [
        v.name,
        {
          byTokens: meanCurve(byVariant.get(v.name) ?? [], 'byTokens'),
          bySeconds: meanCurve(byVariant.get(v.name) ?? [], 'bySeconds'),
          byToolCalls: callCurves[i].points,
        },
      ]),
    ),
    runs: [...byVariant.values()].flat().map((r) => ({
      variant: r.variant,
      seed: r.seed,
      start: r.start,
      end: r.end,
      tokens: r.tokens,
      byTokens: r.byTokens,
      error: r.error ?? null,
    })),
  });
}
