/**
 * scripts/checks.mjs (`npm run check`): its arguments, and real `npm run` children in a scratch project
 * whose lint cannot finish before its format check has: with two jobs they overlap, outputs come whole
 * under their own heading, and a failing check does not stop the others.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

interface Result {
  name: string;
  code: number | null;
  signal: string | null;
  output: string;
  seconds: number;
}
interface Checks {
  CHECKS: string[];
  parseArgs(argv: string[], cores?: number): { checks: string[]; jobs: number };
  heading(r: Pick<Result, 'name' | 'code' | 'signal' | 'seconds'>): string;
  runChecks(checks: string[], jobs: number, o: { cwd: string; print: (t: string) => void }): Promise<Result[]>;
}
const script = fileURLToPath(new URL('../../scripts/checks.mjs', import.meta.url));
const checks = (await import(pathToFileURL(script).href)) as Checks;

test('checks: arguments choose the checks and the jobs; a bad one is named', () => {
  assert.deepEqual(checks.parseArgs([], 2), { checks: ['lint', 'typecheck', 'build:types', 'format:check'], jobs: 2 });
  assert.deepEqual(checks.parseArgs([], 16), { checks: ['lint', 'typecheck', 'build:types', 'format:check'], jobs: 4 });
  assert.deepEqual(checks.parseArgs(['typecheck', 'lint'], 1), { checks: ['lint', 'typecheck'], jobs: 1 });
  assert.deepEqual(checks.parseArgs(['--jobs', '1', 'format:check'], 8), { checks: ['format:check'], jobs: 1 });
  assert.throws(
    () => checks.parseArgs(['tests']),
    /unknown check or flag "tests" \(checks: lint, typecheck, build:types, format:check;/,
  );
  assert.throws(() => checks.parseArgs(['--jobs', '0']), /--jobs takes a whole number from 1 to 99, got 0/);
  assert.throws(() => checks.parseArgs(['--jobs']), /got undefined/);
  assert.equal(checks.heading({ name: 'lint', code: 0, signal: null, seconds: 1.234 }), '> lint: passed in 1.2 s');
  assert.equal(checks.heading({ name: 'lint', code: 2, signal: null, seconds: 3 }), '> lint: FAILED (exit 2) in 3.0 s');
  assert.equal(
    checks.heading({ name: 'x', code: null, signal: 'SIGTERM', seconds: 0 }),
    '> x: killed by SIGTERM in 0.0 s',
  );
});

/** A scratch package whose lint waits for the file its format check writes, then fails. */
function scratch(): string {
  const dir = mkdtempSync(join(tmpdir(), 'arbor-checks-'));
  const node = (code: string) => `node -e ${JSON.stringify(code)}`;
  const scripts = {
    lint: node(
      "const fs=require('fs');const t0=Date.now();setInterval(()=>{if(fs.existsSync('fmt-done')){console.log('lint line 1');console.error('lint line 2');process.exit(3)}if(Date.now()-t0>30000)process.exit(9)},10)",
    ),
    typecheck: node("console.log('typecheck says ok')"),
    'format:check': node("require('fs').writeFileSync('fmt-done','');console.log('format says ok')"),
  };
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'scratch', private: true, scripts }));
  return dir;
}

test('checks: two jobs overlap, each output comes whole under its heading, a failure lets the rest finish', async () => {
  const dir = scratch();
  try {
    const printed: string[] = [];
    const results = await checks.runChecks(['lint', 'typecheck', 'format:check'], 2, {
      cwd: dir,
      print: (t) => printed.push(t),
    });
    // lint, started first, exits 3 only once format:check (the second job's second check) has written its
    // file: they overlapped (alone, lint gives up with 9 after 30 s)
    const code = Object.fromEntries(results.map((r) => [r.name, r.code]));
    assert.deepEqual(code, { lint: 3, typecheck: 0, 'format:check': 0 });
    const order = results.map((r) => r.name);
    assert.ok(order.indexOf('typecheck') < order.indexOf('format:check'), `one job ran them in turn: ${order}`);
    assert.equal(printed.length, 3);
    const block = (name: string) => printed.find((p) => p.startsWith(`> ${name}:`)) ?? '';
    assert.match(block('typecheck'), /^> typecheck: passed in \d+\.\d s\ntypecheck says ok\n$/);
    // stdout and stderr, both kept (two pipes: either may arrive first)
    assert.match(
      block('lint'),
      /^> lint: FAILED \(exit 3\) in \d+\.\d s\n(lint line 1\nlint line 2|lint line 2\nlint line 1)\n$/,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('checks: the command exits 1 naming the failed check, 2 for a bad argument', () => {
  const dir = scratch();
  try {
    const r = spawnSync(process.execPath, [script, '--jobs', '2', 'format:check', 'lint'], {
      cwd: dir,
      encoding: 'utf8',
    });
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stderr, /checks failed: lint\n$/);
    assert.match(r.stdout, /> format:check: passed/);
    const bad = spawnSync(process.execPath, [script, '--jobs', 'x'], { cwd: dir, encoding: 'utf8' });
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /^checks: --jobs takes a whole number from 1 to 99, got x\n$/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
