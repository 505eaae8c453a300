// Build stamps: a build records a hash of its inputs and of its outputs, and skips itself while both
// still match (scripts/build-wasm.mjs: build/kernels.stamp.json; scripts/build-types.mjs:
// dist/types.stamp.json). A missing input or output hashes to null, which never matches a stamp.
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';

/** The SHA-256 (hex) of `bytes`. */
export const sha256 = (bytes) => createHash('sha256').update(bytes).digest('hex');

/** The SHA-256 of `file`'s bytes; null when it does not exist. */
export const fileHash = (file) => (existsSync(file) ? sha256(readFileSync(file)) : null);

/**
 * One hash over `paths` (files and directories, walked in name order), each file's path relative to `root`
 * and its bytes, and `extra` strings. Null when any path is missing.
 */
export function treeHash(root, paths, extra = []) {
  const hash = createHash('sha256');
  const walk = (path) => {
    if (statSync(path).isDirectory()) for (const name of readdirSync(path).sort()) walk(join(path, name));
    else hash.update(`${relative(root, path)}\0`).update(readFileSync(path));
  };
  for (const path of paths) {
    if (!existsSync(path)) return null;
    walk(path);
  }
  for (const text of extra) hash.update(`\0${text}`);
  return hash.digest('hex');
}

/** Whether `file` holds exactly `now` (every value non-null); an unreadable stamp does not match. */
export function stampMatches(file, now) {
  if (Object.values(now).some((v) => v === null || (Array.isArray(v) && v.includes(null)))) return false;
  try {
    return JSON.stringify(JSON.parse(readFileSync(file, 'utf8'))) === JSON.stringify(now);
  } catch {
    return false;
  }
}

/** Writes `stamp` to `file` whole (beside it, then renamed). */
export function writeStamp(file, stamp) {
  const partial = `${file}.${process.pid}.partial`;
  writeFileSync(partial, JSON.stringify(stamp) + '\n');
  renameSync(partial, file);
}

/**
 * The flags both builds share, given whether the outputs are `current`: `--check` prints whether a build
 * is due and exits (0 up to date, 1 due); without `--force` a current build prints `<outputs> up to date`
 * and exits 0. Returns only when the build should run.
 */
export function checkOrSkip(name, current, outputs, argv = process.argv) {
  if (argv.includes('--check')) {
    console.log(`${name}: ${current ? 'up to date' : 'a build is due'}`);
    process.exit(current ? 0 : 1);
  }
  if (!argv.includes('--force') && current) {
    console.log(`${name}: ${outputs} up to date (--force rebuilds)`);
    process.exit(0);
  }
}
