/**
 * Canonical string form of a math answer. Removes presentation-only LaTeX (`$`, `\left`/`\right`,
 * thin spaces, `\boxed`, `\text{..}` wrappers), unit words ("cm", `\text{ miles}`, degrees), percent
 * and currency signs, `\dfrac`/`\tfrac`/`\cfrac`→`\frac`, adds braces (`\frac12`→`\frac{1}{2}`,
 * `\sqrt2`→`\sqrt{2}`), drops a leading single assignment (`x = 3` → `3`), thousands separators
 * (`7,425,000`, `1 000`, `14{,}916`), trailing `.0`, leading zeros, and rewrites relations to ASCII
 * (`\geq`→`>=`, `\neq`→`!=`). Currency codes and words ("USD 12", "Rs. 50", "12 rupees"), compound
 * units ("km/h", "sq. ft"), "1,000.99m²", and a few plain words after a lone amount ("12 apples") are
 * dropped too. `normalizeDetailed` also reports whether a percent sign was removed, which the
 * comparison uses (a percent equals the number itself and the number / 100); with
 * `keepAssignment` it keeps `y = 2x+1` whole (for comparing an equation with its solved form).
 */
import { matchBrace } from './extract.js';

export interface Normalized {
  text: string;
  /** True when a percent marker (`%`, `\%`, "percent", "pct") was removed. */
  percent: boolean;
}

const UNIT_WORDS = [
  'cm',
  'mm',
  'km',
  'm',
  'meter',
  'meters',
  'metre',
  'metres',
  'centimeter',
  'centimeters',
  'millimeter',
  'millimeters',
  'kilometer',
  'kilometers',
  'in',
  'inch',
  'inches',
  'ft',
  'foot',
  'feet',
  'yard',
  'yards',
  'yd',
  'mile',
  'miles',
  'mi',
  'unit',
  'units',
  'degree',
  'degrees',
  'dollar',
  'dollars',
  'cent',
  'cents',
  'hour',
  'hours',
  'hr',
  'hrs',
  'minute',
  'minutes',
  'min',
  'mins',
  'second',
  'seconds',
  'sec',
  's',
  'day',
  'days',
  'week',
  'weeks',
  'month',
  'months',
  'year',
  'years',
  'kg',
  'g',
  'gram',
  'grams',
  'pound',
  'pounds',
  'lb',
  'lbs',
  'ounce',
  'ounces',
  'oz',
  'liter',
  'liters',
  'litre',
  'litres',
  'l',
  'ml',
  'mph',
  'yuan',
  'euros',
  'euro',
  'people',
  'persons',
  'students',
  'points',
  'ways',
  'sq',
  'square',
  'cubic',
  'cm2',
  'per',
  'each',
  'times',
  'mph',
  'kmh',
  'km/h',
  'm/s',
  'percent',
];
const UNIT_SET = new Set(UNIT_WORDS);
/** Multi-letter units that may follow a number without a space ("35cm"). */
const GLUED_UNITS =
  'cm|mm|km|kg|ft|mph|inches|meters|miles|degrees|dollars|units|hrs|hr|mins|min|secs|sec|lbs|lb|oz|yd|ml';
/** Currency codes and words written before or after an amount ("USD 12", "12 EUR", "Rs. 50"). */
const CURRENCY = 'USD|US\\$|EUR|GBP|INR|CAD|AUD|JPY|CNY|RMB|Rs\\.?|rupees|rupee|pesos|peso|yen|bucks';
/** Compound units: "km/h", "m/s", "sq. ft", "cu ft". */
const COMPOUND_UNITS =
  'km\\/h|km\\/hr|m\\/s|ft\\/s|miles\\/hour|sq\\.?\\s*(?:ft|m|in|cm|km|mi|yd|units)|cu\\.?\\s*(?:ft|m|in|cm)';
const BARE_UNITS =
  'square units|sq units|square feet|square inches|square meters|square centimeters|square cm|sq ft|cubic units|cubic feet|cubic inches|' +
  'centimeters|centimetres|millimeters|kilometers|meters|metres|meter|inches|inch|feet|foot|yards|yard|miles|mile|units|unit|degrees|degree|' +
  'dollars|dollar|cents|hours|hour|minutes|minute|seconds|second|days|day|weeks|week|months|month|years|year|' +
  'grams|gram|pounds|pound|ounces|ounce|liters|liter|litres|litre|mph|yuan|euros|people|students|points|ways|cm|mm|km|kg|ft|lbs|lb|oz|m|g|s';

/** Text-like wrapper commands whose content is kept (after unit removal). */
const WRAPPERS = [
  'boxed',
  'fbox',
  'text',
  'textbf',
  'textit',
  'textrm',
  'textnormal',
  'mbox',
  'mathrm',
  'mathbf',
  'mathit',
  'mathsf',
  'operatorname',
  'hbox',
  'bf',
  'rm',
];

