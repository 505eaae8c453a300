/**
 * `npm run bench -- replay [--seeds 3] [--steps 40] [--gain 0.25]`: the replay-stage strategies built
 * so far against on-policy sequential selection from the same warm start (examples/control-mixed.yaml
 * with uniform allocation, i.i.d. GRPO): difficulty selection (dots, vade), test-time RL (reward =
 * the group's majority answer, gold answers unused; held-out accuracy still against gold), and the
 * export → `arbor sft` round trip. Held-out greedy accuracy every 2 steps (300 problems), tokens to
 * each seed's start + gain interpolated (bench/control.ts). Writes bench/out/replay.json and an SVG of
 * accuracy against tokens.
 *
 * Rollout replay (src/replay/replay.ts) from the same warm start, against the same on-policy
 * `sequential` baseline, and `sequential-8` / `sequential-10` (on-policy with 8 / 10 prompts per step:
 * the controls for replay-dots' and replay-remix's smaller fresh batches): `replay-recent` (the previous
 * step's 16 trees replayed, maxAge 2),
 * `replay-dots` (DOTS: 8 fresh groups per step + 8 drawn from the FIFO buffer, σ = 0.5),
 * `replay-remix` (ReMix: 10 fresh groups + round(10·0.4/0.6) = 7 stored ones from the last 2
 * policies, 2 updates per batch, on-policy from step 20). `unmatched.replay_tokens_to_target_gain` (not a
 * headline) = a replay variant's control's tokens to target ÷ its own (control: on-policy with the same fresh prompts per
 * step: sequential, sequential-8, sequential-10), the best variant's (named in `best_replay`); the mean ESS
 * covers steps that replayed something. `remix-p0` is ReMix with replay probability 0: the same 10 fresh
 * prompts and 2 optimiser updates per batch with no stored trees, so `replay_matched_tokens_to_target_gain`
 * (replay-remix against it, per seed in `headline_seeds`; only when both run in this invocation) credits
 * the replayed data alone, not the extra updates. `--variants a,b` runs a subset: figures of variants not run
 * (and the export round trip unless `sequential` runs) are kept from the previous bench/out/replay.json,
 * and only when that JSON's runs were measured at this commit with the same settings (bench/util.ts
 * `assertSameCode`; checked before anything runs). `runs` in the JSON names each variant's commit.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig } from '../src/run/config.js';
import { lineChart } from '../src/ui/report.js';
import { sftCacheDir } from '../src/run/warm-start.js';
import {
  COLORS,
  mean,
  meanCurve,
  metricMean,
  pairedTokenRatios,
  runOnce,
  tokensToTarget,
  type Raw,
  withControl,
  type RunOut,
  type Variant,
} from './control.js';
import { DataError } from '../src/core/errors.js';
import { assertSameCode, benchOutDir, benchProvenance, printTable, writeBenchJson, type Provenance } from './util.js';

const sequential = (c: Raw): Raw => withControl(c, { allocate: { kind: 'uniform' } });
const remix = { kind: 'remix', probability: 0.4, utd: 2, maxAge: 2, onPolicyAfter: 20 };
export const VARIANTS: Variant[] = [
  {
    name: 'sequential',
    family: 'replay',
    patch: (c) => ({ ...sequential(c), run: { ...(c.run as Raw), logTreesEvery: 5 } }),
  },
  { name: 'dots', family: 'replay', patch: (c) => withControl(sequential(c), { select: { kind: 'dots' } }) },
  { name: 'vade', family: 'replay', patch: (c) => withControl(sequential(c), { select: { kind: 'vade' } }) },
  {
    name: 'ttrl',
    family: 'replay',
    patch: (c) => ({ ...sequential(c), reward: { parts: [{ kind: 'majority_vote' }] } }),
  },
  // controls for replay-dots and replay-remix: on-policy with the same 8 or 10 fresh prompts per step and no replay
  {
    name: 'sequential-8',
    family: 'replay',
    patch: (c) => ({ ...sequential(c), run: { ...(c.run as Raw), promptsPerStep: 8 } }),
  },
  {
    name: 'sequential-10',
    family: 'replay',
    patch: (c) => ({ ...sequential(c), run: { ...(c.run as Raw), promptsPerStep: 10 } }),
  },
  {
    name: 'replay-recent',
    family: 'replay',
    patch: (c) => ({ ...sequential(c), replay: { kind: 'recent', steps: 1, maxAge: 2 } }),
  },
  {
    name: 'replay-dots',
    family: 'replay',
    patch: (c) => ({
      ...sequential(c),
      run: { ...(c.run as Raw), promptsPerStep: 8 },
      replay: { kind: 'dots', freshFraction: 0.5 },
    }),
  },
  {
    name: 'replay-remix',
    family: 'replay',
    patch: (c) => ({
      ...sequential(c),
      run: { ...(c.run as Raw), promptsPerStep: 10 },
      replay: remix,
    }),
  },
  // replay-remix's matched control: its optimiser updates per batch and fresh prompts, no replayed trees
  {
    name: 'remix-p0',
    family: 'replay',
    patch: (c) => ({
      ...sequential(c),
      run: { ...(c.run as Raw), promptsPerStep: 10 },
      replay: { ...remix, probability: 0 },
    }),
  },
];
const REPLAY = ['replay-recent', 'replay-dots', 'replay-remix'];

/** A previous replay.json (its figures stand in for variants this invocation does not run), if there is one. */
function previous(file: string): Record<string, any> | undefined {
  if (!existsSync(file)) return undefined;
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new DataError(`${file} is not JSON: ${(e as Error).message}`, file, undefined, undefined, { cause: e });
  }
}

