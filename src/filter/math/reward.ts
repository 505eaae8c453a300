/**
 * The math reward: extract the final answer from the response (boxed, `####`, "the answer is", last
 * math span; or the whole response when it is short), compare it with the item's gold answer via
 * `mathEquivalent`, and return 1 or 0 with info `{ extracted, gold }`.
 */
import { single, type RewardFunction } from '../types.js';
import { extractAnswer } from './extract.js';
import { mathEquivalent } from './equivalence.js';

export interface MathRewardOptions {
  /** Relative tolerance for numeric comparison (default 1e-4). */
  tolerance?: number;
  /** Component name (default "math"). */
  name?: string;
}

/** Responses without an answer marker are used whole only up to this many characters. */
export const SHORT_RESPONSE_CHARS = 40;

/** The answer a response commits to, or null. */
export function responseAnswer(response: string): string | null {
  const got = extractAnswer(response);
  if (got !== null) return got;
  const t = response.trim();
  return t.length > 0 && t.length <= SHORT_RESPONSE_CHARS ? t : null;
}

/** Synchronous core of `mathReward`: is `response` correct for the gold answer text? */
export function verifyMath(
  response: string,
  goldText: string,
  tolerance?: number,
): { correct: boolean; extracted: string | null; gold: string } {
  const gold = extractAnswer(goldText) ?? goldText.trim();
  const extracted = responseAnswer(response);
  const correct = extracted !== null && mathEquivalent(gold, extracted, { tolerance });
  return { correct, extracted, gold };
}

export function mathReward(options: MathRewardOptions = {}): RewardFunction {
  return {
    name: options.name ?? 'math',
    async score({ response, item }) {
      const r = verifyMath(response, item.answer, options.tolerance);
      return single(this.name, r.correct ? 1 : 0, { extracted: r.extracted, gold: r.gold });
    },
  };
}
