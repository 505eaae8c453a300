import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadKernels, referenceKernels, type Kernels } from '../../src/engine/kernels/index.js';
import { attentionLayout, referenceKernels64 } from '../../src/engine/kernels/reference.js';
import { Rng } from '../../src/core/rng.js';

const rng = new Rng(123);
const rand = (n: number) => Float32Array.from({ length: n }, () => rng.normal());

/** Compare with atol + |ref|·rtol; report the first mismatches and the max difference. */
function close(name: string, got: Float32Array, want: Float32Array, n: number, atol = 1e-5, rtol = 1e-4): void {
  let maxDiff = 0;
  const bad: string[] = [];
  for (let i = 0; i < n; i++) {
    const d = Math.abs(got[i] - want[i]);
    maxDiff = Math.max(maxDiff, d);
    if (!(d <= atol + Math.abs(want[i]) * rtol) && bad.length < 3) bad.push(`[${i}] got ${got[i]} want ${want[i]}`);
  }
  assert.equal(bad.length, 0, `${name}: max diff ${maxDiff}; first mismatches ${bad.join(', ')}`);
}

/** Place `data` as: a kernel-memory array, a plain array, or a subarray view at a non-zero offset. */
function place(k: Kernels, data: Float32Array, how: number): Float32Array {
  if (how === 0) {
    const a = k.alloc(data.length);
    a.set(data);
    return a;
  }
  if (how === 1) return data.slice();
  const big = how === 2 ? k.alloc(data.length + 7) : new Float32Array(data.length + 7);
  big.set(data, 5);
  return big.subarray(5, 5 + data.length);
}

