/**
 * A small, safe parser and evaluator for LaTeX/ASCII math expressions (no eval). Supports numbers,
 * single-letter variables (`ab` is a·b; subscripts `a_{3}` and Greek commands are names), `\pi`,
 * `e`, `\infty`, + − × ÷ (`*`, `\cdot`, `\times`, `/`, `\div`), `^` (`x^23` is x²·3 as in LaTeX),
 * implicit multiplication, parentheses/brackets/braces, `\frac{a}{b}`, `\sqrt{x}`, `\sqrt[n]{x}`,
 * `|x|`, `n!`, and functions (sin cos tan sec csc cot, arc-/hyperbolic forms, ln, log, exp, with
 * `\sin^2 x` powers). Parsing is bounded in length and depth; errors are thrown as ParseError and
 * callers treat them as "not an expression".
 */

export class ParseError extends Error {
  override name = 'ParseError';
}

export type Node =
  | { k: 'num'; v: number }
  | { k: 'var'; name: string }
  | { k: 'neg'; a: Node }
  | { k: 'bin'; op: '+' | '-' | '*' | '/' | '^'; a: Node; b: Node }
  | { k: 'fn'; name: string; a: Node; power?: Node }
  | { k: 'fact'; a: Node };

type Tok =
  | { t: 'num'; v: number; text: string }
  | { t: 'var'; name: string }
  | { t: 'fn'; name: string }
  | { t: 'op'; v: string; sq?: boolean }
  | { t: 'frac' }
  | { t: 'sqrt' };

const FUNCS = new Set([
  'sin',
  'cos',
  'tan',
  'sec',
  'csc',
  'cot',
  'arcsin',
  'arccos',
  'arctan',
  'sinh',
  'cosh',
  'tanh',
  'ln',
  'log',
  'exp',
  'sqrt',
  'abs',
]);
const GREEK = new Set([
  'alpha',
  'beta',
  'gamma',
  'delta',
  'epsilon',
  'varepsilon',
  'zeta',
  'eta',
  'theta',
  'vartheta',
  'iota',
  'kappa',
  'lambda',
  'mu',
  'nu',
  'xi',
  'rho',
  'sigma',
  'tau',
  'upsilon',
  'phi',
  'varphi',
  'chi',
  'psi',
  'omega',
  'Gamma',
  'Delta',
  'Theta',
  'Lambda',
  'Xi',
  'Sigma',
  'Phi',
  'Psi',
  'Omega',
]);
const MAX_LEN = 600;
const MAX_DEPTH = 60;

/** Unicode operators written as their ASCII forms. */
const UNICODE_OPS: Record<string, string> = { '×': '*', '·': '*', '÷': '/', '−': '-' };

