/**
 * Multi-threaded kernels (src/engine/kernels/wasm.ts over threads.ts's KernelPool): T−1 workers over
 * the same shared memory each run one share of every large call. Results at 2, 3 and 4 threads must be
 * bit-identical to one thread: GEMMs in all three layouts (cut by rows and by columns, and the decode
 * path up to DECODE_MAX_ROWS rows), with and without accumulation, kernel-owned and foreign arrays,
 * ragged shapes and shapes below the crossover; every other split kernel (paged decode attention and
 * sampling statistics included) above its threshold with ragged tails; each call seen to be split for
 * every helper (whichever thread ends up running a share: a late helper's share is taken by the caller,
 * tested with stopped helpers); and all still matching the plain-TypeScript reference. This VM has 2 cores,
 * so 3 and 4 threads also exercise oversubscription. Also: the config bound and the split arithmetic.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import {
  ATTENTION_THREAD_MIN_WORK,
  createWasmKernels,
  ELEMENTWISE_THREAD_MIN,
  GEMM_THREAD_MIN_WORK,
  kernelThreadJobs,
  kernelWasmPath,
} from '../../src/engine/kernels/wasm.js';
import { AdaptiveSplit, KernelPool, partitionByCost, partitionByShares } from '../../src/engine/kernels/threads.js';
import {
  attentionLayout,
  decodeAttentionRef,
  pagedDecodeAttentionRef,
  referenceKernels,
  samplingStatsRef,
} from '../../src/engine/kernels/reference.js';
import { loadKernels } from '../../src/engine/kernels/index.js';
import type { Kernels } from '../../src/engine/kernels/types.js';
import { buildEngine } from '../../src/engine/build.js';
import { NanoTrainer } from '../../src/engine/embedded/trainer.js';
import { parseConfig } from '../../src/run/config.js';
import { ConfigError } from '../../src/core/errors.js';
import { Rng } from '../../src/core/rng.js';

const THREADS = [2, 3, 4];

/** Backends at 1, 2, 3 and 4 threads for one build, made once per variant. */
const backends = new Map<string, Promise<Kernels[]>>();
function kernelsFor(variant: 'fma' | 'plain'): Promise<Kernels[]> {
  let k = backends.get(variant);
  if (!k) {
    k = Promise.all([1, ...THREADS].map((threads) => createWasmKernels({ variant, threads })));
    backends.set(variant, k);
  }
  return k;
}

/** n standard normals (a plain loop: Float32Array.from with a mapper is several times slower at millions). */
function normals(rng: Rng, n: number, scale = 1): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = rng.normal() * scale;
  return out;
}

/** Which helpers had a share posted while `call` ran (true for each helper of k): the call was split for it. */
function helpersUsed(k: Kernels, call: () => void): boolean[] {
  const before = [...kernelThreadJobs(k)];
  call();
  return kernelThreadJobs(k).map((n, i) => n > before[i]);
}

