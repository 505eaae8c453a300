/**
 * `scratchpad`: long multiplication (a × b, b of 1–3 digits) written one step per line, 60–200 characters,
 * so that a program can name the first wrong step (`firstWrongStep`) while the verifier reads the final
 * answer only. Every line is a function of the problem and the lines written before it, so each step is
 * checked on its own: a column "x*y+c=ss" takes its carry c from the previous line's ss.
 * The careless teacher drops a carry (the error propagates to the answer); a separate share of
 * demonstrations writes a wrong carry on one line but the right result (a flawed positive). It does not
 * grade partial credit: a step is right or wrong.
 */
import { DataError } from '../core/errors.js';
import { Rng, hashString } from '../core/rng.js';
import { drawSplit } from './split.js';
import type { TaskItem } from '../core/types.js';
import { arithAnswerReward, extractArithAnswer } from './arith.js';
import type { Split, Task } from './types.js';

export interface ScratchpadOptions {
  /** Maximum digits of the multiplicand a. */
  digits?: number;
  /** Minimum digits of a (drawn uniformly from minDigits..digits). */
  minDigits?: number;
  /** Digits of the multiplier b (1: no addition phase). */
  multiplierDigits?: number;
  /** Share of demonstrations with one dropped carry that propagates (the answer shown is wrong). */
  teacherErrorRate?: number;
  /** Share of demonstrations with one wrong carry on a line whose result is right (the answer is right). */
  flawedCorrectRate?: number;
}

/** One expected line: its text and, for a column step, its parts (so a slip can rewrite the carry). */
interface Step {
  text: string;
  column?: { terms: string; value: number; carry: number };
}

const two = (n: number) => String(n).padStart(2, '0');
const digitsOf = (n: number) => String(n).split('').reverse().map(Number);
const column = (terms: string, value: number, carry: number): Step => ({
  text: `${terms}+${carry}=${two(value + carry)}`,
  column: { terms, value, carry },
});
/** The carry a column passes on: the tens of the result written after "=". */
const carryOut = (line: string) => Math.floor(Number(line.slice(line.indexOf('=') + 1)) / 10);
/** The number a run of written columns spells: the top column's tens, then each column's units. */
function columnsNumber(columns: readonly string[]): string {
  const values = columns.map((c) => Number(c.slice(c.indexOf('=') + 1)));
  const top = Math.floor(values[values.length - 1] / 10);
  return (
    (top > 0 ? String(top) : '') +
    values
      .map((v) => v % 10)
      .reverse()
      .join('')
  );
}

/**
 * The line expected at index `prior.length` given the lines written so far (null: the scratchpad is
 * complete). Layout: for each digit b_j of b (from the right) a row of columns "a_i*b_j+c=ss" and the
 * row's value shifted by j zeros; then (b of 2+ digits) columns adding the row values "r0_i+r1_i+c=ss";
 * then ";answer". `prior` must hold well-formed lines (each equal to what this function expected).
 */
function expectedStep(a: number, b: number, prior: readonly string[]): Step | null {
  const da = digitsOf(a),
    db = digitsOf(b);
  const k = prior.length,
    rowLength = da.length + 1;
  if (k < db.length * rowLength) {
    const j = Math.floor(k / rowLength),
      i = k % rowLength;
    if (i < da.length) return column(`${da[i]}*${db[j]}`, da[i] * db[j], i === 0 ? 0 : carryOut(prior[k - 1]));
    return { text: columnsNumber(prior.slice(k - da.length, k)) + '0'.repeat(j) };
  }
  const rows = db.map((_, j) => prior[j * rowLength + da.length]);
  if (db.length === 1) return k === rowLength ? { text: `;${Number(rows[0])}` } : null;
  const addStart = db.length * rowLength,
    width = Math.max(...rows.map((r) => r.length)),
    i = k - addStart;
  if (i < width) {
    const digits = rows.map((r) => Number(r[r.length - 1 - i] ?? 0));
    const value = digits.reduce((s, d) => s + d, 0);
    return column(digits.join('+'), value, i === 0 ? 0 : carryOut(prior[k - 1]));
  }
  if (i === width) return { text: `;${Number(columnsNumber(prior.slice(addStart, k)))}` };
  return null;
}

/** A slip at one column step: a dropped (or spurious) carry that propagates, or a wrong carry with the right result. */
export interface Slip {
  kind: 'dropped_carry' | 'flawed_correct';
  /** Line index (0-based) of the slip. */
  step: number;
}

