/**
 * Tree-packed training (model/packing.ts, kernels/tree.ts) against the flat computation: the layout of
 * known trees (positions = depth, the spec's 10-token / 43-pair example), and on random forests the
 * loss, every datum's log-probs and every parameter's gradient of a packed pass equal the flat pass's:
 * float64 reference kernels to 1e-10 relative, WASM float32 within the gradient-check tolerances, with
 * shared response segments, uneven depths, masked (tool) tokens mid-path, several trees per pass, a
 * passes split, LoRA, grouped-query attention with q/k norms and biases, every loss. The WASM tree
 * attention equals the reference and is bit-identical at 1, 2 and 4 threads.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { NanoModel } from '../../src/engine/model/model.js';
import { NanoTrainer, passBytes, type TrainerPacking } from '../../src/engine/embedded/trainer.js';
import { LoraAdapter } from '../../src/engine/model/lora.js';
import { ForestBuilder, packForest } from '../../src/engine/model/packing.js';
import { referenceKernels, referenceKernels64 } from '../../src/engine/kernels/reference.js';
import { treeSegment, treeVisible } from '../../src/engine/kernels/tree.js';
import { loadKernels, type Kernels } from '../../src/engine/kernels/index.js';
import { buildEngine } from '../../src/engine/build.js';
import { parseConfig } from '../../src/run/config.js';
import { Rng } from '../../src/core/rng.js';
import type { Datum, LossExtras, LossSpec } from '../../src/engine/types.js';
import type { NanoConfig } from '../../src/engine/model/config.js';

const kernels64 = referenceKernels64 as unknown as Kernels;

const base: NanoConfig = {
  vocabSize: 13,
  dModel: 16,
  nLayers: 2,
  nHeads: 4,
  dFF: 24,
  contextLength: 40,
  tieEmbeddings: false,
  ropeTheta: 10000,
  normEps: 1e-5,
};
/** Qwen-like: grouped-query attention, q/k norms, q/k/v biases, a separate head size. */
const qwenLike: NanoConfig = {
  ...base,
  nKVHeads: 2,
  headDim: 8,
  qkNorm: true,
  bias: { qkv: true },
  tieEmbeddings: true,
};

