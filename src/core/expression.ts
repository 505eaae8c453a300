/**
 * A safe arithmetic-expression evaluator (the countdown and closest tasks' answers, the calculator
 * tool): integers, + − × ÷ (also "x", "*", "/"), parentheses, unary minus. Own tokenizer and recursive-descent parser — no eval. Returns the
 * value as an exact rational (numerator/denominator) and the list of integer literals used, or an
 * error string. Bounded: expressions longer than 200 characters are rejected.
 */

export type ExprResult = { ok: true; num: bigint; den: bigint; literals: number[] } | { ok: false; error: string };

type Token = { kind: 'num'; value: bigint; text: string } | { kind: 'op'; value: string };

function tokenize(text: string): Token[] | string {
  const out: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const ch = text[i];
    if (ch === ' ') {
      i++;
    } else if (/[0-9]/.test(ch)) {
      let j = i;
      while (j < text.length && /[0-9]/.test(text[j])) j++;
      if (j - i > 9) return `number too long at ${i}`;
      out.push({ kind: 'num', value: BigInt(text.slice(i, j)), text: text.slice(i, j) });
      i = j;
    } else if ('+-*/x×÷()'.includes(ch)) {
      const op = ch === 'x' || ch === '×' ? '*' : ch === '÷' ? '/' : ch;
      out.push({ kind: 'op', value: op });
      i++;
    } else {
      return `unexpected character ${JSON.stringify(ch)} at ${i}`;
    }
  }
  return out;
}

interface Rational {
  num: bigint;
  den: bigint;
}

function gcd(a: bigint, b: bigint): bigint {
  a = a < 0n ? -a : a;
  b = b < 0n ? -b : b;
  while (b) [a, b] = [b, a % b];
  return a;
}

function make(num: bigint, den: bigint): Rational {
  if (den < 0n) [num, den] = [-num, -den];
  const g = gcd(num, den) || 1n;
  return { num: num / g, den: den / g };
}

export function evaluateExpression(text: string): ExprResult {
  if (text.length > 200) return { ok: false, error: 'expression longer than 200 characters' };
  const tokens = tokenize(text);
  if (typeof tokens === 'string') return { ok: false, error: tokens };
  if (!tokens.length) return { ok: false, error: 'empty expression' };
  let pos = 0;
  const literals: number[] = [];
  const peek = () => tokens[pos];
  const fail = (msg: string): never => {
    throw new Error(msg);
  };
  const primary = (depth: number): Rational => {
    if (depth > 50) fail('nesting too deep');
    const t = tokens[pos++];
    if (!t) return fail('unexpected end');
    if (t.kind === 'num') {
      literals.push(Number(t.value));
      return { num: t.value, den: 1n };
    }
    if (t.value === '(') {
      const v = sum(depth + 1);
      const close = tokens[pos++];
      if (!close || close.kind !== 'op' || close.value !== ')') fail('missing )');
      return v;
    }
    if (t.value === '-') {
      const v = primary(depth + 1);
      return { num: -v.num, den: v.den };
    }
    return fail(`unexpected ${t.value}`);
  };
  const product = (depth: number): Rational => {
    let v = primary(depth);
    for (let t = peek(); t && t.kind === 'op' && (t.value === '*' || t.value === '/'); t = peek()) {
      pos++;
      const r = primary(depth);
      if (t.value === '*') v = make(v.num * r.num, v.den * r.den);
      else {
        if (r.num === 0n) fail('division by zero');
        v = make(v.num * r.den, v.den * r.num);
      }
    }
    return v;
  };
  const sum = (depth: number): Rational => {
    let v = product(depth);
    for (let t = peek(); t && t.kind === 'op' && (t.value === '+' || t.value === '-'); t = peek()) {
      pos++;
      const r = product(depth);
      v =
        t.value === '+'
          ? make(v.num * r.den + r.num * v.den, v.den * r.den)
          : make(v.num * r.den - r.num * v.den, v.den * r.den);
    }
    return v;
  };
  try {
    const v = sum(0);
    if (pos !== tokens.length) return { ok: false, error: `unexpected trailing input at token ${pos}` };
    return { ok: true, num: v.num, den: v.den, literals };
  } catch (error) {
    return { ok: false, error: (error as Error).message };
  }
}
