/**
 * A less circular audit of the math verifier on GSM8K than "each solution verifies against its own
 * `#### N`" (where gold and prediction are read from the same line):
 *  - text self-verify: the solution WITHOUT its `#### N` line (and without the `<<a*b=c>>` calculator
 *    annotations) must still verify against N. The verifier deliberately has no last-number
 *    fallback, so this module picks the answer out itself: the LAST STATED NUMBER of the text, with
 *    a currency sign written before it and a unit word or `%` written after it ("$200,000",
 *    "540 meters", "20 cups"). The audit thus tests the verifier's equivalence (currency, units,
 *    thousands separators, decimals), not its extraction.
 *  - mutants: the final answer changed to N+1, to N·10, and with its sign flipped (a minus dropped
 *    where N < 0, added where N > 0), each written once with the original unit word and once with a
 *    different unit word. The number is changed both in the `#### ` line and in the last stated
 *    number; a mutant is rejected when neither the reward path (`verifyMath` on the mutated
 *    solution) nor the text check accepts it. All must be rejected.
 * A unit word alone never decides a verdict: GSM8K gold answers are bare numbers and the verifier
 * ignores units by design, so a correct number with another unit word is accepted (reported apart).
 */
import { goldAnswer } from './extract.js';
import { verifyMath } from './reward.js';

/** The last number stated in a text, with the currency sign / unit word around it. */
export interface StatedNumber {
  /** The number as written ("200,000", "-3", "2.5"). */
  number: string;
  /** The number with its currency sign and unit word ("$200,000", "540 meters"). */
  text: string;
  /** The unit word after the number, if any. */
  unit: string | null;
  /** [start, end) of `text` in the searched string. */
  start: number;
  end: number;
}

export type MutantKind = 'plus_one' | 'times_ten' | 'sign_flip';

export interface Mutant {
  kind: MutantKind;
  /** True for the variant written with a different unit word. */
  otherUnit: boolean;
  /** The mutated final answer value. */
  value: string;
  /** The mutated solution, with its `#### ` line. */
  solution: string;
}

export interface Gsm8kAuditFailure {
  index: number;
  gold: string;
  stated: string | null;
  mutant?: string;
}

export interface Gsm8kAuditReport {
  rows: number;
  /** Share of solutions whose text without `#### N` verifies against N. */
  textSelfVerify: number;
  /** Share of mutants scored 0. */
  mutantsRejected: number;
  mutants: number;
  mutantsByKind: Record<string, { rejected: number; total: number }>;
  /** Share of rows where the correct number with a different unit word is still accepted (info). */
  otherUnitAccepted: number;
  failures: { text: Gsm8kAuditFailure[]; mutants: Gsm8kAuditFailure[] };
}

/** Words after a number that are not units ("5 of them", "3 and 4"). */
const NOT_UNITS = new Set([
  'and',
  'the',
  'for',
  'per',
  'each',
  'every',
  'than',
  'from',
  'with',
  'are',
  'was',
  'were',
  'more',
  'less',
  'left',
  'total',
  'times',
  'that',
  'this',
  'which',
  'who',
  'when',
  'after',
  'before',
  'over',
  'into',
  'out',
  'off',
  'now',
  'all',
  'but',
  'not',
  'into',
  'since',
]);
/** Unit words used for the "different unit word" mutants. */
const OTHER_UNITS = ['apples', 'hours', 'dollars', 'meters'];

/** The solution without its `#### N` line(s) and `<<...>>` calculator annotations. */
export function stripFinalAnswerLine(solution: string): string {
  return solution
    .replace(/<<[^<>]*>>/g, '')
    .replace(/^\s*####.*$/gm, '')
    .trimEnd();
}

const NUMBER = /(?<![\w.,])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\w])/g;

/** The last number stated in `text` (see the file comment), or null. */
export function lastStatedNumber(text: string): StatedNumber | null {
  let last: RegExpExecArray | null = null;
  let m: RegExpExecArray | null;
  NUMBER.lastIndex = 0;
  while ((m = NUMBER.exec(text)) !== null) last = m;
  if (!last) return null;
  let start = last.index;
  let end = start + last[0].length;
  const before = text.slice(0, start);
  const currency = /(?:\\?\$|[€£¥])\s?$/.exec(before);
  if (currency) start -= currency[0].length;
  const after = text.slice(end);
  let unit: string | null = null;
  const pct = /^\s?%/.exec(after);
  if (pct) end += pct[0].length;
  else {
    const word = /^\s+([a-zA-Z]{3,})\b/.exec(after);
    if (word && !NOT_UNITS.has(word[1].toLowerCase())) {
      unit = word[1];
      end += word[0].length;
    }
  }
  return { number: last[0], text: text.slice(start, end), unit, start, end };
}

/** Decimal places of a written number. */
function decimals(n: string): number {
  const m = /\.(\d+)$/.exec(n);
  return m ? m[1].length : 0;
}

