/**
 * `arith`: multi-digit addition, subtraction and multiplication (by a one-digit number) with a short
 * column-by-column scratchpad, sized for a character-level model of 0.1–5M parameters.
 * Prompt "347+85="; completion "7+5+0=12,4+8+1=13,3+0+1=04;432": each column from the right shows
 * its digits, carry (or borrow) and a fixed-width result, then ";" and the answer. Difficulty = digits of the
 * first operand (the second has 1..difficulty digits). The verifier compares the integer after the
 * last ";" exactly. Train and test are disjoint by a hash of the problem text.
 */
import { Rng, hashString } from '../core/rng.js';
import { drawSplit } from './split.js';
import type { TaskItem } from '../core/types.js';
import { single, type RewardFunction } from '../filter/types.js';
import type { Split, Task } from './types.js';

export interface ArithOptions {
  /** Digits of the first operand (the second has 1..digits). */
  digits?: number;
  /** Minimum digits (items are drawn uniformly from minDigits..digits). */
  minDigits?: number;
  /** How digits are drawn: uniform, or geometric (P ∝ 2^−(d−minDigits), a long tail of long responses). */
  digitsDistribution?: 'uniform' | 'geometric';
  /** Operators to draw from. */
  ops?: Array<'+' | '-' | '*'>;
  /**
   * Fraction of SFT demonstrations written by a careless teacher that drops every carry and borrow
   * (default 0). It changes demonstrations only: prompts, answers and the verifier stay exact.
   */
  teacherErrorRate?: number;
}

/**
 * Column scratchpad and answer for a op b (a ≥ b for subtraction; b one digit for multiplication).
 * Every column record has the same width so the answer digits sit at fixed offsets:
 * addition "x+y+c=ss" (two-digit column sum), subtraction "x-y-b=rB" (digit r, borrow-out B),
 * multiplication "x*y+c=ss" (two-digit column value).
 */
export function arithSolution(
  a: number,
  op: string,
  b: number,
  options: { dropCarries?: boolean } = {},
): { scratch: string; answer: number } {
  if (options.dropCarries) return carelessSolution(a, op, b);
  const da = String(a).split('').reverse().map(Number);
  const db = String(b).split('').reverse().map(Number);
  const steps: string[] = [];
  const two = (n: number) => String(n).padStart(2, '0');
  if (op === '+') {
    let carry = 0;
    const n = Math.max(da.length, db.length);
    for (let i = 0; i < n; i++) {
      const x = da[i] ?? 0,
        y = db[i] ?? 0,
        s = x + y + carry;
      steps.push(`${x}+${y}+${carry}=${two(s)}`);
      carry = s >= 10 ? 1 : 0;
    }
    return { scratch: steps.join(','), answer: a + b };
  }
  if (op === '-') {
    let borrow = 0;
    for (let i = 0; i < da.length; i++) {
      const x = da[i],
        y = db[i] ?? 0,
        borrowIn = borrow;
      let r = x - y - borrowIn;
      borrow = r < 0 ? 1 : 0;
      if (r < 0) r += 10;
      steps.push(`${x}-${y}-${borrowIn}=${r}${borrow}`);
    }
    return { scratch: steps.join(','), answer: a - b };
  }
  let carry = 0;
  for (let i = 0; i < da.length; i++) {
    const s = da[i] * b + carry;
    steps.push(`${da[i]}*${b}+${carry}=${two(s)}`);
    carry = Math.floor(s / 10);
  }
  return { scratch: steps.join(','), answer: a * b };
}

/**
 * The careless teacher: the same column format with every carry and borrow taken as 0, and the
 * answer its own columns imply (each column's last digit; the top column's tens digit in front).
 * 47+85 → "7+5+0=12,4+8+0=12;122"; 52-48 → "2-8-0=41,5-4-0=10;14".
 */
