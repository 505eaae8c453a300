/**
 * Token-exact multi-turn rollouts on the embedded engine. A scripted environment answers
 * every policy turn with an observation for three turns; the agent generator grows i.i.d. and uniform
 * turn trees with a real (random-weight) nano model. Checked against records kept outside the
 * generator (what the sampler returned, what the environment said): the trainer's input is the prompt
 * followed by every sampled turn and every observation in order, the loss mask is 1 exactly on the
 * sampled tokens, and the trainer's log-probs of those tokens equal the sampler's within 1e-5.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Rng } from '../../src/core/rng.js';
import { leaves, pathTo, ROOT_ID, trajectory, type RolloutTree } from '../../src/core/tree.js';
import type { TaskItem } from '../../src/core/types.js';
import { referenceKernels } from '../../src/engine/kernels/reference.js';
import { NanoModel } from '../../src/engine/model/model.js';
import { NanoSampler } from '../../src/engine/embedded/sampler.js';
import { CharTokenizer } from '../../src/engine/tokenizer/char.js';
import { NanoTrainer } from '../../src/engine/embedded/trainer.js';
import type { SampleRequest, SampleResult, Sampler } from '../../src/engine/types.js';
import type { Environment, EnvironmentFactory, StepResult, TextPiece, ToolCallFormat } from '../../src/env/types.js';
import { agentGenerator } from '../../src/generate/agent.js';
import type { AgentRuntime } from '../../src/generate/types.js';
import { buildDatums } from '../../src/optimize/datums.js';
import { tokenExactReport } from '../../src/optimize/token-exact.js';

const tokenizer = new CharTokenizer();
const config = {
  vocabSize: tokenizer.vocabSize,
  dModel: 16,
  nLayers: 2,
  nHeads: 2,
  dFF: 32,
  contextLength: 160,
  tieEmbeddings: false,
  ropeTheta: 10000,
  normEps: 1e-5,
};

/** Every turn is "a call"; the observation names the turn and the text's length (so it depends on what was sampled). */
const everyTurnFormat: ToolCallFormat = {
  name: 'test',
  renderTools: () => '',
  renderPrompt: (prompt) => `${prompt}\n`,
  parseCalls: (text) => ({ calls: [{ name: 'note', arguments: { text }, raw: text }], errors: [] }),
  renderObservation: (results) => results.map((r): TextPiece => ({ text: `\n<${r.content}>\n`, special: false })),
  finalAnswer: (text) => text,
};

/** Observations seen by the generator, recorded outside it: by environment episode, in order. */
const said: string[] = [];

class ScriptedEnv implements Environment {
  readonly tools = [];
  constructor(private turn = 0) {}
  async reset(): Promise<{ observation: string }> {
    return { observation: '' };
  }
  async step(action: { text: string }): Promise<StepResult> {
    this.turn++;
    const content = `t${this.turn} n${action.text.length}`;
    said.push(content);
    return {
      results: [{ name: 'note', content, isError: false }],
      done: this.turn >= 3,
      reward: this.turn >= 3 ? 1 : undefined,
      metrics: { toolCalls: 1, toolErrors: 0 },
    };
  }
  async fork(): Promise<Environment> {
    return new ScriptedEnv(this.turn);
  }
  async close(): Promise<void> {}
}

const factory: EnvironmentFactory = { kind: 'scripted', create: async () => new ScriptedEnv(), close: async () => {} };

/** The sampler, with every completion it returned recorded by its context. */
class RecordingSampler implements Sampler {
  readonly specificationVersion = 'arbor.sampler.v1' as const;
  readonly returned: Array<{ context: number[]; tokens: number[]; logprobs: number[] }> = [];
  constructor(private readonly inner: Sampler) {}
  get capabilities() {
    return this.inner.capabilities;
  }
  async sample(requests: SampleRequest[]): Promise<SampleResult[]> {
    const out = await this.inner.sample(requests);
    out.forEach((r, i) =>
      r.completions.forEach((c) =>
        this.returned.push({
          context: requests[i].tokens.slice(),
          tokens: c.tokens.slice(),
          logprobs: c.logprobs.slice(),
        }),
      ),
    );
    return out;
  }
  release(handles: string[]): void {
    this.inner.release(handles);
  }
  weightVersion(): number {
    return this.inner.weightVersion();
  }
}

function runtime(): AgentRuntime {
  return {
    factory,
    format: everyTurnFormat,
    tools: [],
    contextLength: config.contextLength,
    encodePrompt: (item) => [tokenizer.bos, ...tokenizer.encode(everyTurnFormat.renderPrompt(item.prompt, []))],
    encodePieces: (pieces) => pieces.flatMap((p) => tokenizer.encode(p.text)),
    decodeTurn: (tokens) => tokenizer.decode(tokens),
  };
}

