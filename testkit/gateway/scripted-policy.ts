/**
 * A policy with a script, for gateway tests and the gateway bench: a Sampler over a real model whose
 * continuations are chosen by `script(prompt, k)` (the prompt decoded with special tokens, k counting
 * earlier continuations of the same prompt) and whose log-probs are the model's own log-probabilities of
 * those ids as its sampler reports them (each id forced in turn at temperature 1, from the retained state
 * of the one before: a vocabulary-wide row per id, not per prompt token as NanoSampler.scorePrompt), so
 * the trainer's log-probs agree with the "sampled" ones and RL steps are real. A script that returns
 * undefined hands the request to the model's own sampler. The end token is appended unless the text is
 * cut by max tokens. Asserts nothing.
 */
import type { NanoSampler } from '../../src/engine/embedded/sampler.js';
import type { SampleCompletion, SampleRequest, SampleResult, Sampler, TextTokenizer } from '../../src/engine/types.js';

export class ScriptedPolicy implements Sampler {
  readonly specificationVersion = 'arbor.sampler.v1' as const;
  /** Every scripted continuation returned, in order: its prompt ids and sampled ids (what the trainer must see). */
  readonly returned: Array<{ prompt: number[]; tokens: number[] }> = [];
  private readonly seen = new Map<string, number>();

  constructor(
    readonly model: NanoSampler,
    readonly tokenizer: TextTokenizer,
    readonly script: (prompt: string, k: number) => string | undefined,
  ) {}

  get capabilities() {
    // continuations are whole texts: no retained state to stream from
    return { ...this.model.capabilities, cacheHandles: false };
  }

  weightVersion(): number {
    return this.model.weightVersion();
  }

  release(): void {}

  async sample(requests: SampleRequest[]): Promise<SampleResult[]> {
    const out: SampleResult[] = [];
    for (const r of requests) {
      const prompt = (this.tokenizer.decode as (ids: number[], keep?: boolean) => string)(r.tokens, true);
      const k = this.seen.get(prompt) ?? 0;
      const n = r.n ?? 1;
      this.seen.set(prompt, k + n);
      const texts = Array.from({ length: n }, (_, c) => this.script(prompt, k + c));
      if (texts.every((t) => t === undefined)) {
        out.push(...(await this.model.sample([r])));
        continue;
      }
      const completions: SampleCompletion[] = [];
      for (const text of texts) completions.push(await this.scripted(r, text ?? ''));
      const tokensDecoded = completions.reduce((a, c) => a + c.tokens.length, 0);
      const usage = { promptTokensComputed: r.tokens.length, prefixTokensReused: 0, tokensDecoded };
      out.push({ completions, usage, weightVersion: this.weightVersion() });
    }
    return out;
  }

  private async scripted(r: SampleRequest, text: string): Promise<SampleCompletion> {
    const full = [...this.tokenizer.encode(text), this.tokenizer.eos];
    const tokens = full.slice(0, r.maxTokens);
    const logprobs = await this.forcedLogprobs(r.tokens, tokens);
    this.returned.push({ prompt: r.tokens.slice(), tokens: tokens.slice() });
    const finishReason = tokens.length === full.length ? 'stop' : 'length';
    return { tokens, logprobs, finishReason };
  }

  /** The sampler's log-prob of each of `tokens` after `prompt` at temperature 1 (one forced id per call). */
  private async forcedLogprobs(prompt: number[], tokens: number[]): Promise<number[]> {
    const logprobs: number[] = [];
    let handle: string | undefined;
    try {
      for (const [t, id] of tokens.entries()) {
        const context = prompt.concat(tokens.slice(0, t));
        const sampling = { temperature: 1, topP: 1, topK: 0, maxTokens: 1, forcedTokens: [id] };
        const [result] = await this.model.sample([{ tokens: context, ...sampling, retain: true, cacheHandle: handle }]);
        if (handle) this.model.release([handle]);
        const c = result.completions[0];
        handle = c.cacheHandle;
        logprobs.push(c.logprobs[0]);
      }
    } finally {
      if (handle) this.model.release([handle]);
    }
    return logprobs;
  }
}
