/**
 * Run directories under a runs dir: discovery, status (finished = summary.json written; running = a
 * file written within `liveWindowMs`; failed = stopped without a summary), headline numbers, and
 * bounded, incremental reads of metrics.jsonl. Run names are checked against a strict pattern and
 * resolved inside the runs dir, so no request can reach a file outside it.
 */
import { closeSync, existsSync, openSync, readFileSync, readSync, readdirSync, realpathSync, statSync } from 'node:fs';
import { join, sep } from 'node:path';
import YAML from 'yaml';
import { DataError } from '../../core/errors.js';
import type { Headline, MetricsChunk, MetricsRow, RunInfo, RunStatus } from '../types.js';

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$/;
/** The most bytes of metrics.jsonl one request reads (the client asks again from the new offset). */
export const MAX_METRICS_BYTES = 32 * 1024 * 1024;
const MAX_CONFIG_BYTES = 1024 * 1024;

export class RunsDir {
  readonly root: string;

  constructor(
    root: string,
    readonly liveWindowMs = 120_000,
  ) {
    if (!existsSync(root) || !statSync(root).isDirectory())
      throw new DataError(`${root}: not a directory (arbor ui [runs-dir])`, root);
    this.root = realpathSync(root);
  }

  /** The directory of run `name`, or undefined when the name is not a run inside the runs dir. */
  dir(name: string): string | undefined {
    if (!NAME.test(name) || name.includes('..')) return undefined;
    const path = join(this.root, name);
    if (!existsSync(join(path, 'config.resolved.yaml'))) return undefined;
    const real = realpathSync(path);
    return real.startsWith(this.root + sep) ? real : undefined;
  }

  names(): string[] {
    return readdirSync(this.root, { withFileTypes: true })
      .filter((d) => d.isDirectory() && this.dir(d.name) !== undefined)
      .map((d) => d.name)
      .sort();
  }

  list(now = Date.now()): RunInfo[] {
    return this.names().map((n) => this.info(n, now));
  }

  info(name: string, now = Date.now()): RunInfo {
    const dir = this.need(name);
    const config = this.config(name);
    const { rows, summary } = this.rowsAndSummary(name, dir);
    const updatedAt = lastWrite(dir);
    const status: RunStatus = summary ? 'finished' : now - updatedAt <= this.liveWindowMs ? 'running' : 'failed';
    const get = (section: string, key: string) => (config[section] as Record<string, unknown> | undefined)?.[key];
    return {
      name,
      status,
      task: String(get('task', 'name') ?? '?'),
      generator: String(get('generate', 'kind') ?? '?'),
      mode: String(get('run', 'mode') ?? 'sync'),
      steps: Number(get('run', 'steps') ?? 0),
      lastStep: rows.length ? Math.max(...rows.map((r) => r.step ?? 0)) : 0,
      updatedAt,
      headline: headline(rows, summary),
      treeSteps: this.treeSteps(name),
    };
  }

  private readonly cache = new Map<
    string,
    { print: string; rows: MetricsRow[]; summary: Record<string, unknown> | undefined }
  >();

  /** metrics.jsonl and summary.json, re-read only when their fingerprint changed (run lists are polled). */
  private rowsAndSummary(
    name: string,
    dir: string,
  ): { rows: MetricsRow[]; summary: Record<string, unknown> | undefined } {
    const print = this.fingerprint(name);
    const hit = this.cache.get(name);
    if (hit && hit.print === print) return hit;
    const entry = {
      print,
      rows: readMetrics(join(dir, 'metrics.jsonl'), 0, Infinity).rows,
      summary: readJson(join(dir, 'summary.json')),
    };
    this.cache.set(name, entry);
    return entry;
  }

  config(name: string): Record<string, unknown> {
    const file = join(this.need(name), 'config.resolved.yaml');
    try {
      const parsed = YAML.parse(this.configText(name));
      return parsed && typeof parsed === 'object' ? (parsed as Record<string, unknown>) : {};
    } catch (cause) {
      throw new DataError(`${file}: invalid YAML: ${(cause as Error).message}`, file, undefined, undefined, { cause });
    }
  }

  configText(name: string): string {
    const file = join(this.need(name), 'config.resolved.yaml');
    if (statSync(file).size > MAX_CONFIG_BYTES)
      throw new DataError(`${file}: larger than ${MAX_CONFIG_BYTES} bytes`, file);
    return readFileSync(file, 'utf8');
  }

