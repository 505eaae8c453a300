/**
 * Simple rewards: `exact` (trimmed string equality), `numeric` (numbers within a tolerance; commas
 * and spaces in numbers allowed), `format` (a regular expression the response must match),
 * `length_penalty` (DAPO's overlong soft penalty on the response length in tokens).
 */
import { single, type RewardFunction } from './types.js';

/** Exact match of the extracted answer (default: the whole trimmed response) with item.answer. */
export function exactReward(
  options: { caseSensitive?: boolean; extract?: (response: string) => string | null; name?: string } = {},
): RewardFunction {
  const norm = (s: string) => (options.caseSensitive === false ? s.trim().toLowerCase() : s.trim());
  return {
    name: options.name ?? 'exact',
    async score({ response, item }) {
      const got = options.extract ? options.extract(response) : response;
      const ok = got !== null && norm(got) === norm(item.answer);
      return single(this.name, ok ? 1 : 0, { extracted: got });
    },
  };
}

/** Parse a number written with optional commas/spaces between digit groups; null if not a number. */
export function parseNumber(text: string): number | null {
  const t = text
    .trim()
    .replace(/(?<=\d)[,\s](?=\d{3}\b)/g, '')
    .replace(/^\$/, '');
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(t)) return null;
  return Number(t);
}

export function numericReward(
  options: { absTol?: number; relTol?: number; extract?: (response: string) => string | null; name?: string } = {},
): RewardFunction {
  const absTol = options.absTol ?? 1e-6;
  const relTol = options.relTol ?? 1e-6;
  return {
    name: options.name ?? 'numeric',
    async score({ response, item }) {
      const got = options.extract ? options.extract(response) : response;
      const a = got === null ? null : parseNumber(got);
      const b = parseNumber(item.answer);
      const ok = a !== null && b !== null && Math.abs(a - b) <= Math.max(absTol, relTol * Math.abs(b));
      return single(this.name, ok ? 1 : 0, { extracted: got, value: a });
    },
  };
}

/** 1 when the response matches `pattern`, else 0 (or `partial` for each of `anyOf` present). */
export function formatReward(options: { pattern: string; flags?: string; name?: string }): RewardFunction {
  const re = new RegExp(options.pattern, options.flags ?? 's');
  return {
    name: options.name ?? 'format',
    async score({ response }) {
      return single(this.name, re.test(response) ? 1 : 0);
    },
  };
}

/**
 * DAPO overlong penalty: 0 while L ≤ maxLength − cacheLength; −(L − (maxLength − cacheLength)) /
 * cacheLength inside the cache window; −1 beyond maxLength.
 */
export function lengthPenalty(length: number, maxLength: number, cacheLength: number): number {
  const soft = maxLength - cacheLength;
  if (length <= soft) return 0;
  if (length <= maxLength) return -(length - soft) / cacheLength;
  return -1;
}

export function lengthPenaltyReward(options: {
  maxLength: number;
  cacheLength: number;
  name?: string;
}): RewardFunction {
  return {
    name: options.name ?? 'length_penalty',
    async score({ response, responseTokens }) {
      const L = responseTokens ?? response.length;
      return single(this.name, lengthPenalty(L, options.maxLength, options.cacheLength), { length: L });
    },
  };
}

/** Agent episodes: the environment's summed reward along the path (`missing` when it gave none, or for non-agent responses). */
export function envReward(missing = 0, name = 'env'): RewardFunction {
  return {
    name,
    async score(input) {
      const r = input.episode?.envReward;
      return single(name, r ?? missing, r === undefined ? { note: 'no environment reward' } : {});
    },
  };
}
