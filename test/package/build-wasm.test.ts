/**
 * scripts/build-wasm.mjs skips a build that is up to date: its stamp (build/kernels.stamp.json) must
 * match the AssemblyScript sources, the script, the compiler's version and both .wasm outputs. Run on
 * a copy of those files (`--check` compiles nothing; the copy compiles only when the repository's own build is
 * not current), so the repository's build/ is never touched.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { appendFileSync, cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { copyBuildScript } from '../../testkit/package/build-script.js';

const repo = resolve('.');
const ASSEMBLY = 'src/engine/kernels/assembly';

test('build-wasm: up to date is skipped; a changed source, a changed output or a lost stamp makes a build due', () => {
  const dir = mkdtempSync(join(tmpdir(), 'arbor-build-wasm-'));
  try {
    cpSync(join(repo, ASSEMBLY), join(dir, ASSEMBLY), { recursive: true });
    const { run, due } = copyBuildScript(dir, 'build-wasm.mjs');
    if (spawnSync(process.execPath, ['scripts/build-wasm.mjs', '--check']).status === 0) {
      // the repository's build is current (npm test built it): its outputs and stamp must hold in the copy too
      for (const file of ['kernels.wasm', 'kernels-fma.wasm', 'kernels.stamp.json'])
        cpSync(join(repo, 'build', file), join(dir, 'build', file));
    } else {
      assert.equal(due(), true, 'no build/ yet');
      const built = run();
      assert.equal(built.status, 0, built.stderr);
      assert.match(built.stdout, /kernels-fma\.wasm \(\d+ bytes/);
    }
    assert.equal(due(), false, 'built');
    const again = run();
    assert.match(again.stdout, /are up to date/);
    assert.doesNotMatch(again.stdout, /bytes/, 'nothing compiled the second time');

    const source = join(dir, ASSEMBLY, 'index.ts');
    const original = readFileSync(source);
    appendFileSync(source, '\n// an edit\n');
    assert.equal(due(), true, 'a source changed');
    writeFileSync(source, original);
    assert.equal(due(), false, 'the source restored');

    const wasm = join(dir, 'build/kernels-fma.wasm');
    const output = readFileSync(wasm);
    appendFileSync(wasm, Buffer.from([0]));
    assert.equal(due(), true, 'an output changed by hand');
    writeFileSync(wasm, output);
    assert.equal(due(), false, 'the output restored');

    rmSync(join(dir, 'build/kernels.stamp.json'));
    assert.equal(due(), true, 'no stamp');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
