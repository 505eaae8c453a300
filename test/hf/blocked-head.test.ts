/**
 * The output head in blocks of rows (large vocabularies: forward.ts keeps each row's target log-prob
 * and entropy, backward recomputes a block's logits) equals the head held whole (to float32 rounding:
 * a small block takes another GEMM kernel): the same log-probs, loss, metrics and gradients, with a LoRA
 * adapter and for every policy loss with an entropy bonus.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { NanoModel } from '../../src/engine/model/model.js';
import { NanoTrainer } from '../../src/engine/embedded/trainer.js';
import { LoraAdapter } from '../../src/engine/model/lora.js';
import { loadKernels } from '../../src/engine/kernels/index.js';
import { Rng } from '../../src/core/rng.js';
import type { Datum, LossSpec } from '../../src/engine/types.js';

const kernels = await loadKernels({ backend: 'wasm' });
const config = {
  vocabSize: 300,
  dModel: 32,
  nLayers: 2,
  nHeads: 4,
  nKVHeads: 2,
  headDim: 8,
  dFF: 48,
  contextLength: 32,
  tieEmbeddings: true,
  ropeTheta: 1e4,
  normEps: 1e-6,
  qkNorm: true,
  paramNames: 'hf' as const,
  rope: 'transformers' as const,
};

function data(): Datum[] {
  const rng = new Rng(5);
  return [7, 12, 3].map((T) => {
    const seq = Array.from({ length: T + 1 }, () => rng.int(300));
    return {
      inputTokens: seq.slice(0, -1),
      targetTokens: seq.slice(1),
      weights: seq.slice(1).map(() => rng.next()),
      samplingLogprobs: seq.slice(1).map(() => -5 - rng.next()),
      advantages: seq.slice(1).map(() => rng.normal()),
    };
  });
}

async function run(
  blockRows: number | undefined,
  loss: LossSpec,
  lora: boolean,
  weightedRowsOnly = false,
): Promise<{ lp: number[][]; loss: number; metrics: Record<string, number>; grads: Float32Array }> {
  const model = NanoModel.createSync(config, kernels, 11);
  const adapter = lora
    ? new LoraAdapter(model, { rank: 4, alpha: 8, targets: ['q_proj', 'v_proj', 'down_proj'] })
    : undefined;
  if (adapter) {
    adapter.initialise(2);
    adapter.params.data.forEach((_, i) => (adapter.params.data[i] += 0.01 * Math.sin(i)));
  }
  const trainer = new NanoTrainer(model, { adapter, headBlockRows: blockRows, weightedRowsOnly });
  // a third of the positions carry no weight (a prompt)
  const batch = data().map((d) => ({ ...d, weights: d.weights.map((w, t) => (t % 3 === 0 ? 0 : w)) }));
  const out = await trainer.forwardBackward(batch, loss, { entropyCoef: 0.01 });
  return {
    lp: out.logprobs,
    loss: out.loss,
    metrics: out.metrics,
    grads: Float32Array.from((adapter ?? model).grads.data),
  };
}

for (const lora of [false, true]) {
  for (const [loss, blocks, weighted] of [
    [{ kind: 'cross_entropy' }, 5, false],
    [{ kind: 'ppo', clipLow: 0.2, clipHigh: 0.2 }, 5, false],
    [{ kind: 'cross_entropy' }, undefined, true],
    [{ kind: 'ppo', clipLow: 0.2, clipHigh: 0.2 }, 4, true],
  ] as Array<[LossSpec, number | undefined, boolean]>) {
    const how = `${blocks ? `${blocks}-row blocks` : 'one kept block'}${weighted ? ' of the weighted rows only' : ''}`;
    test(`head in ${how} = whole head: ${loss.kind}${lora ? ', LoRA' : ''}`, async () => {
      const whole = await run(undefined, loss, lora);
      const blocked = await run(blocks, loss, lora, weighted);
      if (weighted) {
        // skipped rows report NaN; compare the others
        blocked.lp.forEach((row, i) =>
          row.forEach((x, t) => {
            if (t % 3 === 0) {
              assert.ok(Number.isNaN(x), `lp[${i}][${t}] of a skipped row is NaN`);
              blocked.lp[i][t] = whole.lp[i][t];
            }
          }),
        );
        // the entropy metric averages over weights: unchanged
      }
      // a 5-row head GEMM takes the decode-sized kernel (another summation order): equal to float32 rounding
      blocked.lp.forEach((row, i) =>
        row.forEach((x, t) =>
          assert.ok(Math.abs(x - whole.lp[i][t]) <= 1e-5, `lp[${i}][${t}] ${x} vs ${whole.lp[i][t]}`),
        ),
      );
      assert.ok(
        Math.abs(blocked.loss - whole.loss) <= 1e-5 * Math.abs(whole.loss),
        `loss ${blocked.loss} vs ${whole.loss}`,
      );
      for (const k of Object.keys(whole.metrics))
        assert.ok(Math.abs(blocked.metrics[k] - whole.metrics[k]) <= 1e-6 * (1 + Math.abs(whole.metrics[k])), k);
      let max = 0;
      let scale = 0;
      for (let i = 0; i < whole.grads.length; i++) {
        max = Math.max(max, Math.abs(blocked.grads[i] - whole.grads[i]));
        scale = Math.max(scale, Math.abs(whole.grads[i]));
      }
      assert.ok(scale > 0 && max <= 1e-4 * scale, `gradients differ by ${max} (scale ${scale})`);
    });
  }
}
