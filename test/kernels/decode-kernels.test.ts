/**
 * The kernels of a decode step at Hugging Face shapes, both WASM builds against the plain-
 * TypeScript oracles: matmulBT's unpacked path (gemmDecodeBT, M ≤ DECODE_MAX_ROWS: ragged M, odd N,
 * K not a multiple of 4, read-ahead past the end of B) and the packed GEMM's column blocks (N > NC,
 * causal attention longer than a block); pagedDecodeAttention over scattered, shared and foreign pages
 * (= pagedDecodeAttentionRef, itself = decodeAttentionRef on each row's gathered positions); and
 * samplingStats (= samplingStatsRef: exponentials, log-sum-exp, entropy, sum; −∞ logits). Each
 * comparison is shown to reject a perturbed input.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createWasmKernels, DECODE_MAX_ROWS } from '../../src/engine/kernels/wasm.js';
import {
  attentionLayout,
  decodeAttentionRef,
  pagedDecodeAttentionRef,
  referenceKernels,
  samplingStatsRef,
} from '../../src/engine/kernels/reference.js';
import type { Kernels } from '../../src/engine/kernels/types.js';
import { Rng } from '../../src/core/rng.js';

const rng = new Rng(2025);
const rand = (n: number, scale = 1) => Float32Array.from({ length: n }, () => rng.normal() * scale);

/** The first entry off by more than atol + rtol·|want| (with the max difference), or null. */
function mismatch(got: ArrayLike<number>, want: ArrayLike<number>, atol: number, rtol: number): string | null {
  let worst = 0;
  let first = -1;
  for (let i = 0; i < want.length; i++) {
    const d = Math.abs(got[i] - want[i]);
    if (!(d <= atol + rtol * Math.abs(want[i])) && first < 0) first = i;
    if (!(d <= worst)) worst = d;
  }
  return first < 0 ? null : `entry ${first}: ${got[first]} vs ${want[first]} (max |Δ| ${worst})`;
}

function close(name: string, got: ArrayLike<number>, want: ArrayLike<number>, atol: number, rtol: number): void {
  const bad = mismatch(got, want, atol, rtol);
  if (bad) assert.fail(`${name}: ${bad}`);
}

const builds = new Map<string, Promise<Kernels>>();
const kernelsFor = (variant: 'fma' | 'plain') => {
  if (!builds.has(variant)) builds.set(variant, createWasmKernels({ variant }));
  return builds.get(variant)!;
};