// Both WASM builds: relaxed-SIMD fused multiply-add ("fma", the default where supported) and plain SIMD128.
for (const variant of ['fma', 'plain'] as const) {
  test(`wasm backend loads [${variant}]`, async () => {
    const k = await loadKernels({ backend: 'wasm', variant });
    assert.equal(k.name, variant === 'fma' ? 'wasm-simd-fma' : 'wasm-simd');
  });

  const gemmTitle = 'matmul, matmulBT, matmulAT match the reference: ragged shapes, all placements, accumulate on, off';
  test(`${gemmTitle} [${variant}]`, async () => {
    const k = await loadKernels({ backend: 'wasm', variant });
    const sizes = [1, 3, 5, 17, 33, 64, 67];
    let cases = 0;
    for (const M of sizes)
      for (const K of [1, 5, 33, 67, 300])
        for (const N of sizes) {
          if ((M * K * N) % 3 !== 0 && M * K * N > 500) continue; // subsample the big cube
          for (const op of ['matmul', 'matmulBT', 'matmulAT'] as const) {
            const a = rand(M * K),
              b = rand(K * N),
              init = rand(M * N);
            const how = cases % 4;
            const accumulate = cases % 2 === 0;
            const want = init.slice();
            referenceKernels[op](want, a, b, M, K, N, accumulate);
            const out = place(k, init, how);
            k[op](out, place(k, a, (how + 1) % 4), place(k, b, (how + 2) % 4), M, K, N, accumulate);
            close(`${op} ${M}x${K}x${N} acc=${accumulate} placement=${how}`, out, want, M * N, 1e-4, 1e-4);
            cases++;
          }
        }
    assert.ok(cases > 200);
  });

  const attentionTitle = 'attention forward/backward match the reference on packed ragged batches (odd head sizes too)';
  test(`${attentionTitle} [${variant}]`, async () => {
    const k = await loadKernels({ backend: 'wasm', variant });
    const cases: Array<[number[], number, number]> = [
      [[1], 4, 1],
      [[7, 7], 12, 2],
      [[33], 32, 4],
      [[5, 5, 5], 10, 2],
      [[290], 8, 2],
      [[7, 1, 33, 12], 24, 3],
      [[1, 300, 2], 8, 2],
    ];
    for (const [lengths, C, NH] of cases) {
      const { rows, attSize } = attentionLayout(lengths, NH);
      const n = rows * C;
      const q = rand(n),
        kk = rand(n),
        v = rand(n),
        dout = rand(n);
      const outR = new Float32Array(n),
        attR = new Float32Array(attSize);
      referenceKernels.attentionForward(outR, attR, q, kk, v, lengths, C, NH);
      const out = k.alloc(n),
        att = new Float32Array(attSize).fill(7);
      k.attentionForward(out, att, place(k, q, 0), place(k, kk, 1), place(k, v, 2), lengths, C, NH);
      const tag = `[${lengths}],${C},${NH}`;
      close(`attn fwd ${tag}`, out, outR, n);
      close(`attn probs ${tag}`, att, attR, att.length);
      const gR = [rand(n), rand(n), rand(n)];
      const g = gR.map((x, i) => place(k, x, i));
      referenceKernels.attentionBackward(gR[0], gR[1], gR[2], dout, attR, q, kk, v, lengths, C, NH);
      k.attentionBackward(g[0], g[1], g[2], dout, att, q, kk, v, lengths, C, NH);
      for (let i = 0; i < 3; i++) close(`attn bwd d${'qkv'[i]} ${tag}`, g[i], gR[i], n);
    }
  });

  const interfaceTitle = 'every kernel of the interface is provided by the wasm backend and agrees on norms/softmax';
  test(`${interfaceTitle} [${variant}]`, async () => {
    const k = await loadKernels({ backend: 'wasm', variant });
    for (const name of Object.keys(referenceKernels) as Array<keyof Kernels>) {
      assert.equal(typeof k[name], typeof referenceKernels[name], name);
    }
    const N = 5,
      C = 13;
    const x = rand(N * C),
      w = rand(C);
    const o1 = new Float32Array(N * C),
      r1 = new Float32Array(N),
      o2 = k.alloc(N * C),
      r2 = k.alloc(N);
    referenceKernels.rmsnormForward(o1, r1, x, w, N, C, 1e-5);
    k.rmsnormForward(o2, r2, place(k, x, 0), w, N, C, 1e-5);
    close('rmsnorm', o2, o1, N * C);
    for (const kind of ['softmax', 'logSoftmax'] as const) {
      const y1 = new Float32Array(N * C),
        y2 = k.alloc(N * C);
      referenceKernels[`${kind}Forward`](y1, x, N, C);
      k[`${kind}Forward`](y2, place(k, x, 1), N, C);
      close(kind, y2, y1, N * C);
      const inplace = place(k, x, 0);
      k[`${kind}Forward`](inplace, inplace, N, C);
      close(`${kind} in place`, inplace, y1, N * C);
      const g = rand(N * C),
        d1 = rand(N * C),
        d2 = place(k, d1, 2);
      referenceKernels[`${kind}Backward`](d1, g, y1, N, C);
      k[`${kind}Backward`](d2, g, y1, N, C);
      close(`${kind} backward`, d2, d1, N * C);
    }
    const g = rand(N * C),
      dx1 = rand(N * C),
      dw1 = rand(C),
      dx2 = place(k, dx1, 0),
      dw2 = place(k, dw1, 1);
    referenceKernels.rmsnormBackward(dx1, dw1, g, x, w, r1, N, C);
    k.rmsnormBackward(dx2, dw2, g, x, w, r1, N, C);
    close('rmsnorm backward dx', dx2, dx1, N * C);
    close('rmsnorm backward dw', dw2, dw1, C);
  });
}

/** Finite-difference checks of the reference backward kernels (the oracles themselves). */
test('the default backend is the fused multiply-add build unless ARBOR_KERNELS_FMA=0', async () => {
  const k = await loadKernels({ backend: 'wasm' });
  assert.equal(k.name, process.env.ARBOR_KERNELS_FMA === '0' ? 'wasm-simd' : 'wasm-simd-fma');
});

