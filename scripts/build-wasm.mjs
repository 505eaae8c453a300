#!/usr/bin/env node
// Compiles the AssemblyScript kernels (src/engine/kernels/assembly/*.ts) to build/kernels.wasm with
// SIMD and shared, imported memory. Runs on `npm install` (postinstall) and `npm test`.
import { mkdirSync, statSync, existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import asc from 'assemblyscript/asc';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const entry = join(root, 'src/engine/kernels/assembly/index.ts');
const out = join(root, 'build/kernels.wasm');
mkdirSync(join(root, 'build'), { recursive: true });
const started = Date.now();
const { error, stderr } = await asc.main([
  entry,
  '--outFile', out,
  '-O3', '--noAssert',
  '--runtime', 'stub',
  '--enable', 'simd', '--enable', 'threads',
  '--importMemory', '--sharedMemory',
  '--initialMemory', '32', '--maximumMemory', '32768',
]);
if (error) {
  console.error(stderr.toString());
  console.error(`build-wasm: ${error.message}`);
  process.exit(1);
}
if (!existsSync(out)) {
  console.error('build-wasm: compiler produced no output');
  process.exit(1);
}
console.log(`build-wasm: ${out} (${statSync(out).size} bytes, ${Date.now() - started} ms)`);