  summary(name: string): Record<string, unknown> | undefined {
    return readJson(join(this.need(name), 'summary.json'));
  }

  metrics(name: string, offset = 0): MetricsChunk {
    return readMetrics(join(this.need(name), 'metrics.jsonl'), offset, MAX_METRICS_BYTES);
  }

  treeSteps(name: string): number[] {
    const dir = join(this.need(name), 'trees');
    if (!existsSync(dir)) return [];
    return readdirSync(dir)
      .map((f) => /^step-(\d+)\.jsonl$/.exec(f))
      .filter((m): m is RegExpExecArray => !!m)
      .map((m) => Number(m[1]))
      .sort((a, b) => a - b);
  }

  /** A cheap fingerprint of a run's files, to notice changes (sizes and mtimes). */
  fingerprint(name: string): string {
    const dir = this.dir(name);
    if (!dir) return '';
    return ['metrics.jsonl', 'summary.json', 'trees']
      .map((f) => {
        const p = join(dir, f);
        if (!existsSync(p)) return '-';
        const s = statSync(p);
        return `${s.size}:${s.mtimeMs}`;
      })
      .join('|');
  }

  need(name: string): string {
    const dir = this.dir(name);
    if (!dir) throw new DataError(`no run "${name}" in ${this.root}`, join(this.root, name));
    return dir;
  }
}

function lastWrite(dir: string): number {
  let t = statSync(join(dir, 'config.resolved.yaml')).mtimeMs;
  for (const f of ['metrics.jsonl', 'summary.json', 'trees', 'checkpoints']) {
    const p = join(dir, f);
    if (existsSync(p)) t = Math.max(t, statSync(p).mtimeMs);
  }
  return Math.round(t);
}

function readJson(file: string): Record<string, unknown> | undefined {
  if (!existsSync(file)) return undefined;
  try {
    const v = JSON.parse(readFileSync(file, 'utf8'));
    return v && typeof v === 'object' ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined; // being written, or damaged: the run list shows the run without it
  }
}

/** Numeric fields of each complete line from byte `offset`, at most `maxBytes` of them. */
export function readMetrics(file: string, offset: number, maxBytes: number): MetricsChunk {
  if (!existsSync(file)) return { offset: 0, rows: [] };
  const size = statSync(file).size;
  const start = Number.isInteger(offset) && offset >= 0 && offset <= size ? offset : 0;
  const length = Math.min(size - start, maxBytes);
  const buf = Buffer.alloc(length);
  const fd = openSync(file, 'r');
  try {
    readSync(fd, buf, 0, length, start);
  } finally {
    closeSync(fd);
  }
  const end = buf.lastIndexOf(10) + 1; // only complete lines
  const rows: MetricsRow[] = [];
  for (const line of buf.subarray(0, end).toString('utf8').split('\n')) {
    if (!line.trim()) continue;
    try {
      rows.push(numericFields(JSON.parse(line)));
    } catch {
      // a damaged line: skipped (the run list still shows the rest)
    }
  }
  return { offset: start + end, rows };
}

function numericFields(raw: unknown): MetricsRow {
  const row: MetricsRow = {};
  if (raw && typeof raw === 'object')
    for (const [k, v] of Object.entries(raw)) if (typeof v === 'number' && Number.isFinite(v)) row[k] = v;
  return row;
}

function lastOf(rows: MetricsRow[], key: string): number | undefined {
  for (let i = rows.length - 1; i >= 0; i--) if (rows[i][key] !== undefined) return rows[i][key];
  return undefined;
}

function num(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
}

export function headline(rows: MetricsRow[], summary: Record<string, unknown> | undefined): Headline {
  const first = rows.find((r) => r.eval_greedy_acc !== undefined)?.eval_greedy_acc;
  return {
    reward: lastOf(rows, 'reward_mean'),
    accuracy: lastOf(rows, 'accuracy'),
    heldoutStart: num(summary?.heldout_acc_start) ?? first,
    heldoutEnd: num(summary?.heldout_acc_end) ?? lastOf(rows, 'eval_greedy_acc'),
    passAtK: num(summary?.pass_at_k_end) ?? lastOf(rows, 'eval_pass_at_k'),
    tokens: num(summary?.tokens_decoded) ?? lastOf(rows, 'tokens_decoded_total'),
    wallS: num(summary?.wall_s) ?? lastOf(rows, 'wall_s'),
  };
}
