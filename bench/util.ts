/** Shared bench helpers: table printing and the bench/out/<name>.json writer. */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import os from 'node:os';

export const benchOutDir = join(dirname(fileURLToPath(import.meta.url)), 'out');

/** Print rows as an aligned text table. */
export function printTable(rows: Array<Record<string, string | number | null>>): void {
  if (!rows.length) return;
  const cols = Object.keys(rows[0]);
  const fmt = (v: unknown) => (typeof v === 'number' ? (Number.isInteger(v) ? String(v) : v.toPrecision(4)) : String(v));
  const widths = cols.map((c) => Math.max(c.length, ...rows.map((r) => fmt(r[c]).length)));
  console.log(cols.map((c, i) => c.padEnd(widths[i])).join('  '));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const r of rows) console.log(cols.map((c, i) => fmt(r[c]).padEnd(widths[i])).join('  '));
}

/** Write bench/out/<name>.json with `headline` (the figures the issue names) and details. */
export function writeBenchJson(name: string, headline: Record<string, number | null>, details: Record<string, unknown>): string {
  mkdirSync(benchOutDir, { recursive: true });
  const path = join(benchOutDir, `${name}.json`);
  const machine = { cpus: os.cpus().length, cpu: os.cpus()[0]?.model ?? 'unknown', node: process.version };
  writeFileSync(path, JSON.stringify({ name, date: new Date().toISOString(), machine, headline, ...details }, null, 2));
  console.log(`wrote ${path}`);
  return path;
}