for (const variant of ['fma', 'plain'] as const) {
  test(`matmulBT's unpacked decode path matches the reference up to DECODE_MAX_ROWS rows [${variant}]`, async () => {
    const k = await kernelsFor(variant);
    // [M, K, N]: every M of a 4-row tile and its 2- and 1-row tails, odd N (a last single column), K with
    // a scalar tail, and N·K large enough that the read-ahead runs off the end of B
    const shapes: Array<[number, number, number]> = [
      [1, 576, 193],
      [2, 64, 3],
      [3, 7, 5],
      [5, 131, 257],
      [16, 576, 192],
      [7, 1, 9],
      [DECODE_MAX_ROWS, 100, 1101],
      [DECODE_MAX_ROWS + 1, 100, 301],
      [13, 1536, 77],
    ];
    for (const [M, K, N] of shapes) {
      for (const accumulate of [false, true]) {
        const a = rand(M * K),
          b = rand(N * K),
          init = rand(M * N);
        const want = init.slice();
        referenceKernels.matmulBT(want, a, b, M, K, N, accumulate);
        const owned = k.alloc(M * N);
        owned.set(init);
        const [ka, kb] = [k.alloc(M * K), k.alloc(N * K)];
        ka.set(a);
        kb.set(b);
        k.matmulBT(owned, ka, kb, M, K, N, accumulate);
        const tag = `${M}x${K}x${N} acc=${accumulate}`;
        close(tag, owned, want, 1e-4 * Math.sqrt(K), 1e-4);
        const foreign = init.slice();
        k.matmulBT(foreign, a, b, M, K, N, accumulate);
        for (let i = 0; i < M * N; i++) if (!Object.is(foreign[i], owned[i])) assert.fail(`${tag}: foreign entry ${i}`);
        // the same comparison rejects a perturbed weight row (column N − 1 of every output row changes)
        b[(N - 1) * K] += 5;
        const bad = init.slice();
        k.matmulBT(bad, a, b, M, K, N, accumulate);
        assert.ok(mismatch(bad, want, 1e-4 * Math.sqrt(K), 1e-4), `${tag}: a perturbed weight is caught`);
      }
    }
  });

  const blocksTitle = 'packed GEMM column blocks: N beyond one block, all layouts, causal attention past a block';
  test(`${blocksTitle} [${variant}]`, async () => {
    const k = await kernelsFor(variant);
    for (const [M, K, N] of [
      [70, 300, 1100],
      [9, 33, 513],
      [130, 260, 1031],
    ] as const) {
      for (const op of ['matmul', 'matmulBT', 'matmulAT'] as const) {
        const a = rand(M * K),
          b = rand(K * N),
          init = rand(M * N);
        const want = init.slice();
        referenceKernels[op](want, a, b, M, K, N, true);
        const got = init.slice();
        k[op](got, a, b, M, K, N, true);
        close(`${op} ${M}x${K}x${N}`, got, want, 1e-4 * Math.sqrt(K), 1e-4);
      }
    }
    // one sequence longer than a column block (the scores' causal tiles cross it) and a short one
    const lengths = [700, 5];
    const C = 16,
      NH = 2;
    const { rows, attSize } = attentionLayout(lengths, NH);
    const [q, kk, v, dout] = [rand(rows * C, 0.5), rand(rows * C, 0.5), rand(rows * C, 0.5), rand(rows * C)];
    const out = new Float32Array(rows * C),
      att = new Float32Array(attSize);
    const outRef = new Float32Array(rows * C),
      attRef = new Float32Array(attSize);
    k.attentionForward(out, att, q, kk, v, lengths, C, NH);
    referenceKernels.attentionForward(outRef, attRef, q, kk, v, lengths, C, NH);
    close('attentionForward T=700', out, outRef, 1e-5, 1e-4);
    close('attention probabilities T=700', att, attRef, 1e-6, 1e-4);
    const grads = [0, 1, 2].map(() => new Float32Array(rows * C));
    const gradsRef = [0, 1, 2].map(() => new Float32Array(rows * C));
    k.attentionBackward(grads[0], grads[1], grads[2], dout, attRef, q, kk, v, lengths, C, NH);
    referenceKernels.attentionBackward(gradsRef[0], gradsRef[1], gradsRef[2], dout, attRef, q, kk, v, lengths, C, NH);
    grads.forEach((g, i) => close(`attentionBackward T=700 d${'qkv'[i]}`, g, gradsRef[i], 1e-4, 1e-3));
    const qBad = q.slice();
    qBad[699 * C] += 1; // the last row of the long sequence, head 0
    k.attentionForward(out, att, qBad, kk, v, lengths, C, NH);
    assert.ok(mismatch(out, outRef, 1e-5, 1e-4), 'a perturbed query is caught');
  });
}

