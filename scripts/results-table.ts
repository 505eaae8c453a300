/**
 * `npm run results:table [-- --snapshot control replay ...]`: docs/results.md, one row per method headline
 * against its matched control, generated from the committed bench snapshots bench/results/*.json and never
 * typed by hand. bench/out is git-ignored, so `--snapshot <bench>` first copies the provenance, headline and
 * per-seed values of bench/out/<bench>.json into bench/results/<bench>.json (commit that file with the table).
 * The same rows go into README.md between its results-table markers.
 * REGISTRY says what each headline key measures; keys it does not know are listed, never dropped. It does not
 * run benches, and it judges only what a JSON records: a headline without per-seed values gets no verdict.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { ConfigError, DataError } from '../src/core/errors.js';

/** What one headline key measures. */
export interface Entry {
  method: string;
  task: string;
  /** the control it is measured against, matched in rollouts, updates and prompts per step, seeds and warm start */
  control: string;
  higherIsBetter: boolean;
  /** the value of "no effect": 1 for ratios, 0 for deltas, 0.5 for an AUC */
  neutral: number;
  /** ratio (×), points (percentage points), share (fraction shown as %), auc, score (a graded score delta) */
  unit: 'ratio' | 'points' | 'share' | 'auc' | 'score';
}

const ratio = { higherIsBetter: true, neutral: 1, unit: 'ratio' } as const;
const ARITH = 'arith (control-mixed)';
const TREEPO = 'the same 16 i.i.d. paths per prompt, unpruned';

/** Every method headline the table knows, in table order (the benchmarks' method keys). */
export const REGISTRY: Record<string, Entry> = {
  allocation_matched_tokens_to_target_gain: {
    method: 'DARS allocation',
    task: ARITH,
    control: 'uniform, the rollouts per step DARS trained on',
    ...ratio,
  },
  replay_matched_tokens_to_target_gain: {
    method: 'ReMix replay',
    task: ARITH,
    control: 'ReMix with replay probability 0 (same 2 updates per batch)',
    ...ratio,
  },
  treepo_tokens_to_target_gain: { method: 'TreePO', task: ARITH, control: 'i.i.d. GRPO, same rollouts', ...ratio },
  latr_distinct_sibling_gain: { method: 'LATR', task: ARITH, control: 'TreePO (like-for-like siblings)', ...ratio },
  pruning_tokens_saved: {
    method: 'ARRoL pruning (16 paths, calibrated head)',
    task: ARITH,
    control: TREEPO,
    ...ratio,
    neutral: 0,
    unit: 'share',
  },
  pruning_final_acc_delta: {
    method: 'ARRoL pruning (16 paths, calibrated head)',
    task: ARITH,
    control: TREEPO,
    ...ratio,
    neutral: 0,
    unit: 'points',
  },
  value_head_auc_at_decision: {
    method: 'ARRoL value head',
    task: ARITH,
    control: 'chance (AUC 0.5), the scores at the pruning round',
    ...ratio,
    neutral: 0.5,
    unit: 'auc',
  },
  fapo_flawed_positive_rate_delta: {
    method: 'FAPO',
    task: 'scratchpad',
    control: 'GRPO on the verifier alone, same rollouts (flawed share of 4 sampled answers per held-out problem)',
    higherIsBetter: false,
    neutral: 0,
    unit: 'share',
  },
  fapo_final_acc_delta: {
    method: 'FAPO',
    task: 'scratchpad',
    control: 'GRPO on the verifier alone, same rollouts (greedy accuracy)',
    ...ratio,
    neutral: 0,
    unit: 'points',
  },
  contrastive_score_gain: {
    method: 'contrastive prompting',
    task: 'graded (closest)',
    control: 'the same prompts without earlier candidates',
    ...ratio,
    neutral: 0,
    unit: 'score',
  },
  april_throughput_gain: {
    method: 'APRIL partial rollouts',
    task: 'long-tail arith (runtime-longtail)',
    control: 'the synchronous batch: same prompts, steps and warm start; finished trajectories per second',
    ...ratio,
  },
  sapo_tokens_to_target_gain: {
    method: 'SAPO rollout sharing',
    task: ARITH,
    control: '2 learners not sharing, equal tokens per learner',
    ...ratio,
  },
};

