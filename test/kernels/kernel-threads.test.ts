/**
 * Two-thread kernels (src/engine/kernels/wasm.ts, KernelHelper): a worker over the same shared memory
 * runs one share of each large call (GEMM rows, attention heads, elementwise and row ranges).
 * Results must be bit-identical to one thread: GEMMs in all three layouts, with and without
 * accumulation, for kernel-owned and foreign arrays, ragged shapes, and shapes below the crossover
 * (which stay on one thread); every other split kernel on shapes above its threshold, with ragged
 * tails; and the split results must still match the plain-TypeScript reference.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AdaptiveSplit, ATTENTION_THREAD_MIN_WORK, createWasmKernels, ELEMENTWISE_THREAD_MIN, GEMM_THREAD_MIN_WORK } from '../../src/engine/kernels/wasm.js';
import { attentionLayout, referenceKernels } from '../../src/engine/kernels/reference.js';
import type { Kernels } from '../../src/engine/kernels/types.js';
import { buildEngine } from '../../src/engine/build.js';
import { NanoTrainer } from '../../src/engine/nano/trainer.js';
import { parseConfig } from '../../src/run/config.js';
import { ConfigError } from '../../src/core/errors.js';
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

/** Run `call` on one-thread and two-thread kernels over copies of `inputs` and `outputs` (initial contents kept); returns both output sets and the reference's. */
function runBoth(k1: Kernels, k2: Kernels, inputs: Float32Array[], outputs: Float32Array[], call: (k: Kernels, ins: Float32Array[], outs: Float32Array[]) => void): { one: Float32Array[]; two: Float32Array[]; ref: Float32Array[] } {
  const copy = (k: Kernels | null, a: Float32Array) => {
    const b = k ? k.alloc(a.length) : new Float32Array(a.length);
    b.set(a);
    return b;
  };
  const res = (k: Kernels | null, ker: Kernels) => {
    const outs = outputs.map((o) => copy(k, o));
    call(ker, inputs.map((i) => copy(k, i)), outs);
    return outs;
  };
  return { one: res(k1, k1), two: res(k2, k2), ref: res(null, referenceKernels) };
}

function assertSame(name: string, r: { one: Float32Array[]; two: Float32Array[]; ref: Float32Array[] }, atol: number, rtol: number): void {
  r.one.forEach((one, o) => {
    const two = r.two[o];
    const ref = r.ref[o];
    for (let i = 0; i < one.length; i++) {
      if (!Object.is(one[i], two[i])) assert.fail(`${name} output ${o}: entry ${i}: one thread ${one[i]}, two threads ${two[i]}`);
      if (!(Math.abs(one[i] - ref[i]) <= atol + rtol * Math.abs(ref[i]))) assert.fail(`${name} output ${o}: entry ${i}: ${one[i]} vs reference ${ref[i]}`);
    }
  });
}

