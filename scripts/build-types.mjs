#!/usr/bin/env node
// Writes the package's type declarations (tsconfig.build.json → dist/types/) from scratch: the old
// tree is removed first so a deleted module leaves no stale .d.ts behind. Run by `prepack` (so by
// `npm pack` and `npm publish`); consumers get the result in the tarball and never run tsc.
import { rmSync, existsSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const out = join(root, 'dist/types');
const entry = join(root, 'src/index.ts');
if (!existsSync(entry)) {
  console.error(`build-types: ${entry} is missing: it is the package's public entry (exports ".")`);
  process.exit(1);
}
const started = Date.now();
rmSync(out, { recursive: true, force: true });
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const result = spawnSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json')], { stdio: 'inherit' });
if (result.status !== 0) {
  console.error(`build-types: tsc -p tsconfig.build.json failed (exit ${result.status ?? result.signal})`);
  process.exit(1);
}
if (!existsSync(join(out, 'index.d.ts'))) {
  console.error(`build-types: tsc wrote no ${join(out, 'index.d.ts')}`);
  process.exit(1);
}
console.log(`build-types: ${out} in ${Date.now() - started} ms`);