/** Formats `v` with `d` decimals, with thousands commas when `commas`. */
function format(v: number, d: number, commas: boolean): string {
  const s = v.toFixed(d);
  if (!commas) return s;
  const [int, frac] = s.split('.');
  const sign = int.startsWith('-') ? '-' : '';
  const digits = int.replace('-', '').replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return sign + digits + (frac ? `.${frac}` : '');
}

/** The mutated answer values of N (N+1, N·10, sign flipped; the last two skipped for N = 0). */
export function mutatedValues(gold: string): Array<{ kind: MutantKind; value: number }> {
  const n = Number(gold.replace(/,/g, ''));
  if (!Number.isFinite(n)) return [];
  const d = decimals(gold);
  const round = (v: number) => Number(v.toFixed(d));
  const out: Array<{ kind: MutantKind; value: number }> = [{ kind: 'plus_one', value: round(n + 1) }];
  if (n !== 0) out.push({ kind: 'times_ten', value: round(n * 10) }, { kind: 'sign_flip', value: -n });
  return out;
}

/** A unit word different from `unit` (case-insensitive). */
function otherUnit(unit: string | null): string {
  return OTHER_UNITS.find((u) => u !== unit?.toLowerCase()) ?? 'apples';
}

/** The mutants of one GSM8K solution (empty when its text states no number). */
export function mutateSolution(solution: string, gold: string): Mutant[] {
  const text = stripFinalAnswerLine(solution);
  const stated = lastStatedNumber(text);
  if (!stated) return [];
  const out: Mutant[] = [];
  for (const { kind, value } of mutatedValues(gold)) {
    // The text keeps its own style (thousands commas); the `#### ` line is a bare number, as in GSM8K.
    const written = format(value, decimals(gold), stated.number.includes(','));
    const bare = format(value, decimals(gold), false);
    for (const other of [false, true]) {
      const unit = other ? otherUnit(stated.unit) : stated.unit;
      const head = text.slice(0, stated.start) + stated.text.replace(stated.number, written);
      const body =
        (other
          ? head.replace(stated.unit ? new RegExp(`${stated.unit}$`) : /$/, stated.unit ? unit! : ` ${unit}`)
          : head) + text.slice(stated.end);
      out.push({ kind, otherUnit: other, value: bare, solution: `${body}\n#### ${bare}${other ? ` ${unit}` : ''}` });
    }
  }
  return out;
}

/** Does the solution text, without its `#### N` line, verify against the gold answer? */
export function textSelfVerify(solution: string, gold: string): { ok: boolean; stated: StatedNumber | null } {
  const stated = lastStatedNumber(stripFinalAnswerLine(solution));
  return { ok: stated !== null && verifyMath(stated.text, gold).correct, stated };
}

/** 1 when either the reward path or the text check accepts the (mutated) solution, else 0. */
export function auditScore(solution: string, gold: string): number {
  return verifyMath(solution, gold).correct || textSelfVerify(solution, gold).ok ? 1 : 0;
}

/** Runs both checks over GSM8K rows (`answer` = solution ending in `#### N`). */
export function auditGsm8k(rows: ReadonlyArray<{ answer: string }>, maxFailures = 20): Gsm8kAuditReport {
  const failures: Gsm8kAuditReport['failures'] = { text: [], mutants: [] };
  const byKind: Gsm8kAuditReport['mutantsByKind'] = {};
  let textOk = 0;
  let mutants = 0;
  let rejected = 0;
  let unitRows = 0;
  let unitOk = 0;
  rows.forEach((row, index) => {
    const gold = goldAnswer(row.answer) ?? '';
    const t = textSelfVerify(row.answer, gold);
    if (t.ok) textOk++;
    else if (failures.text.length < maxFailures) failures.text.push({ index, gold, stated: t.stated?.text ?? null });
    const text = stripFinalAnswerLine(row.answer);
    const stated = lastStatedNumber(text);
    if (t.ok && stated) {
      // The correct number with another unit word: accepted, since units never decide (info only).
      unitRows++;
      const swapped = stated.unit
        ? stated.text.replace(new RegExp(`${stated.unit}$`), otherUnit(stated.unit))
        : `${stated.text} ${otherUnit(null)}`;
      if (verifyMath(swapped, gold).correct) unitOk++;
    }
    for (const m of mutateSolution(row.answer, gold)) {
      mutants++;
      const key = m.otherUnit ? `${m.kind}+other_unit` : m.kind;
      const entry = (byKind[key] ??= { rejected: 0, total: 0 });
      entry.total++;
      if (auditScore(m.solution, gold) === 0) {
        rejected++;
        entry.rejected++;
      } else if (failures.mutants.length < maxFailures) {
        failures.mutants.push({
          index,
          gold,
          stated: stated?.text ?? null,
          mutant: `${key}: ${m.solution.slice(-120)}`,
        });
      }
    }
  });
  const rate = (a: number, b: number) => (b ? a / b : 0);
  return {
    rows: rows.length,
    textSelfVerify: rate(textOk, rows.length),
    mutantsRejected: rate(rejected, mutants),
    mutants,
    mutantsByKind: byKind,
    otherUnitAccepted: rate(unitOk, unitRows),
    failures,
  };
}