for (const variant of ['fma', 'plain'] as const) test(`attention, SwiGLU, RoPE, RMSNorm, logitGrad and AdamW split over two threads are bit-identical to one thread and match the reference [${variant}]`, async () => {
  const k1 = await createWasmKernels({ variant });
  const k2 = await createWasmKernels({ variant, threads: 2 });
  const rng = new Rng(11);
  const rand = (n: number, scale = 1) => Float32Array.from({ length: n }, () => rng.normal() * scale);
  // attention: one sequence (split by heads), a batch of ragged sequences (split by sequences), and
  // T > 256 so the GEMM's K blocking meets the causal modes
  const attentionCases: Array<[number[], number, number]> = [[[96], 128, 4], [[96, 40, 96, 7, 96, 96, 61, 96], 128, 4], [[300, 57], 24, 3]];
  for (const [lengths, C, NH] of attentionCases) {
    const { rows, attSize } = attentionLayout(lengths, NH);
    assert.ok(lengths.reduce((a, T) => a + T * T * C, 0) >= ATTENTION_THREAD_MIN_WORK, 'above the attention threshold');
    const n = rows * C;
    const qkv = [rand(n, 0.5), rand(n, 0.5), rand(n, 0.5)];
    const tag = `[${lengths}]x${C}/${NH}`;
    const fwd = runBoth(k1, k2, qkv, [rand(n), rand(attSize)], (k, [q, kk, v], [out, att]) => k.attentionForward(out, att, q, kk, v, lengths, C, NH));
    assertSame(`attentionForward ${tag}`, fwd, 1e-5, 1e-4);
    const bwd = runBoth(k1, k2, [rand(n), fwd.ref[1], ...qkv], [rand(n), rand(n), rand(n)], (k, [dout, att, q, kk, v], [dq, dk, dv]) => k.attentionBackward(dq, dk, dv, dout, att, q, kk, v, lengths, C, NH));
    assertSame(`attentionBackward ${tag}`, bwd, 1e-4, 1e-3);
  }
  // elementwise and row-wise kernels, sizes above the threshold with ragged tails
  const n = ELEMENTWISE_THREAD_MIN * 2 + 3;
  const gate = rand(n, 3);
  const up = rand(n);
  assertSame('swigluForward', runBoth(k1, k2, [gate, up], [rand(n)], (k, [g, u], [o]) => k.swigluForward(o, g, u, n)), 1e-6, 1e-5);
  assertSame('swigluBackward', runBoth(k1, k2, [rand(n), gate, up], [rand(n), rand(n)], (k, [d, g, u], [dg, du]) => k.swigluBackward(dg, du, d, g, u, n)), 1e-6, 1e-5);
  const N = 601, C = 128, NH = 4, maxT = 700, half = C / NH / 2;
  const positions = Int32Array.from({ length: N }, (_, i) => (i * 37) % maxT);
  const cos = new Float32Array(maxT * half), sin = new Float32Array(maxT * half);
  for (let i = 0; i < cos.length; i++) {
    cos[i] = Math.cos(i * 0.37);
    sin[i] = Math.sin(i * 0.37);
  }
  for (const inverse of [false, true]) {
    assertSame(`rope inverse=${inverse}`, runBoth(k1, k2, [cos, sin], [rand(N * C)], (k, [c, s], [x]) => k.rope(x, positions, N, C, NH, c, s, inverse)), 1e-6, 1e-5);
  }
  const x = rand(N * C);
  const w = rand(C);
  const fwd = runBoth(k1, k2, [x, w], [rand(N * C), rand(N)], (k, [xx, ww], [o, r]) => k.rmsnormForward(o, r, xx, ww, N, C, 1e-5));
  assertSame('rmsnormForward', fwd, 1e-5, 1e-4);
  assertSame('rmsnormBackward', runBoth(k1, k2, [rand(N * C), x, w, fwd.ref[1]], [rand(N * C), rand(C)], (k, [d, xx, ww, r], [dx, dw]) => k.rmsnormBackward(dx, dw, d, xx, ww, r, N, C)), 1e-4, 1e-4);
  const V = 101, rows = 500;
  const logits = rand(rows * V, 2);
  const lsm = new Float32Array(rows * V);
  referenceKernels.logSoftmaxForward(lsm, logits, rows, V);
  const targets = Int32Array.from({ length: rows }, (_, i) => (i * 13) % V);
  const grad = runBoth(k1, k2, [lsm, rand(rows), rand(rows, 0.1)], [rand(rows * V), rand(rows)], (k, [l, c, b], [d, e]) => k.logitGrad(d, e, l, c, b, targets, rows, V));
  assertSame('logitGrad', grad, 1e-6, 1e-5);
  const m = rand(n, 0.01);
  const v = Float32Array.from(rand(n, 0.01), (a) => a * a);
  const step = { lr: 0.01, beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1, bc1: 0.19, bc2: 0.0975, gradScale: 0.5 };
  assertSame('adamw', runBoth(k1, k2, [rand(n)], [rand(n), m, v], (k, [g], [p, mm, vv]) => k.adamw(p, g, mm, vv, n, step)), 1e-6, 1e-5);
});

test('engine.threads: 2 gives the embedded engine two-thread kernels; 3 is a config error naming the key', async () => {
  for (const threads of [1, 2]) {
    const c = parseConfig({ engine: { threads }, model: { dModel: 16, nLayers: 1, nHeads: 2, dFF: 32, contextLength: 16 }, sft: { enabled: false } });
    const engine = await buildEngine({ engine: c.engine, model: c.model, sft: c.sft });
    assert.ok(engine.trainer instanceof NanoTrainer);
    assert.equal(/-2t$/.test((engine.trainer as NanoTrainer).model.kernels.name), threads === 2, `threads ${threads}`);
    await engine.close();
  }
  assert.throws(() => parseConfig({ engine: { threads: 3 } }), (e: unknown) => e instanceof ConfigError && /engine\.threads/.test(e.message));
});

test('the adaptive GEMM split follows the threads measured speeds within its bounds', () => {
  const s = new AdaptiveSplit();
  assert.equal(s.helperShare, 0.5);
  // the helper takes twice as long per row: its share moves towards 1/3, and stops at the 0.35 bound
  for (let i = 0; i < 50; i++) s.observe(100, 1, 100, 2);
  assert.ok(Math.abs(s.helperShare - 0.35) < 1e-9, `share ${s.helperShare}`);
  // equal speeds bring it back to one half
  for (let i = 0; i < 100; i++) s.observe(100, 1, 100, 1);
  assert.ok(Math.abs(s.helperShare - 0.5) < 1e-3, `share ${s.helperShare}`);
  // a helper 1.2x faster per row: the ideal share is 1.2/2.2
  for (let i = 0; i < 100; i++) s.observe(100, 1.2, 100, 1);
  assert.ok(Math.abs(s.helperShare - 1.2 / 2.2) < 1e-3, `share ${s.helperShare}`);
  // timings too short to mean anything are ignored
  const before = s.helperShare;
  s.observe(4, 0.001, 4, 0.01);
  assert.equal(s.helperShare, before);
});
