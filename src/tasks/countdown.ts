/**
 * `countdown`: reach a target from 3–4 given numbers with + − × ÷ (each number used at most once by
 * default, or exactly once). Prompt "3 5 7 -> 22:"; the answer is an expression such as "3*5+7".
 * Targets are built from a random expression over the numbers with integer intermediate results, so
 * every item is solvable; many answers are valid. The verifier parses the expression safely
 * (expression.ts), checks the numbers used and exact equality with the target.
 */
import { Rng } from '../core/rng.js';
import { drawSplit } from './split.js';
import type { TaskItem } from '../core/types.js';
import { single, type RewardFunction } from '../filter/types.js';
import { evaluateExpression } from '../core/expression.js';
import type { Split, Task } from './types.js';

export interface CountdownOptions {
  /** How many numbers (3 or 4). */
  count?: number;
  /** Numbers are drawn from 1..maxNumber. */
  maxNumber?: number;
  /** Every number must be used exactly once (default: at most once). */
  useAll?: boolean;
  /** Reward for a well-formed expression that uses allowed numbers but misses the target. */
  formatCredit?: number;
}

export interface CountdownCheck {
  correct: boolean;
  wellFormed: boolean;
  reason: string;
}

/** Check an answer expression against the numbers and target. */
export function checkCountdown(expression: string, numbers: number[], target: number, useAll = false): CountdownCheck {
  const r = evaluateExpression(expression.trim());
  if (!r.ok) return { correct: false, wellFormed: false, reason: r.error };
  const pool = numbers.slice();
  for (const lit of r.literals) {
    const i = pool.indexOf(lit);
    if (i < 0) return { correct: false, wellFormed: false, reason: `number ${lit} not available (or used twice)` };
    pool.splice(i, 1);
  }
  if (useAll && pool.length) return { correct: false, wellFormed: true, reason: `unused numbers ${pool.join(',')}` };
  if (r.den !== 1n || r.num !== BigInt(target))
    return { correct: false, wellFormed: true, reason: `value ${r.num}/${r.den} ≠ ${target}` };
  return { correct: true, wellFormed: true, reason: 'ok' };
}

/** The expression: text before the first newline/EOS, after an optional "=" answer marker. */
export function extractCountdownAnswer(response: string): string {
  const line = response.split('\n').pop()!.trim();
  return line.replace(/^.*=\s*/, '').trim();
}

function buildExpression(rng: Rng, numbers: number[]): { text: string; value: number } | null {
  // combine numbers left to right with random ops, keeping integer, positive intermediate values
  let text = String(numbers[0]);
  let value = numbers[0];
  let lastOp = '';
  for (let i = 1; i < numbers.length; i++) {
    const n = numbers[i];
    const options: Array<['+' | '-' | '*' | '/', number]> = [
      ['+', value + n],
      ['*', value * n],
    ];
    if (value - n > 0) options.push(['-', value - n]);
    if (n > 1 && value % n === 0) options.push(['/', value / n]);
    const [op, v] = options[rng.int(options.length)];
    const needsParens = (op === '*' || op === '/') && (lastOp === '+' || lastOp === '-');
    text = `${needsParens ? `(${text})` : text}${op}${n}`;
    value = v;
    lastOp = op;
  }
  return value > 0 && value < 1000 ? { text, value } : null;
}

export function countdownTask(options: CountdownOptions = {}): Task {
  const count = options.count ?? 3;
  const maxNumber = options.maxNumber ?? 9;
  const useAll = options.useAll ?? false;
  const formatCredit = options.formatCredit ?? 0;
  const reward: RewardFunction = {
    name: 'correct',
    async score({ response, item }) {
      const meta = item.meta as { numbers: number[]; target: number };
      const check = checkCountdown(extractCountdownAnswer(response), meta.numbers, meta.target, useAll);
      return single('correct', check.correct ? 1 : check.wellFormed ? formatCredit : 0, { reason: check.reason });
    },
  };
  const makeItem = (rng: Rng): TaskItem | null => {
    const numbers = Array.from({ length: count }, () => rng.intRange(1, maxNumber));
    const order = rng.shuffle(numbers.slice());
    const built = buildExpression(rng, order);
    if (!built) return null;
    const prompt = `${numbers.join(' ')} -> ${built.value}:`;
    return {
      id: prompt,
      prompt,
      answer: String(built.value),
      demonstration: built.text,
      meta: { numbers, target: built.value },
    };
  };
  return {
    name: 'countdown',
    description: `reach the target from ${count} numbers in 1..${maxNumber} with + - * /`,
    reward,
    demonstration: (item) => item.demonstration ?? '',
    makeItems(split: Split, n: number, seed: number): TaskItem[] {
      return drawSplit('countdown', split, n, seed, (rng) => makeItem(rng));
    },
  };
}