test('reference backward kernels match finite differences in float64 (|error| ≤ 1e-8 + 1e-6·|fd|)', () => {
  const k64 = referenceKernels64;
  const rand64 = (n: number) => Float64Array.from(rand(n));
  const near = (a: number, b: number) => Math.abs(a - b) <= 1e-8 + 1e-6 * Math.abs(b);
  const fd = (f: () => number, x: Float64Array, i: number) => {
    const h = 1e-5;
    const o = x[i];
    x[i] = o + h;
    const a = f();
    x[i] = o - h;
    const b = f();
    x[i] = o;
    return (a - b) / (2 * h);
  };
  const N = 2,
    C = 6;
  const x = rand64(N * C),
    w = rand64(C),
    g = rand64(N * C);
  const lossOf = (fwd: (out: Float64Array) => void) => () => {
    const out = new Float64Array(N * C);
    fwd(out);
    let s = 0;
    for (let i = 0; i < N * C; i++) s += out[i] * g[i];
    return s;
  };
  const rms = lossOf((out) => k64.rmsnormForward(out, new Float64Array(N), x, w, N, C, 1e-5));
  const rstd = new Float64Array(N);
  k64.rmsnormForward(new Float64Array(N * C), rstd, x, w, N, C, 1e-5);
  const dx = new Float64Array(N * C),
    dw = new Float64Array(C);
  k64.rmsnormBackward(dx, dw, g, x, w, rstd, N, C);
  for (let i = 0; i < N * C; i++) assert.ok(near(dx[i], fd(rms, x, i)), `rmsnorm dx[${i}]`);
  for (let i = 0; i < C; i++) assert.ok(near(dw[i], fd(rms, w, i)), `rmsnorm dw[${i}]`);
  for (const kind of ['softmax', 'logSoftmax'] as const) {
    const f = lossOf((out) => k64[`${kind}Forward`](out, x, N, C));
    const y = new Float64Array(N * C);
    k64[`${kind}Forward`](y, x, N, C);
    const d = new Float64Array(N * C);
    k64[`${kind}Backward`](d, g, y, N, C);
    for (let i = 0; i < N * C; i++) assert.ok(near(d[i], fd(f, x, i)), `${kind} dx[${i}]: ${d[i]} vs ${fd(f, x, i)}`);
  }
  // attention
  const lengths = [4, 2],
    NH = 2,
    Ca = 4,
    n = 6 * Ca,
    attSize = NH * (16 + 4);
  const q = rand64(n),
    k = rand64(n),
    v = rand64(n),
    ga = rand64(n);
  const attLoss = () => {
    const out = new Float64Array(n);
    k64.attentionForward(out, new Float64Array(attSize), q, k, v, lengths, Ca, NH);
    let s = 0;
    for (let i = 0; i < n; i++) s += out[i] * ga[i];
    return s;
  };
  const att = new Float64Array(attSize);
  k64.attentionForward(new Float64Array(n), att, q, k, v, lengths, Ca, NH);
  const dq = new Float64Array(n),
    dk = new Float64Array(n),
    dv = new Float64Array(n);
  k64.attentionBackward(dq, dk, dv, ga, att, q, k, v, lengths, Ca, NH);
  for (const [name, grad, x0] of [
    ['q', dq, q],
    ['k', dk, k],
    ['v', dv, v],
  ] as const) {
    for (let i = 0; i < n; i++) assert.ok(near(grad[i], fd(attLoss, x0, i)), `attention d${name}[${i}]`);
  }
});

test('wasm alloc returns zeros even where an earlier call used the memory as scratch', async () => {
  const k = await loadKernels({ backend: 'wasm' });
  const M = 64,
    K = 256,
    N = 64;
  // plain (non-WASM) inputs are copied into scratch space above the heap
  const a = new Float32Array(M * K).fill(1.5);
  const b = new Float32Array(N * K).fill(-2);
  k.matmulBT(new Float32Array(M * N), a, b, M, K, N, false);
  const fresh = k.alloc(M * K + N * K);
  assert.equal(
    fresh.findIndex((x) => x !== 0),
    -1,
    'every entry of a new allocation is 0',
  );
});