const gemmTitle = 'GEMM at 2, 3, 4 threads is bit-identical to one thread in every layout and cut';
for (const variant of ['fma', 'plain'] as const)
  test(`${gemmTitle} [${variant}]`, async () => {
    const [k1, ...kt] = await kernelsFor(variant);
    kt.forEach((k, i) => assert.match(k.name, new RegExp(`-${THREADS[i]}t$`)));
    const rng = new Rng(5);
    // [M, K, N]: M ≥ N cuts rows (4-row tiles), M < N cuts columns (8-column panels), M ≤ DECODE_MAX_ROWS
    // with matmulBT takes the decode path (column ranges cut anywhere). [24000, 16, 13]: short K and a
    // ragged last panel, so every thread writes ragged-edge tiles all the time (the shape that exposed
    // shared scratch). [48, 97, 2001], [13, 301, 3001]: the decode path's 4-row tiles with 2- and 1-row tails.
    const shapes: Array<[number, number, number]> = [
      [16, 64, 4100],
      [1000, 128, 384],
      [37, 300, 129],
      [203, 97, 515],
      [384, 2048, 128],
      [8, 16, 8],
      [24000, 16, 13],
      [4, 1024, 4100],
      [6, 300, 1203],
      [48, 97, 2001],
      [13, 301, 3001],
    ];
    const work = shapes.map(([M, K, N]) => M * K * N);
    assert.ok(work.some((w) => w >= GEMM_THREAD_MIN_WORK) && work.some((w) => w < GEMM_THREAD_MIN_WORK));
    for (const [M, K, N] of shapes) {
      // one draw per shape: the three layouts read the same sizes (A: M·K, B: K·N, C: M·N)
      const [a, b, init] = [M * K, K * N, M * N].map((n) => normals(rng, n));
      for (const op of ['matmul', 'matmulBT', 'matmulAT'] as const) {
        for (const acc of [false, true]) {
          const one = k1.alloc(M * N);
          one.set(init);
          k1[op](one, a, b, M, K, N, acc);
          const tag = `${op} ${M}x${K}x${N} acc=${acc}`;
          if (!acc && M * N <= 1e5) {
            const ref = new Float32Array(M * N);
            referenceKernels[op](ref, a, b, M, K, N, false);
            for (let i = 0; i < M * N; i++) {
              const ok = Math.abs(one[i] - ref[i]) <= 1e-4 * (Math.sqrt(K) + Math.abs(ref[i]));
              if (!ok) assert.fail(`${tag}: entry ${i}: ${one[i]} vs reference ${ref[i]}`);
            }
          }
          for (const k of kt) {
            const owned = k.alloc(M * N);
            owned.set(init);
            const a2 = k.alloc(M * K);
            const b2 = k.alloc(K * N);
            a2.set(a);
            b2.set(b);
            const used = helpersUsed(k, () => k[op](owned, a2, b2, M, K, N, acc));
            if (M * K * N >= 4 * GEMM_THREAD_MIN_WORK && !(M <= 8 && op !== 'matmulBT')) {
              assert.ok(used.every(Boolean), `${tag} on ${k.name}: a share for every helper (${used})`);
            }
            if (M * K * N < GEMM_THREAD_MIN_WORK) {
              assert.ok(!used.some(Boolean), `${tag} on ${k.name}: below the crossover, one thread`);
            }
            const foreign = Float32Array.from(init);
            k[op](foreign, a, b, M, K, N, acc);
            for (let i = 0; i < M * N; i++) {
              if (one[i] !== owned[i] || one[i] !== foreign[i]) {
                assert.fail(`${tag} ${k.name}: entry ${i}: ${one[i]} vs ${owned[i]} / ${foreign[i]}`);
              }
            }
          }
        }
      }
    }
  });

type Outputs = { one: Float32Array[]; many: Float32Array[][]; ref: Float32Array[] };

/**
 * Run `call` on the one-thread backend, each multi-thread backend and the reference over copies of
 * `inputs` and `outputs` (initial contents kept); asserts each multi-thread call reached every helper.
 */
type Call = (k: Kernels, ins: Float32Array[], outs: Float32Array[]) => void;
function runAll(ks: Kernels[], inputs: Float32Array[], outputs: Float32Array[], call: Call): Outputs {
  const copy = (k: Kernels | null, a: Float32Array) => {
    const b = k ? k.alloc(a.length) : new Float32Array(a.length);
    b.set(a);
    return b;
  };
  const res = (k: Kernels | null, ker: Kernels) => {
    const outs = outputs.map((o) => copy(k, o));
    const ins = inputs.map((i) => copy(k, i));
    if (!k || kernelThreadJobs(k).length === 0) call(ker, ins, outs);
    else assert.ok(helpersUsed(k, () => call(ker, ins, outs)).every(Boolean), `${k.name}: a share for every helper`);
    return outs;
  };
  const [k1, ...kt] = ks;
  return { one: res(k1, k1), many: kt.map((k) => res(k, k)), ref: res(null, referenceKernels) };
}

/** Every multi-thread output equals one thread's bit for bit, and one thread's is within atol + rtol·|ref|. */
function assertSame(name: string, r: Outputs, atol: number, rtol: number): void {
  r.one.forEach((one, o) => {
    const ref = r.ref[o];
    r.many.forEach((outs, t) => {
      for (let i = 0; i < one.length; i++) {
        if (Object.is(one[i], outs[o][i])) continue;
        assert.fail(`${name} output ${o}: entry ${i}: one thread ${one[i]}, ${THREADS[t]} threads ${outs[o][i]}`);
      }
    });
    for (let i = 0; i < one.length; i++) {
      if (Math.abs(one[i] - ref[i]) <= atol + rtol * Math.abs(ref[i])) continue;
      assert.fail(`${name} output ${o}: entry ${i}: ${one[i]} vs reference ${ref[i]}`);
    }
  });
}

