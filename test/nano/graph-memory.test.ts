/**
 * The training graph's activations: kernel memory is never freed, so a graph given the trainer's row
 * budget (`rowsHint`: budgets of 512 MiB or more) allocates the budget's rows at its first pass and never
 * again, while one without it grows 1.5× at a time (each growth a new set of buffers).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { NanoModel } from '../../src/engine/model/model.js';
import { TrainingGraph } from '../../src/engine/model/forward.js';
import { referenceKernels } from '../../src/engine/kernels/reference.js';
import type { Kernels } from '../../src/engine/kernels/index.js';
import type { NanoConfig } from '../../src/engine/model/config.js';

const config: NanoConfig = {
  vocabSize: 11,
  dModel: 8,
  nLayers: 1,
  nHeads: 2,
  dFF: 12,
  contextLength: 64,
  tieEmbeddings: true,
  ropeTheta: 10000,
  normEps: 1e-5,
};
/** The graph's activation capacity (rows) after each forward pass of `rows` tokens, and its allocated floats. */
function passes(rowsHint: number, rowsList: number[]): Array<{ capacity: number; floats: number }> {
  let floats = 0;
  const kernels: Kernels = { ...referenceKernels, alloc: (n: number) => ((floats += n), referenceKernels.alloc(n)) };
  const model = NanoModel.createSync(config, kernels, 1);
  const graph = new TrainingGraph(model, undefined, undefined, rowsHint);
  return rowsList.map((rows) => {
    const seq = Array.from({ length: rows }, (_, i) => (i % 10) + 1);
    graph.forward({ sequences: [seq], targets: [seq], weights: [seq.map(() => 1)] });
    return { capacity: (graph as unknown as { capacityN: number }).capacityN, floats };
  });
}

test('with a row budget the activations are allocated once, for the budget, at the first pass', () => {
  const out = passes(60, [10, 30, 48, 60]);
  assert.deepEqual(
    out.map((o) => o.capacity),
    [60, 60, 60, 60],
  );
  // a pass beyond the budget (a single longer datum) still gets its rows: the capacity grows 1.5×
  assert.equal(passes(60, [10, 64])[1].capacity, 90);
});

test('without one they grow with the passes, 1.5× at least, allocating a new set each time', () => {
  const out = passes(0, [10, 30, 40, 48]);
  assert.deepEqual(
    out.map((o) => o.capacity),
    [10, 30, 45, 68],
  );
  // each growth allocated more than the graph holds at the end: the older sets are not freed
  const budgeted = passes(68, [10, 30, 40, 48]);
  assert.ok(out[3].floats > budgeted[3].floats, `${out[3].floats} floats grown vs ${budgeted[3].floats} budgeted`);
});
