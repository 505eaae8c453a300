/**
 * The output head's buffers: kernel memory is never freed (a bump allocator), so the head must not
 * reallocate its logit buffers once they reach their cap (the head then runs in blocks of rows). Each
 * reallocation at the cap leaked 2 × 256 MiB: on a 151k-vocabulary model the trainer's kernel memory grew
 * past 3 GiB as passes got longer.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { NanoModel } from '../../src/engine/model/model.js';
import { OutputHead } from '../../src/engine/model/head.js';
import { referenceKernels } from '../../src/engine/kernels/reference.js';
import type { Kernels } from '../../src/engine/kernels/index.js';
import type { NanoConfig } from '../../src/engine/model/config.js';

test('the head allocates its capped logit buffers once, however far the row count grows', () => {
  const V = 1 << 16; // 2^26 / V = 1024 rows fill the logit cap
  const config: NanoConfig = {
    vocabSize: V,
    dModel: 8,
    nLayers: 1,
    nHeads: 2,
    dFF: 8,
    contextLength: 8,
    tieEmbeddings: true,
    ropeTheta: 10000,
    normEps: 1e-5,
  };
  const big: number[] = [];
  const kernels: Kernels = {
    ...referenceKernels,
    alloc: (n: number) => {
      if (n >= 1 << 24) big.push(n);
      return referenceKernels.alloc(n);
    },
  };
  const model = NanoModel.createSync(config, kernels, 1);
  const head = new OutputHead(model);
  const ensure = (N: number) => (head as unknown as { ensure(N: number): void }).ensure(N);
  ensure(300); // 300 · V floats: below the cap
  assert.deepEqual(big, [300 * V, 300 * V]);
  for (const N of [1100, 1700, 2600, 4000]) ensure(N);
  // one growth to the cap (logits and their gradient), none after it
  assert.deepEqual(big, [300 * V, 300 * V, 1 << 26, 1 << 26]);
  assert.equal(head.logprobs.length, 1 << 26);
});
