#!/usr/bin/env node
// Compiles the AssemblyScript kernels (src/engine/kernels/assembly/*.ts) with SIMD and shared,
// imported memory, twice: build/kernels.wasm (plain SIMD128) and build/kernels-fma.wasm (relaxed SIMD:
// fused multiply-add, used when the runtime supports it). Runs on `npm install`/`npm ci` in this
// repository (prepare), `npm pack` and `npm test`; consumers get the files in the tarball. Each file is
// written beside its target and renamed over it, so a process loading the kernels meanwhile never reads
// a half-written module.
//
// Up to date is skipped: build/kernels.stamp.json records a hash of the inputs (the AssemblyScript
// sources, this script and scripts/stamp.mjs, the compiler's version) and of both outputs; when all of them still match, the
// build prints so and exits (`--force` rebuilds anyway; `--check` builds nothing and exits 0 when up to date,
// 1 when a build is due). npm ci, npm test and npm pack each run it.
import { mkdirSync, readFileSync, renameSync, rmSync, statSync, existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkOrSkip, fileHash, stampMatches, treeHash, writeStamp } from './stamp.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const sources = join(root, 'src/engine/kernels/assembly');
const entry = join(sources, 'index.ts');
const outputs = [join(root, 'build/kernels.wasm'), join(root, 'build/kernels-fma.wasm')];
const stampFile = join(root, 'build/kernels.stamp.json');
mkdirSync(join(root, 'build'), { recursive: true });

/** One hash over every source file (path and bytes, in path order), this script, stamp.mjs and the compiler's version. */
function inputsHash() {
  const ascPackage = createRequire(import.meta.url).resolve('assemblyscript/package.json');
  const version = JSON.parse(readFileSync(ascPackage, 'utf8')).version;
  return treeHash(root, [sources, fileURLToPath(import.meta.url), join(root, 'scripts/stamp.mjs')], [version]);
}

/** The stamp as this tree would write it now (an output that is missing hashes to null). */
const now = { inputs: inputsHash(), outputs: outputs.map(fileHash) };
// build/ holds what the sources would compile to when the stamp matches the inputs and both outputs
checkOrSkip('build-wasm', stampMatches(stampFile, now), 'build/kernels.wasm and build/kernels-fma.wasm are');
const { default: asc } = await import('assemblyscript/asc');

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

rmSync(stampFile, { force: true });
await build(outputs[0], []);
await build(outputs[1], ['--enable', 'relaxed-simd']);
writeStamp(stampFile, { inputs: now.inputs, outputs: outputs.map(fileHash) });