async function grow(
  branching: 'iid' | 'uniform',
): Promise<{ trees: RolloutTree[]; sampler: RecordingSampler; model: NanoModel }> {
  const model = NanoModel.createSync(config, referenceKernels, 11);
  for (let i = 0; i < model.params.data.length; i++) model.params.data[i] *= 2;
  const sampler = new RecordingSampler(new NanoSampler(model));
  const items: TaskItem[] = [
    { id: 'a', prompt: 'hello', answer: '' },
    { id: 'b', prompt: 'abc', answer: '' },
  ];
  const generator = agentGenerator({
    kind: 'agent',
    groupSize: 4,
    format: 'arbor',
    branching,
    rootCopies: 0,
    branchFactor: 2,
    maxTurns: 6,
    maxTurnTokens: 10,
    toolTimeoutMs: 1000,
    episodeTimeoutMs: 10_000,
  });
  const { trees } = await generator.grow(
    items.map((item) => ({ item, promptTokens: [] })),
    {
      sampler,
      rng: new Rng(3),
      step: 1,
      stopTokens: [tokenizer.eos, ...tokenizer.encode('abcdefghijklmnopqrstuvwxyz')],
      maxResponseTokens: 120,
      temperature: 1,
      topP: 1,
      topK: 0,
      treeIdPrefix: 't',
      agent: runtime(),
    },
  );
  return { trees, sampler, model };
}

for (const branching of ['iid', 'uniform'] as const) {
  test(`agent ${branching}: the trainer sees prompt + every sampled turn + every observation, masked exactly, with the sampler's log-probs`, async () => {
    said.length = 0;
    const { trees, sampler, model } = await grow(branching);
    const trainer = new NanoTrainer(model);
    let multiTurn = 0;
    for (const tree of trees) {
      assert.equal(leaves(tree).length, 4, 'G episodes per prompt');
      for (const leaf of leaves(tree)) {
        const path = pathTo(tree, leaf.id);
        // rebuild the expected sequence from the records: each turn's tokens are what the sampler
        // returned for the context so far, each observation what the environment said, re-rendered
        let expected = tree.nodes[ROOT_ID].tokens.slice();
        const sampledAt = new Map<number, number>();
        for (const node of path.slice(1)) {
          const rec = sampler.returned.find(
            (r) =>
              r.context.length === expected.length &&
              r.context.every((t, i) => t === expected[i]) &&
              r.tokens.every((t, i) => node.tokens[i] === t),
          );
          assert.ok(rec, `${tree.id}/${node.id}: a completion the sampler returned for this context starts the turn`);
          rec!.tokens.forEach((_, i) => sampledAt.set(expected.length + i, rec!.logprobs[i]));
          const rest = node.tokens.slice(rec!.tokens.length);
          if (rest.length) {
            const text = tokenizer.decode(rest);
            const m = /^\n<(t\d n\d+)>\n$/.exec(text);
            assert.ok(
              m && said.includes(m[1]),
              `${tree.id}/${node.id}: what follows the turn is an observation the environment gave (${JSON.stringify(text)})`,
            );
          }
          expected = expected.concat(node.tokens);
        }
        if (path.length > 2) multiTurn++;
        const tr = trajectory(tree, leaf.id);
        const [d] = buildDatums([{ trajectory: tr, advantage: 1, excluded: false }], {
          aggregation: 'token_mean',
          maxResponseTokens: 120,
        });
        assert.deepEqual(
          [...d.inputTokens, d.targetTokens.at(-1)!],
          expected,
          'trainer input = the path, token for token',
        );
        const lp = (await trainer.logprobs([d]))[0];
        for (let j = 1; j < expected.length; j++) {
          const s = sampledAt.get(j);
          assert.equal(d.weights[j - 1] > 0, s !== undefined, `position ${j}: trained exactly when sampled`);
          if (s !== undefined)
            assert.ok(Math.abs(lp[j - 1] - s) < 1e-5, `position ${j}: trainer ${lp[j - 1]} vs sampler ${s}`);
        }
      }
    }
    assert.ok(multiTurn >= 4, `several episodes span more than one turn (${multiTurn})`);
    const report = await tokenExactReport(trees, trainer);
    assert.equal(report.exact, 1, JSON.stringify(report));
  });
}

test('tokenExactReport fails when a sampled log-prob is off or an observation token is marked trainable', async () => {
  const { trees, model } = await grow('iid');
  const trainer = new NanoTrainer(model);
  const node = Object.values(trees[0].nodes).find((n) => n.parent !== null && n.mask.includes(1))!;
  const t = node.mask.indexOf(1);
  node.logprobs[t] += 0.01;
  const bad = await tokenExactReport(trees, trainer);
  assert.equal(bad.exact, 0);
  assert.ok(bad.maxLogprobDiff > 0.009);
  node.logprobs[t] -= 0.01;
  assert.equal((await tokenExactReport(trees, trainer)).exact, 1, 'restored');
  // a mask longer than the sampled turn (trl #5144): an observation token marked trainable
  const turn = Object.values(trees[0].nodes).find((n) => n.parent !== null && n.mask.includes(0))!;
  turn.mask[turn.mask.indexOf(0)] = 1;
  const masked = await tokenExactReport(trees, trainer);
  assert.equal(masked.exact, 0);
  assert.ok(
    masked.maxLogprobDiff > 0.1,
    `an observation token has no sampled log-prob to match (${masked.maxLogprobDiff})`,
  );
});
