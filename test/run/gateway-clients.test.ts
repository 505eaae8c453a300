/**
 * RL through the real client libraries (specs/agent-gateway.md §6 tests 12-15, 18, 19): an agent written
 * with the AI SDK v5 (generateText, streamText), the official openai client v4 (a hand-written tool loop,
 * non-streamed and `create({ stream: true })`) and LangChain.js (`ChatOpenAI.bindTools`, invoke and
 * stream) trains two steps through the gateway on a tiny random Qwen3 with its real tokenizer. A
 * ScriptedPolicy makes the model call `weather` exactly as Qwen3's template renders a call, then answer
 * with the tool's result. The harness (testkit/gateway/harness.ts) checks each step: the ids trained are
 * exactly the ids sampled, `tokenExactReport` is exact, every episode is one chain; here, per client:
 * how it wrote the tool call back (AI SDK and LangChain compactly, the openai loop verbatim), that it
 * read the usage, and that the weights moved. The figures per client are printed as diagnostics.
 */
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { openPolicy, trainThroughClient, type Policy } from '../../testkit/gateway/harness.js';

const root = mkdtempSync(join(tmpdir(), 'arbor-gateway-clients-'));
process.on('exit', () => rmSync(root, { recursive: true, force: true }));

let policy: Policy;

before(async () => {
  policy = await openPolicy(root);
});

const clients = [
  { name: 'AI SDK generateText + stopWhen', module: 'ai-sdk-generate', stream: false, compact: true },
  { name: 'AI SDK streamText (includeUsage)', module: 'ai-sdk-stream', stream: true, compact: true },
  {
    name: 'openai v4 chat.completions.create, hand-written loop',
    module: 'openai-chat',
    stream: false,
    compact: false,
  },
  {
    name: 'openai v4 create({ stream: true }), chunks accumulated',
    module: 'openai-stream',
    stream: true,
    compact: false,
  },
  { name: 'LangChain ChatOpenAI.bindTools().invoke', module: 'langchain-invoke', stream: false, compact: true },
  { name: 'LangChain ChatOpenAI.bindTools().stream', module: 'langchain-stream', stream: true, compact: true },
];

for (const client of clients)
  test(`${client.name}: two RL steps, token-exact, one chain per episode`, { timeout: 60_000 }, async (t) => {
    const module = resolve('testkit/gateway/agents', `${client.module}.ts`);
    const r = await trainThroughClient(policy, module);
    t.diagnostic(
      `${client.module}: ${r.sampledTokens} sampled tokens checked, ${r.calls} calls, ${r.forks} forks, ` +
        `max |trainer − sampler| log-prob ${r.maxLogprobDiff.toExponential(1)}, rewards ${r.rewards.join(' ')}`,
    );
    assert.deepEqual([r.steps, r.episodes, r.calls, r.forks], [2, 4, 8, 0], 'two calls per episode, no fork');
    assert.ok(r.sampledTokens > 0);
    assert.equal(r.exactTokens, r.sampledTokens, 'tokenExactReport compared every sampled token');
    assert.equal(r.clientOutputTokens, r.sampledTokens, "the client read the gateway's usage of every call");
    assert.ok(r.weightChange > 0, 'the weights moved');
    const streamed = client.stream ? 8 : 0;
    assert.deepEqual(
      r.requests,
      { total: 8, streamed, streamUsage: streamed },
      'one request per call, as this client sends it',
    );
    // each episode's second request carries its first reply's tool call back, as this client writes it
    const { sent, echoed } = r.arguments;
    assert.equal(sent.length, 4);
    const compact = sent.map((a) => JSON.stringify(JSON.parse(a)));
    assert.deepEqual(echoed.slice().sort(), (client.compact ? compact : sent).slice().sort());
    if (client.compact) assert.notDeepEqual(compact, sent, 'the gateway sent `{"city": "…"}`, with a space');
  });
