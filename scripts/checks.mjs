#!/usr/bin/env node
// `npm run check`: the lint, the type check, the declaration build and the format check, side by side.
// Each is an npm script of its own (`npm run lint`, `typecheck`, `build:types`, `format:check`) and runs
// as a child process; a core runs one check at a time, the longest (lint) first. Each check's output is
// printed whole when it ends, under a line naming it, its seconds and its result, so outputs never
// interleave. Every check runs to its end even when another fails, so one run shows every problem; the
// exit code is 1 if any failed. `build:types` writes dist/types (skipped when up to date), which the
// packaging test's `npm pack` then reuses.
//
// On 2 cores from a fresh clone of 3b7ada2 (a busy machine) the lint took 85.8 s and the other three
// 35.9 + 20.2 + 31.5 s: about 88 s side by side (the lint on one core, the other three in turn on the
// other), 173 s one after another.
//
// Usage: node scripts/checks.mjs [--jobs N] [name ...]   (names: lint, typecheck, build:types, format:check)
import { spawn } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { pathToFileURL } from 'node:url';

/** The checks, longest first: the order a free core takes them in. */
export const CHECKS = ['lint', 'typecheck', 'build:types', 'format:check'];

/**
 * Parses `[--jobs N] [name ...]` into the checks to run (all when none is named) and how many at a time
 * (default: the machine's cores, at most one per check). Throws an Error naming a bad flag or check.
 */
export function parseArgs(argv, cores = availableParallelism()) {
  const names = [];
  let jobs = null;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--jobs') {
      const value = argv[++i];
      if (!/^[1-9]\d{0,1}$/.test(value ?? ''))
        throw new Error(`--jobs takes a whole number from 1 to 99, got ${value}`);
      jobs = Number(value);
    } else if (CHECKS.includes(arg)) {
      if (!names.includes(arg)) names.push(arg);
    } else {
      throw new Error(`unknown check or flag ${JSON.stringify(arg)} (checks: ${CHECKS.join(', ')}; flag: --jobs N)`);
    }
  }
  const checks = CHECKS.filter((name) => !names.length || names.includes(name));
  return { checks, jobs: Math.min(jobs ?? Math.max(1, cores), checks.length) };
}

/** The line printed above a check's output. */
export function heading({ name, code, signal, seconds }) {
  const result = code === 0 ? 'passed' : signal ? `killed by ${signal}` : `FAILED (exit ${code})`;
  return `> ${name}: ${result} in ${seconds.toFixed(1)} s`;
}

const live = new Set();

/** Runs `npm run <name>` in cwd with its output captured; resolves with its exit and output, never rejects. */
function runCheck(name, cwd) {
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const started = Date.now();
  return new Promise((resolve) => {
    const chunks = [];
    const child = spawn(npm, ['run', '--silent', name], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    live.add(child);
    child.stdout.on('data', (c) => chunks.push(c));
    child.stderr.on('data', (c) => chunks.push(c));
    const done = (code, signal, extra = '') => {
      live.delete(child);
      const output = Buffer.concat(chunks).toString('utf8') + extra;
      resolve({ name, code, signal, output, seconds: (Date.now() - started) / 1000 });
    };
    child.on('error', (error) => done(1, null, `could not start ${npm} run ${name}: ${error.message}\n`));
    child.on('close', (code, signal) => done(code, signal));
  });
}

/** Runs the checks `jobs` at a time, in the order given; prints each one's output as it ends. */
export async function runChecks(
  checks,
  jobs,
  { cwd = process.cwd(), print = (text) => process.stdout.write(text) } = {},
) {
  const queue = [...checks];
  const results = [];
  const worker = async () => {
    for (let name = queue.shift(); name; name = queue.shift()) {
      const result = await runCheck(name, cwd);
      results.push(result);
      const body = result.output.trimEnd();
      print(`${heading(result)}\n${body ? body + '\n' : ''}`);
    }
  };
  await Promise.all(Array.from({ length: jobs }, worker));
  return results;
}

async function main() {
  let options;
  try {
    options = parseArgs(process.argv.slice(2));
  } catch (error) {
    console.error(`checks: ${error.message}`);
    return 2;
  }
  for (const signal of ['SIGINT', 'SIGTERM']) {
    process.on(signal, () => {
      for (const child of live) child.kill(signal);
      process.exit(130);
    });
  }
  const results = await runChecks(options.checks, options.jobs);
  const failed = results.filter((r) => r.code !== 0).map((r) => r.name);
  if (failed.length) console.error(`checks failed: ${failed.join(', ')}`);
  return failed.length ? 1 : 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await main();
}
