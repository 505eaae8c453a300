/**
 * scripts/build-types.mjs skips a declaration build that is up to date: its stamp (dist/types.stamp.json)
 * must match src/, both tsconfigs, package-lock.json, the script, TypeScript's version and dist/types/.
 * Run on a one-module project beside the repository's node_modules, so the repository's dist/ is never
 * touched and tsc takes a second or two.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  appendFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { copyBuildScript } from '../../testkit/package/build-script.js';

const repo = resolve('.');

test('build-types: up to date is skipped; a changed source, lock, output or a lost stamp makes a build due', () => {
  const dir = mkdtempSync(join(tmpdir(), 'arbor-build-types-'));
  try {
    for (const file of ['tsconfig.json', 'tsconfig.build.json']) cpSync(join(repo, file), join(dir, file));
    mkdirSync(join(dir, 'src'));
    const index = join(dir, 'src/index.ts');
    writeFileSync(index, 'export function twice(x: number): number {\n  return 2 * x;\n}\n');
    writeFileSync(join(dir, 'package-lock.json'), '{"lockfileVersion": 3}\n');
    const { run, due } = copyBuildScript(dir, 'build-types.mjs');
    assert.equal(due(), true, 'no dist/ yet');
    const built = run();
    assert.equal(built.status, 0, built.stderr + built.stdout);
    assert.match(built.stdout, /build-types: .*dist\/types in \d+ ms/);
    assert.match(
      readFileSync(join(dir, 'dist/types/index.d.ts'), 'utf8'),
      /export declare function twice\(x: number\): number;/,
    );
    assert.equal(due(), false, 'built');
    const again = run();
    assert.equal(again.stdout, 'build-types: dist/types is up to date (--force rebuilds)\n');

    const original = readFileSync(index);
    appendFileSync(index, 'export const three = 3;\n');
    assert.equal(due(), true, 'a source changed');
    writeFileSync(index, original);
    assert.equal(due(), false, 'the source restored');

    appendFileSync(join(dir, 'package-lock.json'), '\n');
    assert.equal(due(), true, 'the dependencies changed');
    writeFileSync(join(dir, 'package-lock.json'), '{"lockfileVersion": 3}\n');

    const output = join(dir, 'dist/types/index.d.ts');
    const declared = readFileSync(output);
    writeFileSync(output, 'export {};\n');
    assert.equal(due(), true, 'an output changed by hand');
    writeFileSync(output, declared);
    assert.equal(due(), false, 'the output restored');

    rmSync(join(dir, 'dist/types.stamp.json'));
    assert.equal(due(), true, 'no stamp');
    const forced = run('--force');
    assert.equal(forced.status, 0, forced.stderr);
    assert.ok(existsSync(join(dir, 'dist/types.stamp.json')) && !due(), 'a forced build stamps again');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
