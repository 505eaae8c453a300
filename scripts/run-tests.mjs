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
/**
 * The longest files, longest first (from a full run's per-test durations on 2 cores): the runner starts
 * files in the order given, two at a time, so a long file started last would run alone at the end.
 */
const LONGEST_FIRST = [
  'test/package/pack.test.ts',
  'test/docs/cli-smoke.test.ts',
  'test/hf/run.test.ts',
  'test/reliability/kill-resume.test.ts',
  'test/kernels/kernel-threads.test.ts',
  'test/reliability/cli-args.test.ts',
  'test/env/mcp-third-party-train.test.ts',
  'test/docs/commands.test.ts',
  'test/serve/vllm-fuzz.test.ts',
  'test/serve/e2e-remote-lora.test.ts',
  'test/lint/config.test.ts',
  'test/filter/sandbox.test.ts',
  'test/run/ai-sdk-example.test.ts',
  'test/api/example.test.ts',
  'test/reliability/config-bounds.test.ts',
  'test/remote/fleet-all-down.test.ts',
  'test/env/mcp-third-party.test.ts',
];
const rank = (f) => {
  const i = LONGEST_FIRST.indexOf(f.split('\\').join('/'));
  return i < 0 ? LONGEST_FIRST.length : i;
};
const filter = process.argv.slice(2);
let files = find('test').sort((a, b) => rank(a) - rank(b));
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
