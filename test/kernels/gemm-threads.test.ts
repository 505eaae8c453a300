/**
 * Two-thread GEMM (src/engine/kernels/wasm.ts, GemmHelper): a worker over the same shared memory
 * computes the lower rows of large products. Results must be bit-identical to one thread, in all
 * three layouts, with and without accumulation, for kernel-owned and foreign arrays, ragged shapes,
 * and shapes below the crossover (which stay on one thread).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createWasmKernels, GEMM_THREAD_MIN_WORK } from '../../src/engine/kernels/wasm.js';
import { Rng } from '../../src/core/rng.js';

test('two-thread GEMM is bit-identical to one thread in every layout', async () => {
  const k1 = await createWasmKernels();
  const k2 = await createWasmKernels({ threads: 2 });
  assert.match(k2.name, /-2t$/);
  const rng = new Rng(5);
  // [24000, 16, 13]: short K and a ragged last column panel, so both threads write ragged-edge tiles
  // all the time (the shape that exposes shared scratch between the threads)
  const shapes: Array<[number, number, number]> = [[16, 64, 1024], [1000, 128, 384], [37, 300, 129], [203, 97, 515], [384, 2048, 128], [8, 16, 8], [24000, 16, 13]];
  assert.ok(shapes.some(([M, K, N]) => M * K * N >= GEMM_THREAD_MIN_WORK) && shapes.some(([M, K, N]) => M * K * N < GEMM_THREAD_MIN_WORK));
  // the ragged shape three times: a race between the threads (both using one static scratch tile, a
  // bug this test caught before the tile moved into per-call scratch) shows only sometimes
  for (const [M, K, N] of [...shapes, shapes[shapes.length - 1], shapes[shapes.length - 1]]) {
    for (const op of ['matmul', 'matmulBT', 'matmulAT'] as const) {
      for (const acc of [false, true]) {
        const a = Float32Array.from({ length: M * K }, () => rng.normal());
        const b = Float32Array.from({ length: K * N }, () => rng.normal());
        const init = Float32Array.from({ length: M * N }, () => rng.normal());
        const one = k1.alloc(M * N);
        one.set(init);
        k1[op](one, a, b, M, K, N, acc);
        const owned = k2.alloc(M * N);
        owned.set(init);
        const a2 = k2.alloc(M * K);
        const b2 = k2.alloc(K * N);
        a2.set(a);
        b2.set(b);
        k2[op](owned, a2, b2, M, K, N, acc);
        const foreign = Float32Array.from(init);
        k2[op](foreign, a, b, M, K, N, acc);
        for (let i = 0; i < M * N; i++) {
          if (one[i] !== owned[i] || one[i] !== foreign[i]) assert.fail(`${op} ${M}x${K}x${N} acc=${acc}: entry ${i}: ${one[i]} vs ${owned[i]} / ${foreign[i]}`);
        }
      }
    }
  }
});
