/**
 * Errors are data in the Generate stage: when the sampler rejects a batch because of one prompt,
 * growSafely bisects the batch so the other trees still grow, and the bad prompt's tree carries an
 * `error` leaf with the sampler's message instead of failing the step. Aborts are not swallowed.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Rng } from '../../src/core/rng.js';
import { hasError, isComplete, leaves } from '../../src/core/tree.js';
import type { SampleOptions, SampleRequest, SampleResult, Sampler } from '../../src/engine/types.js';
import { generatorFromConfig } from '../../src/generate/index.js';
import { growSafely } from '../../src/generate/safe.js';
import { ScriptedTreeSampler } from './scripted.js';

/** The scripted sampler, except that any call containing a prompt with token 30 fails as a whole. */
class PickySampler implements Sampler {
  readonly specificationVersion = 'arbor.sampler.v1' as const;
  readonly capabilities;
  calls = 0;
  constructor(private readonly inner = new ScriptedTreeSampler(0.2)) {
    this.capabilities = inner.capabilities;
  }
  weightVersion(): number {
    return 0;
  }
  release(handles: string[]): void {
    this.inner.release(handles);
  }
  async sample(requests: SampleRequest[], options?: SampleOptions): Promise<SampleResult[]> {
    this.calls++;
    if (requests.some((r) => r.tokens.includes(30))) throw new Error('context contains a forbidden token');
    if (options?.signal?.aborted) throw options.signal.reason;
    return this.inner.sample(requests);
  }
}

const inputs = [5, 6, 30, 7, 8].map((t, i) => ({
  item: { id: `q${i}`, prompt: '', answer: '' },
  promptTokens: [1, t],
}));
const ctx = (sampler: Sampler, signal?: AbortSignal) => ({
  sampler,
  rng: new Rng(1),
  step: 1,
  stopTokens: [2],
  maxResponseTokens: 12,
  temperature: 1,
  topP: 1,
  topK: 0,
  treeIdPrefix: 't',
  signal,
});

for (const spec of [
  { kind: 'iid', groupSize: 4 },
  { kind: 'treepo', groupSize: 4, segmentLength: 3, branchingFactor: 2, initialDivergence: 2 },
]) {
  test(`${spec.kind}: one bad prompt costs only its own tree`, async () => {
    const sampler = new PickySampler();
    const out = await growSafely(generatorFromConfig(spec), inputs, ctx(sampler));
    assert.equal(out.trees.length, 5);
    assert.deepEqual(
      out.trees.map((t) => t.itemId),
      ['q0', 'q1', 'q2', 'q3', 'q4'],
      'trees stay in input order',
    );
    assert.equal(out.errors, 1);
    const bad = out.trees[2];
    assert.ok(hasError(bad));
    assert.match(leaves(bad)[0].error ?? '', /forbidden token/);
    for (const i of [0, 1, 3, 4]) {
      assert.ok(isComplete(out.trees[i]) && !hasError(out.trees[i]), `tree ${i} grew`);
      assert.equal(leaves(out.trees[i]).length, 4);
    }
    assert.equal(new Set(out.trees.map((t) => t.id)).size, 5, 'tree ids stay unique');
    assert.equal(out.stats.trajectories, 16);
  });
}

test('an aborted call is not turned into error trees', async () => {
  const controller = new AbortController();
  controller.abort(new Error('shutdown'));
  await assert.rejects(
    growSafely(
      generatorFromConfig({ kind: 'iid', groupSize: 2 }),
      [inputs[0], inputs[1]],
      ctx(new PickySampler(), controller.signal),
    ),
    /shutdown/,
  );
});