test('assertSame rejects a one-ulp difference between thread counts and a perturbed reference', () => {
  const a = Float32Array.from([1, 2, 3]);
  const bumped = Float32Array.from(a);
  bumped[1] = Math.fround(2 + 2 ** -22);
  assert.throws(() => assertSame('t', { one: [a], many: [[a], [bumped]], ref: [a] }, 1e-6, 1e-6), /3 threads/);
  const off = Float32Array.from([1, 2, 3.01]);
  assert.throws(() => assertSame('t', { one: [a], many: [[a]], ref: [off] }, 1e-6, 1e-5), /reference/);
  assertSame('t', { one: [a], many: [[a], [Float32Array.from(a)]], ref: [a] }, 1e-6, 1e-6);
});

const kernelsTitle =
  'attention, decode and paged decode attention, SwiGLU, RoPE, RMSNorm, softmax, sampling stats, ' +
  'logitGrad and AdamW at 2, 3, 4 threads are bit-identical to one thread and match the reference';
for (const variant of ['fma', 'plain'] as const)
  test(`${kernelsTitle} [${variant}]`, async () => {
    const ks = await kernelsFor(variant);
    const rng = new Rng(11);
    const rand = (n: number, scale = 1) => normals(rng, n, scale);
    // attention: one sequence (cut by heads), a batch of ragged sequences (cut by sequences), and
    // T > 256 so the GEMM's K blocking meets the causal modes
    const attentionCases: Array<[number[], number, number]> = [
      [[96], 128, 4],
      [[96, 40, 96, 7, 96, 96, 61, 96], 128, 4],
      [[300, 57], 24, 3],
    ];
    for (const [lengths, C, NH] of attentionCases) {
      const { rows, attSize } = attentionLayout(lengths, NH);
      assert.ok(
        lengths.reduce((a, T) => a + T * T * C, 0) >= 2 * ATTENTION_THREAD_MIN_WORK,
        'every thread gets a share',
      );
      const n = rows * C;
      const qkv = [rand(n, 0.5), rand(n, 0.5), rand(n, 0.5)];
      const tag = `[${lengths}]x${C}/${NH}`;
      const fwd = runAll(ks, qkv, [rand(n), rand(attSize)], (k, [q, kk, v], [out, att]) =>
        k.attentionForward(out, att, q, kk, v, lengths, C, NH),
      );
      assertSame(`attentionForward ${tag}`, fwd, 1e-5, 1e-4);
      const grads = [rand(n), rand(n), rand(n)];
      const bwd = runAll(ks, [rand(n), fwd.ref[1], ...qkv], grads, (k, [dout, att, q, kk, v], [dq, dk, dv]) =>
        k.attentionBackward(dq, dk, dv, dout, att, q, kk, v, lengths, C, NH),
      );
      assertSame(`attentionBackward ${tag}`, bwd, 1e-4, 1e-3);
    }
    // decode attention, GQA: 12 query heads over 4 kv heads (cut by kv groups at ≤ 4 threads), and 8 over 2
    for (const [T, NH, NKV, hd] of [
      [700, 12, 4, 36],
      [2100, 8, 2, 20],
    ]) {
      const q = rand(NH * hd);
      const kv = [rand(T * NKV * hd), rand(T * NKV * hd)];
      const r = runAll(ks, [q, ...kv], [rand(NH * hd)], (k, [qq, kk, vv], [out]) => {
        if (k === referenceKernels) decodeAttentionRef(out, qq, kk, vv, T, NH, NKV, hd);
        else k.decodeAttention!(out, qq, kk, vv, T, NH, NKV, hd);
      });
      assertSame(`decodeAttention T=${T} ${NH}/${NKV}x${hd}`, r, 1e-5, 1e-4);
    }
    // paged decode attention: 16 rows of a batch (cut by (row, kv head) at equal work), pages scattered
    {
      const [L, P, NH, NKV, hd, layer] = [2, 16, 12, 4, 20, 1];
      const lengths = Int32Array.from({ length: 16 }, (_, r) => 40 + 29 * r);
      const W = Math.ceil(Math.max(...lengths) / P);
      const pageCount = 16 * W;
      const pageFloats = L * P * NKV * hd;
      const pages = Int32Array.from({ length: pageCount }, (_, i) => (i * 37) % pageCount);
      const kvInputs = [...Array.from({ length: 2 * pageCount }, () => rand(pageFloats)), rand(16 * NH * hd)];
      const r = runAll(ks, kvInputs, [rand(16 * NH * hd)], (k, ins, [out]) => {
        const [kPages, vPages, q] = [ins.slice(0, pageCount), ins.slice(pageCount, 2 * pageCount), ins[2 * pageCount]];
        if (k === referenceKernels) {
          pagedDecodeAttentionRef(out, q, kPages, vPages, pages, W, lengths, 16, layer, P, NH, NKV, hd);
        } else k.pagedDecodeAttention!(out, q, kPages, vPages, pages, W, lengths, 16, layer, P, NH, NKV, hd);
      });
      assertSame('pagedDecodeAttention', r, 1e-5, 1e-4);
    }
    // sampling statistics: rows of a large vocabulary at three temperatures (cut by rows)
    {
      const [R, V] = [7, 20011];
      const invT = Float32Array.from({ length: R }, (_, i) => [1, 1.4, 0.8][i % 3]);
      const stats = ks.map(() => new Float64Array(R * 3));
      const ref = new Float64Array(R * 3);
      const r = runAll(ks, [rand(R * V, 3), invT], [rand(R * V)], (k, [x, t], [e]) => {
        if (k === referenceKernels) samplingStatsRef(e, ref, x, t, R, V);
        else k.samplingStats!(e, stats[ks.indexOf(k)], x, t, R, V);
      });
      assertSame('samplingStats exponentials', r, 1e-7, 1e-6);
      stats.forEach((st, i) => assert.deepEqual(st, stats[0], `samplingStats: stats at ${[1, ...THREADS][i]} threads`));
      for (let i = 0; i < R * 3; i++) assert.ok(Math.abs(stats[0][i] - ref[i]) <= 1e-6 * (1 + Math.abs(ref[i])));
    }
    // elementwise and row-wise kernels, sizes above the threshold with ragged tails
    const n = ELEMENTWISE_THREAD_MIN * 2 + 3;
    const gate = rand(n, 3);
    const up = rand(n);
    const swiglu = runAll(ks, [gate, up], [rand(n)], (k, [g, u], [o]) => k.swigluForward(o, g, u, n));
    assertSame('swigluForward', swiglu, 1e-6, 1e-5);
    const swigluBack = runAll(ks, [rand(n), gate, up], [rand(n), rand(n)], (k, [d, g, u], [dg, du]) =>
      k.swigluBackward(dg, du, d, g, u, n),
    );
    assertSame('swigluBackward', swigluBack, 1e-6, 1e-5);
    const N = 601,
      C = 128,
      NH = 4,
      maxT = 700,
      half = C / NH / 2;
    const positions = Int32Array.from({ length: N }, (_, i) => (i * 37) % maxT);
    const cos = new Float32Array(maxT * half),
      sin = new Float32Array(maxT * half);
    for (let i = 0; i < cos.length; i++) {
      cos[i] = Math.cos(i * 0.37);
      sin[i] = Math.sin(i * 0.37);
    }
    for (const inverse of [false, true]) {
      const r = runAll(ks, [cos, sin], [rand(N * C)], (k, [c, s], [x]) =>
        k.rope(x, positions, N, C, NH, c, s, inverse),
      );
      assertSame(`rope inverse=${inverse}`, r, 1e-6, 1e-5);
    }
    const x = rand(N * C);
    const w = rand(C);
    const fwd = runAll(ks, [x, w], [rand(N * C), rand(N)], (k, [xx, ww], [o, r]) =>
      k.rmsnormForward(o, r, xx, ww, N, C, 1e-5),
    );
    assertSame('rmsnormForward', fwd, 1e-5, 1e-4);
    // dweight sums rows in fixed groups: the same bits at every thread count
    const rmsBack = runAll(ks, [rand(N * C), x, w, fwd.ref[1]], [rand(N * C), rand(C)], (k, [d, xx, ww, r], [dx, dw]) =>
      k.rmsnormBackward(dx, dw, d, xx, ww, r, N, C),
    );
    assertSame('rmsnormBackward', rmsBack, 1e-4, 1e-4);
    const V = 101,
      rows = 700;
    const logits = rand(rows * V, 2);
    for (const kind of ['softmax', 'logSoftmax'] as const) {
      const y = runAll(ks, [logits], [rand(rows * V)], (k, [l], [o]) => k[`${kind}Forward`](o, l, rows, V));
      assertSame(`${kind}Forward`, y, 1e-6, 1e-5);
      const back = runAll(ks, [rand(rows * V), y.ref[0]], [rand(rows * V)], (k, [d, yy], [dx]) =>
        k[`${kind}Backward`](dx, d, yy, rows, V),
      );
      assertSame(`${kind}Backward`, back, 1e-5, 1e-4);
    }
    const lsm = new Float32Array(rows * V);
    referenceKernels.logSoftmaxForward(lsm, logits, rows, V);
    const targets = Int32Array.from({ length: rows }, (_, i) => (i * 13) % V);
    const grad = runAll(ks, [lsm, rand(rows), rand(rows, 0.1)], [rand(rows * V), rand(rows)], (k, [l, c, b], [d, e]) =>
      k.logitGrad(d, e, l, c, b, targets, rows, V),
    );
    assertSame('logitGrad', grad, 1e-6, 1e-5);
    const m = rand(n, 0.01);
    const v = Float32Array.from(rand(n, 0.01), (a) => a * a);
    const hyper = { lr: 0.01, beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1 };
    const step = { ...hyper, bc1: 0.19, bc2: 0.0975, gradScale: 0.5 };
    const adamw = runAll(ks, [rand(n)], [rand(n), m, v], (k, [g], [p, mm, vv]) => k.adamw(p, g, mm, vv, n, step));
    assertSame('adamw', adamw, 1e-6, 1e-5);
  });