/** The scratchpad lines of a × b, correct, or with `slip` (the lines after it computed from what was written). */
export function scratchpadLines(a: number, b: number, slip?: Slip): string[] {
  const lines: string[] = [];
  for (let step = expectedStep(a, b, lines); step; step = expectedStep(a, b, lines)) {
    const c = step.column;
    if (slip && lines.length === slip.step && c) {
      const written = c.carry > 0 ? 0 : 1;
      const result = slip.kind === 'dropped_carry' ? c.value + written : c.value + c.carry;
      lines.push(`${c.terms}+${written}=${two(result)}`);
    } else lines.push(step.text);
  }
  return lines;
}

/** Steps where a slip can fall: columns with a carry in (none: every column after the first). */
function slipCandidates(a: number, b: number): number[] {
  const lines = scratchpadLines(a, b);
  const columns = lines.flatMap((line, k) => (/^\d.*\+\d=\d\d$/.test(line) && k > 0 ? [k] : []));
  const carried = columns.filter((k) => /\+[1-9]=/.test(lines[k]));
  return carried.length ? carried : columns;
}

/** The operands of a "a*b=" prompt (a DataError naming the item when it is not one). */
function operands(item: TaskItem): [number, number] {
  const m = /^(\d+)\*(\d+)=$/.exec(item.prompt);
  if (!m)
    throw new DataError(
      `scratchpad item ${JSON.stringify(item.id)}: prompt is not "a*b="`,
      undefined,
      undefined,
      'prompt',
    );
  return [Number(m[1]), Number(m[2])];
}

const LINE = /^(\d(?:[*+]\d)+\+\d+=\d+|\d+|;-?\d+)$/;

/**
 * Index (0-based line) of the first step that does not follow from the problem and the lines before it;
 * null when every step is right; −1 when the response is not a scratchpad (a line outside the grammar,
 * or no ";answer" as its last line). Missing or extra lines count as wrong at the first one.
 */
export function firstWrongStep(item: TaskItem, response: string): number | null {
  const [a, b] = operands(item);
  const lines = response.replace(/\n+$/, '').split('\n');
  if (!lines.every((line) => LINE.test(line)) || !lines[lines.length - 1].startsWith(';')) return -1;
  for (let k = 0; k <= lines.length; k++) {
    const step = expectedStep(a, b, lines.slice(0, k));
    if (k === lines.length) return step ? k : null;
    if (!step || lines[k] !== step.text) return k;
  }
  return null;
}

function operand(rng: Rng, digits: number): number {
  return rng.intRange(10 ** (digits - 1), 10 ** digits - 1);
}

export function scratchpadTask(options: ScratchpadOptions = {}): Task {
  const maxDigits = options.digits ?? 3;
  const minDigits = options.minDigits ?? 2;
  const multiplierDigits = options.multiplierDigits ?? 2;
  const errorRate = options.teacherErrorRate ?? 0;
  const flawedRate = options.flawedCorrectRate ?? 0;
  const reward = arithAnswerReward;
  const makeItem = (rng: Rng): TaskItem => {
    const d = rng.intRange(minDigits, maxDigits);
    const a = operand(rng, d),
      b = operand(rng, multiplierDigits);
    const prompt = `${a}*${b}=`;
    // which teacher writes the demonstration is a hash of the problem, so items and their order never change
    const u = hashString(`teacher/${prompt}`) / 4294967296;
    const kind: Slip['kind'] | undefined =
      u < errorRate ? 'dropped_carry' : u < errorRate + flawedRate ? 'flawed_correct' : undefined;
    const candidates = kind ? slipCandidates(a, b) : [];
    const step = candidates[hashString(`slip/${prompt}`) % Math.max(1, candidates.length)];
    const slip: Slip | undefined = kind ? { kind, step } : undefined;
    return {
      id: prompt,
      prompt,
      answer: String(a * b),
      demonstration: scratchpadLines(a, b, slip).join('\n'),
      difficulty: d,
      meta: { teacher: kind ?? 'correct' },
    };
  };
  return {
    name: 'scratchpad',
    description: `${minDigits}..${maxDigits}-digit × ${multiplierDigits}-digit long multiplication, one step per line`,
    reward,
    extractAnswer: extractArithAnswer,
    firstWrongStep,
    demonstration: (item) => item.demonstration ?? '',
    makeItems(split: Split, count: number, seed: number): TaskItem[] {
      // test items: hash bucket 0 of 5; train: the other buckets. Same seed → same items.
      return drawSplit('scratchpad', split, count, seed, (rng) => makeItem(rng));
    },
  };
}
