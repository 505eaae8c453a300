#!/usr/bin/env node
// Runs every test/**/*.test.ts with node's built-in test runner (through tsx), so the runner prints
// its "# tests / # pass / # fail" summary. Node 20 does not expand globs for --test, so we list files.
//
// A full run (no filter) groups the files into SHARDS processes instead of one process per file: each
// process pays tsx's start-up and the import of src/ once (about 1.2 s of CPU per process), which
// with one process per file took a fifth of the suite's CPU. A shard is a generated module under test-artifacts/shards/
// that imports its files in path order, so their tests run one after another in one process; one more
// shard than the cores runs at a time (ARBOR_TEST_CONCURRENCY sets another number). Files therefore share a process with others: a test restores what it changes
// in process-wide state (process.env, hooks, globals) and closes what it opens, as every test here
// does. `ARBOR_TEST_ISOLATE=1` (or any filter) runs each file in its own process instead.
//
// A full run records in test-artifacts/test-timing.json, which the layout bench reads: the runner's wall
// time (total_seconds), the whole `npm test`'s when npm ran this script (npm_test_seconds: from the start
// of the shell npm gave the test script, so the build, typecheck, format check and lint count too; Linux
// only, else null), cores, test processes at a time (concurrency), date, commit, exit code and each file's test seconds (file_seconds).
import { mkdirSync, readFileSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import {
  npmTestStartedAt,
  openRunDirectory,
  SHARDS,
  shardFiles,
  testConcurrency,
  weight,
  writeShards,
} from './test-plan.mjs';

function find(dir) {
  const out = [];
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...find(p));
    else if (name.endsWith('.test.ts')) out.push(p);
  }
  return out;
}

let concurrency;
try {
  concurrency = testConcurrency();
} catch (error) {
  console.error(error.message);
  process.exit(1);
}
const filter = process.argv.slice(2);
let files = find('test');
if (filter.length) files = files.filter((f) => filter.some((s) => f.includes(s)));
if (!files.length) {
  console.error('no test files matched');
  process.exit(1);
}
const full = !filter.length;
const isolate = !full || process.env.ARBOR_TEST_ISOLATE === '1';
const entries = isolate ? [...files].sort((a, b) => weight(b) - weight(a)) : writeShards(shardFiles(files, SHARDS));
const durations = join('test-artifacts', 'test-file-seconds.json');
const reporters = [`--test-reporter=${process.stdout.isTTY ? 'spec' : 'tap'}`, '--test-reporter-destination=stdout'];
if (full) {
  mkdirSync('test-artifacts', { recursive: true });
  reporters.push('--test-reporter=./scripts/test-file-seconds.mjs', `--test-reporter-destination=${durations}`);
}
const started = Date.now();
// the run's own TMPDIR and fixtures (test-plan.mjs), removed when it ends; SIGINT reaches the runner's
// whole process group, so this process only waits for the runner to end and then removes the directory
const run = openRunDirectory();
console.log(`# tests' TMPDIR: ${run.tmp} (removed at the end)`);
process.on('SIGINT', () => {});
const runner = ['--import', 'tsx', '--test', `--test-concurrency=${concurrency}`, ...reporters, ...entries];
const r = spawnSync(process.execPath, runner, {
  stdio: 'inherit',
  env: { ...process.env, TMPDIR: run.tmp, TMP: run.tmp, TEMP: run.tmp, ARBOR_TEST_FIXTURES: run.fixtures },
});
rmSync(run.root, { recursive: true, force: true });
if (full) {
  const head = spawnSync('git', ['rev-parse', '--verify', 'HEAD'], { encoding: 'utf8' });
  let fileSeconds = null;
  try {
    fileSeconds = JSON.parse(readFileSync(durations, 'utf8'));
  } catch {
    // the reporter wrote nothing (the runner was killed): the timing has no per-file part
  }
  const npmStarted = npmTestStartedAt();
  const ended = Date.now();
  const timing = {
    total_seconds: (ended - started) / 1000,
    npm_test_seconds: npmStarted === null ? null : Math.round(ended - npmStarted) / 1000,
    cores: availableParallelism(),
    date: new Date(started).toISOString(),
    commit: head.status === 0 ? head.stdout.trim() : null,
    files: files.length,
    processes: entries.length,
    concurrency,
    exit_code: r.status,
    node: process.version,
    file_seconds: fileSeconds,
  };
  // written whole, then renamed: a reader never sees half of it
  writeFileSync('test-artifacts/test-timing.json.tmp', JSON.stringify(timing, null, 2) + '\n');
  renameSync('test-artifacts/test-timing.json.tmp', 'test-artifacts/test-timing.json');
}
process.exit(r.status ?? 1);