/** A paged cache of `rows` sequences: pages [L, P, C] in random order, some shared by two rows; returns the table. */
function pagedCase(
  lengthsIn: number[],
  L: number,
  P: number,
  NKV: number,
  hd: number,
  alloc: (n: number) => Float32Array,
) {
  const C = NKV * hd;
  const R = lengthsIn.length;
  const W = Math.ceil(Math.max(...lengthsIn) / P);
  const perRow = lengthsIn.map((T) => Math.ceil(T / P));
  const total = perRow.reduce((a, b) => a + b, 0) + 3;
  const order = Array.from({ length: total }, (_, i) => i).sort(() => rng.next() - 0.5);
  const kPages = order.map(() => alloc(L * P * C));
  const vPages = order.map(() => alloc(L * P * C));
  for (const p of [...kPages, ...vPages]) p.set(rand(p.length));
  const pages = new Int32Array(R * W).fill(-1);
  let next = 0;
  for (let r = 0; r < R; r++) {
    for (let i = 0; i < perRow[r]; i++) {
      // row 1 shares row 0's first page (a forked prefix)
      pages[r * W + i] = r === 1 && i === 0 ? pages[0] : order[next++];
    }
  }
  return { kPages, vPages, pages, W, lengths: Int32Array.from(lengthsIn), C };
}

test("pagedDecodeAttentionRef is decodeAttentionRef over each row's positions gathered from its pages", () => {
  const [L, P, NH, NKV, hd, layer] = [3, 4, 6, 2, 5, 2];
  const c = pagedCase([1, 9, 4, 13], L, P, NKV, hd, (n) => new Float32Array(n));
  const R = c.lengths.length;
  const q = rand(R * NH * hd);
  const got = new Float64Array(R * NH * hd);
  pagedDecodeAttentionRef(got, q, c.kPages, c.vPages, c.pages, c.W, c.lengths, R, layer, P, NH, NKV, hd);
  for (let r = 0; r < R; r++) {
    const T = c.lengths[r];
    const k = new Float32Array(T * c.C),
      v = new Float32Array(T * c.C);
    for (let s = 0; s < T; s++) {
      const page = c.pages[r * c.W + Math.floor(s / P)];
      for (let i = 0; i < c.C; i++) {
        k[s * c.C + i] = c.kPages[page][(layer * P + (s % P)) * c.C + i];
        v[s * c.C + i] = c.vPages[page][(layer * P + (s % P)) * c.C + i];
      }
    }
    const want = new Float64Array(NH * hd);
    decodeAttentionRef(want, q.subarray(r * NH * hd, (r + 1) * NH * hd), k, v, T, NH, NKV, hd);
    close(`row ${r}`, got.subarray(r * NH * hd, (r + 1) * NH * hd), want, 1e-12, 0);
  }
});