const configTitle =
  "engine.threads: up to the machine's parallelism builds that many kernel threads; one more is a " +
  'config error naming the key';
test(configTitle, async () => {
  const cores = availableParallelism();
  for (const threads of [1, Math.min(2, cores)]) {
    const model = { dModel: 16, nLayers: 1, nHeads: 2, dFF: 32, contextLength: 16 };
    const c = parseConfig({ engine: { threads }, model, sft: { enabled: false } });
    const engine = await buildEngine({ engine: c.engine, model: c.model, sft: c.sft });
    assert.ok(engine.trainer instanceof NanoTrainer);
    const name = (engine.trainer as NanoTrainer).model.kernels.name;
    assert.equal(/-\d+t$/.test(name), threads > 1, `threads ${threads}: ${name}`);
    if (threads > 1) assert.match(name, new RegExp(`-${threads}t$`));
    await engine.close();
  }
  assert.equal(parseConfig({ engine: { threads: cores } }).engine.threads, cores);
  for (const threads of [cores + 1, 0, 1.5]) {
    const namesKey = (e: unknown) => e instanceof ConfigError && /engine\.threads/.test(e.message);
    assert.throws(() => parseConfig({ engine: { threads } }), namesKey, `threads ${threads}`);
  }
  // the environment variable and the library entry points refuse bad counts too (no silent fallback)
  const saved = process.env.ARBOR_KERNEL_THREADS;
  try {
    for (const raw of [String(cores + 1), '0', 'two']) {
      process.env.ARBOR_KERNEL_THREADS = raw;
      const namesVariable = (e: unknown) => e instanceof ConfigError && /ARBOR_KERNEL_THREADS/.test(e.message);
      await assert.rejects(loadKernels(), namesVariable, raw);
    }
  } finally {
    if (saved === undefined) delete process.env.ARBOR_KERNEL_THREADS;
    else process.env.ARBOR_KERNEL_THREADS = saved;
  }
  await assert.rejects(createWasmKernels({ threads: 0 }), ConfigError);
  await assert.rejects(loadKernels({ threads: 2.5 }), ConfigError);
});

