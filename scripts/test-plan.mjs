// How scripts/run-tests.mjs plans and times a full run: each file's expected seconds (test-seconds.json),
// shards balanced longest-processing-time-first, the generated shard modules
// (test-artifacts/shards/shard-NN.mjs, each importing its files in path order), and when `npm test` began.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';

/** Processes a full run uses: enough that two at a time even out, few enough that start-up stays small. */
export const SHARDS = 14;
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

/** Writes one module per shard importing its files; returns their paths, heaviest first. */
export function writeShards(shards) {
  const dir = join('test-artifacts', 'shards');
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  return shards.map((shard, i) => {
    const path = join(dir, `shard-${String(i).padStart(2, '0')}.mjs`);
    const lines = shard.files.map((f) => `import ${JSON.stringify(slash(relative(dir, f)))};`);
    writeFileSync(
      path,
      `// ${shard.files.length} test files, about ${Math.round(shard.seconds)} s\n${lines.join('\n')}\n`,
    );
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
