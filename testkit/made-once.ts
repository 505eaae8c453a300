/**
 * Fixtures a test run makes once and copies for each caller. `scripts/run-tests.mjs` gives every run a
 * directory of its own in ARBOR_TEST_FIXTURES and removes it when the run ends, so nothing made by an
 * earlier run, or by other code, is ever reused. Without it (a test file run by hand) each call makes its
 * own. Two processes asking for the same fixture at once may both make it; the first rename wins.
 */
import { createHash } from 'node:crypto';
import { cpSync, existsSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';

/** `out`, holding what `make(dir)` writes for `key`: made into the run's fixtures once, then copied. */
export function madeOnce(key: string, out: string, make: (dir: string) => void): string {
  const fixtures = process.env.ARBOR_TEST_FIXTURES;
  if (!fixtures || !existsSync(fixtures)) {
    make(out);
    return out;
  }
  const entry = join(fixtures, createHash('sha256').update(key).digest('hex').slice(0, 24));
  if (!existsSync(entry)) {
    const part = `${entry}.part-${process.pid}`;
    try {
      make(part);
      renameSync(part, entry);
    } catch (error) {
      // another process's rename came first (the directory exists, not empty), or the make failed
      if (!existsSync(entry)) throw error;
    } finally {
      rmSync(part, { recursive: true, force: true });
    }
  }
  cpSync(entry, out, { recursive: true });
  return out;
}
