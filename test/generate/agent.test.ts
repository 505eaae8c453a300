/**
 * The agent generator with the real arbor format, the calculator environment and a scripted sampler
 * whose turns are fixed texts: turn nodes (sampled tokens mask 1, observation mask 0), the episode
 * record the Filter reads, malformed calls as error observations, the turn / token limits, uniform
 * branching within the leaf budget, and TRACE's preference for anchors predicted near p = 0.5.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Rng } from '../../src/core/rng.js';
import { leaves, pathTo, ROOT_ID, type RolloutTree } from '../../src/core/tree.js';
import type { TaskItem } from '../../src/core/types.js';
import { CharTokenizer } from '../../src/engine/tokenizer/char.js';
import type { SampleRequest, SampleResult, Sampler } from '../../src/engine/types.js';
import { calculatorEnvironmentFactory } from '../../src/env/builtin/calculator.js';
import { arborFormat, encodePieces } from '../../src/env/format/index.js';
import { scoreTrees } from '../../src/filter/score-trees.js';
import { agentGenerator, type AgentOptions } from '../../src/generate/agent.js';
import type { AgentRuntime, QualityHook } from '../../src/generate/types.js';
import { calculatorTask } from '../../src/tasks/calculator.js';

const tok = new CharTokenizer();
const format = arborFormat();

/** Turn k of an episode (k = EOS tokens in the response so far) is `script(k, seed)`; n continuations per request. */
class TextSampler implements Sampler {
  readonly specificationVersion = 'arbor.sampler.v1' as const;
  readonly capabilities = {
    entropy: false,
    topLogprobs: false,
    forcedTokens: false,
    cacheHandles: false,
    prefixCaching: false,
  };
  requests: SampleRequest[] = [];
  constructor(
    private readonly promptLength: (context: number[]) => number,
    private readonly script: (turn: number, seed: number) => string,
  ) {}
  async sample(requests: SampleRequest[]): Promise<SampleResult[]> {
    this.requests.push(...requests);
    return requests.map((r) => {
      const turn = r.tokens.slice(this.promptLength(r.tokens)).filter((t) => t === tok.eos).length;
      // continuation i of a request follows the script with seed + i
      const completions = Array.from({ length: r.n ?? 1 }, (_, i) => {
        let tokens = [...tok.encode(this.script(turn, (r.seed ?? 0) + i)), tok.eos];
        let finishReason: 'stop' | 'length' = 'stop';
        if (tokens.length > r.maxTokens) [tokens, finishReason] = [tokens.slice(0, r.maxTokens), 'length'];
        return { tokens, logprobs: tokens.map(() => -0.5), finishReason };
      });
      return {
        completions,
        usage: {
          promptTokensComputed: r.tokens.length,
          prefixTokensReused: 0,
          tokensDecoded: completions.reduce((a, c) => a + c.tokens.length, 0),
        },
        weightVersion: 0,
      };
    });
  }
  release(): void {}
  weightVersion(): number {
    return 0;
  }
}

const factory = calculatorEnvironmentFactory();
const tools = [
  {
    name: 'calc',
    description: 'evaluate an arithmetic expression',
    inputSchema: { type: 'object', properties: { expr: { type: 'string' } }, required: ['expr'] },
  },
];

function runtime(contextLength?: number): AgentRuntime {
  return {
    factory,
    format,
    tools,
    contextLength,
    encodePrompt: (item) => [tok.bos, ...tok.encode(format.renderPrompt(item.prompt, tools))],
    encodePieces: (pieces) => encodePieces(pieces, (text) => tok.encode(text)),
    decodeTurn: (tokens) => tok.decode(tokens),
  };
}

const options: AgentOptions = {
  kind: 'agent',
  groupSize: 1,
  format: 'arbor',
  branching: 'iid',
  rootCopies: 0,
  branchFactor: 2,
  maxTurns: 4,
  maxTurnTokens: 0,
  toolTimeoutMs: 2000,
  episodeTimeoutMs: 20_000,
};
const item: TaskItem = { id: '12*3=', prompt: '12*3=', answer: '36', meta: { a: 12, b: 3, useTool: true } };
const promptLength = runtime().encodePrompt(item, '').length;

