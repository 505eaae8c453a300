/**
 * `closest`: a graded task for contrastive prompting (CUDA-L1, arXiv 2507.14111). Prompt
 * "3 5 7 ~ 50:"; the answer is an expression over the given numbers (each at most once, + − × ÷) whose
 * value is as close as possible to the target, which need not be reachable. The score is graded in
 * [0, 1]: (1 + dBest/width) / (1 + d/width), d = |value − target|, dBest the best an exhaustive search
 * reaches (1 = as close as the best); 0 for an invalid expression. It does not reward brevity.
 */
import { Rng } from '../core/rng.js';
import { drawSplit } from './split.js';
import type { TaskItem } from '../core/types.js';
import { single, type RewardFunction } from '../filter/types.js';
import { extractCountdownAnswer } from './countdown.js';
import { evaluateExpression } from '../core/expression.js';
import type { Split, Task } from './types.js';

export interface ClosestOptions {
  /** How many numbers (2..4). */
  count: number;
  /** Numbers are drawn from 1..maxNumber. */
  maxNumber: number;
  /** Targets are drawn from 1..maxTarget. */
  maxTarget: number;
  /** Distance at which the score halves relative to the best reachable (same units as the target). */
  width: number;
}

/** What an item's grader needs: the numbers, the target and the best reachable distance. */
export interface ClosestMeta {
  numbers: number[];
  target: number;
  best: number;
}

/** A grading: the score in [0, 1], the expression's value (undefined when invalid) and why. */
export interface ClosestGrade {
  score: number;
  value?: number;
  reason: string;
}

/** Grade an expression: 0 when it does not parse or uses a number not given (or twice), else the closeness score. */
export function gradeClosest(expression: string, meta: ClosestMeta, width: number): ClosestGrade {
  const r = evaluateExpression(expression.trim());
  if (!r.ok) return { score: 0, reason: r.error };
  const pool = meta.numbers.slice();
  for (const literal of r.literals) {
    const i = pool.indexOf(literal);
    if (i < 0) return { score: 0, reason: `number ${literal} not available (or used twice)` };
    pool.splice(i, 1);
  }
  const value = Number(r.num) / Number(r.den);
  const distance = Math.abs(value - meta.target);
  // a rational intermediate (7/2*4) can beat the integer-only search: clip at 1
  const score = Math.min(1, (1 + meta.best / width) / (1 + distance / width));
  return { score, value, reason: `value ${value} at distance ${distance} (best ${meta.best})` };
}

type Term = { value: number; text: string; op: '' | '+' | '-' | '*' | '/' };

/** `a op b` with the parentheses precedence needs: an additive operand under × ÷, a composite right of ÷ or −. */
function combine(a: Term, b: Term, op: Term['op'], value: number): Term {
  const additive = (t: Term) => t.op === '+' || t.op === '-';
  const left = (op === '*' || op === '/') && additive(a) ? `(${a.text})` : a.text;
  const wrapRight = op === '/' ? b.op !== '' : op === '*' || op === '-' ? additive(b) : false;
  return { value, text: `${left}${op}${wrapRight ? `(${b.text})` : b.text}`, op };
}

/**
 * The closest expression by exhaustive search over subsets and orders (integer, positive intermediates,
 * exact divisions only); ties go to the shorter text, then to the first found.
 */
export function closestExpression(numbers: number[], target: number): { text: string; value: number } {
  let best: Term = { value: numbers[0], text: String(numbers[0]), op: '' };
  const consider = (t: Term) => {
    const d = Math.abs(t.value - target);
    const bestD = Math.abs(best.value - target);
    if (d < bestD || (d === bestD && t.text.length < best.text.length)) best = t;
  };
  const search = (terms: Term[]) => {
    for (const t of terms) consider(t);
    for (let i = 0; i < terms.length; i++)
      for (let j = 0; j < terms.length; j++) {
        if (i === j) continue;
        const [a, b] = [terms[i], terms[j]];
        const rest = terms.filter((_, k) => k !== i && k !== j);
        const options: Array<[Term['op'], number]> = [];
        if (i < j) options.push(['+', a.value + b.value], ['*', a.value * b.value]);
        if (a.value - b.value > 0) options.push(['-', a.value - b.value]);
        if (b.value > 1 && a.value % b.value === 0) options.push(['/', a.value / b.value]);
        for (const [op, value] of options) search([...rest, combine(a, b, op, value)]);
      }
  };
  search(numbers.map((n) => ({ value: n, text: String(n), op: '' })));
  return { text: best.text, value: best.value };
}

export function closestTask(options: ClosestOptions): Task {
  const { count, maxNumber, maxTarget, width } = options;
  const reward: RewardFunction = {
    name: 'closeness',
    async score({ response, item }) {
      const grade = gradeClosest(extractCountdownAnswer(response), item.meta as unknown as ClosestMeta, width);
      return single('closeness', grade.score, { reason: grade.reason });
    },
  };
  const makeItem = (rng: Rng): TaskItem => {
    const numbers = Array.from({ length: count }, () => rng.intRange(1, maxNumber));
    const target = rng.intRange(1, maxTarget);
    const found = closestExpression(numbers, target);
    const prompt = `${numbers.join(' ')} ~ ${target}:`;
    const meta: ClosestMeta = { numbers, target, best: Math.abs(found.value - target) };
    return { id: prompt, prompt, answer: String(found.value), demonstration: found.text, meta: { ...meta } };
  };
  return {
    name: 'closest',
    description: `an expression over ${count} numbers in 1..${maxNumber} closest to a target ≤ ${maxTarget}`,
    reward,
    extractAnswer: (response) => {
      const grade = evaluateExpression(extractCountdownAnswer(response));
      return grade.ok ? `${grade.num}/${grade.den}` : null;
    },
    demonstration: (item) => item.demonstration ?? '',
    makeItems(split: Split, n: number, seed: number): TaskItem[] {
      return drawSplit('closest', split, n, seed, (rng) => makeItem(rng));
    },
  };
}