/** One run's code, as `runs[<variant or "export">]` of replay.json records it. */
export type RunRecord = Pick<Provenance, 'commit' | 'dirty' | 'diff' | 'date'>;

/**
 * What a `--variants` invocation keeps from `previous` (read from `file`): the figures and curves of the
 * variants it does not `rerun`, and the export round trip unless `sequential` reruns (it exports that
 * run). Throws a DataError, before anything runs, when one of them was measured from other code than
 * `current` or with other `settings`: a headline is computed only from runs of one commit.
 */
export function carryOver(
  previous: Record<string, any> | undefined,
  file: string,
  current: Provenance,
  rerun: string[],
  settings: Record<string, unknown>,
): {
  variants: Record<string, Record<string, number | null>>;
  curves: Record<string, unknown>;
  export?: { ok: boolean; rows: number; detail: string };
  runs: Record<string, RunRecord>;
} {
  if (!previous) return { variants: {}, curves: {}, runs: {} };
  const kept = Object.keys(previous.variants ?? {}).filter((n) => !rerun.includes(n));
  const keepExport = !rerun.includes('sequential') && previous.export !== undefined;
  const keys = keepExport ? [...kept, 'export'] : kept;
  assertSameCode(previous, file, current, keys, settings);
  const pick = <T>(o: Record<string, T> | undefined) =>
    Object.fromEntries(kept.filter((n) => o?.[n] !== undefined).map((n) => [n, o![n]]));
  return {
    variants: pick(previous.variants),
    curves: pick(previous.curves),
    ...(keepExport ? { export: previous.export } : {}),
    runs: Object.fromEntries(keys.map((k) => [k, previous.runs[k] as RunRecord])),
  };
}

function arg(args: string[], name: string, fallback: string): string {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : fallback;
}

/** Export the baseline's verified leaves and train a fresh model on them with `arbor sft`. */
function exportRoundtrip(runDir: string): { ok: boolean; rows: number; detail: string } {
  const file = join(benchOutDir, 'replay', 'export-sft.jsonl');
  const run = (args: string[]) =>
    spawnSync(process.execPath, ['bin/arbor.mjs', ...args], { encoding: 'utf8', timeout: 600_000 });
  const ex = run(['export', runDir, '--to', file, '--force']);
  if (ex.status !== 0) return { ok: false, rows: 0, detail: ex.stderr.trim().slice(-300) };
  const rows = readFileSync(file, 'utf8').split('\n').filter(Boolean).length;
  const out = join(benchOutDir, 'replay', 'export-sft-ckpt');
  const sft = run(['sft', '--data', file, '--out', out, '--steps', '100', '--context', '64']);
  const ok = sft.status === 0 && rows > 0 && existsSync(join(out, 'model.safetensors'));
  return { ok, rows, detail: (ex.stdout + sft.stdout).trim().split('\n').slice(-2).join(' | ') };
}

