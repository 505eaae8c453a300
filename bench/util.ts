/**
 * Shared bench helpers: table printing, the child training run, and the one writer of
 * bench/out/<name>.json. Every bench JSON carries its provenance (commit, uncommitted changes under src/
 * and bench/, Node version, date, the bench's arguments), taken when the bench starts, so a figure can
 * be traced to the code that measured it; `assertSameCode` is the rule for reusing figures of an
 * earlier JSON. It does not pin the machine's load or the examples/ configs (a bench records those).
 * Progress goes to stderr through one `Progress` (`--quiet` silences it): the bench's phases
 * (`benchPhase`), counts toward a total with an ETA (`benchCounter`), and each child training run.
 */
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import os from 'node:os';
import { DataError } from '../src/core/errors.js';
import { formatSeconds, Progress } from '../src/run/progress.js';

export const benchOutDir = join(dirname(fileURLToPath(import.meta.url)), 'out');
/** The checkout the benches run from (bench/..). */
export const repoDir = dirname(dirname(fileURLToPath(import.meta.url)));
/**
 * The paths whose uncommitted changes make a bench JSON `dirty` (git pathspecs): src/ and bench/, but not the
 * results table's snapshots in bench/results/, which are data written after a bench, not code it runs.
 */
export const CODE_PATHS = ['src', 'bench', ':(exclude)bench/results'];

/** The code and invocation a bench JSON was measured with; its fields go at the top of the JSON. */
export interface Provenance {
  /** `git rev-parse HEAD`; null outside a git checkout */
  commit: string | null;
  /** tracked files under src/ or bench/ differ from the commit (staged or not); null without git */
  dirty: boolean | null;
  /** those files, at most 20 (relative to the checkout) */
  dirty_files: string[];
  /** sha256 of `git diff HEAD -- src bench`, 16 hex digits, when dirty: two runs of the same edits share it */
  diff: string | null;
  /** `process.version` */
  node: string;
  /** ISO 8601, when the bench started */
  date: string;
  /** the bench's name and its command-line arguments (`npm run bench -- <bench> <args>`) */
  bench: string;
  args: string[];
}

// GIT_OPTIONAL_LOCKS=0: `git status` must not take the index lock of a tree others are working in
const git = (cwd: string, args: string[]) =>
  spawnSync('git', args, {
    cwd,
    encoding: 'utf8',
    maxBuffer: 1 << 28,
    env: { ...process.env, LC_ALL: 'C', GIT_OPTIONAL_LOCKS: '0' },
  });

/** The provenance of a bench started now in checkout `cwd` (default: this one). */
export function provenance(
  bench: string,
  args: string[],
  options: { cwd?: string; now?: Date; paths?: string[] } = {},
): Provenance {
  const cwd = options.cwd ?? repoDir;
  const paths = options.paths ?? CODE_PATHS;
  const base = { node: process.version, date: (options.now ?? new Date()).toISOString(), bench, args: [...args] };
  const head = git(cwd, ['rev-parse', '--verify', 'HEAD']);
  if (head.status !== 0) return { commit: null, dirty: null, dirty_files: [], diff: null, ...base };
  // --untracked-files=no: a new file no commit tracks is not part of "the commit's code" either way
  const status = git(cwd, ['status', '--porcelain', '--untracked-files=no', '--', ...paths]);
  const diff = git(cwd, ['diff', 'HEAD', '--', ...paths]);
  if (status.status !== 0 || diff.status !== 0) {
    return { commit: head.stdout.trim(), dirty: null, dirty_files: [], diff: null, ...base };
  }
  const files = status.stdout
    .split('\n')
    .filter(Boolean)
    .map((line) => line.slice(3));
  const dirty = files.length > 0;
  const hash = dirty ? createHash('sha256').update(diff.stdout).digest('hex').slice(0, 16) : null;
  return { commit: head.stdout.trim(), dirty, dirty_files: files.slice(0, 20), diff: hash, ...base };
}

/** Whether two provenances name the same code: one commit, and no uncommitted edits or the same ones. */
export function sameCode(a: Pick<Provenance, 'commit' | 'dirty' | 'diff'>, b: typeof a): boolean {
  if (a.commit === null || a.commit !== b.commit) return false;
  if (a.dirty === false && b.dirty === false) return true;
  return a.dirty === true && b.dirty === true && a.diff !== null && a.diff === b.diff;
}

/** "<commit>", "<commit> + uncommitted edits (diff <hash>)", or "no commit". */
function describe(p: Partial<Provenance>): string {
  if (!p.commit) return 'no commit';
  if (p.dirty === true) return `${p.commit} + uncommitted edits (diff ${p.diff ?? 'unknown'})`;
  return p.dirty === false ? p.commit : `${p.commit} (uncommitted edits unknown)`;
}

/**
 * The merge rule: figures of an earlier bench JSON (`previous`, read from `file`) may stand in for runs
 * not repeated now only when every one of them (`previous.runs[key]` for each key) was measured from the
 * same code as `current` (see sameCode) and with the same `settings`. Throws a DataError naming both.
 */
