#!/usr/bin/env node
// Runs every test/**/*.test.ts with node's built-in test runner (through tsx), so the runner prints
// its "# tests / # pass / # fail" summary. Node 20 does not expand globs for --test, so we list files.
import { readdirSync, statSync } from 'node:fs';
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
const r = spawnSync(process.execPath, ['--import', 'tsx', '--test', '--test-concurrency=2', ...files], {
  stdio: 'inherit',
});
process.exit(r.status ?? 1);