function tokenize(src: string): Tok[] {
  if (src.length > MAX_LEN) throw new ParseError('too long');
  const out: Tok[] = [];
  let i = 0;
  let afterCaret = false;
  while (i < src.length) {
    const c = src[i];
    const caret: boolean = afterCaret;
    afterCaret = false;
    if (c === ' ' || c === '\t') {
      i++;
      afterCaret = caret;
      continue;
    }
    if (/[0-9.]/.test(c)) {
      if (caret && c !== '.') {
        out.push({ t: 'num', v: Number(c), text: c });
        i++;
        continue;
      }
      const m = /^(\d+\.?\d*|\.\d+)/.exec(src.slice(i));
      if (!m) throw new ParseError(`bad number at ${i}`);
      out.push({ t: 'num', v: Number(m[1]), text: m[1] });
      i += m[1].length;
      if (src[i] === '_') throw new ParseError('number with subscript (base notation)');
      continue;
    }
    if (c === '\\') {
      const m = /^\\([a-zA-Z]+|.)/.exec(src.slice(i));
      if (!m) throw new ParseError('dangling backslash');
      const name = m[1];
      i += m[0].length;
      if (name === 'frac') out.push({ t: 'frac' });
      else if (name === 'sqrt') out.push({ t: 'sqrt' });
      else if (name === 'pi') out.push({ t: 'var', name: '\\pi' });
      else if (name === 'infty' || name === 'infinity') out.push({ t: 'var', name: '\\infty' });
      else if (name === 'cdot' || name === 'times' || name === 'ast') out.push({ t: 'op', v: '*' });
      else if (name === 'div') out.push({ t: 'op', v: '/' });
      else if (name === '{' || name === '}') out.push({ t: 'op', v: name === '{' ? '(' : ')' });
      else if (name === 'lvert' || name === 'rvert' || name === 'vert' || name === '|') out.push({ t: 'op', v: '|' });
      else if (FUNCS.has(name)) out.push({ t: 'fn', name });
      else if (GREEK.has(name)) out.push({ t: 'var', name: `\\${name}` });
      else if (name === 'mathrm' || name === 'operatorname' || name === 'text') {
        // \mathrm{e} / \operatorname{sin}: read the braced word.
        const w = /^\s*\{([a-zA-Z]+)\}/.exec(src.slice(i));
        if (!w) throw new ParseError(`\\${name} without word`);
        i += w[0].length;
        if (FUNCS.has(w[1])) out.push({ t: 'fn', name: w[1] });
        else if (w[1].length === 1) out.push({ t: 'var', name: w[1] });
        else throw new ParseError('text word');
      } else throw new ParseError(`unknown command \\${name}`);
      continue;
    }
    if (/[a-zA-Z]/.test(c)) {
      const m = /^[a-zA-Z]+/.exec(src.slice(i))!;
      let word = m[0];
      i += word.length;
      // Split a letter run into known function names and single-letter variables.
      while (word.length) {
        const fn = [...FUNCS].filter((f) => word.startsWith(f)).sort((a, b) => b.length - a.length)[0];
        if (fn && word.length >= fn.length) {
          out.push({ t: 'fn', name: fn });
          word = word.slice(fn.length);
        } else if (word.startsWith('pi')) {
          out.push({ t: 'var', name: '\\pi' });
          word = word.slice(2);
        } else {
          out.push({ t: 'var', name: word[0] });
          word = word.slice(1);
        }
      }
      // Subscript binds to the last variable: a_{37}, x_1.
      if (src[i] === '_') {
        const last = out[out.length - 1];
        const sm = /^_(\{[^{}]*\}|[0-9a-zA-Z])/.exec(src.slice(i));
        if (!sm || last.t !== 'var') throw new ParseError('bad subscript');
        last.name += `_${sm[1].replace(/[{}]/g, '')}`;
        i += sm[0].length;
      }
      continue;
    }
    if (c === '_') throw new ParseError('stray subscript');
    if ('+-*/^()[]{}|!'.includes(c)) {
      out.push({
        t: 'op',
        v: c === '[' ? '(' : c === ']' ? ')' : c === '{' ? '(' : c === '}' ? ')' : c,
        sq: c === '[' || undefined,
      });
      if (c === '^') afterCaret = true;
      i++;
      continue;
    }
    const unicodeOp = UNICODE_OPS[c];
    if (unicodeOp) {
      out.push({ t: 'op', v: unicodeOp });
      i++;
      continue;
    }
    if (c === 'π') {
      out.push({ t: 'var', name: '\\pi' });
      i++;
      continue;
    }
    throw new ParseError(`unexpected ${JSON.stringify(c)}`);
  }
  return out;
}

class Parser {
  private pos = 0;
  private depth = 0;
  constructor(private readonly toks: Tok[]) {}

  parseAll(): Node {
    if (!this.toks.length) throw new ParseError('empty');
    const n = this.expr();
    if (this.pos < this.toks.length) throw new ParseError('trailing tokens');
    return n;
  }

  private peek(): Tok | undefined {
    return this.toks[this.pos];
  }
  private isOp(v: string): boolean {
    const t = this.peek();
    return t !== undefined && t.t === 'op' && t.v === v;
  }
  private expectOp(v: string): void {
    if (!this.isOp(v)) throw new ParseError(`expected ${v}`);
    this.pos++;
  }
  private enter(): void {
    if (++this.depth > MAX_DEPTH) throw new ParseError('too deep');
  }

