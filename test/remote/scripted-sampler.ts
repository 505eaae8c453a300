/**
 * A deterministic in-process Sampler for client/server tests: continuation tokens are a pure function
 * of (context, seed, index), so a result obtained through HTTP can be compared exactly with a direct
 * call. Not an engine: it has no model.
 */
import { Rng } from '../../src/core/rng.js';
import type { SampleRequest, SampleResult, Sampler } from '../../src/engine/types.js';

export class ScriptedSampler implements Sampler {
  readonly specificationVersion = 'arbor.sampler.v1' as const;
  readonly capabilities = {
    entropy: true,
    topLogprobs: true,
    forcedTokens: false,
    cacheHandles: false,
    prefixCaching: false,
  };
  calls = 0;
  constructor(
    readonly vocab = 50,
    readonly delayMs = 0,
  ) {}
  weightVersion(): number {
    return 3;
  }
  release(): void {}
  async sample(requests: SampleRequest[], options: { signal?: AbortSignal } = {}): Promise<SampleResult[]> {
    this.calls++;
    if (this.delayMs) {
      await new Promise<void>((resolve, reject) => {
        const t = setTimeout(resolve, this.delayMs);
        options.signal?.addEventListener(
          'abort',
          () => {
            clearTimeout(t);
            reject(new DOMException('aborted', 'AbortError'));
          },
          { once: true },
        );
      });
    }
    return requests.map((r) => {
      const n = r.n ?? 1;
      const completions = Array.from({ length: n }, (_, i) => {
        const rng = new Rng((r.seed ?? 0) * 1000 + i + r.tokens.length * 7 + r.tokens.reduce((a, b) => a + b, 0));
        const tokens: number[] = [];
        const logprobs: number[] = [];
        const topLogprobs: Array<Array<[number, number]>> = [];
        let finishReason: 'stop' | 'length' = 'length';
        for (let t = 0; t < r.maxTokens; t++) {
          const tok = rng.int(this.vocab);
          tokens.push(tok);
          logprobs.push(-1 - rng.next());
          topLogprobs.push([
            [tok, logprobs[t]],
            [(tok + 1) % this.vocab, -3],
          ]);
          if (r.stopTokens?.includes(tok)) {
            finishReason = 'stop';
            break;
          }
        }
        return {
          tokens,
          logprobs,
          finishReason,
          topLogprobs: r.topLogprobs ? topLogprobs.map((row) => row.slice(0, r.topLogprobs)) : undefined,
        };
      });
      const decoded = completions.reduce((s, c) => s + c.tokens.length, 0);
      return {
        completions,
        usage: { promptTokensComputed: r.tokens.length, prefixTokensReused: 0, tokensDecoded: decoded },
        weightVersion: 3,
      };
    });
  }
}
