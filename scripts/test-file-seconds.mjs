// A node:test reporter (used by scripts/run-tests.mjs on full runs): the seconds each test file's
// top-level tests took, by the file that declares them (a shard process runs many files), heaviest
// first, as one JSON object. Module loading is not in a test's duration, so it is not counted.
import { relative } from 'node:path';

export default async function* fileSeconds(source) {
  const perFile = new Map();
  for await (const event of source) {
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue;
    const { nesting, file, details } = event.data;
    if (nesting !== 0 || typeof details?.duration_ms !== 'number') continue;
    const name = file ? relative(process.cwd(), file).split('\\').join('/') : '(unknown)';
    perFile.set(name, (perFile.get(name) ?? 0) + details.duration_ms / 1000);
  }
  const sorted = [...perFile].sort((a, b) => b[1] - a[1]).map(([f, s]) => [f, Math.round(s * 10) / 10]);
  yield JSON.stringify(Object.fromEntries(sorted), null, 2) + '\n';
}
