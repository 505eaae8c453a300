/**
 * Math answer equivalence. Both answers are normalized (normalize.ts); equal strings match. Otherwise
 * each is parsed into a structured value and compared:
 *  - numbers/expressions: evaluated (expr.ts) — constants compared with a relative tolerance
 *    (default 1e-4; two integer values must be equal exactly); expressions with variables compared at 6 seeded random points (same variable
 *    set required). Percent rule (as Math-Verify): `50\%` equals both 50 and 0.5.
 *    A plain decimal prediction with ≥ 2 decimals also matches the gold rounded to that precision.
 *  - tuples `(a,b)` and intervals `[a,b)`: ordered, bracket kinds must match;
 *  - sets `\{a,b\}` and bare comma lists `a, b`: order-insensitive; a set vs a tuple is compared in
 *    the written order;
 *  - unions `A \cup B`: order-insensitive parts;  matrices (`pmatrix`, `bmatrix`, `array`...): elementwise,
 *    after evaluating written-out matrix sums and products (`A + B`, `A B`, `2A - B`);
 *  - `;`-separated solutions that each assign several unknowns (`p=5,q=2;p=7,q=2`) are tuples;
 *  - relations: `x=3` vs `3` (named left side dropped; a chain `a = b = c` is its last side; an
 *    equation between constants against a value is its last side), an equation against its
 *    solved form (`2x+4y-3=0` vs `y=-\frac12x+\frac34`), equations `L=R` vs `L'=R'` when L−R is a
 *    nonzero multiple of L'−R', inequalities when the difference is a positive multiple (`5 >= x`
 *    equals `x <= 5`), chained `a < x <= b` becomes the interval `(a, b]`;
 *  - anything else: case-insensitive text equality.
 * Answers longer than 1000 characters after normalization only match as equal strings.
 * Never throws; deterministic.
 */
import { Rng, hashString } from '../../core/rng.js';
import { evaluate, parseExpression, variables, type Node } from './expr.js';
import { isNameLike, normalizeDetailed, topLevelIndices } from './normalize.js';

export interface EquivalenceOptions {
  /** Relative tolerance for numeric comparison (default 1e-4). */
  tolerance?: number;
}

type Value =
  | { k: 'expr'; node: Node; percent: boolean; src: string }
  | { k: 'text'; s: string }
  | { k: 'seq'; kind: 'set' | 'list' | 'tuple'; open: string; close: string; items: Value[] }
  | { k: 'union'; parts: Value[] }
  | { k: 'matrix'; rows: Value[][] }
  | { k: 'rel'; ops: string[]; sides: Node[] };

const REL_RE = /<=|>=|!=|=|<|>/g;

function splitTop(s: string, seps: string): string[] {
  const idx = topLevelIndices(s, seps);
  if (!idx.length) return [s];
  const out: string[] = [];
  let prev = 0;
  for (const i of idx) {
    out.push(s.slice(prev, i));
    prev = i + 1;
  }
  out.push(s.slice(prev));
  return out;
}

/** If the whole string is one bracket group, its [open, inner, close]. */
function wrapped(s: string): [string, string, string] | null {
  let open: string;
  let start: number;
  if (s.startsWith('\\{')) {
    open = '{';
    start = 2;
  } else if ('([{'.includes(s[0] ?? '')) {
    open = s[0];
    start = 1;
  } else return null;
  let depth = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === '\\' && (s[i + 1] === '{' || s[i + 1] === '}')) {
      depth += s[i + 1] === '{' ? 1 : -1;
      if (depth === 0) return i + 2 === s.length ? [open, s.slice(start, i), '}'] : null;
      i++;
      continue;
    }
    if ('([{'.includes(c)) depth++;
    else if (')]}'.includes(c)) {
      depth--;
      if (depth === 0) return i + 1 === s.length ? [open, s.slice(start, i), c] : null;
    }
  }
  return null;
}