test("the adaptive GEMM split follows the threads' measured speeds within ±30% of equal shares", () => {
  const s = new AdaptiveSplit(2);
  const helper = () => s.shares(2)[1];
  assert.equal(helper(), 0.5);
  // the helper takes twice as long per row: its share moves towards 1/3, and stops at the 0.35 bound
  for (let i = 0; i < 50; i++) s.observe([100, 100], [1, 2]);
  assert.ok(Math.abs(helper() - 0.35) < 1e-9, `share ${helper()}`);
  // equal speeds bring it back to one half
  for (let i = 0; i < 100; i++) s.observe([100, 100], [1, 1]);
  assert.ok(Math.abs(helper() - 0.5) < 1e-3, `share ${helper()}`);
  // a helper 1.2x faster per row: the ideal share is 1.2/2.2
  for (let i = 0; i < 100; i++) s.observe([100, 100], [1.2, 1]);
  assert.ok(Math.abs(helper() - 1.2 / 2.2) < 1e-3, `share ${helper()}`);
  // timings too short to mean anything are ignored
  const before = helper();
  s.observe([4, 4], [0.001, 0.01]);
  assert.equal(helper(), before);
  // four threads, one of them a third as fast: its share falls to the 0.7/4 bound, the rest share the remainder
  const s4 = new AdaptiveSplit(4);
  for (let i = 0; i < 100; i++) s4.observe([100, 100, 100, 100], [1, 1, 3, 1]);
  const shares = s4.shares(4);
  assert.ok(Math.abs(shares.reduce((a, b) => a + b, 0) - 1) < 1e-12);
  assert.ok(Math.abs(shares[2] - 0.7 / 4) < 0.01, `slow thread ${shares[2]}`);
  for (const i of [0, 1, 3]) assert.ok(Math.abs(shares[i] - (1 - shares[2]) / 3) < 1e-9, `thread ${i}: ${shares[i]}`);
  // a call over the first two threads only updates those two
  s4.observe([10, 10], [1, 1]);
  assert.ok(Math.abs(s4.shares(4)[2] - shares[2]) < 0.01);
});

