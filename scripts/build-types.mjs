#!/usr/bin/env node
// Writes the package's type declarations (tsconfig.build.json → dist/types/) from scratch: the old
// tree is removed first so a deleted module leaves no stale .d.ts behind. Run by `prepack` (so by
// `npm pack` and `npm publish`) and by `npm run check` (a declaration that cannot be written is an error
// only declaration output finds); consumers get the result in the tarball and never run tsc.
//
// Up to date is skipped: dist/types.stamp.json records a hash of the inputs (src/, both tsconfigs,
// package-lock.json, this script, TypeScript's version) and of dist/types/; while both still match, the
// build prints so and exits (`--force` rebuilds anyway; `--check` builds nothing and exits 0 when up to
// date, 1 when a build is due). So `npm pack` in `npm test` reuses what `npm run check` wrote.
import { rmSync, existsSync, readFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkOrSkip, stampMatches, treeHash, writeStamp } from './stamp.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const out = join(root, 'dist/types');
const stampFile = join(root, 'dist/types.stamp.json');
const entry = join(root, 'src/index.ts');
if (!existsSync(entry)) {
  console.error(`build-types: ${entry} is missing: it is the package's public entry (exports ".")`);
  process.exit(1);
}
const require = createRequire(import.meta.url);
const tscVersion = JSON.parse(readFileSync(require.resolve('typescript/package.json'), 'utf8')).version;
const inputs = ['src', 'tsconfig.json', 'tsconfig.build.json', 'package-lock.json', 'scripts/build-types.mjs'];
const inputsHash = () =>
  treeHash(
    root,
    [...inputs, 'scripts/stamp.mjs'].map((p) => join(root, p)),
    [tscVersion],
  );
const now = { inputs: inputsHash(), outputs: existsSync(out) ? treeHash(root, [out]) : null };
checkOrSkip('build-types', stampMatches(stampFile, now), 'dist/types is');
const started = Date.now();
rmSync(out, { recursive: true, force: true });
rmSync(stampFile, { force: true });
const tsc = require.resolve('typescript/bin/tsc');
const result = spawnSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json')], { stdio: 'inherit' });
if (result.status !== 0) {
  console.error(`build-types: tsc -p tsconfig.build.json failed (exit ${result.status ?? result.signal})`);
  process.exit(1);
}
if (!existsSync(join(out, 'index.d.ts'))) {
  console.error(`build-types: tsc wrote no ${join(out, 'index.d.ts')}`);
  process.exit(1);
}
writeStamp(stampFile, { inputs: now.inputs, outputs: treeHash(root, [out]) });
console.log(`build-types: ${out} in ${Date.now() - started} ms`);