function parseMatrix(s: string): Value | null {
  const m = /^\(?\\begin\{(pmatrix|bmatrix|vmatrix|Bmatrix|matrix|array)\}(\{[^{}]*\})?([\s\S]*)\\end\{\1\}\)?$/.exec(
    s.replace(/^\[(\\begin)/, '$1').replace(/(\\end\{array\})\]$/, '$1'),
  );
  // One matrix literal only (`A + B` spans two; parseMatrixExpr evaluates it).
  if (!m || /\\(?:begin|end)\{/.test(m[3])) return null;
  const rows = m[3]
    .split(/\\\\/)
    .map((r) => r.trim())
    .filter((r) => r.length);
  const parsed = rows.map((r) => r.split('&').map((c) => parseValue(c, false)));
  if (!parsed.length || parsed.some((r) => r.length !== parsed[0].length)) return null;
  return { k: 'matrix', rows: parsed };
}

const MATRIX_RE = /\\begin\{(pmatrix|bmatrix|Bmatrix|matrix|array)\}(\{[^{}]*\})?([\s\S]*?)\\end\{\1\}/g;

type Cells = Node[][];

/** Cells of one matrix literal's body as expressions, or null when a cell is not one. */
function matrixCells(body: string): Cells | null {
  const rows = body
    .split(/\\\\/)
    .map((r) => r.trim())
    .filter((r) => r.length);
  try {
    const cells = rows.map((r) => r.split('&').map((c) => parseExpression(c)));
    if (!cells.length || cells.some((r) => r.length !== cells[0].length)) return null;
    return cells;
  } catch {
    return null;
  }
}

const mul = (a: Node, b: Node): Node => ({ k: 'bin', op: '*', a, b });
const add = (a: Node, b: Node): Node => ({ k: 'bin', op: '+', a, b });

function matMul(a: Cells, b: Cells): Cells | null {
  if (a[0].length !== b.length) return null;
  return a.map((row) => b[0].map((_, j) => row.map((x, k) => mul(x, b[k][j])).reduce(add)));
}

/**
 * Matrix arithmetic written out: sums, differences and products of matrix literals with optional
 * scalar coefficients (`A + B`, `A B`, `A \cdot B`, `2A - B`). The result is one matrix whose cells
 * are the (symbolic) entries, so it compares elementwise with a written-out matrix. Null when the
 * text is not such an expression (or holds a single plain matrix, which parseMatrix handles).
 */
function parseMatrixExpr(s: string): Value | null {
  const found = [...s.matchAll(MATRIX_RE)];
  if (!found.length) return null;
  const gaps: string[] = [];
  let prev = 0;
  const mats: Cells[] = [];
  for (const m of found) {
    gaps.push(s.slice(prev, m.index));
    prev = m.index! + m[0].length;
    const cells = matrixCells(m[3]);
    if (!cells) return null;
    mats.push(cells);
  }
  if (s.slice(prev).trim()) return null;
  if (mats.length === 1 && !gaps[0].trim()) return null;
  const MULT = /^(?:\\cdot|\\times|\*)?$/;
  const coefficient = (text: string, negative: boolean): Node | null => {
    const t = text.replace(/(?:\\cdot|\\times|\*)$/, '').trim();
    let n: Node = { k: 'num', v: 1 };
    if (t) {
      try {
        n = parseExpression(t);
      } catch {
        return null;
      }
    }
    return negative ? { k: 'neg', a: n } : n;
  };
  let total: Cells | null = null;
  let term: Cells | null = null;
  let coef: Node | null = null;
  const flush = (): boolean => {
    if (!term || !coef) return false;
    const c = coef;
    const scaled = term.map((r) => r.map((x) => mul(c, x)));
    if (!total) total = scaled;
    else {
      const t: Cells = total;
      if (t.length !== scaled.length || t[0].length !== scaled[0].length) return false;
      total = t.map((r, i) => r.map((x, j) => add(x, scaled[i][j])));
    }
    return true;
  };
  for (let i = 0; i < mats.length; i++) {
    const gap = gaps[i].trim();
    if (i > 0 && MULT.test(gap)) {
      term = matMul(term!, mats[i]);
      if (!term) return null;
      continue;
    }
    let negative = false;
    let text = gap;
    if (i > 0) {
      if (gap[0] !== '+' && gap[0] !== '-') return null;
      negative = gap[0] === '-';
      text = gap.slice(1);
      if (!flush()) return null;
    } else if (gap.startsWith('-')) {
      negative = true;
      text = gap.slice(1);
    }
    coef = coefficient(text, negative);
    if (!coef) return null;
    term = mats[i];
  }
  if (!flush() || !total) return null;
  const rows: Cells = total;
  return {
    k: 'matrix',
    rows: rows.map((r) => r.map((node) => ({ k: 'expr', node, percent: false, src: '' }) as Value)),
  };
}

function exprOrText(s: string, percent: boolean): Value {
  const mixed = /^(-?)(\d+)\\frac\{(\d+)\}\{(\d+)\}$/.exec(s);
  if (mixed && Number(mixed[3]) < Number(mixed[4])) {
    const v = Number(mixed[2]) + Number(mixed[3]) / Number(mixed[4]);
    return { k: 'expr', node: { k: 'num', v: mixed[1] ? -v : v }, percent, src: s };
  }
  try {
    return { k: 'expr', node: parseExpression(s), percent, src: s };
  } catch {
    return {
      k: 'text',
      s: s
        .replace(/[{}]/g, '')
        .replace(/^\((\w)\)$/, '$1')
        .toLowerCase(),
    };
  }
}

function parseRelation(s: string, keepEq = false): Value | null {
  const ops: string[] = [];
  const parts: string[] = [];
  let prev = 0;
  let depth = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if ('([{'.includes(c)) depth++;
    else if (')]}'.includes(c)) depth--;
    else if (depth === 0 && '<>!='.includes(c)) {
      REL_RE.lastIndex = i;
      const m = REL_RE.exec(s);
      if (!m || m.index !== i) continue;
      parts.push(s.slice(prev, i));
      ops.push(m[0]);
      i += m[0].length - 1;
      prev = i + 1;
    }
  }
  if (!ops.length) return null;
  parts.push(s.slice(prev));
  if (parts.some((p) => !p)) return null;
  if (!keepEq) {
    // Chains of `=` (worked steps): the last side is the answer (`x = 5+5+1 = 11` → `11`).
    if (ops.every((o) => o === '=') && parts.length > 2) return parseValue(parts[parts.length - 1], false);
    // `name = value` → value.
    if (ops.length === 1 && ops[0] === '=' && isNameLike(parts[0])) return parseValue(parts[1], false);
  }
  // `a < x <= b` → interval.
  if (ops.length === 2 && ops.every((o) => o === '<' || o === '<=') && isNameLike(parts[1])) {
    return parseValue(`${ops[0] === '<' ? '(' : '['}${parts[0]},${parts[2]}${ops[1] === '<' ? ')' : ']'}`, false);
  }
  if (ops.length === 2 && ops.every((o) => o === '>' || o === '>=') && isNameLike(parts[1])) {
    return parseValue(`${ops[1] === '>' ? '(' : '['}${parts[2]},${parts[0]}${ops[0] === '>' ? ')' : ']'}`, false);
  }
  try {
    return { k: 'rel', ops, sides: parts.map((p) => parseExpression(p)) };
  } catch {
    return null;
  }
}

