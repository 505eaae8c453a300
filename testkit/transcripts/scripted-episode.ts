/**
 * Rollouts with a scripted policy, for the transcript tests: a Sampler that answers each request
 * with the next scripted turn (token ids given by the test, finish reason `stop`), and `rollout`, which
 * grows one agent episode with the real agent generator, token I/O (`agentRuntime`) and environment.
 * Asserts nothing; test/run/transcripts.test.ts compares its trees with rendered transcripts.
 */
import { Rng } from '../../src/core/rng.js';
import type { RolloutTree } from '../../src/core/tree.js';
import type { TaskItem } from '../../src/core/types.js';
import type { SampleRequest, SampleResult, Sampler, TextTokenizer } from '../../src/engine/types.js';
import type { EnvironmentFactory, ToolCallFormat } from '../../src/env/types.js';
import { agentGenerator } from '../../src/generate/agent.js';
import { agentRuntime } from '../../src/run/agent-runtime.js';
import type { ArborConfig } from '../../src/run/config.js';
import { stopTokens } from '../../src/run/prompts.js';

/** Emits `turns[0]`, then `turns[1]`, ... (one per request, n = 1), each ending with its own last token. */
export class ScriptedTurnSampler implements Sampler {
  readonly specificationVersion = 'arbor.sampler.v1' as const;
  readonly capabilities = {
    entropy: false,
    topLogprobs: false,
    forcedTokens: false,
    cacheHandles: false,
    prefixCaching: false,
  };
  private next = 0;
  constructor(private readonly turns: number[][]) {}
  weightVersion(): number {
    return 0;
  }
  release(): void {}
  async sample(requests: SampleRequest[]): Promise<SampleResult[]> {
    return requests.map(() => {
      const tokens = (this.turns[this.next++] ?? []).slice();
      const completion = { tokens, logprobs: tokens.map(() => -0.5), finishReason: 'stop' as const };
      return {
        completions: [completion],
        usage: { promptTokensComputed: 0, prefixTokensReused: 0, tokensDecoded: tokens.length },
        weightVersion: 0,
      };
    });
  }
}

/** One episode of `item` grown by the agent generator with `turns` as the policy's sampled ids. */
export async function rollout(o: {
  format: ToolCallFormat;
  tokenizer: TextTokenizer;
  factory: EnvironmentFactory;
  item: TaskItem;
  turns: number[][];
  treeId?: string;
}): Promise<RolloutTree> {
  const probe = await o.factory.create();
  const tools = probe.tools;
  await probe.close();
  const config = { engine: { kind: 'remote' }, model: {} } as unknown as ArborConfig;
  const agent = agentRuntime({ factory: o.factory, format: o.format, tools }, o.tokenizer, config);
  const generator = agentGenerator({
    kind: 'agent',
    groupSize: 1,
    format: 'arbor',
    branching: 'iid',
    rootCopies: 0,
    branchFactor: 2,
    maxTurns: 8,
    maxTurnTokens: 0,
    toolTimeoutMs: 5000,
    episodeTimeoutMs: 60_000,
  });
  const { trees } = await generator.grow([{ item: o.item, promptTokens: [] }], {
    sampler: new ScriptedTurnSampler(o.turns),
    rng: new Rng(1),
    step: 1,
    stopTokens: stopTokens(o.tokenizer),
    maxResponseTokens: 4000,
    temperature: 1,
    topP: 1,
    topK: 0,
    treeIdPrefix: o.treeId ?? 't',
    agent,
  });
  return trees[0];
}
