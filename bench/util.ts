/** Shared bench helpers: table printing and the bench/out/<name>.json writer. */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import os from 'node:os';

export const benchOutDir = join(dirname(fileURLToPath(import.meta.url)), 'out');

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

/** Write bench/out/<name>.json with `headline` (the figures the issue names) and details. */
export function writeBenchJson(
  name: string,
  headline: Record<string, number | null>,
  details: Record<string, unknown>,
): string {
  mkdirSync(benchOutDir, { recursive: true });
  const path = join(benchOutDir, `${name}.json`);
  const machine = { cpus: os.cpus().length, cpu: os.cpus()[0]?.model ?? 'unknown', node: process.version };
  writeFileSync(path, JSON.stringify({ name, date: new Date().toISOString(), machine, headline, ...details }, null, 2));
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
  const r = spawnSync(process.execPath, ['--import', 'tsx', join(here, 'train-child.ts'), file], {
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  if (r.status !== 0) throw new Error(`training run failed (exit ${r.status}):\n${r.stderr.slice(-4000)}`);
  const lines = r.stdout.trim().split('\n');
  return JSON.parse(lines[lines.length - 1]);
}