/** `p=5,q=2` → the values [5, 2] when every item assigns a named unknown; otherwise null. */
function assignmentGroup(group: string): string[] | null {
  const items = splitTop(group, ',').filter((p) => p.length);
  if (items.length < 2) return null;
  const values: string[] = [];
  for (const item of items) {
    const eq = topLevelIndices(item, '=');
    if (eq.length !== 1 || !isNameLike(item.slice(0, eq[0])) || /[<>!]$/.test(item.slice(0, eq[0]))) return null;
    values.push(item.slice(eq[0] + 1));
  }
  return values;
}

/** Structured value of a normalized answer string (`keepEq`: equations stay equations). */
function parseValue(raw: string, percent: boolean, keepEq = false): Value {
  let s = raw.trim();
  if (!s) return { k: 'text', s: '' };
  // `x \in S` → S.
  s = s.replace(/^[a-zA-Z](_\{?\w+\}?)?\\in(?![a-zA-Z])/, '');
  const matrix = parseMatrix(s) ?? parseMatrixExpr(s);
  if (matrix) return matrix;
  const cupParts = s.split(/\\cup(?![a-zA-Z])/);
  if (cupParts.length > 1) return { k: 'union', parts: cupParts.map((p) => parseValue(p, false)) };
  // Solutions separated by `;`, each assigning several unknowns: `p=5,q=2;p=7,q=2` is the list of
  // tuples (5,2), (7,2).
  const groups = splitTop(s, ';').filter((p) => p.length);
  if (groups.length > 1 && !keepEq) {
    const tuples = groups.map(assignmentGroup);
    if (tuples.every((t) => t !== null)) {
      return {
        k: 'seq',
        kind: 'list',
        open: '',
        close: '',
        items: tuples.map(
          (t) =>
            ({ k: 'seq', kind: 'tuple', open: '(', close: ')', items: t!.map((v) => parseValue(v, false)) }) as Value,
        ),
      };
    }
  }
  const items = splitTop(s, ',;').filter((p) => p.length);
  if (items.length > 1)
    return { k: 'seq', kind: 'list', open: '', close: '', items: items.map((p) => parseValue(p, percent, keepEq)) };
  const w = wrapped(s);
  if (w) {
    const inner = splitTop(w[1], ',;');
    if (w[0] === '{' && s.startsWith('\\{'))
      return { k: 'seq', kind: 'set', open: '{', close: '}', items: inner.map((p) => parseValue(p, false)) };
    if (inner.length > 1) {
      if (w[0] === '{')
        return { k: 'seq', kind: 'set', open: '{', close: '}', items: inner.map((p) => parseValue(p, false)) };
      return { k: 'seq', kind: 'tuple', open: w[0], close: w[2], items: inner.map((p) => parseValue(p, false)) };
    }
  }
  const rel = parseRelation(s, keepEq);
  if (rel) return rel;
  return exprOrText(s, percent);
}