  expr(): Node {
    this.enter();
    let n = this.term();
    while (this.isOp('+') || this.isOp('-')) {
      const op = (this.toks[this.pos++] as { v: string }).v as '+' | '-';
      n = { k: 'bin', op, a: n, b: this.term() };
    }
    this.depth--;
    return n;
  }

  private startsFactor(): boolean {
    const t = this.peek();
    if (!t) return false;
    if (t.t === 'op') return t.v === '(' || (t.v === '|' && !this.absOpen);
    return true;
  }

  private absOpen = false;

  private term(): Node {
    let n = this.unary();
    for (;;) {
      if (this.isOp('*') || this.isOp('/')) {
        const op = (this.toks[this.pos++] as { v: string }).v as '*' | '/';
        n = { k: 'bin', op, a: n, b: this.unary() };
      } else if (this.startsFactor()) {
        n = { k: 'bin', op: '*', a: n, b: this.power() };
      } else return n;
    }
  }

  private unary(): Node {
    if (this.isOp('-')) {
      this.pos++;
      return { k: 'neg', a: this.unary() };
    }
    if (this.isOp('+')) {
      this.pos++;
      return this.unary();
    }
    return this.power();
  }

  private power(): Node {
    this.enter();
    let base = this.postfix();
    if (this.isOp('^')) {
      this.pos++;
      const exp = this.isOp('-') ? (this.pos++, { k: 'neg' as const, a: this.power() }) : this.power();
      base = { k: 'bin', op: '^', a: base, b: exp };
    }
    this.depth--;
    return base;
  }

  private postfix(): Node {
    let n = this.primary();
    while (this.isOp('!')) {
      this.pos++;
      n = { k: 'fact', a: n };
    }
    return n;
  }

  private group(): Node {
    this.expectOp('(');
    const saved = this.absOpen;
    this.absOpen = false;
    const n = this.expr();
    this.absOpen = saved;
    this.expectOp(')');
    return n;
  }

  private primary(): Node {
    const t = this.peek();
    if (!t) throw new ParseError('unexpected end');
    if (t.t === 'num') {
      this.pos++;
      return { k: 'num', v: t.v };
    }
    if (t.t === 'var') {
      this.pos++;
      if (t.name === '\\pi') return { k: 'num', v: Math.PI };
      if (t.name === '\\infty') return { k: 'num', v: Infinity };
      if (t.name === 'e') return { k: 'num', v: Math.E };
      return { k: 'var', name: t.name };
    }
    if (t.t === 'frac') {
      this.pos++;
      const a = this.group();
      const b = this.group();
      return { k: 'bin', op: '/', a, b };
    }
    if (t.t === 'sqrt') {
      this.pos++;
      const nx = this.peek();
      if (nx && nx.t === 'op' && nx.sq && this.isBracketIndex()) {
        // \sqrt[n]{x}: the tokenizer maps [ to (, so an index is a group followed by another group.
        const idx = this.group();
        const x = this.group();
        return { k: 'bin', op: '^', a: x, b: { k: 'bin', op: '/', a: { k: 'num', v: 1 }, b: idx } };
      }
      const x = this.isOp('(') ? this.group() : this.power();
      return { k: 'fn', name: 'sqrt', a: x };
    }
    if (t.t === 'fn') {
      this.pos++;
      let power: Node | undefined;
      if (this.isOp('^')) {
        this.pos++;
        power = this.isOp('-') ? (this.pos++, { k: 'neg' as const, a: this.postfix() }) : this.postfix();
      }
      const a = this.isOp('(') ? this.group() : this.power();
      return { k: 'fn', name: t.name, a, power };
    }
    if (t.t === 'op' && t.v === '(') return this.group();
    if (t.t === 'op' && t.v === '|' && !this.absOpen) {
      this.pos++;
      const saved = this.absOpen;
      this.absOpen = true;
      const a = this.expr();
      this.absOpen = saved;
      this.expectOp('|');
      return { k: 'fn', name: 'abs', a };
    }
    throw new ParseError('unexpected token');
  }