/** Replace every `\cmd{...}` (brace-matched) by fn(content); other occurrences left alone. */
function mapCommand(
  s: string,
  cmd: string,
  fn: (content: string, after: string) => { text: string; skip?: number },
): string {
  const re = new RegExp(`\\\\${cmd}(?![a-zA-Z])\\s*\\{`, 'g');
  let out = '';
  let pos = 0;
  let m: RegExpExecArray | null;
  while ((m = re.exec(s)) !== null) {
    const open = m.index + m[0].length - 1;
    const end = matchBrace(s, open);
    if (end < 0) break;
    const content = s.slice(open + 1, end - 1);
    const r = fn(content, s.slice(end));
    out += s.slice(pos, m.index) + r.text;
    pos = end + (r.skip ?? 0);
    re.lastIndex = pos;
  }
  return out + s.slice(pos);
}

/** `\frac12` → `\frac{1}{2}`, `\frac1{2}`, `\frac{1}2`, `\sqrt2` → `\sqrt{2}`, `\sqrt x` → `\sqrt{x}`. */
function braceArguments(s: string): string {
  let t = s;
  // One-character (digit or letter) arguments without braces.
  t = t.replace(/\\frac\s*([0-9a-zA-Z])\s*([0-9a-zA-Z])/g, '\\frac{$1}{$2}');
  t = t.replace(/\\frac\s*([0-9a-zA-Z])\s*(?=\{)/g, '\\frac{$1}');
  t = t.replace(/\\frac(\{[^{}]*\})\s*([0-9a-zA-Z])/g, '\\frac$1{$2}');
  t = t.replace(/\\sqrt\s*([0-9]+|[a-zA-Z])(?![a-zA-Z])/g, '\\sqrt{$1}');
  return t;
}

const TEXT_SEPARATORS = /^\s*(and|or|,|;)\s*$/i;

/** Removes LaTeX decoration, units, percent; returns canonical text and the percent flag. */
export function normalizeDetailed(input: string, options: { keepAssignment?: boolean } = {}): Normalized {
  let s = String(input ?? '');
  let percent = false;
  // Double-escaped commands (`\\frac` from JSON dumps) → single backslash.
  s = s.replace(/(?<!\\)\\\\(?=[a-zA-Z])(?!\\)/g, '\\');
  s = s.replace(/\r?\n|\\n(?![a-zA-Z])/g, ' ');
  s = s.trim();
  // Math delimiters.
  s = s.replace(/\\\[|\\\]|\\\(|\\\)/g, ' ');
  s = s.replace(/\\\$/g, ' ');
  s = s.replace(/\$/g, ' ');
  s = s.replace(/[€£¥]/g, ' ');
  // Percent markers (before `%` is mistaken for anything else).
  if (/\\%|%|\bpercent(age)?\b|\bpct\b/i.test(s)) percent = true;
  s = s.replace(/\\%|%/g, ' ').replace(/\b(percentage|percent|pct)\b/gi, ' ');
  // Degrees.
  s = s.replace(/\^\s*\{\s*\\circ\s*\}|\^\s*\\circ|\\circ|°|\\degree/g, ' ');
  // \text-like wrappers: unit words vanish, separators become commas, other content is kept.
  for (const w of WRAPPERS) {
    s = mapCommand(s, w, (content, after) => {
      const c = content.trim();
      const lower = c.toLowerCase().replace(/\s+/g, ' ');
      if (TEXT_SEPARATORS.test(c)) return { text: ' , ' };
      if (w !== 'boxed' && w !== 'fbox' && (UNIT_SET.has(lower) || new RegExp(`^(${BARE_UNITS})$`, 'i').test(lower))) {
        const pow = /^\s*\^\s*(\{\s*\d\s*\}|\d)/.exec(after);
        return { text: ' ', skip: pow ? pow[0].length : 0 };
      }
      return { text: ` ${c} ` };
    });
  }
  s = s.replace(
    /\\(displaystyle|textstyle|scriptstyle|left\.|right\.|left|right|bigl|bigr|Bigl|Bigr|big|Big|limits)(?![a-zA-Z])/g,
    ' ',
  );
  s = s.replace(/\\(qquad|quad)(?![a-zA-Z])/g, '');
  s = s.replace(/,\s*\\!\s*/g, ',');
  s = s.replace(/(?<!\\)\\[!,;:]|(?<!\\)\\ /g, (m) => (m === '\\!' ? '' : ' '));
  s = s.replace(/~/g, ' ');
  s = s.replace(/\\[dtc]frac(?![a-zA-Z])/g, '\\frac');
  s = s.replace(/(?<!\\)\{\s*,\s*\}/g, '');
  // Relations to ASCII.
  s = s
    .replace(/\\(leq|leqslant|le)(?![a-zA-Z])|≤|⩽/g, '<=')
    .replace(/\\(geq|geqslant|ge)(?![a-zA-Z])|≥|⩾/g, '>=')
    .replace(/\\(neq|ne)(?![a-zA-Z])|≠/g, '!=')
    .replace(/\\lt(?![a-zA-Z])/g, '<')
    .replace(/\\gt(?![a-zA-Z])/g, '>');
  if (/\\approx/.test(s))
    s = /=/.test(s.split('\\approx')[0]) ? s.slice(0, s.indexOf('\\approx')) : s.replace(/\\approx/g, '=');
  // Trailing unit words after a number.
  s = s
    .trim()
    .replace(/[.,;]+$/, '')
    .trim();
  s = s.replace(new RegExp(`([0-9}])\\s+(?:${BARE_UNITS})(?:\\s*(?:\\^\\s*\\{?[23]\\}?|²|³))?$`, 'i'), '$1');
  s = s.replace(new RegExp(`([0-9])(?:${GLUED_UNITS})(?:\\s*(?:\\^\\s*\\{?[23]\\}?|²|³))?$`, 'i'), '$1');
  // "1,000.99m²": a one-letter length unit glued to a number only with a written square/cube.
  s = s.replace(/([0-9])m\s*[²³]$/, '$1');
  // Currency codes/words and compound units around a lone amount: "USD 12", "12 EUR", "30 km/h".
  s = s.replace(new RegExp(`^(?:${CURRENCY})\\s*(?=[-+]?\\d)`, 'i'), '');
  s = s.replace(new RegExp(`([0-9])\\s*(?:${CURRENCY}|${COMPOUND_UNITS})$`, 'i'), '$1');
  // A lone amount followed by a few plain words: "12 apples", "5 more cookies" → the amount.
  s = s.replace(/^([-+]?\d[\d,]*(?:\.\d+)?)\s+[a-z]{3,}(?:\s+[a-z]{3,}){0,2}$/i, '$1');
  s = s.trim();
  // Thousands separators in a lone number.
  if (/^[-+]?\d{1,3}(\s\d{3})+$/.test(s)) s = s.replace(/\s/g, '');
  if (/^[-+]?[1-9]\d{0,2}(,\d{3})+(\.\d+)?$/.test(s)) s = s.replace(/,/g, '');
  // Word separators between answers: `1 and 2`, `(11,7) or (7,11)`.
  s = s.replace(/\s+(?:and|or)\s+/gi, ',');
  // Whitespace: keep one space only between a command name and a following letter.
  // \u0001 is a placeholder that cannot occur in an answer
  s = s
    .replace(/(\\[a-zA-Z]+)\s+(?=[a-zA-Z])/g, '$1\u0001')
    .replace(/\s+/g, '')
    .replace(/\u0001/g, ' '); // eslint-disable-line no-control-regex -- the placeholder above
  s = s.replace(/(?<=[)\]\d])(?:and|or)(?=[([\d-]|[A-Za-z][(_=])/g, ',');
  s = braceArguments(s);
  // Single assignment `x=3`, `f(x)=3`, `(p,q)=(3,2)` → right-hand side.
  if (!options.keepAssignment) s = stripAssignment(s);
  s = s.replace(/[.,;]+$/, '');
  s = canonicalNumber(s);
  return { text: s, percent };
}

/** Canonical string of an answer (see the file comment). */
export function normalizeAnswer(s: string): string {
  return normalizeDetailed(s).text;
}

/** True for the left side of an assignment that only names the answer: `x`, `f(x)`, `a_{3}`, `|AB|`, `A:B`. */
export function isNameLike(lhs: string): boolean {
  const t = lhs.replace(/_\{?[0-9a-zA-Z]+\}?/g, '');
  if (!t || t.length > 40) return false;
  if (/[0-9+\-*^=<>!]/.test(t)) return false;
  return /[a-zA-Z]/.test(t);
}

/** Top-level indices of `ch` (outside (), [], {}). */
export function topLevelIndices(s: string, chars: string): number[] {
  const out: number[] = [];
  let depth = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === '\\' && (s[i + 1] === '{' || s[i + 1] === '}')) {
      depth += s[i + 1] === '{' ? 1 : -1;
      i++;
      continue;
    }
    if (c === '(' || c === '[' || c === '{') depth++;
    else if (c === ')' || c === ']' || c === '}') depth--;
    else if (depth === 0 && chars.includes(c)) out.push(i);
  }
  return out;
}

function stripAssignment(s: string): string {
  if (topLevelIndices(s, ',;').length) return s;
  const eq = topLevelIndices(s, '=').filter((i) => s[i - 1] !== '<' && s[i - 1] !== '>' && s[i - 1] !== '!');
  if (eq.length !== 1) return s;
  const lhs = s.slice(0, eq[0]);
  const rhs = s.slice(eq[0] + 1);
  if (!rhs || /[<>]/.test(rhs)) return s;
  return isNameLike(lhs) ? rhs : s;
}

/** `1000.0` → `1000`, `.5` → `0.5`, `004` → `4`, `2.50` → `2.5`, `+3` → `3`. Only for a lone number. */
function canonicalNumber(s: string): string {
  const m = /^([-+]?)(\d*)(?:\.(\d*))?$/.exec(s);
  if (!m || (!m[2] && !m[3])) return s;
  const sign = m[1] === '-' ? '-' : '';
  const int = (m[2] || '0').replace(/^0+(?=\d)/, '');
  const frac = (m[3] ?? '').replace(/0+$/, '');
  const out = frac ? `${int}.${frac}` : int;
  return out === '0' ? '0' : sign + out;
}
