#!/usr/bin/env node
// Runs every test/**/*.test.ts with node's built-in test runner (through tsx), so the runner prints
// its "# tests / # pass / # fail" summary. Node 20 does not expand globs for --test, so we list files.
// A run of every file (no filter) records its wall time in test-artifacts/test-timing.json (total seconds,
// cores, date, commit, exit code), which the layout bench reads.
import { mkdirSync, readdirSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';

function find(dir) {
  const out = [];
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...find(p));
    else if (name.endsWith('.test.ts')) out.push(p);
  }
  return out;
}
const filter = process.argv.slice(2);
let files = find('test');
if (filter.length) files = files.filter((f) => filter.some((s) => f.includes(s)));
if (!files.length) {
  console.error('no test files matched');
  process.exit(1);
}
const started = Date.now();
const r = spawnSync(process.execPath, ['--import', 'tsx', '--test', '--test-concurrency=2', ...files], {
  stdio: 'inherit',
});
if (!filter.length) {
  const head = spawnSync('git', ['rev-parse', '--verify', 'HEAD'], { encoding: 'utf8' });
  const timing = {
    total_seconds: (Date.now() - started) / 1000,
    cores: availableParallelism(),
    date: new Date(started).toISOString(),
    commit: head.status === 0 ? head.stdout.trim() : null,
    files: files.length,
    exit_code: r.status,
    node: process.version,
  };
  mkdirSync('test-artifacts', { recursive: true });
  // written whole, then renamed: a reader never sees half of it
  writeFileSync('test-artifacts/test-timing.json.tmp', JSON.stringify(timing, null, 2) + '\n');
  renameSync('test-artifacts/test-timing.json.tmp', 'test-artifacts/test-timing.json');
}
process.exit(r.status ?? 1);