async function grow(
  script: (turn: number, seed: number) => string,
  o: Partial<AgentOptions> = {},
  extra: { maxResponseTokens?: number; contextLength?: number; quality?: QualityHook } = {},
): Promise<{ tree: RolloutTree; sampler: TextSampler }> {
  const sampler = new TextSampler(() => promptLength, script);
  const { trees } = await agentGenerator({ ...options, ...o }).grow([{ item, promptTokens: [] }], {
    sampler,
    rng: new Rng(1),
    step: 1,
    stopTokens: [tok.eos],
    maxResponseTokens: extra.maxResponseTokens ?? 64,
    temperature: 1,
    topP: 1,
    topK: 0,
    treeIdPrefix: 't',
    agent: runtime(extra.contextLength),
    quality: extra.quality,
  });
  return { tree: trees[0], sampler };
}

test('a tool call and an answer: two turn nodes, the observation masked, the episode recorded and verified', async () => {
  const { tree } = await grow((turn) => (turn === 0 ? '@calc(12*3)' : '36'));
  const [leaf] = leaves(tree);
  const [rootNode, first, second] = pathTo(tree, leaf.id);
  assert.equal(tok.decode(rootNode.tokens), 'tools: calc(expr)\n12*3=');
  const call = [...tok.encode('@calc(12*3)'), tok.eos];
  const obs = tok.encode('\n= 36\n');
  assert.deepEqual(first.tokens, [...call, ...obs]);
  assert.deepEqual(first.mask, [...call.map(() => 1), ...obs.map(() => 0)]);
  assert.deepEqual(first.logprobs, [...call.map(() => -0.5), ...obs.map(() => 0)]);
  assert.deepEqual(second.tokens, [...tok.encode('36'), tok.eos]);
  assert.deepEqual(second.mask, [1, 1, 1]);
  assert.deepEqual(leaf.episode, { finalAnswer: '36', turns: 2, toolCalls: 1, toolErrors: 0, end: 'answer' });
  assert.equal(tree.meta?.agent && (tree.meta.agent as { toolCalls: number }).toolCalls, 1);
  const task = calculatorTask();
  await scoreTrees([tree], new Map([[item.id, item]]), task.reward, {
    decode: (t) => tok.decode(t),
    concurrency: 1,
    timeoutMs: 5000,
    failureReward: 0,
  });
  assert.equal(leaf.reward, 1, 'the verifier reads the final answer');
});

test('a wrong answer after the right observation scores 0; a direct answer is one turn', async () => {
  const wrong = (await grow((turn) => (turn === 0 ? '@calc(12*3)' : '35'))).tree;
  const direct = (await grow(() => '36')).tree;
  const task = calculatorTask();
  await scoreTrees([wrong, direct], new Map([[item.id, item]]), task.reward, {
    decode: (t) => tok.decode(t),
    concurrency: 1,
    timeoutMs: 5000,
    failureReward: 0,
  });
  assert.equal(leaves(wrong)[0].reward, 0);
  assert.equal(leaves(direct)[0].reward, 1);
  assert.equal(leaves(direct)[0].episode?.turns, 1);
  assert.equal(leaves(direct)[0].episode?.toolCalls, 0);
});

test('a malformed call becomes an error observation and the episode goes on', async () => {
  const { tree } = await grow((turn) => (turn === 0 ? '@calc(12*3' : '36'));
  const [leaf] = leaves(tree);
  const first = pathTo(tree, leaf.id)[1];
  const observation = tok.decode(first.tokens.filter((_, i) => first.mask[i] === 0));
  assert.match(observation, /^\n! .+\n$/, `error line (${JSON.stringify(observation)})`);
  assert.equal(leaf.episode?.toolErrors, 1);
  assert.equal(leaf.episode?.finalAnswer, '36');
});

