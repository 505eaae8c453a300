#!/usr/bin/env node
// Compiles the AssemblyScript kernels (src/engine/kernels/assembly/*.ts) with SIMD and shared,
// imported memory, twice: build/kernels.wasm (plain SIMD128) and build/kernels-fma.wasm (relaxed SIMD:
// fused multiply-add, used when the runtime supports it). Runs on `npm install`/`npm ci` in this
// repository (prepare), `npm pack` and `npm test`; consumers get the files in the tarball. Each file is
// written beside its target and renamed over it, so a process loading the kernels meanwhile never reads
// a half-written module.
import { mkdirSync, renameSync, rmSync, statSync, existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import asc from 'assemblyscript/asc';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const entry = join(root, 'src/engine/kernels/assembly/index.ts');
mkdirSync(join(root, 'build'), { recursive: true });

async function build(out, extra) {
  const started = Date.now();
  const partial = out.replace(/\.wasm$/, `.${process.pid}.partial.wasm`);
  const { error, stderr } = await asc.main([
    entry,
    '--outFile',
    partial,
    '-O3',
    '--noAssert',
    '--runtime',
    'stub',
    '--enable',
    'simd',
    '--enable',
    'threads',
    ...extra,
    '--importMemory',
    '--sharedMemory',
    '--initialMemory',
    '32',
    '--maximumMemory',
    '65536',
  ]);
  if (error) {
    rmSync(partial, { force: true });
    console.error(stderr.toString());
    console.error(`build-wasm: ${error.message}`);
    process.exit(1);
  }
  if (!existsSync(partial)) {
    console.error(`build-wasm: compiler produced no ${partial}`);
    process.exit(1);
  }
  renameSync(partial, out);
  console.log(`build-wasm: ${out} (${statSync(out).size} bytes, ${Date.now() - started} ms)`);
}

await build(join(root, 'build/kernels.wasm'), []);
await build(join(root, 'build/kernels-fma.wasm'), ['--enable', 'relaxed-simd']);