// ---------------------------------------------------------------------------------------------

function close(a: number, b: number, tol: number): boolean {
  if (Number.isNaN(a) || Number.isNaN(b)) return false;
  if (!Number.isFinite(a) || !Number.isFinite(b)) return a === b;
  const d = Math.abs(a - b);
  return d <= 1e-9 || d <= tol * Math.max(Math.abs(a), Math.abs(b));
}

/** Does the decimal literal `src` equal `gold` rounded to the literal's number of decimals (≥ 2)? */
function roundedMatch(gold: number, src: string): boolean {
  const m = /^-?\d*\.(\d{2,})$/.exec(src);
  if (!m || !Number.isFinite(gold)) return false;
  const d = m[1].length;
  return Math.abs(gold - Number(src)) <= 0.5 * 10 ** -d + 1e-12;
}

const POINTS = 8;
/** At least this many sample points must evaluate to numbers on both sides. */
const MIN_COMPARED = 3;

/**
 * Sample environments for the variables (deterministic, seeded by the variable names): the first
 * five points draw every variable from [0.3, 2.7], the last three draw each variable's sign at
 * random too (so |x| and x differ).
 */
function samplePoints(vars: string[]): Map<string, number>[] {
  const rng = new Rng(hashString(vars.join(',')) ^ 0x5eed);
  const out: Map<string, number>[] = [];
  for (let i = 0; i < POINTS; i++) {
    const env = new Map<string, number>();
    for (const v of vars) {
      const mag = 0.3 + 2.4 * rng.next();
      env.set(v, i >= 5 && rng.next() < 0.5 ? -mag : mag);
    }
    out.push(env);
  }
  return out;
}

function sameVars(a: Node, b: Node): string[] | null {
  const va = [...variables(a)].sort();
  const vb = [...variables(b)].sort();
  if (va.length !== vb.length || va.some((v, i) => v !== vb[i])) return null;
  return va;
}

function exprEqual(g: Extract<Value, { k: 'expr' }>, p: Extract<Value, { k: 'expr' }>, tol: number): boolean {
  const vars = sameVars(g.node, p.node);
  if (!vars) return false;
  if (!vars.length) {
    const a = evaluate(g.node, new Map());
    const b = evaluate(p.node, new Map());
    // Two integers must match exactly (70001 is not 70000, whatever the relative tolerance).
    const ints = Number.isInteger(a) && Number.isInteger(b) && Math.abs(a) < 2 ** 53 && Math.abs(b) < 2 ** 53;
    if (ints ? a === b : close(a, b, tol)) return true;
    if (g.percent || p.percent) {
      if (close(a / 100, b, tol) || close(a, b / 100, tol)) return true;
    }
    return roundedMatch(a, p.src);
  }
  let compared = 0;
  for (const env of samplePoints(vars)) {
    const a = evaluate(g.node, env);
    const b = evaluate(p.node, env);
    // Points outside either side's real domain are skipped.
    if (Number.isNaN(a) || Number.isNaN(b)) continue;
    if (!close(a, b, tol)) return false;
    compared++;
  }
  return compared >= MIN_COMPARED;
}

