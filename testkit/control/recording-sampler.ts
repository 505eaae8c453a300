/**
 * A sampler for producer tests over the char tokenizer: it records every prompt it is asked to
 * continue (decoded, BOS dropped) and answers the k-th continuation of a prompt (counted across
 * calls) with `script(prompt, k)` plus EOS. Asserts nothing; no model behind it.
 */
import { CharTokenizer } from '../../src/engine/tokenizer/char.js';
import type { SampleRequest, SampleResult, Sampler } from '../../src/engine/types.js';

export class RecordingSampler implements Sampler {
  readonly specificationVersion = 'arbor.sampler.v1' as const;
  readonly capabilities = {
    entropy: false,
    topLogprobs: false,
    forcedTokens: false,
    cacheHandles: false,
    prefixCaching: false,
  };
  /** Every request's decoded context, in call order. */
  readonly prompts: string[] = [];
  private readonly seen = new Map<string, number>();

  constructor(
    readonly tokenizer: CharTokenizer,
    private readonly script: (prompt: string, k: number) => string,
  ) {}

  async sample(requests: SampleRequest[]): Promise<SampleResult[]> {
    return requests.map((r) => {
      const prompt = this.tokenizer.decode(r.tokens);
      this.prompts.push(prompt);
      const completions = Array.from({ length: r.n ?? 1 }, () => {
        const k = this.seen.get(prompt) ?? 0;
        this.seen.set(prompt, k + 1);
        const tokens = [...this.tokenizer.encode(this.script(prompt, k)), this.tokenizer.eos];
        return { tokens, logprobs: tokens.map(() => -0.5), finishReason: 'stop' as const };
      });
      const tokensDecoded = completions.reduce((a, c) => a + c.tokens.length, 0);
      return {
        completions,
        usage: { promptTokensComputed: r.tokens.length, prefixTokensReused: 0, tokensDecoded },
        weightVersion: 0,
      };
    });
  }

  release(): void {}

  weightVersion(): number {
    return 0;
  }
}
