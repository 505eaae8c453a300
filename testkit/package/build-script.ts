/**
 * A stamped build script (scripts/build-wasm.mjs, scripts/build-types.mjs) copied into `dir` with
 * scripts/stamp.mjs and the repository's node_modules, so a test can build, check and tamper there
 * without touching the repository's own outputs.
 */
import assert from 'node:assert/strict';
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { cpSync, symlinkSync } from 'node:fs';
import { join, resolve } from 'node:path';

export interface BuildScript {
  /** Runs the copy with `args`. */
  run(...args: string[]): SpawnSyncReturns<string>;
  /** `--check`: whether a build is due (any exit but 0 or 1 fails the test). */
  due(): boolean;
}

export function copyBuildScript(dir: string, name: string): BuildScript {
  const repo = resolve('.');
  for (const file of [name, 'stamp.mjs']) cpSync(join(repo, 'scripts', file), join(dir, 'scripts', file));
  symlinkSync(join(repo, 'node_modules'), join(dir, 'node_modules'), 'dir');
  const script = join(dir, 'scripts', name);
  const run = (...args: string[]) => spawnSync(process.execPath, [script, ...args], { encoding: 'utf8' });
  const due = () => {
    const r = run('--check');
    assert.ok(r.status === 0 || r.status === 1, `--check exited ${r.status}: ${r.stderr}`);
    return r.status === 1;
  };
  return { run, due };
}