/** Is d1 = c·d2 for a constant c (c > 0 when `positive`) at every sample point? */
function proportional(d1: Node, d2: Node, positive: boolean, tol: number): boolean {
  const vars = sameVars(d1, d2);
  if (!vars || !vars.length) return false;
  let ratio: number | null = null;
  let compared = 0;
  for (const env of samplePoints(vars)) {
    const a = evaluate(d1, env);
    const b = evaluate(d2, env);
    if (!Number.isFinite(a) || !Number.isFinite(b)) continue;
    if (Math.abs(b) < 1e-12) {
      if (Math.abs(a) > 1e-9) return false;
      continue;
    }
    const r = a / b;
    if (ratio === null) ratio = r;
    else if (!close(ratio, r, tol)) return false;
    compared++;
  }
  if (ratio === null || Math.abs(ratio) < 1e-12 || (positive && ratio < 0)) return false;
  return compared >= MIN_COMPARED;
}

const FLIP: Record<string, string> = { '>': '<', '>=': '<=', '<': '<', '<=': '<=', '=': '=', '!=': '!=' };

function relEqual(g: Extract<Value, { k: 'rel' }>, p: Extract<Value, { k: 'rel' }>, tol: number): boolean {
  if (g.ops.length !== 1 || p.ops.length !== 1) {
    if (g.ops.length !== p.ops.length || g.ops.some((o, i) => o !== p.ops[i])) return false;
    return g.sides.every((n, i) => exprEqual(asExpr(n), asExpr(p.sides[i]), tol));
  }
  // Canonical difference form: `a op b` with op in {<, <=} means b − a op' 0.
  const canon = (v: Extract<Value, { k: 'rel' }>): { op: string; d: Node } => {
    const [a, b] = v.sides;
    const op = v.ops[0];
    if (op === '>' || op === '>=') return { op: FLIP[op], d: { k: 'bin', op: '-', a, b } };
    return { op, d: { k: 'bin', op: '-', a: b, b: a } };
  };
  const cg = canon(g);
  const cp = canon(p);
  if (cg.op !== cp.op) return false;
  // Without variables, compare the sides themselves (`1 < 2` is not `3 < 5`).
  if (!variables(cg.d).size && !variables(cp.d).size) {
    const flipG = g.ops[0] === '>' || g.ops[0] === '>=';
    const flipP = p.ops[0] === '>' || p.ops[0] === '>=';
    const sg = flipG ? [...g.sides].reverse() : g.sides;
    const sp = flipP ? [...p.sides].reverse() : p.sides;
    return exprEqual(asExpr(sg[0]), asExpr(sp[0]), tol) && exprEqual(asExpr(sg[1]), asExpr(sp[1]), tol);
  }
  return proportional(cg.d, cp.d, cg.op === '<' || cg.op === '<=', tol);
}

/** The last side of an `=`-only relation without variables (`\frac12 = \frac{10}{9}`), or null. */
function solvedSide(v: Extract<Value, { k: 'rel' }>): Value | null {
  if (v.ops.some((o) => o !== '=') || v.sides.some((n) => variables(n).size)) return null;
  return asExpr(v.sides[v.sides.length - 1]);
}

function asExpr(node: Node): Extract<Value, { k: 'expr' }> {
  return { k: 'expr', node, percent: false, src: '' };
}

function unwrapSingle(v: Value): Value {
  return v.k === 'seq' && v.items.length === 1 ? unwrapSingle(v.items[0]) : v;
}

/** Set semantics: every element of each side has an equal element on the other (duplicates ignored). */
function setEqual(a: Value[], b: Value[], tol: number): boolean {
  return a.every((x) => b.some((y) => valuesEqual(x, y, tol))) && b.every((y) => a.some((x) => valuesEqual(x, y, tol)));
}

function unorderedEqual(a: Value[], b: Value[], tol: number): boolean {
  if (a.length !== b.length) return setEqual(a, b, tol);
  const used = new Array<boolean>(b.length).fill(false);
  for (const x of a) {
    const j = b.findIndex((y, idx) => !used[idx] && valuesEqual(x, y, tol));
    if (j < 0) return false;
    used[j] = true;
  }
  return true;
}