test('layout: the spec example (prompt P → A → {B, C}; P → D) packs 10 tokens, positions = depth, 43 visible pairs', () => {
  const P = [1, 2, 3];
  const [A, B, C, D] = [[4, 5], [6, 7], [8], [9, 10]];
  const seqs = [
    [...P, ...A, ...B],
    [...P, ...A, ...C],
    [...P, ...D],
  ];
  const pack = packForest(
    seqs,
    seqs.map((s) => s.map((_, i) => i)),
  );
  assert.deepEqual([...pack.tokens], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  assert.deepEqual([...pack.positions], [0, 1, 2, 3, 4, 5, 6, 5, 3, 4]);
  assert.equal(treeVisible(pack.layout), 43);
  assert.equal(pack.trees, 1);
  // segments: P·A·B (contiguous chain), C (after rows 0..4), D (after rows 0..2)
  const segs = [0, 1, 2].map((s) => treeSegment(pack.layout, s));
  assert.deepEqual(
    segs.map((g) => [g.start, g.len, g.chain]),
    [
      [0, 7, []],
      [7, 1, [[0, 5]]],
      [8, 2, [[0, 3]]],
    ],
  );
  // entries: the shared rows predict one target each; none here has two (targets are position indices)
  assert.equal(pack.E, 10 + 0);
});

test('layout: a GRPO star (prompt of 4, G = 3) shares the prompt; its last row predicts each first token', () => {
  const seqs = [
    [1, 2, 3, 4, 5, 6],
    [1, 2, 3, 4, 7],
    [1, 2, 3, 4, 8, 9, 10],
  ];
  const targets = seqs.map((s, i) => [...s.slice(1), 11 + i]);
  const pack = packForest(seqs, targets);
  assert.equal(pack.N, 4 + 2 + 1 + 3);
  assert.deepEqual([...pack.positions], [0, 1, 2, 3, 4, 5, 4, 4, 5, 6]);
  // row 3 (token 4) predicts 5, 7 and 8: three entries on one row
  const onRow3 = [...pack.entryRow.keys()].filter((e) => pack.entryRow[e] === 3).map((e) => pack.entryTarget[e]);
  assert.deepEqual(onRow3.sort(), [5, 7, 8]);
  assert.equal(pack.E, pack.N + 2);
  // every datum position maps to an entry with its own target
  seqs.forEach((s, d) => s.forEach((_, t) => assert.equal(pack.entryTarget[pack.entryOf[d][t]], targets[d][t])));
  // two forests in one pack never see each other: positions restart
  const two = packForest(
    [
      [1, 2],
      [3, 4],
    ],
    [
      [2, 0],
      [4, 0],
    ],
  );
  assert.equal(two.trees, 2);
  assert.deepEqual([...two.positions], [0, 1, 0, 1]);
  assert.deepEqual(treeSegment(two.layout, 1).chain, []);
});

/**
 * A random forest of datums: `trees` prompts, each grown into a tree of response segments (TreePO-like,
 * uneven depths), one datum per leaf with per-copy advantages, behaviour log-probs, references, and
 * masked (weight 0) tool tokens mid-path.
 */
function forest(rng: Rng, trees: number, V: number, withPolicy: boolean): Datum[] {
  const data: Datum[] = [];
  for (let tr = 0; tr < trees; tr++) {
    const prompt = Array.from({ length: 3 + rng.int(4) }, () => rng.int(V));
    const grow = (prefix: number[], masked: boolean[], depth: number): void => {
      const seg = Array.from({ length: 1 + rng.int(4) }, () => rng.int(V));
      const path = [...prefix, ...seg];
      const pm = [...masked, ...seg.map(() => rng.next() < 0.2)];
      const kids = depth < 3 ? rng.int(3) : 0;
      if (kids === 0 || path.length > 30) {
        const T = path.length - 1;
        const P = prompt.length;
        const d: Datum = {
          inputTokens: path.slice(0, -1),
          targetTokens: path.slice(1),
          weights: Array.from({ length: T }, (_, t) => (t + 1 < P || pm[t + 1] ? 0 : 0.05 + 0.2 * rng.next())),
        };
        if (withPolicy) {
          const A = rng.normal();
          d.samplingLogprobs = Array.from({ length: T }, () => -2.6 + 0.8 * rng.normal());
          d.advantages = Array.from({ length: T }, () => A);
          d.referenceLogprobs = Array.from({ length: T }, () => -2.6 + 0.4 * rng.normal());
        }
        data.push(d);
        return;
      }
      for (let k = 0; k < kids; k++) grow(path, pm, depth + 1);
    };
    const G = 2 + rng.int(3);
    for (let g = 0; g < G; g++)
      grow(
        prompt,
        prompt.map(() => false),
        0,
      );
  }
  return data;
}

function makeModel(config: NanoConfig, kernels: Kernels, seed: number): NanoModel {
  const model = NanoModel.createSync(config, kernels, seed);
  for (const s of model.params.specs) {
    const v = model.params.get(s.name);
    for (let i = 0; i < v.length; i++) v[i] = s.init === 'ones' ? 1 + 0.1 * Math.sin(i) : 4 * v[i];
  }
  return model;
}

interface Pass {
  loss: number;
  logprobs: number[][];
  grads: Float64Array;
  metrics: Record<string, number>;
}

async function pass(
  model: NanoModel,
  data: Datum[],
  loss: LossSpec,
  extras: LossExtras,
  packing: TrainerPacking,
  options: { lora?: LoraAdapter; maxRowsPerPass?: number; headBlockRows?: number } = {},
): Promise<Pass> {
  const trained = options.lora ?? model;
  trained.grads.data.fill(0);
  const trainer = new NanoTrainer(model, {
    packing,
    adapter: options.lora,
    maxRowsPerPass: options.maxRowsPerPass,
    headBlockRows: options.headBlockRows,
  });
  const out = await trainer.forwardBackward(data, loss, extras);
  return { ...out, grads: Float64Array.from(trained.grads.data) };
}

/** Worst |a − b| / max(|b|, floor·max|b|) over every entry. */
function worstRel(a: ArrayLike<number>, b: ArrayLike<number>, floor = 1e-3): number {
  let scale = 0;
  for (let i = 0; i < b.length; i++) scale = Math.max(scale, Math.abs(b[i]));
  let worst = 0;
  for (let i = 0; i < b.length; i++)
    worst = Math.max(worst, Math.abs(a[i] - b[i]) / Math.max(Math.abs(b[i]), floor * scale, 1e-300));
  return worst;
}

const LOSSES: Array<[string, LossSpec, LossExtras]> = [
  ['cross_entropy', { kind: 'cross_entropy' }, {}],
  ['ppo + KL + entropy', { kind: 'ppo', clipLow: 0.2, clipHigh: 0.28 }, { klCoef: 0.1, entropyCoef: 0.01 }],
  ['ppo dual clip + truncated IS', { kind: 'ppo', clipLow: 0.2, clipHigh: 0.28, dualClip: 3, truncateAt: 2 }, {}],
  ['importance_sampling', { kind: 'importance_sampling' }, {}],
  ['gspo', { kind: 'gspo', clipLow: 0.2, clipHigh: 0.2 }, {}],
];

for (const [label, config] of [
  ['llama-like', base],
  ['qwen-like (GQA, q/k norm, biases, tied)', qwenLike],
] as const) {
  test(`float64: packed loss, log-probs and every gradient equal flat (${label}, every loss, full and LoRA)`, async () => {
    for (const [name, loss, extras] of LOSSES) {
      for (const lora of [false, true]) {
        const model = makeModel(config, kernels64, 5);
        const adapter = lora
          ? new LoraAdapter(model, { rank: 2, alpha: 4, targets: ['q_proj', 'v_proj', 'down_proj'] })
          : undefined;
        if (adapter)
          for (let i = 0; i < adapter.params.data.length; i++) adapter.params.data[i] = 0.3 * Math.sin(i + 1);
        const data = forest(new Rng(11), 3, config.vocabSize, loss.kind !== 'cross_entropy');
        const flat = await pass(model, data, loss, extras, 'flat', { lora: adapter });
        const tree = await pass(model, data, loss, extras, 'tree', { lora: adapter });
        const what = `${name}${lora ? ' LoRA' : ''}`;
        assert.ok(tree.metrics.train_token_ratio < 0.8, `${what}: sharing (${tree.metrics.train_token_ratio})`);
        assert.equal(flat.metrics.train_token_ratio, 1);
        assert.ok(
          Math.abs(tree.loss - flat.loss) <= 1e-10 * Math.abs(flat.loss),
          `${what}: loss ${tree.loss} vs ${flat.loss}`,
        );
        const lp = (p: Pass) => p.logprobs.flat();
        assert.ok(worstRel(lp(tree), lp(flat)) <= 1e-10, `${what}: log-probs`);
        const g = worstRel(tree.grads, flat.grads, 1e-6);
        assert.ok(g <= 1e-10, `${what}: worst relative gradient difference ${g}`);
        assert.ok(
          flat.grads.some((x) => x !== 0),
          `${what}: gradients are not all zero`,
        );
        for (const k of ['clip_fraction', 'approx_kl', 'entropy'])
          assert.ok(Math.abs(tree.metrics[k] - flat.metrics[k]) <= 1e-9, `${what}: ${k}`);
      }
    }
  });
}

test('float64: opposite advantages on one shared token beyond both clips keep each copy’s own clip branch', async () => {
  // two datums identical token for token (one shared path), A = +1 and −1, ratio e^1 > 1 + ε: the + copy
  // is clipped (no gradient) and the − copy is not, so the gradient is not zero (a collapsed Σ A = 0 would be)
  const model = makeModel(base, kernels64, 2);
  const seq = [1, 4, 2, 7, 3];
  const mk = (A: number): Datum => ({
    inputTokens: seq.slice(0, -1),
    targetTokens: seq.slice(1),
    weights: [0, 0.5, 0.5, 0.5],
    samplingLogprobs: [0, -9, -9, -9],
    advantages: [A, A, A, A],
  });
  const loss: LossSpec = { kind: 'ppo', clipLow: 0.2, clipHigh: 0.28 };
  const flat = await pass(model, [mk(1), mk(-1)], loss, {}, 'flat');
  const tree = await pass(model, [mk(1), mk(-1)], loss, {}, 'tree');
  assert.ok(
    flat.grads.some((x) => Math.abs(x) > 1e-6),
    'the flat gradient is not zero',
  );
  assert.ok(worstRel(tree.grads, flat.grads, 1e-6) <= 1e-10);
  assert.equal(tree.metrics.train_token_ratio, 0.5);
});

test('float64: a forest split over passes (maxRowsPerPass) and a head in blocks of rows equal flat', async () => {
  const model = makeModel(base, kernels64, 4);
  const data = forest(new Rng(3), 5, base.vocabSize, true);
  const loss: LossSpec = { kind: 'ppo', clipLow: 0.2, clipHigh: 0.28 };
  const flat = await pass(model, data, loss, {}, 'flat');
  const split = await pass(model, data, loss, {}, 'tree', { maxRowsPerPass: 40, headBlockRows: 7 });
  assert.ok(worstRel(split.grads, flat.grads, 1e-6) <= 1e-10);
  assert.ok(Math.abs(split.loss - flat.loss) <= 1e-10 * Math.abs(flat.loss));
});

test('WASM float32: packed gradients equal the float64 flat ones within the gradient-check tolerances', async () => {
  const wasm = await loadKernels({ backend: 'wasm' });
  for (const config of [base, qwenLike]) {
    const m32 = makeModel(config, wasm, 6);
    const m64 = makeModel(config, kernels64, 6);
    m64.params.data.set(m32.params.data);
    const data = forest(new Rng(8), 4, config.vocabSize, true);
    const loss: LossSpec = { kind: 'ppo', clipLow: 0.2, clipHigh: 0.28 };
    const g32 = (await pass(m32, data, loss, { entropyCoef: 0.01 }, 'tree')).grads;
    const g64 = (await pass(m64, data, loss, { entropyCoef: 0.01 }, 'flat')).grads;
    let scale = 0;
    for (const g of g64) scale = Math.max(scale, Math.abs(g));
    const bad: string[] = [];
    for (let i = 0; i < g64.length; i++)
      if (Math.abs(g32[i] - g64[i]) > 1e-6 * scale + 1e-5 * Math.abs(g64[i]))
        bad.push(`grad[${i}] ${g32[i]} vs ${g64[i]}`);
    assert.deepEqual(bad.slice(0, 5), []);
  }
});

test('WASM tree attention equals the reference and is bit-identical at 1, 2 and 4 threads', async () => {
  const data = forest(new Rng(21), 6, 50, false);
  const pack = packForest(
    data.map((d) => d.inputTokens),
    data.map((d) => d.targetTokens),
  );
  const [N, NH, hs] = [pack.N, 4, 12];
  const C = NH * hs;
  const rng = new Rng(1);
  const rand = () => Float32Array.from({ length: N * C }, () => rng.normal());
  const [q, k, v, dout] = [rand(), rand(), rand(), rand()];
  const att0 = NH * treeVisible(pack.layout);
  const run = (K: Kernels) => {
    const out = new Float32Array(N * C);
    const att = new Float32Array(att0);
    K.treeAttentionForward(out, att, q, k, v, pack.layout, C, NH);
    const [dq, dk, dv] = [new Float32Array(N * C), new Float32Array(N * C), new Float32Array(N * C)];
    K.treeAttentionBackward(dq, dk, dv, dout, att, q, k, v, pack.layout, C, NH);
    return [out, att, dq, dk, dv];
  };
  const ref = run(referenceKernels);
  const one = run(await loadKernels({ backend: 'wasm', threads: 1 }));
  ['out', 'att', 'dq', 'dk', 'dv'].forEach((name, i) => {
    const rel = worstRel(one[i], ref[i], 1e-2);
    assert.ok(rel < 1e-4, `${name}: wasm vs reference ${rel}`);
  });
  for (const threads of [2, 4]) {
    const many = run(await loadKernels({ backend: 'wasm', threads }));
    ['out', 'att', 'dq', 'dk', 'dv'].forEach((name, i) =>
      assert.ok(
        many[i].every((x, j) => Object.is(x, one[i][j])),
        `${name}: ${threads} threads differ from one`,
      ),
    );
  }
});

test('a kernel backend whose tree attention ignores the layout is refused on first use (fails closed)', () => {
  // a plain causal mask over the packed rows: sibling rows would see each other
  const broken: Kernels = {
    ...referenceKernels,
    name: 'broken',
    treeAttentionForward: (out, _att, q, k, v, layout, C, NH) =>
      referenceKernels.attentionForward(out, new Float32Array(NH * layout[2] ** 2), q, k, v, [layout[2]], C, NH),
  };
  const model = NanoModel.createSync(base, broken, 1);
  assert.throws(
    () => new NanoTrainer(model),
    (e: Error) => /broken kernels: tree attention differs from flat attention.*trainer\.packing: flat/.test(e.message),
  );
  assert.doesNotThrow(() => new NanoTrainer(model, { packing: 'flat' }));
  assert.doesNotThrow(() => new NanoTrainer(NanoModel.createSync(base, referenceKernels, 1)));
});

test('trainer.packing reaches the embedded trainer (default tree; flat when set)', async () => {
  const model = { dModel: 16, nLayers: 1, nHeads: 2, dFF: 32, contextLength: 16 };
  for (const packing of [undefined, 'flat', 'tree'] as const) {
    const c = parseConfig({ model, sft: { enabled: false }, ...(packing ? { trainer: { packing } } : {}) });
    const engine = await buildEngine(c);
    assert.equal((engine.trainer as NanoTrainer).packing, packing ?? 'tree');
    await engine.close();
  }
  assert.throws(
    () => parseConfig({ trainer: { packing: 'dense' } }),
    (e: Error) => /trainer\.packing/.test(e.message),
  );
});

test('the forest builder counts rows and attention pairs as it grows (what splits a pack)', () => {
  const data = forest(new Rng(5), 4, 9, false);
  const b = new ForestBuilder();
  for (const d of data) {
    const more = b.added(d.inputTokens);
    const before = { rows: b.rows, visible: b.visible };
    b.add(d.inputTokens, d.targetTokens);
    assert.deepEqual(
      { rows: b.rows, visible: b.visible },
      { rows: before.rows + more.rows, visible: before.visible + more.visible },
    );
  }
  const pack = b.build();
  assert.equal(b.rows, pack.N);
  assert.equal(b.visible, treeVisible(pack.layout));
  assert.deepEqual(b.added(data[0].inputTokens), { rows: 0, visible: 0 });
});

test('the default pass budget is what the 4 GiB kernel memory leaves after weights and optimizer state', () => {
  const MiB = 2 ** 20;
  // a model of n float32 parameters (passBytes reads only the arenas' sizes)
  const model = (n: number) => ({ params: { data: { length: n } } }) as unknown as NanoModel;
  const adapter = (n: number) => ({ params: { data: { length: n } } }) as unknown as LoraAdapter;
  // a 135M model with a small LoRA: 4096 − 540 − 3·4 − 1280 MiB leave more than the 1.75 GiB cap
  assert.equal(passBytes(model(135e6), adapter(1e6)), 1792 * MiB);
  // a 0.5B one with LoRA: 4 GiB − 1.98 GB of weights − 1.25 GiB reserve
  const b05 = passBytes(model(494e6), adapter(2e6));
  assert.equal(b05, 4 * 2 ** 30 - 4 * 494e6 - 3 * 4 * 2e6 - 1.25 * 2 ** 30);
  assert.ok(b05 > 800 * MiB && b05 < 1000 * MiB, `${b05 / MiB} MiB`);
  // full fine-tuning counts gradients and both moments; nothing left: the 256 MiB floor
  assert.equal(passBytes(model(494e6)), 256 * MiB);
});