  /** After `\sqrt`, is the next `(`-group immediately followed by another `(`-group? */
  private isBracketIndex(): boolean {
    let depth = 0;
    for (let j = this.pos; j < this.toks.length; j++) {
      const t = this.toks[j];
      if (t.t !== 'op') continue;
      if (t.v === '(') depth++;
      else if (t.v === ')') {
        depth--;
        if (depth === 0) {
          const nx = this.toks[j + 1];
          return nx !== undefined && nx.t === 'op' && nx.v === '(';
        }
      }
    }
    return false;
  }
}

/** Parse a (normalized) expression; throws ParseError when it is not one. */
export function parseExpression(src: string): Node {
  return new Parser(tokenize(src)).parseAll();
}

/** Free variable names of an expression. */
export function variables(n: Node, acc: Set<string> = new Set()): Set<string> {
  switch (n.k) {
    case 'var':
      acc.add(n.name);
      break;
    case 'neg':
    case 'fact':
      variables(n.a, acc);
      break;
    case 'bin':
      variables(n.a, acc);
      variables(n.b, acc);
      break;
    case 'fn':
      variables(n.a, acc);
      if (n.power) variables(n.power, acc);
      break;
    default:
      break;
  }
  return acc;
}

function factorial(x: number): number {
  if (!Number.isInteger(x) || x < 0) return NaN;
  if (x > 170) return Infinity;
  let r = 1;
  for (let i = 2; i <= x; i++) r *= i;
  return r;
}

function applyFn(name: string, x: number): number {
  switch (name) {
    case 'sin':
      return Math.sin(x);
    case 'cos':
      return Math.cos(x);
    case 'tan':
      return Math.tan(x);
    case 'sec':
      return 1 / Math.cos(x);
    case 'csc':
      return 1 / Math.sin(x);
    case 'cot':
      return 1 / Math.tan(x);
    case 'arcsin':
      return Math.asin(x);
    case 'arccos':
      return Math.acos(x);
    case 'arctan':
      return Math.atan(x);
    case 'sinh':
      return Math.sinh(x);
    case 'cosh':
      return Math.cosh(x);
    case 'tanh':
      return Math.tanh(x);
    case 'ln':
      return Math.log(x);
    case 'log':
      return Math.log10(x);
    case 'exp':
      return Math.exp(x);
    case 'sqrt':
      return Math.sqrt(x);
    case 'abs':
      return Math.abs(x);
    default:
      return NaN;
  }
}

/** Real-valued power; odd roots of negative numbers stay real (cube root of −8 is −2). */
function pow(a: number, b: number): number {
  if (a < 0 && !Number.isInteger(b)) {
    const inv = 1 / b;
    if (Number.isInteger(Math.round(inv)) && Math.abs(inv - Math.round(inv)) < 1e-9 && Math.round(inv) % 2 !== 0) {
      return -Math.pow(-a, b);
    }
  }
  return Math.pow(a, b);
}

/** Evaluate with variable values from env (missing variables → NaN). */
export function evaluate(n: Node, env: ReadonlyMap<string, number>): number {
  switch (n.k) {
    case 'num':
      return n.v;
    case 'var':
      return env.get(n.name) ?? NaN;
    case 'neg':
      return -evaluate(n.a, env);
    case 'fact':
      return factorial(evaluate(n.a, env));
    case 'fn': {
      const v = applyFn(n.name, evaluate(n.a, env));
      return n.power ? pow(v, evaluate(n.power, env)) : v;
    }
    case 'bin': {
      const a = evaluate(n.a, env);
      const b = evaluate(n.b, env);
      switch (n.op) {
        case '+':
          return a + b;
        case '-':
          return a - b;
        case '*':
          return a * b;
        case '/':
          return a / b;
        case '^':
          return pow(a, b);
      }
    }
  }
  return NaN;
}