function valuesEqual(g0: Value, p0: Value, tol: number): boolean {
  const g = unwrapSingle(g0);
  const p = unwrapSingle(p0);
  if (g.k === 'expr' && p.k === 'expr') return exprEqual(g, p, tol);
  if (g.k === 'text' || p.k === 'text') {
    const ts = (v: Value) => (v.k === 'text' ? v.s : v.k === 'expr' ? v.src.toLowerCase() : null);
    const a = ts(g);
    const b = ts(p);
    return a !== null && b !== null && a === b && a.length > 0;
  }
  if (g.k === 'rel' && p.k === 'rel') return relEqual(g, p, tol);
  // An equation between constants against a value: its last side is the answer
  // (`\frac{1}{2} \$ = \frac{10}{9}` against `10/9`; `a+3z = 0` is not `0`).
  if (g.k === 'rel' && p.k === 'expr') {
    const side = solvedSide(g);
    return side !== null && valuesEqual(side, p, tol);
  }
  if (p.k === 'rel' && g.k === 'expr') {
    const side = solvedSide(p);
    return side !== null && valuesEqual(g, side, tol);
  }
  // A list of alternatives that all equal one value is that value (`15\frac{39}{40}` or `\frac{639}{40}`).
  if (g.k === 'seq' && g.kind !== 'tuple' && p.k !== 'seq') return g.items.every((x) => valuesEqual(x, p, tol));
  if (p.k === 'seq' && p.kind !== 'tuple' && g.k !== 'seq') return p.items.every((y) => valuesEqual(g, y, tol));
  if (g.k === 'matrix' && p.k === 'matrix') {
    if (g.rows.length !== p.rows.length) return false;
    return g.rows.every(
      (r, i) => r.length === p.rows[i].length && r.every((c, j) => valuesEqual(c, p.rows[i][j], tol)),
    );
  }
  if (g.k === 'union' && p.k === 'union') return unorderedEqual(g.parts, p.parts, tol);
  if (g.k === 'seq' && p.k === 'seq') {
    if (g.kind === 'tuple' && p.kind === 'tuple') {
      if (g.open !== p.open || g.close !== p.close || g.items.length !== p.items.length) return false;
      return g.items.every((x, i) => valuesEqual(x, p.items[i], tol));
    }
    if (g.kind === 'tuple' || p.kind === 'tuple') {
      // A set or bare list against a tuple: compare in written order.
      return g.items.length === p.items.length && g.items.every((x, i) => valuesEqual(x, p.items[i], tol));
    }
    return unorderedEqual(g.items, p.items, tol);
  }
  return false;
}

/** Longest normalized answer (characters) that is parsed and compared structurally. */
const MAX_STRUCTURED = 1000;

/** Decimal comma fallback: `1,22` against `1.22` (only when the other side is a decimal number). */
function decimalCommaMatch(a: string, b: string): boolean {
  return /^-?\d+,\d+$/.test(a) && /^-?\d+\.\d+$/.test(b) && Number(a.replace(',', '.')) === Number(b);
}

/** Are the two answers mathematically equivalent? `gold` is the reference; see the file comment. */
export function mathEquivalent(gold: string, pred: string, options: EquivalenceOptions = {}): boolean {
  try {
    const tol = options.tolerance ?? 1e-4;
    const g = normalizeDetailed(gold);
    const p = normalizeDetailed(pred);
    if (!g.text || !p.text) return false;
    if (g.text === p.text) return true;
    // Words ("Even" / "even"): case-insensitive.
    if (/^[a-zA-Z]{2,}$/.test(g.text) && g.text.toLowerCase() === p.text.toLowerCase()) return true;
    if (decimalCommaMatch(g.text, p.text) || decimalCommaMatch(p.text, g.text)) return true;
    // Structured comparison is bounded: very long answers only match as equal strings.
    if (g.text.length > MAX_STRUCTURED || p.text.length > MAX_STRUCTURED) return false;
    if (valuesEqual(parseValue(g.text, g.percent), parseValue(p.text, p.percent), tol)) return true;
    // An equation against its solved form (`2x+4y-3=0` vs `y = -\frac{1}{2}x + \frac{3}{4}`): the
    // named left side dropped by normalization is kept, and the two equations compared as relations.
    const gk = normalizeDetailed(gold, { keepAssignment: true }).text;
    const pk = normalizeDetailed(pred, { keepAssignment: true }).text;
    if ((gk !== g.text || pk !== p.text) && gk.includes('=') && pk.includes('=')) {
      return valuesEqual(parseValue(gk, false, true), parseValue(pk, false, true), tol);
    }
    return false;
  } catch {
    return false;
  }
}
