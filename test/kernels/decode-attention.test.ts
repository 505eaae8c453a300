/**
 * kernels.decodeAttention (WASM, used by incremental decoding) with grouped-query attention: one query
 * row q [NH·hd] over T cached rows k, v [T, NKV·hd], query head h reading kv head ⌊h / (NH/NKV)⌋.
 * The oracle decodeAttentionRef is checked against an independent one (the last row of the reference
 * causal attention over K/V with each kv head repeated for its query heads); the WASM kernel (both
 * builds) against the oracle for NKV = NH, NKV < NH, a head size that is not a divisor of anything
 * (remainder lanes), and lengths from 1; each comparison is shown to reject a perturbed input.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createWasmKernels, kernelThreadJobs } from '../../src/engine/kernels/wasm.js';
import { decodeAttentionRef, referenceKernels64 } from '../../src/engine/kernels/reference.js';
import type { Kernels } from '../../src/engine/kernels/types.js';
import { ArborError } from '../../src/core/errors.js';
import { Rng } from '../../src/core/rng.js';

/** [T, NH, NKV, hd]: multi-head (NKV = NH), GQA groups of 2, 3 and 8, odd and large head sizes. */
const CASES: Array<[number, number, number, number]> = [
  [1, 2, 2, 4],
  [5, 2, 2, 6],
  [17, 6, 6, 6],
  [40, 4, 4, 32],
  [33, 1, 1, 64],
  [9, 4, 2, 12],
  [23, 6, 2, 7],
  [64, 16, 8, 128],
  [31, 8, 1, 20],
];

/** The largest |got − want| / (1 + |want|). */
function maxError(got: Float32Array | Float64Array, want: Float32Array | Float64Array): number {
  let worst = 0;
  for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i] - want[i]) / (1 + Math.abs(want[i])));
  return worst;
}

function makeCase(rng: Rng, T: number, NH: number, NKV: number, hd: number) {
  const rand = (n: number) => Float32Array.from({ length: n }, () => rng.normal());
  return { q: rand(NH * hd), k: rand(T * NKV * hd), v: rand(T * NKV * hd) };
}

test('decodeAttentionRef = the last row of causal attention over K/V heads repeated per query head', () => {
  const rng = new Rng(7);
  for (const [T, NH, NKV, hd] of CASES) {
    const { q, k, v } = makeCase(rng, T, NH, NKV, hd);
    const C = NH * hd;
    // K/V expanded to NH heads, the query in the last of T rows (earlier query rows are random)
    const qs = Float64Array.from({ length: T * C }, () => rng.normal());
    qs.set(q, (T - 1) * C);
    const expand = (src: Float32Array) => {
      const out = new Float64Array(T * C);
      for (let s = 0; s < T; s++) {
        for (let h = 0; h < NH; h++) {
          const kv = Math.floor(h / (NH / NKV));
          for (let i = 0; i < hd; i++) out[s * C + h * hd + i] = src[s * NKV * hd + kv * hd + i];
        }
      }
      return out;
    };
    const full = new Float64Array(T * C);
    referenceKernels64.attentionForward(full, new Float64Array(NH * T * T), qs, expand(k), expand(v), [T], C, NH);
    const want = full.subarray((T - 1) * C);
    const got = new Float64Array(C);
    decodeAttentionRef(got, q, k, v, T, NH, NKV, hd);
    const tag = `T=${T} NH=${NH} NKV=${NKV} hd=${hd}`;
    assert.ok(maxError(got, want) <= 1e-12, `${tag}: ${maxError(got, want)}`);
    if (T > 1) {
      // the same comparison rejects a perturbed key
      const wrong = new Float64Array(C);
      decodeAttentionRef(
        wrong,
        q,
        Float32Array.from(k, (x, i) => (i === 0 ? x + 1 : x)),
        v,
        T,
        NH,
        NKV,
        hd,
      );
      assert.ok(maxError(wrong, want) > 1e-6, `${tag}: a perturbed key changes the result`);
    }
  }
});

const wasmTitle = 'decodeAttention (WASM, GQA) = decodeAttentionRef, both builds, bit-identical at 1 and 3 threads';
test(wasmTitle, async () => {
  const rng = new Rng(11);
  let builds = 0;
  for (const variant of ['fma', 'plain'] as const) {
    let kernels: Kernels[];
    try {
      kernels = [await createWasmKernels({ variant }), await createWasmKernels({ variant, threads: 3 })];
    } catch {
      continue; // the fma build needs relaxed SIMD
    }
    builds++;
    const [k1, k3] = kernels;
    assert.ok(k1.decodeAttention, `${variant} build exports decodeAttention`);
    // the last case is long enough to be cut across threads (2·T·NH·hd ≥ 2^18 per share)
    for (const [T, NH, NKV, hd] of [...CASES, [1500, 12, 4, 40] as [number, number, number, number]]) {
      const { q, k, v } = makeCase(rng, T, NH, NKV, hd);
      const want = new Float32Array(NH * hd);
      decodeAttentionRef(want, q, k, v, T, NH, NKV, hd);
      const out = new Float32Array(NH * hd);
      k1.decodeAttention!(out, q, k, v, T, NH, NKV, hd);
      const tag = `${variant} T=${T} NH=${NH} NKV=${NKV} hd=${hd}`;
      assert.ok(maxError(out, want) <= 1e-5, `${tag}: max error ${maxError(out, want)}`);
      const owned = [q, k, v].map((a) => {
        const b = k3.alloc(a.length);
        b.set(a);
        return b;
      });
      const out3 = k3.alloc(NH * hd);
      const jobs = kernelThreadJobs(k3).reduce((a, b) => a + b, 0);
      k3.decodeAttention!(out3, owned[0], owned[1], owned[2], T, NH, NKV, hd);
      const jobsAfter = kernelThreadJobs(k3).reduce((a, b) => a + b, 0);
      if (T === 1500) assert.equal(jobsAfter, jobs + 2, `${tag}: both helpers ran a share`);
      for (let i = 0; i < out.length; i++) {
        if (!Object.is(out[i], out3[i])) assert.fail(`${tag}: entry ${i}: 1 thread ${out[i]}, 3 threads ${out3[i]}`);
      }
      // the comparison rejects a perturbed value row of the kv head that query head 0 reads
      const vBad = Float32Array.from(v);
      vBad[(T - 1) * NKV * hd] += 1;
      const bad = new Float32Array(NH * hd);
      k1.decodeAttention!(bad, q, k, vBad, T, NH, NKV, hd);
      assert.ok(maxError(bad, want) > 1e-5, `${tag}: a perturbed value is caught`);
    }
    // 3 query heads cannot share 2 kv heads evenly
    const f = (n: number) => new Float32Array(n);
    assert.throws(() => k1.decodeAttention!(f(12), f(12), f(8), f(8), 1, 3, 2, 4), ArborError);
  }
  assert.ok(builds >= 1, 'at least the plain build loads');
});