export function assertSameCode(
  previous: Record<string, unknown>,
  file: string,
  current: Provenance,
  keys: string[],
  settings: Record<string, unknown>,
): void {
  const runs = previous.runs as Record<string, Partial<Provenance>> | undefined;
  for (const key of keys) {
    const run = runs?.[key];
    if (!run || !('commit' in run)) {
      throw new DataError(
        `${file} records no commit for "${key}" (written before bench JSONs kept one per run): ` +
          'its figures cannot be merged; run every variant (leave --variants out)',
        file,
        undefined,
        `runs.${key}`,
      );
    }
    if (!sameCode(run as Provenance, current)) {
      throw new DataError(
        `${file}: "${key}" was measured at ${describe(run)}, this run is at ${describe(current)}; ` +
          'a headline may not mix commits: run every variant (leave --variants out), or commit and re-run',
        file,
        undefined,
        `runs.${key}.commit`,
      );
    }
  }
  const before = JSON.stringify(previous.settings ?? null);
  if (keys.length && before !== JSON.stringify(settings)) {
    throw new DataError(
      `${file} was measured with settings ${before}, this run has ${JSON.stringify(settings)}: ` +
        'its figures cannot be merged; run every variant (leave --variants out)',
      file,
      undefined,
      'settings',
    );
  }
}

let started: Provenance | undefined;
let progress = new Progress();
let phase = '';

/**
 * Called by bench/run.ts before a bench's main(): its provenance is taken now, before any run; `quiet`
 * silences the bench's progress.
 */
export function beginBench(bench: string, args: string[], options: { quiet?: boolean } = {}): Provenance {
  started = provenance(bench, args);
  progress = new Progress(options.quiet);
  return started;
}

/** The running bench's progress on stderr: a status line on a terminal, milestones as lines elsewhere. */
export function benchProgress(): Progress {
  return progress;
}

/** "bench <name>" of the running bench. */
function benchName(): string {
  return `bench ${started?.bench ?? 'main'}`;
}

/**
 * One phase of a bench: "bench <name>: <label>" now and "bench <name>: <label> done in <time>" when `work`
 * ends; the heartbeat (`benchHeartbeat`) names the phase under way.
 */
export async function benchPhase<T>(label: string, work: () => T | Promise<T>): Promise<T> {
  const began = Date.now();
  const outer = phase;
  phase = label;
  progress.line(`${benchName()}: ${label}`);
  try {
    return await work();
  } finally {
    phase = outer;
    progress.line(`${benchName()}: ${label} done in ${formatSeconds((Date.now() - began) / 1000)}`);
  }
}

/** `tick(done, detail)` toward `total` in a bench's loop: "bench <name>: <label> <done>/<total> ... eta". */
export function benchCounter(label: string, total: number): (done: number, detail?: string) => void {
  return progress.counter(`${benchName()}: ${label}`, total);
}

/**
 * While the bench runs: a line "bench <name>: <phase>, <child runs>, <elapsed> elapsed" every `everySeconds` (a plain
 * line on a terminal too: the bench's tables go to stdout beside it), when the event loop is free (a
 * child run through spawnSync holds it; its own lines mark it). Returns the stop.
 */
export function benchHeartbeat(everySeconds = 10): () => void {
  const began = Date.now();
  const timer = setInterval(() => {
    const elapsed = formatSeconds((Date.now() - began) / 1000);
    const doing = [phase, ...running].filter(Boolean).join(', ');
    progress.line(`${benchName()}: ${doing ? `${doing}, ` : ''}${elapsed} elapsed`);
  }, everySeconds * 1000);
  timer.unref();
  return () => clearInterval(timer);
}

/** The bench's start and end: "bench <name>: started" now, "bench <name>: done in <time>" from the returned call. */
export function benchStarted(): () => void {
  const began = Date.now();
  progress.line(`${benchName()}: started`);
  return () => progress.line(`${benchName()}: done in ${formatSeconds((Date.now() - began) / 1000)}`);
}

let childRuns = 0;
/** The child runs under way ("training run <n> (<run name>)"). */
const running = new Set<string>();

/** A child training run's lines: "bench <name>: training run <n> (<run name>)" and its time when it ends. */
function announceRun(config: unknown): (failed?: boolean) => void {
  const n = ++childRuns;
  const name = (config as { run?: { name?: string } } | null)?.run?.name ?? 'resumed';
  const run = `training run ${n} (${name})`;
  const began = Date.now();
  running.add(run);
  progress.line(`${benchName()}: ${run}...`);
  return (failed) => {
    running.delete(run);
    const took = formatSeconds((Date.now() - began) / 1000);
    progress.line(`${benchName()}: ${run} ${failed ? 'failed after' : 'done in'} ${took}`);
  };
}

/** The running bench's provenance (taken by beginBench; now, with no arguments, when it was not called). */
export function benchProvenance(name: string): Provenance {
  return started ?? provenance(name, []);
}