/** `shaping_<term>_..._gain` (a ratio) or `..._delta` (points): one advantage-shaping term against plain GRPO. */
export function shapingEntry(key: string): Entry | undefined {
  const m = /^shaping_([a-z]+)_[a-z0-9_]*(gain|delta)$/.exec(key);
  if (!m) return undefined;
  const control = 'plain GRPO, same rollouts';
  const unit = m[2] === 'gain' ? 'ratio' : 'points';
  return {
    method: `advantage shaping: ${m[1]}`,
    task: ARITH,
    control,
    ...ratio,
    neutral: unit === 'ratio' ? 1 : 0,
    unit,
  };
}

/** Headlines left out of the table on purpose, with the reason (they do not measure what they name). */
export const EXCLUDED: Record<string, string> = {
  allocation_tokens_to_target_gain:
    'unmatched: DARS samples fewer rollouts per step than uniform; see allocation_matched_tokens_to_target_gain',
  allocation_informative_groups_gain: 'XRPO gives every group 8 rollouts at these settings: uniform against uniform',
  replay_tokens_to_target_gain: 'unmatched: ReMix makes 2 updates per batch; see replay_matched_tokens_to_target_gain',
  value_head_auc: 'averaged over every node, finished leaves included; see value_head_auc_at_decision',
};

/** The registry entry of `key`, if it has one. */
export const entryOf = (key: string): Entry | undefined => REGISTRY[key] ?? shapingEntry(key);

/** One bench snapshot: its file (as shown in the table) and its JSON. */
export interface Snapshot {
  file: string;
  json: Record<string, unknown>;
}

/** Mean and spread (sample standard deviation, n − 1; null below 2 seeds) of per-seed values. */
export function seedStats(values: number[]): { mean: number; spread: number | null; n: number } {
  const n = values.length;
  const mean = values.reduce((a, b) => a + b, 0) / n;
  if (n < 2) return { mean, spread: null, n };
  return { mean, spread: Math.sqrt(values.reduce((a, v) => a + (v - mean) ** 2, 0) / (n - 1)), n };
}

export type Verdict = 'wins' | 'within noise' | 'loses' | 'no spread' | 'target not reached';

/**
 * How many seeds' runs reached the target, for a tokens-to-target key (`reached[key]` of a methods snapshot:
 * `{ method, control }`); a run that misses counts with all its tokens, so its ratio is only a bound.
 */
export function reachNote(json: Record<string, unknown>, key: string, seeds: number): string | undefined {
  const r = (json.reached as Record<string, { method: number; control: number }> | undefined)?.[key];
  if (!r || !key.includes('tokens_to_target') || (r.method >= seeds && r.control >= seeds)) return undefined;
  return `target reached by ${r.method}/${seeds} method and ${r.control}/${seeds} control runs`;
}

/** "within noise" when mean ± spread covers the neutral value; otherwise wins or loses by the entry's direction. */
export function verdict(entry: Entry, stats: { mean: number; spread: number | null }): Verdict {
  if (stats.spread === null) return 'no spread';
  const delta = stats.mean - entry.neutral;
  if (Math.abs(delta) <= stats.spread) return 'within noise';
  return delta > 0 === entry.higherIsBetter ? 'wins' : 'loses';
}

/** `value` in the entry's unit (3 significant figures at most, a sign on deltas). */
export function formatValue(entry: Entry, value: number): string {
  const signed = (x: string) => (value > 0 ? `+${x}` : x);
  if (entry.unit === 'ratio') return `${value.toFixed(2)}×`;
  if (entry.unit === 'points') return `${signed(value.toFixed(1))} pts`;
  if (entry.unit === 'share') return `${signed((100 * value).toFixed(1))}%`;
  return entry.unit === 'auc' ? value.toFixed(3) : signed(value.toFixed(3));
}

