/**
 * kernels.decodeAttention (WASM, used by incremental decoding): one query row over T cached rows must
 * equal the last row of the reference causal attention on the same q/k/v, for ragged head sizes
 * (remainder lanes) and lengths, in both WASM builds.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createWasmKernels } from '../../src/engine/kernels/wasm.js';
import { referenceKernels } from '../../src/engine/kernels/reference.js';
import { Rng } from '../../src/core/rng.js';

test('decodeAttention = the last row of causal attention (fma and plain builds, ragged shapes)', async () => {
  const rng = new Rng(11);
  for (const variant of ['fma', 'plain'] as const) {
    let kernels;
    try {
      kernels = await createWasmKernels({ variant });
    } catch {
      continue; // the fma build needs relaxed SIMD
    }
    assert.ok(kernels.decodeAttention, `${variant} build exports decodeAttention`);
    for (const [T, C, NH] of [[1, 8, 2], [5, 12, 2], [17, 36, 6], [40, 128, 4], [33, 64, 1]]) {
      const q = Float32Array.from({ length: T * C }, () => rng.normal());
      const k = Float32Array.from({ length: T * C }, () => rng.normal());
      const v = Float32Array.from({ length: T * C }, () => rng.normal());
      const ref = new Float32Array(T * C);
      referenceKernels.attentionForward(ref, new Float32Array(NH * T * T), q, k, v, [T], C, NH);
      const out = new Float32Array(C);
      kernels.decodeAttention!(out, q.subarray((T - 1) * C), k, v, T, C, NH);
      for (let c = 0; c < C; c++) {
        const want = ref[(T - 1) * C + c];
        assert.ok(Math.abs(out[c] - want) <= 1e-5 * (1 + Math.abs(want)), `${variant} T=${T} C=${C} NH=${NH} [${c}]: ${out[c]} vs ${want}`);
      }
    }
  }
});