/** Print rows as an aligned text table. */
export function printTable(rows: Array<Record<string, string | number | null>>): void {
  if (!rows.length) return;
  const cols = Object.keys(rows[0]);
  const fmt = (v: unknown) =>
    typeof v === 'number' ? (Number.isInteger(v) ? String(v) : v.toPrecision(4)) : String(v);
  const widths = cols.map((c) => Math.max(c.length, ...rows.map((r) => fmt(r[c]).length)));
  console.log(cols.map((c, i) => c.padEnd(widths[i])).join('  '));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const r of rows) console.log(cols.map((c, i) => fmt(r[c]).padEnd(widths[i])).join('  '));
}

/**
 * The JSON of one bench: its provenance first (the fields of `Provenance`), then `machine`, `headline` and
 * the bench's details. When the code changed between `start` and `end` (someone committed or edited
 * src/ or bench/ during the run) it is flagged `code_changed_during_run` with the end state.
 */
export function benchRecord(
  name: string,
  headline: Record<string, number | null>,
  details: Record<string, unknown>,
  start: Provenance,
  end: Provenance = start,
): Record<string, unknown> {
  const machine = { cpus: os.cpus().length, cpu: os.cpus()[0]?.model ?? 'unknown', node: process.version };
  const changed = !sameCode(start, end) && !(start.commit === null && end.commit === null);
  const record: Record<string, unknown> = { name, ...start, machine, headline, ...details };
  // the provenance is this module's to write: a bench's own key of the same name does not replace it
  Object.assign(record, start);
  if (changed) {
    const atEnd = { commit: end.commit, dirty: end.dirty, dirty_files: end.dirty_files, diff: end.diff };
    Object.assign(record, { code_changed_during_run: true, code_at_end: atEnd });
  }
  return record;
}

/** Write bench/out/<name>.json (or `<dir>/<name>.json`) with `headline` (the figures the issue names). */
export function writeBenchJson(
  name: string,
  headline: Record<string, number | null>,
  details: Record<string, unknown>,
  options: { dir?: string } = {},
): string {
  const start = benchProvenance(name);
  const end = provenance(start.bench, start.args);
  const record = benchRecord(name, headline, details, start, end);
  if (record.code_changed_during_run) {
    console.warn(`warning: the code changed during this bench (${describe(start)} → ${describe(end)})`);
  }
  const dir = options.dir ?? benchOutDir;
  mkdirSync(dir, { recursive: true });
  const path = join(dir, `${name}.json`);
  // atomically: a reader never sees half a JSON
  writeFileSync(`${path}.tmp`, JSON.stringify(record, null, 2));
  renameSync(`${path}.tmp`, path);
  console.log(`wrote ${path}`);
  return path;
}

/** Run `train(config, options)` in a child process (see train-child.ts); resolves to its summary. */
export function trainInChild(
  config: unknown,
  options: Record<string, unknown>,
): Record<string, number | string | null> {
  const file = join(mkdtempSync(join(tmpdir(), 'arbor-bench-')), 'args.json');
  writeFileSync(file, JSON.stringify({ config, options }));
  const here = dirname(fileURLToPath(import.meta.url));
  const done = announceRun(config);
  const r = spawnSync(process.execPath, ['--import', 'tsx', join(here, 'train-child.ts'), file], {
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  done(r.status !== 0);
  if (r.status !== 0) throw new Error(`training run failed (exit ${r.status}):\n${r.stderr.slice(-4000)}`);
  const lines = r.stdout.trim().split('\n');
  return JSON.parse(lines[lines.length - 1]);
}

/** `trainInChild` without blocking: runs that must run at once (SAPO's learners sharing a directory). */
export function trainInChildAsync(
  config: unknown,
  options: Record<string, unknown>,
): Promise<Record<string, number | string | null>> {
  const file = join(mkdtempSync(join(tmpdir(), 'arbor-bench-')), 'args.json');
  writeFileSync(file, JSON.stringify({ config, options }));
  const here = dirname(fileURLToPath(import.meta.url));
  const done = announceRun(config);
  const child = spawn(process.execPath, ['--import', 'tsx', join(here, 'train-child.ts'), file], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.on('close', (code) => done(code !== 0));
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out = (out + d).slice(-1_000_000)));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (err = (err + d).slice(-100_000)));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`training run failed (exit ${code}):\n${err.slice(-4000)}`));
      const lines = out.trim().split('\n');
      try {
        resolve(JSON.parse(lines[lines.length - 1]));
      } catch (e) {
        reject(new Error(`training run printed no summary: ${(e as Error).message}`));
      }
    });
  });
}

/** The CPU tick counters of /proc/stat (null off Linux): the start of a stealSince measurement. */
export function cpuTicks(): number[] | null {
  try {
    return readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  } catch {
    return null;
  }
}

/** The share of CPU time the hypervisor gave other tenants since `from`; null off Linux. */
export function stealSince(from: number[] | null): number | null {
  const to = cpuTicks();
  if (!from || !to || to.length < 8) return null;
  const d = to.map((x, i) => x - (from[i] ?? 0));
  const total = d.reduce((a, b) => a + b, 0);
  return total > 0 ? d[7] / total : null;
}