for (const variant of ['fma', 'plain'] as const) {
  const pagedTitle = 'pagedDecodeAttention (WASM) = the reference: GQA, ragged pages, foreign pages bit-identical';
  test(`${pagedTitle} [${variant}]`, async () => {
    const k = await kernelsFor(variant);
    // [lengths, L, P, NH, NKV, hd]: decode rows of a batch, a prefill (one sequence's rows 1..T), MHA
    const cases: Array<[number[], number, number, number, number, number]> = [
      [[1, 9, 33, 16, 17, 64], 2, 16, 9, 3, 64],
      [[1, 2, 3, 4, 5, 6, 7], 1, 4, 4, 4, 7],
      [[70, 3], 3, 5, 8, 2, 20],
      [[12], 2, 16, 16, 8, 128],
    ];
    for (const [lengths, L, P, NH, NKV, hd] of cases) {
      const c = pagedCase(lengths, L, P, NKV, hd, (n) => k.alloc(n));
      const R = lengths.length;
      const Cq = NH * hd;
      const q = rand(R * Cq);
      const tag = `[${lengths}] L=${L} P=${P} ${NH}/${NKV}x${hd}`;
      for (let layer = 0; layer < L; layer++) {
        const want = new Float32Array(R * Cq);
        pagedDecodeAttentionRef(want, q, c.kPages, c.vPages, c.pages, c.W, c.lengths, R, layer, P, NH, NKV, hd);
        const got = k.alloc(R * Cq);
        k.pagedDecodeAttention!(got, q, c.kPages, c.vPages, c.pages, c.W, c.lengths, R, layer, P, NH, NKV, hd);
        close(`${tag} layer ${layer}`, got, want, 1e-5, 1e-4);
        // pages outside kernel memory are copied for the call: the same bits
        const [kf, vf] = [c.kPages.map((p) => p.slice()), c.vPages.map((p) => p.slice())];
        const foreign = new Float32Array(R * Cq);
        k.pagedDecodeAttention!(foreign, q, kf, vf, c.pages, c.W, c.lengths, R, layer, P, NH, NKV, hd);
        for (let i = 0; i < got.length; i++) {
          if (!Object.is(got[i], foreign[i])) assert.fail(`${tag}: foreign entry ${i}`);
        }
      }
      // a perturbed value in the last position of the last row (kv head 0) is caught
      const T = lengths[R - 1];
      const last = c.pages[(R - 1) * c.W + Math.floor((T - 1) / P)];
      const want = new Float32Array(R * Cq);
      pagedDecodeAttentionRef(want, q, c.kPages, c.vPages, c.pages, c.W, c.lengths, R, 0, P, NH, NKV, hd);
      c.vPages[last][((T - 1) % P) * c.C] += 1;
      const bad = new Float32Array(R * Cq);
      k.pagedDecodeAttention!(bad, q, c.kPages, c.vPages, c.pages, c.W, c.lengths, R, 0, P, NH, NKV, hd);
      assert.ok(mismatch(bad, want, 1e-5, 1e-4), `${tag}: a perturbed value is caught`);
    }
    const f = (n: number) => new Float32Array(n);
    const one = Int32Array.from([1]);
    // 3 query heads cannot share 2 kv heads evenly
    const zero = Int32Array.from([0]);
    assert.throws(() => k.pagedDecodeAttention!(f(12), f(12), [f(8)], [f(8)], zero, 1, one, 1, 0, 1, 3, 2, 4));
  });

  const statsTitle = 'samplingStats (WASM) = samplingStatsRef: temperatures, odd V, −∞ logits, out aliasing x';
  test(`${statsTitle} [${variant}]`, async () => {
    const k = await kernelsFor(variant);
    for (const [N, V] of [
      [5, 1001],
      [2, 3],
      [3, 49152],
    ]) {
      const x = rand(N * V, 3);
      x[V + 1] = -Infinity; // a masked token in row 1
      const invT = Float32Array.from({ length: N }, (_, n) => [1, 1 / 0.7, 1 / 1.3][n % 3]);
      const [e, eRef] = [new Float32Array(N * V), new Float32Array(N * V)];
      const [stats, statsRef] = [new Float64Array(N * 3), new Float64Array(N * 3)];
      k.samplingStats!(e, stats, x, invT, N, V);
      samplingStatsRef(eRef, statsRef, x, invT, N, V);
      const tag = `${N}x${V}`;
      close(`${tag} exponentials`, e, eRef, 1e-7, 1e-6);
      close(`${tag} stats`, stats, statsRef, 1e-6, 1e-6);
      assert.ok(Number.isFinite(stats[4]), `${tag}: a −∞ logit leaves the entropy finite (${stats[4]})`);
      const inPlace = k.alloc(N * V);
      inPlace.set(x);
      const stats2 = new Float64Array(N * 3);
      k.samplingStats!(inPlace, stats2, inPlace, invT, N, V);
      for (let i = 0; i < N * V; i++) if (!Object.is(inPlace[i], e[i])) assert.fail(`${tag}: in place, entry ${i}`);
      assert.deepEqual(stats2, stats);
      // one logit raised far above the rest moves the stats out of tolerance
      x[N * V - 1] = 40;
      const bad = new Float64Array(N * 3);
      k.samplingStats!(e, bad, x, invT, N, V);
      assert.ok(mismatch(bad, statsRef, 1e-6, 1e-6), `${tag}: a perturbed logit is caught`);
    }
  });
}
