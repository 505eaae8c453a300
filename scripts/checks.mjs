#!/usr/bin/env node
// npm test's static checks side by side: typecheck (tsc), format:check (prettier) and lint (eslint) read
// the tree and write nothing, so they run at once (on 2 cores the shorter ones cost no wall time). Each
// check's output is printed whole when it ends, with its time; the exit code is 1 if any check failed.
import { spawn } from 'node:child_process';

const CHECKS = ['typecheck', 'format:check', 'lint'];
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

function run(script) {
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn(npm, ['run', '--silent', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    const out = [];
    child.stdout.on('data', (c) => out.push(c));
    child.stderr.on('data', (c) => out.push(c));
    const done = (code, why) => {
      const seconds = ((Date.now() - started) / 1000).toFixed(1);
      const status = code === 0 ? 'ok' : `failed (${why ?? `exit ${code}`})`;
      process.stdout.write(`\n> ${script}: ${status} in ${seconds} s\n${Buffer.concat(out).toString()}`);
      resolve(code === 0);
    };
    child.on('error', (e) => done(1, e.message));
    child.on('close', (code, signal) => done(code ?? 1, signal ?? undefined));
  });
}

const results = await Promise.all(CHECKS.map(run));
const failed = CHECKS.filter((_, i) => !results[i]);
if (failed.length) console.error(`\nchecks failed: ${failed.join(', ')}`);
process.exit(failed.length ? 1 : 0);