test('partitions: contiguous, non-empty, covering; by shares in proportion, by cost at equal work', () => {
  const cases = [
    [10, [0.5, 0.5]],
    [3, [0.2, 0.3, 0.5]],
    [257, [0.3, 0.2, 0.25, 0.25]],
    [4, [0.97, 0.01, 0.01, 0.01]],
  ] as const;
  for (const [units, shares] of cases) {
    const b = partitionByShares(units, shares);
    assert.equal(b.length, shares.length + 1);
    assert.equal(b[0], 0);
    assert.equal(b[shares.length], units);
    for (let i = 0; i < shares.length; i++) assert.ok(b[i + 1] > b[i], `${units} [${shares}]: ${b}`);
  }
  assert.deepEqual(partitionByShares(100, [0.25, 0.5, 0.25]), [0, 25, 75, 100]);
  // one long sequence (cost 100² per head) and many short ones: the long one's two heads fill a share
  const lengths = [100, 10, 10, 10, 10, 10];
  const NH = 2;
  const b = partitionByCost(lengths.length * NH, 2, (i) => lengths[Math.floor(i / NH)] ** 2);
  assert.deepEqual(b, [0, 2, 12]);
  assert.deepEqual(
    partitionByCost(8, 4, () => 1),
    [0, 2, 4, 6, 8],
  );
  assert.deepEqual(
    partitionByCost(3, 3, (i) => (i === 0 ? 1000 : 1)),
    [0, 1, 2, 3],
  );
});

test('a call never waits for a helper that has not started: stopped helpers leave the caller every share', async () => {
  const bytes = new Uint8Array(readFileSync(kernelWasmPath('plain')));
  const module = await WebAssembly.compile(bytes);
  const memory = new WebAssembly.Memory({ initial: 64, maximum: 1024, shared: true });
  const instance = await WebAssembly.instantiate(module, { env: { memory, abort: () => {} } });
  const swiglu = instance.exports.swigluForward as (out: number, gate: number, up: number, n: number) => void;
  const n = 3000;
  const [gate, up, out] = [1 << 20, (1 << 20) + n * 4, (1 << 20) + 2 * n * 4];
  const f = new Float32Array(memory.buffer);
  const rng = new Rng(3);
  for (let i = 0; i < 2 * n; i++) f[gate / 4 + i] = rng.normal();
  swiglu(out, gate, up, n);
  const one = f.slice(out / 4, out / 4 + n);
  const pool = new KernelPool(module, memory, 3);
  const shares = [0, 1000, 2000].map((i0) => ({
    op: 'swigluForward' as const,
    args: [out + i0 * 4, gate + i0 * 4, up + i0 * 4, 1000],
  }));
  const here = (s: { args: number[] }) => swiglu(s.args[0], s.args[1], s.args[2], s.args[3]);
  const check = (tag: string) => {
    for (let i = 0; i < n; i++) if (!Object.is(f[out / 4 + i], one[i])) assert.fail(`${tag}: entry ${i}`);
  };
  f.fill(0, out / 4, out / 4 + n);
  pool.run(shares, here);
  check('three threads');
  await pool.terminate();
  f.fill(0, out / 4, out / 4 + n);
  const times = pool.run(shares, here);
  check('helpers stopped');
  assert.deepEqual(times, [-1, -1, -1], 'shares run off their own threads teach the adaptive split nothing');
  assert.deepEqual(pool.jobs, [2, 2], 'each call was still split for every helper');
});