function carelessSolution(a: number, op: string, b: number): { scratch: string; answer: number } {
  const da = String(a).split('').reverse().map(Number);
  const db = String(b).split('').reverse().map(Number);
  const two = (n: number) => String(n).padStart(2, '0');
  const steps: string[] = [];
  const digits: number[] = [];
  let top = 0;
  const n = op === '+' ? Math.max(da.length, db.length) : da.length;
  for (let i = 0; i < n; i++) {
    const x = da[i] ?? 0;
    const y = op === '*' ? b : (db[i] ?? 0);
    if (op === '-') {
      const r = x - y < 0 ? x - y + 10 : x - y;
      steps.push(`${x}-${y}-0=${r}${x - y < 0 ? 1 : 0}`);
      digits.push(r);
    } else {
      const s = op === '+' ? x + y : x * y;
      steps.push(`${x}${op}${y}+0=${two(s)}`);
      digits.push(s % 10);
      if (i === n - 1) top = Math.floor(s / 10);
    }
  }
  const answer = Number(String(top || '') + digits.reverse().join(''));
  return { scratch: steps.join(','), answer };
}

/** The integer after the last ";" (null when missing or malformed). */
export function extractArithAnswer(response: string): string | null {
  const i = response.lastIndexOf(';');
  if (i < 0) return null;
  const m = /^-?\d+/.exec(response.slice(i + 1).trim());
  return m ? String(Number(m[0])) : null;
}

/** 1 when the integer after the last `;` is the gold answer (arith, scratchpad), with the extracted answer. */
export const arithAnswerReward: RewardFunction = {
  name: 'correct',
  async score({ response, item }) {
    const got = extractArithAnswer(response);
    return single('correct', got !== null && got === item.answer ? 1 : 0, { extracted: got });
  },
};

function randomOperand(rng: Rng, digits: number): number {
  if (digits <= 1) return rng.int(10);
  return rng.intRange(10 ** (digits - 1), 10 ** digits - 1);
}

/** minDigits + the number of successive heads of a fair coin, capped at maxDigits. */
function geometricDigits(rng: Rng, minDigits: number, maxDigits: number): number {
  let d = minDigits;
  while (d < maxDigits && rng.next() < 0.5) d++;
  return d;
}

export function arithTask(options: ArithOptions = {}): Task {
  const maxDigits = options.digits ?? 3;
  const minDigits = options.minDigits ?? 1;
  const ops = options.ops ?? ['+', '-', '*'];
  const teacherErrorRate = options.teacherErrorRate ?? 0;
  const geometric = options.digitsDistribution === 'geometric';
  const reward = arithAnswerReward;
  const makeItem = (rng: Rng): TaskItem => {
    const op = ops[rng.int(ops.length)];
    const d = geometric ? geometricDigits(rng, minDigits, maxDigits) : rng.intRange(minDigits, maxDigits);
    let a = randomOperand(rng, d);
    let b = op === '*' ? rng.intRange(2, 9) : randomOperand(rng, rng.intRange(1, d));
    if (op === '-' && b > a) [a, b] = [b, a];
    const prompt = `${a}${op}${b}=`;
    const { scratch, answer } = arithSolution(a, op, b);
    // the careless teacher is chosen by a hash of the problem, so items and their order do not change
    const careless = teacherErrorRate > 0 && hashString(`teacher/${prompt}`) / 4294967296 < teacherErrorRate;
    const shown = careless ? arithSolution(a, op, b, { dropCarries: true }) : { scratch, answer };
    return {
      id: prompt,
      prompt,
      answer: String(answer),
      demonstration: `${shown.scratch};${shown.answer}`,
      difficulty: d,
    };
  };
  return {
    name: 'arith',
    description: `integer ${ops.join(' ')} with ${minDigits}..${maxDigits}-digit operands and a column scratchpad`,
    reward,
    extractAnswer: extractArithAnswer,
    demonstration: (item) => item.demonstration ?? '',
    makeItems(split: Split, count: number, seed: number): TaskItem[] {
      // test items: hash bucket 0 of 5; train: the other buckets. Same seed → same items.
      return drawSplit('arith', split, count, seed, (rng) => makeItem(rng));
    },
  };
}
