/**
 * How `npm test` runs the suite (scripts/run-tests.mjs with scripts/test-plan.mjs): files grouped into
 * balanced shards, each file's seconds attributed by the file that declares the test even when a shard
 * imports many, the start of the whole `npm test` read from the parent process, and a filtered run.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const repo = resolve('.');
/** A child `node --test` reports to us over the v8 protocol when it inherits this; a nested run must not. */
const childEnv = { ...process.env, NODE_TEST_CONTEXT: undefined };
interface Shard {
  seconds: number;
  files: string[];
}
interface TestPlan {
  SHARDS: number;
  shardFiles(files: string[], count: number, weigh?: (file: string) => number): Shard[];
  npmTestStartedAt(): number | null;
  testConcurrency(env: Record<string, string | undefined>, cores: number): number;
  openRunDirectory(base: string, pid: number): { root: string; tmp: string; fixtures: string };
  writeShards(shards: Shard[], dir: string): string[];
}
const plan = (await import(pathToFileURL(join(repo, 'scripts/test-plan.mjs')).href)) as TestPlan;

test('shards: every file once, heaviest first, within one file of the ideal balance', () => {
  const weights: Record<string, number> = { 'a.ts': 60, 'b.ts': 30, 'c.ts': 29, 'd.ts': 12, 'e.ts': 11 };
  for (let i = 0; i < 40; i++) weights[`small/${String(i).padStart(2, '0')}.ts`] = 1 + (i % 5);
  const files = Object.keys(weights).sort();
  const total = files.reduce((s, f) => s + weights[f], 0);
  for (const count of [1, 3, 6, 100]) {
    const shards = plan.shardFiles(files, count, (f) => weights[f]);
    assert.equal(shards.length, Math.min(count, files.length));
    assert.deepEqual(shards.flatMap((s) => s.files).sort(), files, `count ${count}: each file in one shard`);
    for (const s of shards) {
      assert.deepEqual(s.files, [...s.files].sort(), 'a shard imports its files in path order');
      assert.equal(
        s.seconds,
        s.files.reduce((sum, f) => sum + weights[f], 0),
      );
    }
    assert.deepEqual(
      shards.map((s) => s.seconds),
      shards.map((s) => s.seconds).sort((x, y) => y - x),
      'heaviest shard first',
    );
    // longest-processing-time-first: no shard exceeds the even share by more than one file's weight
    const heaviest = shards[0].seconds;
    assert.ok(heaviest <= Math.max(total / shards.length + 6, 60), `count ${count}: heaviest ${heaviest}`);
  }
  assert.deepEqual(plan.shardFiles(files, 6, (f) => weights[f])[0].files, ['a.ts'], 'the 60 s file alone');
});

test('concurrency: one more than the cores, or ARBOR_TEST_CONCURRENCY; a bad value is named', () => {
  assert.equal(plan.testConcurrency({}, 2), 3);
  assert.equal(plan.testConcurrency({ ARBOR_TEST_CONCURRENCY: '' }, 8), 9);
  assert.equal(plan.testConcurrency({ ARBOR_TEST_CONCURRENCY: '1' }, 8), 1);
  assert.equal(plan.testConcurrency({ ARBOR_TEST_CONCURRENCY: '64' }, 2), 64);
  for (const bad of ['0', '65', '2.5', 'two', '-1']) {
    assert.throws(
      () => plan.testConcurrency({ ARBOR_TEST_CONCURRENCY: bad }, 2),
      new RegExp(
        `^Error: ARBOR_TEST_CONCURRENCY must be a whole number from 1 to 64, got "${bad.replace('.', '\\.')}"$`,
      ),
    );
  }
  const r = spawnSync(process.execPath, ['scripts/run-tests.mjs', 'no-such-test-file'], {
    env: { ...childEnv, ARBOR_TEST_CONCURRENCY: 'many' },
    encoding: 'utf8',
  });
  assert.equal(r.status, 1);
  assert.match(r.stderr, /ARBOR_TEST_CONCURRENCY must be a whole number from 1 to 64, got "many"/);
});