test('limits: max turns, an observation that would overflow the episode budget, an over-long turn', async () => {
  const always = (await grow(() => '@calc(1+1)', { maxTurns: 3 })).tree;
  const [a] = leaves(always);
  assert.equal(a.episode?.end, 'max_turns');
  assert.equal(a.episode?.turns, 3);
  assert.equal(a.finishReason, 'depth');
  // 12 tokens of call + EOS, then the observation would pass a 16-token episode budget
  const tight = (await grow(() => '@calc(12*3)', {}, { maxResponseTokens: 16 })).tree;
  const [b] = leaves(tight);
  assert.equal(b.episode?.end, 'max_tokens');
  assert.ok(
    pathTo(tight, b.id)
      .slice(1)
      .reduce((n, x) => n + x.tokens.length, 0) <= 16,
    'the episode stays within its budget',
  );
  assert.ok(
    b.mask.every((m) => m === 1),
    'no observation was appended',
  );
  const long = (await grow(() => 'x'.repeat(30), { maxTurnTokens: 8 })).tree;
  const [c] = leaves(long);
  assert.equal(c.tokens.length, 8);
  assert.equal(c.episode?.end, 'max_tokens');
});

test('uniform branching: root copies, then every anchor branches within the budget of G leaves', async () => {
  const script = (turn: number, seed: number) => (turn < 2 ? `@calc(${seed % 7}+1)` : 'done');
  const { tree, sampler } = await grow(script, {
    groupSize: 8,
    branching: 'uniform',
    branchFactor: 2,
    rootCopies: 2,
    maxTurns: 5,
  });
  assert.equal(leaves(tree).length, 8);
  // the continuations of one node share one request (their context is computed once)
  assert.deepEqual(
    sampler.requests.map((r) => r.n),
    [2, 2, 2, 2, 2, 2, 2],
  );
  assert.equal(tree.nodes[ROOT_ID].children.length, 2, 'two episodes from the prompt');
  for (const id of tree.nodes[ROOT_ID].children)
    assert.equal(tree.nodes[id].children.length, 2, `anchor ${id} branches in two`);
  assert.equal((tree.meta!.agent as { forks: number }).forks, 1 + 2 + 4, 'one fork per extra child');
  for (const l of leaves(tree)) assert.equal(l.episode?.turns, 3);
});

test('iid: G independent episodes from the prompt; missing leaves are refilled when episodes end early', async () => {
  const { tree } = await grow((turn, seed) => (turn === 0 && seed % 2 ? '@calc(2*2)' : '4'), { groupSize: 6 });
  assert.equal(tree.nodes[ROOT_ID].children.length, 6);
  assert.equal(leaves(tree).length, 6);
  const trees = await grow(() => '4', { groupSize: 4, branching: 'uniform', rootCopies: 2 });
  assert.equal(leaves(trees.tree).length, 4, 'answers in the first turn leave budget: fresh episodes fill it');
  assert.equal(trees.tree.nodes[ROOT_ID].children.length, 4);
});

test('trace: the extra children go to the anchors predicted nearest p = 0.5', async () => {
  const script = (turn: number, seed: number) => (turn === 0 ? `@calc(${seed % 5}*1)` : 'ok');
  const predicted = new Map<string, number>();
  const quality: QualityHook = {
    predict: (tree, ids) =>
      ids.map((id) => {
        const p = [0.02, 0.5, 0.97, 0.45][Number(id.split('.')[1])];
        predicted.set(id, p);
        return p;
      }),
  };
  const { tree } = await grow(
    script,
    { groupSize: 8, branching: 'trace', branchFactor: 2, rootCopies: 4, maxTurns: 3 },
    { quality },
  );
  const children = (k: number) => tree.nodes[`0.${k}`].children.length;
  assert.equal(leaves(tree).length, 8);
  assert.ok(children(1) >= 2 && children(3) >= 2, 'uncertain anchors branch');
  assert.ok(
    children(1) + children(3) > children(0) + children(2),
    `more continuations where p ≈ 0.5 (${[0, 1, 2, 3].map(children)})`,
  );
  assert.ok(predicted.size >= 4, 'the predictor was asked about every anchor');
});

test('without an environment the agent generator is a configuration error naming env', async () => {
  await assert.rejects(
    agentGenerator(options).grow([{ item, promptTokens: [] }], {
      sampler: new TextSampler(
        () => 0,
        () => '',
      ),
      rng: new Rng(1),
      step: 1,
      stopTokens: [2],
      maxResponseTokens: 8,
      temperature: 1,
      topP: 1,
      topK: 0,
      treeIdPrefix: 't',
    }),
    (e: Error & { key?: string }) => /needs an environment/.test(e.message),
  );
});
