// How scripts/run-tests.mjs plans and times a full run: each file's expected seconds (test-seconds.json),
// shards balanced longest-processing-time-first, the generated shard modules
// (test-artifacts/shards/shard-NN.mjs, each importing its files in path order), and when `npm test` began.
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join, relative } from 'node:path';

/** Processes a full run uses: enough that a few at a time even out, few enough that start-up stays small. */
export const SHARDS = 14;

/**
 * Test processes at a time: ARBOR_TEST_CONCURRENCY when set (1 to 64), else one more than the cores. Tests
 * wait on servers, child processes, timers and disk a seventh of the time; a third process on 2 cores fills
 * that (the suite took 284 s of runner time instead of 303 s, measured 2026-11-29). An invalid value
 * throws an Error naming it.
 */
export function testConcurrency(env = process.env, cores = availableParallelism()) {
  const set = env.ARBOR_TEST_CONCURRENCY;
  if (set === undefined || set === '') return cores + 1;
  if (!/^\d+$/.test(set) || Number(set) < 1 || Number(set) > 64) {
    throw new Error(`ARBOR_TEST_CONCURRENCY must be a whole number from 1 to 64, got ${JSON.stringify(set)}`);
  }
  return Number(set);
}
/**
 * Each file's test seconds from a full run on 2 cores (test-artifacts/test-file-seconds.json, which every
 * full run writes; copy it here when the shards drift apart), plus IMPORT_SECONDS for loading the file.
 * A file not in the table counts UNKNOWN_SECONDS.
 */
const SECONDS = JSON.parse(readFileSync(new URL('./test-seconds.json', import.meta.url), 'utf8'));
const IMPORT_SECONDS = 0.5;
const UNKNOWN_SECONDS = 2;

const slash = (f) => f.split('\\').join('/');
export const weight = (f) => (SECONDS[slash(f)] ?? UNKNOWN_SECONDS) + IMPORT_SECONDS;

/** Longest-processing-time-first: each file, heaviest first, goes to the lightest shard; shards heaviest first. */
export function shardFiles(files, count, weigh = weight) {
  const shards = Array.from({ length: Math.min(count, files.length) }, () => ({ seconds: 0, files: [] }));
  for (const file of [...files].sort((a, b) => weigh(b) - weigh(a) || a.localeCompare(b))) {
    const lightest = shards.reduce((best, s) => (s.seconds < best.seconds ? s : best));
    lightest.files.push(file);
    lightest.seconds += weigh(file);
  }
  for (const s of shards) s.files.sort();
  return shards.sort((a, b) => b.seconds - a.seconds);
}

/**
 * Writes one module per shard importing its files, after scripts/test-hold.mjs, whose `release()` on the last
 * line lets the tests start; returns their paths, heaviest first.
 */
export function writeShards(shards, dir = join('test-artifacts', 'shards')) {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  return shards.map((shard, i) => {
    const path = join(dir, `shard-${String(i).padStart(2, '0')}.mjs`);
    const hold = `import { release } from ${JSON.stringify(slash(relative(dir, 'scripts/test-hold.mjs')))};`;
    const lines = shard.files.map((f) => `import ${JSON.stringify(slash(relative(dir, f)))};`);
    const head = `// ${shard.files.length} test files, about ${Math.round(shard.seconds)} s; tests start once all are imported`;
    writeFileSync(path, [head, hold, ...lines, 'release();', ''].join('\n'));
    return path;
  });
}

/**
 * Under `npm test` (npm_lifecycle_event test): when this process's parent, the shell npm started for the test
 * script, began (ms since the epoch, ±1 s; Linux's /proc). Else, or off Linux, null.
 */
export function npmTestStartedAt() {
  if (process.env.npm_lifecycle_event !== 'test') return null;
  try {
    // /proc/<pid>/stat field 22 is the start time in clock ticks (USER_HZ, 100) after boot; /proc/stat's btime is the boot
    const stat = readFileSync(`/proc/${process.ppid}/stat`, 'utf8');
    const ticks = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]);
    const boot = Number(/^btime (\d+)$/m.exec(readFileSync('/proc/stat', 'utf8'))?.[1]);
    const at = boot * 1000 + ticks * 10;
    return Number.isFinite(at) && at <= Date.now() ? at : null;
  } catch {
    return null; // not Linux
  }
}

const RUN_PREFIX = 'arbor-test-run-';

/** Whether process `pid` is alive (signal 0 tests without sending; EPERM means it exists as another user's). */
function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return error.code === 'EPERM';
  }
}

/**
 * A fresh directory for one run, named after this process, holding:
 * - `tmp`: the tests' TMPDIR, open to every user as /tmp is (mode 1777). Whatever a test leaves in its temporary directories (a run left about 70,
 *   some of 40 MB, before this) goes when the run ends. tsx keeps its compile cache in `$TMPDIR/tsx-<uid>`,
 *   so that name links to the machine's own cache: a run does not compile every module again.
 * - `fixtures`: what testkit/made-once.ts makes once per run (ARBOR_TEST_FIXTURES).
 * Directories of runs whose process is gone (killed before their clean-up) are removed first. The
 * caller removes `root` at the end.
 */
export function openRunDirectory(base = tmpdir(), pid = process.pid) {
  for (const name of readdirSync(base)) {
    const owner = name.startsWith(RUN_PREFIX) ? Number(name.slice(RUN_PREFIX.length).split('-')[0]) : NaN;
    if (Number.isInteger(owner) && owner > 0 && owner !== pid && !alive(owner)) {
      rmSync(join(base, name), { recursive: true, force: true });
    }
  }
  const root = mkdtempSync(join(base, `${RUN_PREFIX}${pid}-`));
  const tmp = join(root, 'tmp');
  const fixtures = join(root, 'fixtures');
  mkdirSync(tmp);
  mkdirSync(fixtures);
  // as /tmp is: the code sandbox's per-run users must reach their directories in `tmp`
  chmodSync(root, 0o755);
  chmodSync(tmp, 0o1777);
  if (typeof process.getuid === 'function') {
    const cache = join(base, `tsx-${process.getuid()}`);
    mkdirSync(cache, { recursive: true });
    symlinkSync(cache, join(tmp, `tsx-${process.getuid()}`), 'dir');
  }
  return { root, tmp, fixtures };
}
