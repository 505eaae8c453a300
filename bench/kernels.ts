/**
 * `npm run bench -- kernels`: GFLOP/s of the WASM SIMD matmul (A·B, A·Bᵀ, Aᵀ·B; the default build, fused
 * multiply-add where relaxed SIMD is available, and the plain SIMD128 build for A·B) and of the plain-TS
 * reference on shapes the model uses, single-threaded; when a C compiler and OpenBLAS are present,
 * a tiny C program calling cblas_sgemm (OPENBLAS_NUM_THREADS=1) is built and timed on the same shapes
 * in the same run. Headline: matmul_gflops_1t (ours at 512³), matmul_vs_openblas_1t (ours ÷ OpenBLAS
 * at 512³, null without OpenBLAS).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadKernels, referenceKernels, type Kernels } from '../src/engine/kernels/index.js';
import { benchOutDir, printTable, writeBenchJson } from './util.js';

const SHAPES: Array<[number, number, number]> = [
  [64, 128, 128],
  [256, 128, 384],
  [256, 384, 128],
  [1024, 128, 101],
  [512, 512, 512],
];

/** Median seconds per call over at least `minMs` of calls (robust to other work on a shared machine). */
function timeIt(fn: () => void, minMs = 300): number {
  fn();
  const times: number[] = [];
  const start = performance.now();
  while (performance.now() - start < minMs || times.length < 5) {
    const t = performance.now();
    fn();
    times.push(performance.now() - t);
  }
  times.sort((x, y) => x - y);
  return times[times.length >> 1] / 1000;
}

function gflops(
  k: Kernels,
  op: 'matmul' | 'matmulBT' | 'matmulAT',
  M: number,
  K: number,
  N: number,
  minMs = 300,
): number {
  const a = k.alloc(M * K).map(() => Math.random() - 0.5);
  const b = k.alloc(K * N).map(() => Math.random() - 0.5);
  const c = k.alloc(M * N);
  const s = timeIt(() => k[op](c, a, b, M, K, N, false), minMs);
  return (2 * M * K * N) / s / 1e9;
}

const C_SOURCE = `
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static int cmp(const void *x, const void *y) { double a = *(const double *)x, b = *(const double *)y; return (a > b) - (a < b); }
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(int argc, char **argv) {
  int M = atoi(argv[1]), K = atoi(argv[2]), N = atoi(argv[3]);
  float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * K * N), *c = malloc(sizeof(float) * M * N);
  for (int i = 0; i < M * K; i++) a[i] = (float)rand() / RAND_MAX - 0.5f;
  for (int i = 0; i < K * N; i++) b[i] = (float)rand() / RAND_MAX - 0.5f;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, a, K, b, N, 0.0f, c, N);
  /* median time per call over at least 0.3 s, as the WASM side measures */
  int reps = 0, cap = 1 << 20; double *times = malloc(sizeof(double) * cap); double start = now();
  while ((now() - start < 0.3 || reps < 5) && reps < cap) { double t = now(); cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, a, K, b, N, 0.0f, c, N); times[reps++] = now() - t; }
  qsort(times, reps, sizeof(double), cmp);
  printf("%f\\n", 2.0 * M * K * N / times[reps / 2] / 1e9);
  return 0;
}
`;

/** Build the OpenBLAS reference program; returns its path or a reason it is unavailable. */
function buildOpenBlas(): { path?: string; reason?: string } {
  const cc = ['cc', 'gcc'].find((c) => spawnSync(c, ['--version']).status === 0);
  if (!cc) return { reason: 'no C compiler' };
  const header = [
    '/usr/include/cblas.h',
    '/usr/include/x86_64-linux-gnu/cblas.h',
    '/usr/include/openblas/cblas.h',
    '/usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h',
  ].find(existsSync);
  if (!header) return { reason: 'OpenBLAS headers not found (apt-get install libopenblas-dev)' };
  mkdirSync(benchOutDir, { recursive: true });
  const src = join(benchOutDir, 'sgemm.c');
  const bin = join(benchOutDir, 'sgemm');
  writeFileSync(src, C_SOURCE);
  const r = spawnSync(cc, ['-O2', `-I${header.replace(/\/cblas\.h$/, '')}`, src, '-o', bin, '-lopenblas'], {
    encoding: 'utf8',
  });
  if (r.status !== 0) return { reason: `build failed: ${r.stderr.slice(0, 200)}` };
  return { path: bin };
}

function openBlasGflops(bin: string, M: number, K: number, N: number, threads: number): number {
  const out = execFileSync(bin, [String(M), String(K), String(N)], {
    env: { ...process.env, OPENBLAS_NUM_THREADS: String(threads) },
    encoding: 'utf8',
  });
  return Number(out.trim());
}

export async function main(): Promise<void> {
  const wasm = await loadKernels({ backend: 'wasm' });
  const plain = await loadKernels({ backend: 'wasm', variant: 'plain' });
  console.log(`kernels: ${wasm.name} (wasm_* columns); wasm_plain_AB = the SIMD128 mul+add build`);
  const blas = buildOpenBlas();
  const rows: Array<Record<string, string | number | null>> = [];
  for (const [M, K, N] of SHAPES) {
    const ours = gflops(wasm, 'matmul', M, K, N);
    const row: Record<string, string | number | null> = {
      shape: `${M}x${K}x${N}`,
      wasm_AB: ours,
      wasm_ABt: gflops(wasm, 'matmulBT', M, K, N),
      wasm_AtB: gflops(wasm, 'matmulAT', M, K, N),
      wasm_plain_AB: gflops(plain, 'matmul', M, K, N),
      ts_reference:
        M * K * N > 2e7
          ? gflops(referenceKernels, 'matmul', 128, 128, 128, 200)
          : gflops(referenceKernels, 'matmul', M, K, N, 200),
      openblas_1t: blas.path ? openBlasGflops(blas.path, M, K, N, 1) : null,
      openblas_2t: blas.path ? openBlasGflops(blas.path, M, K, N, 2) : null,
    };
    row.ours_over_openblas_1t = row.openblas_1t ? ours / (row.openblas_1t as number) : null;
    rows.push(row);
  }
  printTable(rows);
  if (!blas.path) console.log(`OpenBLAS reference: ${blas.reason}`);
  const big = rows[rows.length - 1];
  writeBenchJson(
    'kernels',
    {
      matmul_gflops_1t: big.wasm_AB as number,
      matmul_vs_openblas_1t: big.ours_over_openblas_1t as number | null,
    },
    {
      kernels: wasm.name,
      rows,
      openblas: blas.path ? 'cblas_sgemm via -lopenblas' : blas.reason,
      note: 'ts_reference at 512^3 is measured at 128^3 (too slow at full size)',
    },
  );
}