/** The spread in the entry's unit, without a sign. */
const formatSpread = (entry: Entry, spread: number) =>
  formatValue({ ...entry, unit: entry.unit === 'score' ? 'auc' : entry.unit }, spread).replace(/^\+/, '');

/** "abcdef123456", with "(uncommitted edits)", "(edits unknown)" or "(code changed during run)"; "no commit". */
export function formatCommit(json: Record<string, unknown>): string {
  if (typeof json.commit !== 'string' || !json.commit) return '**no commit**';
  const marks = [
    json.dirty === true ? '**uncommitted edits**' : json.dirty === false ? '' : '**edits unknown**',
    json.code_changed_during_run === true ? '**code changed during run**' : '',
  ].filter(Boolean);
  return [`\`${json.commit.slice(0, 12)}\``, ...marks].join(' ');
}

/** The per-seed values of `key` in a snapshot (`headline_seeds[key]`), checked to be finite numbers. */
function seedValues(snapshot: Snapshot, key: string): number[] {
  const seeds = (snapshot.json.headline_seeds as Record<string, unknown> | undefined)?.[key];
  if (seeds === undefined) return [];
  if (!Array.isArray(seeds) || seeds.some((x) => typeof x !== 'number' || !Number.isFinite(x))) {
    throw new DataError(
      `${snapshot.file}: headline_seeds.${key} must be a list of finite numbers`,
      snapshot.file,
      undefined,
      `headline_seeds.${key}`,
    );
  }
  return seeds as number[];
}

/** One table row of `key` from `snapshot`, or undefined when its headline is null (not measured). */
function row(snapshot: Snapshot, key: string, entry: Entry): string[] | undefined {
  const headline = (snapshot.json.headline as Record<string, unknown>)[key];
  if (headline === null) return undefined;
  if (typeof headline !== 'number' || !Number.isFinite(headline)) {
    throw new DataError(
      `${snapshot.file}: headline.${key} must be a finite number or null`,
      snapshot.file,
      undefined,
      `headline.${key}`,
    );
  }
  const seeds = seedValues(snapshot, key);
  const stats = seeds.length ? seedStats(seeds) : { mean: headline, spread: null, n: 0 };
  if (Math.abs(stats.mean - headline) > 1e-9 * Math.max(1, Math.abs(headline))) {
    throw new DataError(
      `${snapshot.file}: headline.${key} = ${headline} is not the mean of headline_seeds.${key} (${stats.mean})`,
      snapshot.file,
      undefined,
      `headline.${key}`,
    );
  }
  const spread = stats.spread === null ? '± ?' : `± ${formatSpread(entry, stats.spread)}`;
  const reach = reachNote(snapshot.json, key, stats.n);
  const seedsText = [stats.n ? `${stats.n} seed${stats.n === 1 ? '' : 's'}` : 'no per-seed values', reach]
    .filter(Boolean)
    .join('; ');
  // no run of either arm reached the target: the ratio compares tokens decoded, not tokens to the target
  const none = reach && /by 0\/\d+ method and 0\//.test(reach);
  const task = typeof snapshot.json.task === 'string' ? snapshot.json.task : entry.task;
  return [
    entry.method,
    task,
    entry.control,
    `\`${key}\``,
    `${formatValue(entry, stats.mean)} ${spread} (${seedsText})`,
    none ? 'target not reached' : verdict(entry, stats),
    formatCommit(snapshot.json),
    `\`${snapshot.file}\``,
  ];
}

const table = (header: string[], rows: string[][]) =>
  [header, header.map(() => '---'), ...rows].map((cells) => `| ${cells.join(' | ')} |`).join('\n');

const HEADER = `# Results: every method against its matched control

<!-- Generated by \`npm run results:table\` from bench/results/*.json (scripts/results-table.ts): do not edit. -->

Each row is one headline of a bench JSON snapshot in \`bench/results/\`: the method, its task, the control it is
matched against (rollouts, optimiser updates and prompts per step, steps, seeds, warm start, evaluation set), the
mean over seeds ± the spread (the sample standard deviation of the per-seed values), and the verdict: **within
noise** when mean ± spread covers the neutral value (1 for a ratio, 0 for a delta, 0.5 for an AUC), otherwise
**wins** or **loses**; **no spread** when the JSON records fewer than 2 per-seed values. A tokens-to-target ratio
says how many runs reached the target when some did not (a run that misses counts with all its tokens, so the ratio
is a bound), and reads **target not reached** when no run of either arm did. Commit: the code the bench ran at; a
row measured with uncommitted edits or without a commit says so in bold.`;

