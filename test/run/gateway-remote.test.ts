/**
 * The agent gateway over a remote engine: the run's sampler is the vLLM client
 * (`engine.kind: remote`, `sampler.api: openai`) talking to a live `arbor serve` on loopback, as a real
 * vLLM fleet would be. The user's agent calls the gateway; the gateway samples through the remote
 * sampler with token-id prompts, and the episode's tree holds exactly the ids the server sampled, with
 * its log-probs: the same ids as the server gives for that prompt and seed when asked directly.
 */
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Rng } from '../../src/core/rng.js';
import { hasError, leaves } from '../../src/core/tree.js';
import type { EpisodeRecord } from '../../src/core/episode.js';
import { buildSamplingEngine } from '../../src/engine/build.js';
import { agentGenerator, type AgentOptions } from '../../src/generate/agent.js';
import { checkEpisodeTree } from '../../src/generate/episode-tree.js';
import type { AgentDriver } from '../../src/generate/types.js';
import { parseConfig } from '../../src/run/config.js';
import { openGatewayAgent } from '../../src/run/gateway-runtime.js';
import { derivedSeed } from '../../src/serve/limits.js';
import { serveHf, tinyQwen3 } from '../../testkit/serve/hf-fixture.js';

const dir = tinyQwen3(mkdtempSync(join(tmpdir(), 'arbor-gateway-remote-')));
const served = await serveHf({ checkpoint: dir, name: 'tiny' });
after(() => served.close());

test('the gateway samples through a remote (vLLM-protocol) engine, token-exact', { timeout: 120_000 }, async () => {
  const engine = { kind: 'remote', sampler: { api: 'openai', servers: [served.url], model: 'tiny' }, tokenizer: dir };
  const config = parseConfig({
    engine,
    env: { kind: 'agent', module: 'testkit/gateway/agents/fetch-chat.ts', concurrency: 4, timeoutSeconds: 60 },
    generate: { kind: 'agent', groupSize: 3 },
    sampling: { maxResponseTokens: 6 },
  });
  const { sampler, tokenizer } = await buildSamplingEngine({ engine: config.engine });
  const agent = (await openGatewayAgent(config, sampler, tokenizer, { log: () => {} }))!;
  const records: EpisodeRecord[] = [];
  const driver: AgentDriver = {
    runEpisode: async (item, spec) => {
      const record = await agent.runEpisode(item, spec);
      records.push(record);
      return record;
    },
  };
  try {
    const item = { id: 'q', prompt: 'What is 12+34?', answer: '46' };
    const ctx = {
      ...{ sampler, rng: new Rng(0), step: 1, stopTokens: [...tokenizer.eosIds!], maxResponseTokens: 6 },
      ...{ temperature: 1, topP: 1, topK: 0, treeIdPrefix: 'r', gateway: driver },
    };
    const { trees } = await agentGenerator(config.generate as AgentOptions).grow([{ item, promptTokens: [] }], ctx);
    const tree = trees[0];
    assert.ok(!hasError(tree), JSON.stringify(records.map((r) => r.error)));
    assert.equal(leaves(tree).length, 3);
    const check = checkEpisodeTree(tree, records);
    assert.deepEqual(check.problems, []);
    assert.equal(check.exact, check.sampled);
    assert.ok(check.sampled >= 3, `${check.sampled} sampled ids`);
    // what the gateway recorded is what the server samples for that prompt and the call's seed, asked
    // directly: episode e0's seed is the generator's first draw, its first call's seed derived from it
    const e0 = records.find((r) => r.episodeId.endsWith('/e0'))!;
    const call = e0.calls[0];
    const seed = derivedSeed(new Rng(0).nextU32() >>> 0, 1);
    const stopTokens = [...tokenizer.eosIds!];
    const [direct] = await sampler.sample([
      { tokens: call.promptIds, maxTokens: 6, temperature: 1, topP: 1, topK: 0, stopTokens, seed },
    ]);
    assert.deepEqual(call.choices[0].tokens, direct.completions[0].tokens);
    call.choices[0].logprobs.forEach((lp, t) => assert.ok(Math.abs(lp - direct.completions[0].logprobs[t]) < 1e-6));
  } finally {
    await agent.close();
    await sampler.close?.();
  }
});