test("run directory: fresh per run with tmp/ and fixtures/, tsx's cache linked; a dead run's removed", () => {
  const base = mkdtempSync(join(tmpdir(), 'arbor-run-dir-base-'));
  try {
    const gone = spawnSync(process.execPath, ['-e', '']).pid!; // exited: its pid names a dead run
    const dead = join(base, `arbor-test-run-${gone}-abc`);
    const live = join(base, `arbor-test-run-${process.ppid}-def`);
    const unrelated = join(base, 'arbor-test-run-notapid');
    for (const dir of [dead, live, unrelated]) mkdirSync(dir);
    const run = plan.openRunDirectory(base, process.pid);
    assert.match(run.root, new RegExp(`arbor-test-run-${process.pid}-\\w+$`));
    assert.deepEqual([run.tmp, run.fixtures], [join(run.root, 'tmp'), join(run.root, 'fixtures')]);
    assert.deepEqual([statSync(run.root).mode & 0o7777, statSync(run.tmp).mode & 0o7777], [0o755, 0o1777]);
    assert.equal(existsSync(dead), false, 'the dead run was cleaned up');
    assert.ok(existsSync(live) && existsSync(unrelated) && existsSync(run.fixtures));
    const uid = process.getuid!();
    assert.equal(realpathSync(join(run.tmp, `tsx-${uid}`)), realpathSync(join(base, `tsx-${uid}`)));
    writeFileSync(join(base, `tsx-${uid}`, 'kept'), '');
    assert.notEqual(plan.openRunDirectory(base, process.pid).root, run.root, 'a second run, another directory');
    // removing a run removes its link, never the machine's tsx cache behind it
    rmSync(run.root, { recursive: true, force: true });
    assert.ok(existsSync(join(base, `tsx-${uid}`, 'kept')));
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
});

test("a shard's tests start after all its files are imported: a later file's top-level work cannot delay them", () => {
  const root = mkdtempSync(join(tmpdir(), 'arbor-shard-hold-'));
  try {
    const early = join(root, 'early.test.mjs');
    const late = join(root, 'late.test.mjs');
    writeFileSync(
      early,
      "import { test } from 'node:test';\n" +
        "test('early', async () => { const t0 = Date.now(); await new Promise((r) => setTimeout(r, 50)); console.log(`# early waited ${Date.now() - t0} ms`); });\n",
    );
    // a top-level await, then 1.5 s of synchronous work: without the hold it lands inside early's 50 ms wait
    writeFileSync(
      late,
      "import { test } from 'node:test';\nawait new Promise((r) => setTimeout(r, 10));\n" +
        'const t0 = Date.now(); while (Date.now() - t0 < 1500) {}\n' +
        "test('late', () => {});\n",
    );
    const [shard] = plan.writeShards([{ seconds: 2, files: [early, late] }], join(root, 'shards'));
    const r = spawnSync(process.execPath, ['--test', '--test-reporter=tap', shard], {
      env: childEnv,
      encoding: 'utf8',
    });
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /^# pass 2$/m);
    const waited = Number(/early waited (\d+) ms/.exec(r.stdout)?.[1]);
    assert.ok(waited >= 45 && waited < 1000, `early's 50 ms timer took ${waited} ms`);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test("test-seconds.json names only test files that exist (a removed file's entry is removed too)", () => {
  const table = JSON.parse(readFileSync(join(repo, 'scripts/test-seconds.json'), 'utf8')) as Record<string, number>;
  const missing = Object.keys(table).filter((f) => !existsSync(join(repo, f)));
  assert.deepEqual(missing, []);
  assert.ok(Object.values(table).every((s) => typeof s === 'number' && s >= 0));
});

test('the file-seconds reporter attributes each test to the file that declares it, inside one shard', () => {
  const dir = mkdtempSync(join(tmpdir(), 'arbor-run-tests-'));
  try {
    const testFile = (ms: number) =>
      `import { test } from 'node:test';\ntest('waits', () => new Promise((r) => setTimeout(r, ${ms})));\n`;
    writeFileSync(join(dir, 'slow.test.mjs'), testFile(300));
    writeFileSync(join(dir, 'quick.test.mjs'), testFile(1));
    writeFileSync(join(dir, 'shard.mjs'), "import './quick.test.mjs';\nimport './slow.test.mjs';\n");
    const reporter = pathToFileURL(join(repo, 'scripts/test-file-seconds.mjs')).href;
    const r = spawnSync(
      process.execPath,
      ['--test', `--test-reporter=${reporter}`, '--test-reporter-destination=out.json', 'shard.mjs'],
      { cwd: dir, encoding: 'utf8', env: childEnv },
    );
    assert.equal(r.status, 0, r.stderr);
    const seconds = JSON.parse(readFileSync(join(dir, 'out.json'), 'utf8')) as Record<string, number>;
    assert.deepEqual(Object.keys(seconds), ['slow.test.mjs', 'quick.test.mjs'], 'heaviest first, no shard.mjs');
    assert.ok(seconds['slow.test.mjs'] >= 0.3 && seconds['slow.test.mjs'] < 5, JSON.stringify(seconds));
    assert.ok(seconds['quick.test.mjs'] < 0.3, JSON.stringify(seconds));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("npm test's start: the parent process's start time under npm test, null otherwise", () => {
  const script =
    `const m = await import(${JSON.stringify(pathToFileURL(join(repo, 'scripts/test-plan.mjs')).href)});` +
    'console.log(JSON.stringify(m.npmTestStartedAt()));';
  const read = (env: Record<string, string | undefined>) => {
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', env });
    assert.equal(r.status, 0, r.stderr);
    return JSON.parse(r.stdout) as number | null;
  };
  const { npm_lifecycle_event: _event, ...env } = process.env;
  assert.equal(read(env), null, 'not under npm test');
  const at = read({ ...env, npm_lifecycle_event: 'test' });
  if (process.platform !== 'linux') return assert.equal(at, null);
  // the child's parent is this test process: it started uptime seconds ago (btime has 1 s resolution)
  const started = Date.now() - process.uptime() * 1000;
  assert.ok(at !== null && Math.abs(at - started) < 1500, `${at} vs ${started}`);
});

test('a filtered run: only the matching files, each in its own process, and no timing record', () => {
  const timing = join(repo, 'test-artifacts/test-timing.json');
  const before = existsSync(timing) ? readFileSync(timing, 'utf8') : null;
  const r = spawnSync(process.execPath, ['scripts/run-tests.mjs', 'test/core/progress-count.test.ts'], {
    cwd: repo,
    encoding: 'utf8',
    env: childEnv,
  });
  assert.equal(r.status, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /^# pass [1-9]\d*$/m);
  assert.match(r.stdout, /^# fail 0$/m);
  assert.equal(existsSync(timing) ? readFileSync(timing, 'utf8') : null, before, 'a filtered run records nothing');
  // the tests ran with their own TMPDIR, which the runner named and then removed
  const runDir = /^# tests' TMPDIR: (\S+)\/tmp \(removed at the end\)$/m.exec(r.stdout)?.[1];
  assert.ok(runDir?.includes(`arbor-test-run-${r.pid}-`), r.stdout.slice(0, 300));
  assert.equal(existsSync(runDir!), false);
  const none = spawnSync(process.execPath, ['scripts/run-tests.mjs', 'no-such-test-file'], {
    cwd: repo,
    encoding: 'utf8',
  });
  assert.equal(none.status, 1);
  assert.match(none.stderr, /no test files matched/);
});