export async function main(args: string[]): Promise<void> {
  const seeds = Number(arg(args, 'seeds', '3'));
  const steps = Number(arg(args, 'steps', '40'));
  const gain = Number(arg(args, 'gain', '0.25'));
  const only = arg(args, 'variants', '').split(',').filter(Boolean);
  const variants = VARIANTS.filter((v) => !only.length || only.includes(v.name));
  const unknown = only.filter((n) => !VARIANTS.some((v) => v.name === n));
  if (unknown.length) {
    throw new Error(`--variants: unknown variant(s) ${unknown.join(', ')} (${VARIANTS.map((v) => v.name).join(', ')})`);
  }
  const loaded = loadConfig('examples/control-mixed.yaml');
  const base = JSON.parse(
    JSON.stringify({ ...loaded, sft: { ...loaded.sft, checkpoint: loaded.sft.checkpoint ?? sftCacheDir(loaded) } }),
  ) as Raw;
  // what must match for figures of an earlier replay.json to stand in for variants not run now
  const settings = { seeds, steps, gain, config: base };
  const current = benchProvenance('replay');
  const file = join(benchOutDir, 'replay.json');
  const kept = carryOver(
    only.length ? previous(file) : undefined,
    file,
    current,
    variants.map((v) => v.name),
    settings,
  );
  const own: RunRecord = { commit: current.commit, dirty: current.dirty, diff: current.diff, date: current.date };
  const runs: Record<string, RunRecord> = {
    ...kept.runs,
    ...Object.fromEntries(variants.map((v) => [v.name, own])),
  };
  const byVariant = new Map<string, RunOut[]>();
  for (let s = 0; s < seeds; s++) {
    for (const v of variants) {
      const r = runOnce(base, v, s, steps, 'replay');
      byVariant.set(v.name, [...(byVariant.get(v.name) ?? []), r]);
      console.log(
        r.error
          ? `${v.name} seed ${s}: FAILED ${r.error.split('\n').slice(-3).join(' ')}`
          : `${v.name} seed ${s}: ${(100 * r.start).toFixed(1)}% → ${(100 * r.end).toFixed(1)}%, ${r.tokens} tokens`,
      );
    }
  }
  const summary: Record<string, Record<string, number | null>> = { ...kept.variants };
  for (const v of variants) {
    const ok = (byVariant.get(v.name) ?? []).filter((r) => !r.error);
    const reach = ok.map((r) => tokensToTarget(r.byTokens, r.start + gain));
    const ms = ok.flatMap((r) => r.metrics);
    const fin = (x: number) => (Number.isFinite(x) ? x : null);
    summary[v.name] = {
      seeds_ok: ok.length,
      acc_start: fin(mean(ok.map((r) => r.start))),
      acc_end: fin(mean(ok.map((r) => r.end))),
      tokens: fin(mean(ok.map((r) => r.tokens))),
      tokens_to_target: fin(mean(ok.map((r, i) => reach[i] ?? r.tokens))),
      reached: reach.filter((x) => x !== undefined).length,
      // loop seconds (evaluations excluded) to the same target; a seed that never reaches it counts with all
      // its seconds
      seconds_to_target: fin(
        mean(
          ok.map((r) => tokensToTarget(r.bySeconds, r.start + gain) ?? r.bySeconds[r.bySeconds.length - 1]?.[0] ?? NaN),
        ),
      ),
      replay_ess: fin(
        metricMean(
          ms.filter((m) => ((m.replay_tokens as number) ?? 0) > 0),
          'replay_ess',
        ),
      ),
      replay_trees: fin(metricMean(ms, 'replay_trees')),
      replay_age_mean: fin(
        metricMean(
          ms.filter((m) => ((m.replay_tokens as number) ?? 0) > 0),
          'replay_age_mean',
        ),
      ),
      informative_groups: fin(metricMean(ms, 'informative_groups')),
      prompts_passed_over: fin(metricMean(ms, 'prompts_passed_over')),
      reward_mean: fin(metricMean(ms, 'reward_mean')),
    };
  }
  const columns = [...new Set(Object.values(summary).flatMap((row) => Object.keys(row)))];
  printTable(
    Object.entries(summary).map(([variant, row]) => ({
      variant,
      ...Object.fromEntries(columns.map((c) => [c, row[c] ?? null])),
    })),
  );
  const ratio = (a: number | null | undefined, b: number | null | undefined) =>
    a != null && b != null && b !== 0 ? a / b : null;
  const selection = Object.fromEntries(
    ['dots', 'vade'].map((n) => [n, ratio(summary.sequential?.tokens_to_target, summary[n]?.tokens_to_target)]),
  );
  const best = Object.entries(selection).reduce<[string, number | null]>(
    (b, [n, x]) => (x !== null && (b[1] === null || x > b[1]) ? [n, x] : b),
    ['', null],
  );
  // each replay variant against on-policy training with the same fresh prompts per step (its control):
  // a smaller fresh batch alone already needs fewer tokens here, so the 16-prompt baseline would
  // credit replay with what the batch size did
  const CONTROL: Record<string, string> = {
    'replay-recent': 'sequential',
    'replay-dots': 'sequential-8',
    'replay-remix': 'sequential-10',
  };
  const replayGain = Object.fromEntries(
    REPLAY.filter((n) => summary[n]).map((n) => [
      n,
      ratio(summary[CONTROL[n]]?.tokens_to_target, summary[n].tokens_to_target),
    ]),
  );
  const replayWallGain = Object.fromEntries(
    REPLAY.filter((n) => summary[n]).map((n) => [
      n,
      ratio(summary[CONTROL[n]]?.seconds_to_target, summary[n].seconds_to_target),
    ]),
  );
  const replayGainVs16 = Object.fromEntries(
    REPLAY.filter((n) => summary[n]).map((n) => [
      n,
      ratio(summary.sequential?.tokens_to_target, summary[n].tokens_to_target),
    ]),
  );
  const bestReplay = Object.entries(replayGain).reduce<[string, number | null]>(
    (b, [n, x]) => (x !== null && (b[1] === null || x > b[1]) ? [n, x] : b),
    ['', null],
  );
  // the export round trip exports this invocation's sequential seed 0; without it, the kept one (or none)
  const roundtrip = variants.some((v) => v.name === 'sequential')
    ? exportRoundtrip(join(benchOutDir, 'replay', 'sequential-seed0'))
    : kept.export;
  if (roundtrip && variants.some((v) => v.name === 'sequential')) runs.export = own;
  const ttrl = summary.ttrl ?? { acc_start: null, acc_end: null };
  // replay-remix against remix-p0 (same updates per batch), seed by seed, from this invocation's runs only
  const matchedRatios = pairedTokenRatios(byVariant.get('remix-p0') ?? [], byVariant.get('replay-remix') ?? [], gain);
  const headline = {
    replay_matched_tokens_to_target_gain: matchedRatios.length ? mean(matchedRatios) : null,
    selection_tokens_to_target_gain: best[1],
    ttrl_acc_gain: ttrl.acc_end !== null && ttrl.acc_start !== null ? 100 * (ttrl.acc_end - ttrl.acc_start) : null,
    export_roundtrip: roundtrip ? (roundtrip.ok ? 1 : 0) : null,
  };
  console.log(
    JSON.stringify(
      {
        best_selection: best[0],
        best_replay: bestReplay[0],
        replay_tokens_to_target_gain_by_variant: replayGain,
        replay_seconds_to_target_gain_by_variant: replayWallGain,
        headline,
        export: roundtrip,
      },
      null,
      2,
    ),
  );
  const curves = {
    ...kept.curves,
    ...Object.fromEntries(
      [...byVariant.entries()].map(([n, rs]) => [
        n,
        rs.map((r) => ({ seed: r.seed, byTokens: r.byTokens, bySeconds: r.bySeconds })),
      ]),
    ),
  } as Record<string, RunOut[]>;
  const series = VARIANTS.filter((v) => curves[v.name]).map((v, i) => ({
    name: v.name,
    color: COLORS[i % COLORS.length],
    points: meanCurve(curves[v.name], 'byTokens'),
  }));
  writeFileSync(
    join(benchOutDir, 'replay-tokens.svg'),
    lineChart('replay: held-out greedy accuracy vs tokens decoded (mean of seeds)', 'tokens decoded', series, 760, 380),
  );
  writeBenchJson('replay', headline, {
    config: 'examples/control-mixed.yaml (control.allocate: uniform)',
    seeds,
    steps,
    gain,
    settings,
    // the code each variant's figures (and the export round trip) were measured with
    runs,
    target: 'each seed: its start accuracy + gain',
    headline_seeds: { replay_matched_tokens_to_target_gain: matchedRatios },
    // not a headline: it credits ReMix's second update per batch to replay
    unmatched: { replay_tokens_to_target_gain: bestReplay[1] },
    replay_matched_control: 'remix-p0: replay-remix with probability 0 (10 fresh prompts, 2 updates per batch)',
    best_selection: best[0],
    selection_tokens_to_target_gain_by_strategy: selection,
    best_replay: bestReplay[0],
    replay_controls: CONTROL,
    replay_tokens_to_target_gain_by_variant: replayGain,
    replay_seconds_to_target_gain_by_variant: replayWallGain,
    replay_tokens_to_target_gain_vs_16_prompts: replayGainVs16,
    replay_variants: [
      "replay-recent: previous step's trees replayed (16 fresh + 16 stored)",
      'replay-dots: 8 fresh + 8 from the DOTS buffer',
      'replay-remix: 10 fresh + 7 stored, 2 updates per batch, on-policy from step 20',
      'all TIS cap 2',
    ].join('; '),
    variants_rerun: variants.map((v) => v.name),
    // does replay beat simply training on-policy with the smaller fresh batch? (> 1: replay-dots needs fewer tokens)
    replay_dots_vs_onpolicy_8_prompts: ratio(
      summary['sequential-8']?.tokens_to_target,
      summary['replay-dots']?.tokens_to_target,
    ),
    replay_remix_vs_onpolicy_10_prompts: ratio(
      summary['sequential-10']?.tokens_to_target,
      summary['replay-remix']?.tokens_to_target,
    ),
    ttrl_vs_gold_final_acc_points:
      ttrl.acc_end !== null && summary.sequential?.acc_end != null
        ? 100 * (ttrl.acc_end - summary.sequential.acc_end)
        : null,
    export: roundtrip ?? null,
    variants: summary,
    curves,
  });
}
