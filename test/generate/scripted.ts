/**
 * A deterministic scripted Sampler for generator tests: each continuation emits tokens from a seeded
 * stream and stops (token 2 = EOS) with probability `stopProbability` per token. It honours n,
 * maxTokens, stopTokens, retain/cacheHandle (handles name the full token context) and reports usage,
 * so tests can check budgets, reuse and release without a model.
 */
import { Rng } from '../../src/core/rng.js';
import type { SampleRequest, SampleResult, Sampler } from '../../src/engine/types.js';

export class ScriptedTreeSampler implements Sampler {
  readonly specificationVersion = 'arbor.sampler.v1' as const;
  readonly capabilities = {
    entropy: true,
    topLogprobs: false,
    forcedTokens: false,
    cacheHandles: true,
    prefixCaching: false,
  };
  calls = 0;
  requestsSeen: SampleRequest[][] = [];
  /** What each call returned (parallel to requestsSeen). */
  resultsSeen: SampleResult[][] = [];
  /** Every handle ever issued and the full token context it names (kept after release). */
  readonly handleContext = new Map<string, number[]>();
  readonly live = new Map<string, number[]>();
  private counter = 0;
  constructor(readonly stopProbability: number) {}
  weightVersion(): number {
    return 0;
  }
  release(handles: string[]): void {
    for (const h of handles) this.live.delete(h);
  }
  async sample(requests: SampleRequest[]): Promise<SampleResult[]> {
    this.calls++;
    this.requestsSeen.push(requests);
    const results = requests.map((r) => {
      const cached = r.cacheHandle ? this.live.get(r.cacheHandle) : undefined;
      const reused = cached && cached.every((t, i) => r.tokens[i] === t) ? cached.length : 0;
      const n = r.n ?? 1;
      const completions = Array.from({ length: n }, (_, i) => {
        const rng = new Rng(r.seed ?? 0).fork(i);
        const tokens: number[] = [];
        let finishReason: 'stop' | 'length' = 'length';
        while (tokens.length < r.maxTokens) {
          if (rng.next() < this.stopProbability) {
            tokens.push(2);
            finishReason = 'stop';
            break;
          }
          tokens.push(5 + rng.int(10));
        }
        const c = {
          tokens,
          logprobs: tokens.map(() => -1 - rng.next()),
          entropies: tokens.map(() => rng.next()),
          finishReason,
          cacheHandle: undefined as string | undefined,
        };
        if (r.retain) {
          c.cacheHandle = `h${++this.counter}`;
          this.live.set(c.cacheHandle, r.tokens.concat(tokens));
          this.handleContext.set(c.cacheHandle, r.tokens.concat(tokens));
        }
        return c;
      });
      return {
        completions,
        usage: {
          promptTokensComputed: r.tokens.length - reused,
          prefixTokensReused: reused + (n - 1) * r.tokens.length,
          tokensDecoded: completions.reduce((s, c) => s + c.tokens.length, 0),
        },
        weightVersion: 0,
      };
    });
    this.resultsSeen.push(results);
    return results;
  }
}