/** The whole of docs/results.md for these snapshots (sorted by file), deterministic. */
export function renderResults(snapshots: Snapshot[]): string {
  const sorted = [...snapshots].sort((a, b) => (a.file < b.file ? -1 : a.file > b.file ? 1 : 0));
  const rows: string[][] = [];
  const missing: string[] = [];
  const excluded: string[] = [];
  const unknown: string[] = [];
  const keysIn = (s: Snapshot) => Object.keys((s.json.headline as Record<string, unknown> | undefined) ?? {});
  const registered = [
    ...Object.keys(REGISTRY),
    ...[...new Set(sorted.flatMap(keysIn))].filter((k) => !REGISTRY[k] && shapingEntry(k)).sort(),
  ];
  for (const key of registered) {
    const found = sorted.flatMap((s) => (keysIn(s).includes(key) ? [row(s, key, entryOf(key)!)] : []));
    rows.push(...found.filter((r): r is string[] => r !== undefined));
    if (!found.some((r) => r)) missing.push(key);
  }
  for (const s of sorted) {
    for (const key of keysIn(s)) {
      if (EXCLUDED[key]) excluded.push(`- \`${key}\` in \`${s.file}\`: ${EXCLUDED[key]}`);
      else if (!entryOf(key)) unknown.push(`\`${key}\` in \`${s.file}\``);
    }
  }
  const header = ['Method', 'Task', 'Matched control', 'Headline', 'Mean ± spread', 'Verdict', 'Commit', 'Snapshot'];
  const parts = [
    HEADER,
    rows.length ? table(header, rows) : 'No snapshot in `bench/results/` records a method headline yet.',
  ];
  const list = (title: string, items: string[]) => items.length && parts.push(`${title}\n\n${items.join('\n')}`);
  const what = (key: string) => `- \`${key}\`: ${entryOf(key)!.method} against ${entryOf(key)!.control}`;
  list('Not measured yet (no snapshot records a value):', missing.map(what));
  list('Left out on purpose (they do not measure what they name):', excluded);
  list(
    'Other headlines, not method-against-control figures:',
    unknown.map((u) => `- ${u}`),
  );
  const inputs = sorted.map((s) => `- \`${s.file}\`: ${formatCommit(s.json)}, ${String(s.json.date ?? 'no date')}`);
  parts.push(inputs.length ? `Inputs:\n\n${inputs.join('\n')}` : 'Inputs: none.');
  return `${parts.join('\n\n')}\n`;
}

/** One bench JSON at `path`, shown as `file`; a file that is not a bench JSON (no headline object) is a DataError. */
export function readSnapshot(path: string, file: string): Snapshot {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(path, 'utf8'));
  } catch (e) {
    throw new DataError(`${file} is not JSON: ${(e as Error).message}`, file, undefined, undefined, { cause: e });
  }
  const headline = (json as Record<string, unknown> | null)?.headline;
  if (typeof headline !== 'object' || headline === null || Array.isArray(headline)) {
    throw new DataError(`${file} has no headline object (not a bench JSON)`, file, undefined, 'headline');
  }
  return { file, json: json as Record<string, unknown> };
}

/** The snapshots in `dir` (every *.json, shown as `<shown>/<name>`), sorted by name. */
export function readSnapshots(dir: string, shown = 'bench/results'): Snapshot[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => readSnapshot(join(dir, f), `${shown}/${f}`));
}

/** The fields of a bench JSON a snapshot keeps: its provenance, its headline and the headline's per-seed values. */
export const SNAPSHOT_FIELDS = [
  'name',
  'commit',
  'dirty',
  'dirty_files',
  'diff',
  'node',
  'date',
  'bench',
  'args',
  'code_changed_during_run',
  'code_at_end',
  'machine',
  'task',
  'seeds',
  'steps',
  'headline',
  'headline_seeds',
  'reached',
];

/** Copy the snapshot fields of `<outDir>/<bench>.json` to `<resultsDir>/<bench>.json`; returns the path written. */
export function snapshot(bench: string, outDir: string, resultsDir: string): string {
  const from = join(outDir, `${bench}.json`);
  if (!/^[a-z0-9-]+$/.test(bench) || !existsSync(from)) {
    throw new ConfigError(
      `--snapshot ${bench}: no bench JSON ${from} (run \`npm run bench -- ${bench}\` first)`,
      '--snapshot',
    );
  }
  const read = readSnapshot(from, from);
  const kept = Object.fromEntries(SNAPSHOT_FIELDS.filter((k) => k in read.json).map((k) => [k, read.json[k]]));
  mkdirSync(resultsDir, { recursive: true });
  const to = join(resultsDir, `${bench}.json`);
  writeFileSync(`${to}.tmp`, `${JSON.stringify(kept, null, 2)}\n`);
  renameSync(`${to}.tmp`, to);
  return to;
}

const repoDir = dirname(dirname(fileURLToPath(import.meta.url)));
/** The committed snapshots and the generated table, relative to the checkout. */
export const RESULTS_DIR = join(repoDir, 'bench', 'results');
export const RESULTS_DOC = join(repoDir, 'docs', 'results.md');
export const README = join(repoDir, 'README.md');

/** The markers around the README's copy of the table (Prettier leaves what lies between them alone). */
export const README_BEGIN = '<!-- results-table:begin (generated by `npm run results:table`: do not edit) -->';
export const README_END = '<!-- results-table:end -->';

/** The README's table: the rows of docs/results.md without their snapshot column. */
export function renderReadmeTable(snapshots: Snapshot[]): string {
  const results = renderResults(snapshots);
  const rows = results
    .split('\n')
    .filter((l) => l.startsWith('| ') && !l.startsWith('| Method') && !l.startsWith('| ---'));
  const cells = rows.map((l) => l.slice(2, -2).split(' | '));
  const keep = (c: string[]) => c.slice(0, 7);
  const header = ['Method', 'Task', 'Matched control', 'Headline', 'Mean ± spread over seeds', 'Verdict', 'Commit'];
  return cells.length
    ? table(header, cells.map(keep))
    : 'No bench snapshot records a method headline yet (`bench/results/`).';
}

/** `readme` with the text between its results-table markers replaced by `tableText`; a DataError without them. */
export function spliceReadme(readme: string, tableText: string, file = 'README.md'): string {
  const begin = readme.indexOf(README_BEGIN);
  const end = readme.indexOf(README_END);
  if (begin < 0 || end < begin) {
    throw new DataError(`${file} has no results-table markers (${README_BEGIN} … ${README_END})`, file);
  }
  const inner = `\n<!-- prettier-ignore-start -->\n${tableText}\n<!-- prettier-ignore-end -->\n`;
  return readme.slice(0, begin + README_BEGIN.length) + inner + readme.slice(end);
}

export function main(args: string[]): void {
  const at = args.indexOf('--snapshot');
  const benches = at >= 0 ? args.slice(at + 1) : [];
  if (args.some((a, i) => a.startsWith('--') && i !== at) || (at >= 0 && !benches.length)) {
    throw new ConfigError(`usage: npm run results:table [-- --snapshot <bench> ...] (got ${args.join(' ')})`, 'args');
  }
  for (const b of benches) console.log(`snapshot ${snapshot(b, join(repoDir, 'bench', 'out'), RESULTS_DIR)}`);
  const snapshots = readSnapshots(RESULTS_DIR);
  writeFileSync(RESULTS_DOC, renderResults(snapshots));
  console.log(`wrote ${RESULTS_DOC}`);
  writeFileSync(README, spliceReadme(readFileSync(README, 'utf8'), renderReadmeTable(snapshots)));
  console.log(`wrote the results table in ${README}`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) main(process.argv.slice(2));
