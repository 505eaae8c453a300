/**
 * Final-answer extraction from a math solution or a model's output, in priority order:
 *  1. the LAST `\boxed{...}` / `\fbox{...}` (nested braces handled; `\boxed 5` also accepted). Boxes
 *     that directly precede the last one, separated only by connectors ("and", commas, `\quad`,
 *     `$`) or by a short same-line stretch that ends no sentence, are joined with ", " —
 *     "\boxed{1} and \boxed{2}" and "\boxed{1} papers and \boxed{2} bins" give "1, 2".
 *  2. GSM8K style `#### X` (last occurrence).
 *  3. "The final answer is X" / "The answer is: X" / "Final answer: X" (last occurrence; trailing
 *     period and "I hope it is correct" dropped; `$...$` around X removed).
 *     A "The final answer is X" stated after the last box takes precedence over the box. A
 *     prose statement around exactly one number ("Final Answer: it took 3 hours") gives the number.
 *  4. the last display or inline math span (`\[..\]`, `$$..$$`, `\(..\)`, `$..$`; inline spans may
 *     not cross a line break; `\$` is not a delimiter); spans joined only by "and"/"or"/commas
 *     are one answer ("$1$ and $2$" gives "1, 2").
 * There is deliberately no last-number fallback: text without a box, marker or math span has no
 * extracted answer (callers may use a short response whole).
 * Returns null when none applies. `goldAnswer` picks a dataset's reference answer out of its solution.
 */

/** A located `\boxed{...}` group: content and the [start, end) span of the whole command. */
interface BoxSpan {
  content: string;
  start: number;
  end: number;
}

/** Index just past the brace group opening at `open` (text[open] === '{'); escaped braces ignored. */
export function matchBrace(text: string, open: number): number {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    const ch = text[i];
    if (ch === '\\') {
      i++;
      continue;
    }
    if (ch === '{') depth++;
    else if (ch === '}') {
      depth--;
      if (depth === 0) return i + 1;
    }
  }
  return -1;
}

/** All `\boxed{..}` / `\fbox{..}` groups in order of appearance. */
export function findBoxed(text: string): BoxSpan[] {
  const out: BoxSpan[] = [];
  const re = /\\+(?:boxed|fbox)\b/g;
  let m: RegExpExecArray | null;
  while ((m = re.exec(text)) !== null) {
    let i = m.index + m[0].length;
    while (i < text.length && (text[i] === ' ' || text[i] === '\t')) i++;
    if (text[i] === '{') {
      const end = matchBrace(text, i);
      if (end < 0) {
        out.push({ content: text.slice(i + 1), start: m.index, end: text.length });
        break;
      }
      out.push({ content: text.slice(i + 1, end - 1), start: m.index, end });
      re.lastIndex = end;
    } else if (i > m.index + m[0].length) {
      // `\boxed 5`: one token after a space.
      const tok = /^[^\s$.,;]+/.exec(text.slice(i));
      if (tok) {
        out.push({ content: tok[0], start: m.index, end: i + tok[0].length });
        re.lastIndex = i + tok[0].length;
      }
    }
  }
  return out;
}

const CONNECTOR = /^(?:\s|,|;|&|\$|\\[()[\]]|\\\\|\\quad|\\qquad|\\[,;: !]|\\text\{\s*(?:and|,)?\s*\}|\band\b|\.)*$/i;

/** Longest stretch of same-line text between two boxes that still joins them into one answer. */
const SAME_LINE_GAP = 40;

/**
 * Do two boxes separated by `gap` belong to one answer? Connector-only gaps always do; so does a
 * short stretch on the same line that ends no sentence and either lists ("and", "or", a comma) or
 * holds no words ("\boxed{1} papers and \boxed{2} bins", "y_1 = \boxed{..} and y_2 = \boxed{..}").
 */
function joinsBoxes(gap: string): boolean {
  if (CONNECTOR.test(gap)) return true;
  if (gap.length > SAME_LINE_GAP || /\n|\\n(?![a-z])/.test(gap) || /[.!?](?=\s|$)/.test(gap)) return false;
  // A listing ("and", "or", a comma) or no words at all; "\boxed{1} no no \boxed{2}" is a correction.
  const words = gap.replace(/\\[a-zA-Z]+/g, ' ').match(/[a-zA-Z]{2,}/g) ?? [];
  return !words.length || /\b(?:and|or)\b|,|;/i.test(gap.replace(/\\[a-zA-Z]+/g, ' '));
}

/** The last boxed answer, joined with the boxes directly before it that belong to the same answer. */
export function lastBoxed(text: string): string | null {
  const boxes = findBoxed(text);
  if (!boxes.length) return null;
  const parts = [boxes[boxes.length - 1].content];
  for (let k = boxes.length - 2; k >= 0; k--) {
    const gap = text.slice(boxes[k].end, boxes[k + 1].start);
    if (!joinsBoxes(gap)) break;
    parts.unshift(boxes[k].content);
  }
  return parts.map((p) => p.trim()).join(', ');
}

/** Strip `$...$` / `\(...\)` wrappers, a trailing period and surrounding whitespace. */
export function stripMathDelimiters(s: string): string {
  let t = s.trim();
  for (let guard = 0; guard < 4; guard++) {
    const before = t;
    t = t.replace(/[.\s]+$/, '').trim();
    const m =
      /^\$\$([\s\S]*)\$\$$/.exec(t) ??
      /^\$([\s\S]*)\$$/.exec(t) ??
      /^\\\(([\s\S]*)\\\)$/.exec(t) ??
      /^\\\[([\s\S]*)\\\]$/.exec(t);
    if (m && !m[1].includes('$')) t = m[1].trim();
    if (t === before) break;
  }
  return t;
}

/** One number as written in prose: sign, thousands commas, decimals, a simple fraction. */
const PROSE_NUMBER =
  /(?<![\w.])[-−]?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w,]*\d)|(?<![\w.])[-−]?\d+(?:\.\d+)?(?:\/\d+)?(?!\w)/g;

/**
 * Everything after the last "answer is" style marker, cut to one short statement. A statement
 * written as prose around exactly one number ("Final Answer: Jane started 3 hours ago") gives
 * that number. `from` skips markers that start before that index.
 */
function answerPhrase(text: string, from = 0): string | null {
  const re = /(?:final answer is|the answer is|answer is|final answer|the answer should be)\s*[:：]?/gi;
  let last: RegExpExecArray | null = null;
  let m: RegExpExecArray | null;
  while ((m = re.exec(text)) !== null) if (m.index >= from) last = m;
  if (!last) return null;
  let rest = text.slice(last.index + last[0].length);
  rest = rest.replace(/\s*I hope it is correct[\s\S]*$/i, '').replace(/<\|[\s\S]*$/, '');
  rest = rest.trim().replace(/^(?:\\?["“])+/, '');
  // Prefer a math span at the start of the phrase ("$12$ and $13$" is one answer, "12, 13").
  const mathStart =
    /^(\$\$[\s\S]*?\$\$|\$[^$]*\$|\\\([\s\S]*?\\\)|\\\[[\s\S]*?\\\])(?:[ \t]*(?:,|;|\band\b|\bor\b)[ \t]*(?:\$[^$\n]*\$|\\\([^\n]*?\\\)))*/i.exec(
      rest,
    );
  if (mathStart)
    return stripMathDelimiters(
      mathStart[0].includes('$', 2) && !mathStart[0].startsWith('$$')
        ? (lastMathSpan(mathStart[0]) ?? mathStart[1])
        : mathStart[1],
    );
  // Otherwise one line, cut at the end of the sentence (a period followed by space or end).
  let line = rest.split('\n')[0];
  const stop = /\.(?=\s|$)/.exec(line);
  if (stop) line = line.slice(0, stop.index);
  // "The largest $n$ is 34" → "34".
  if (/[a-z]{3,}/i.test(line.replace(/\\[a-zA-Z]+/g, '')) && /\sis\s/.test(line)) {
    line = line.slice(line.lastIndexOf(' is ') + 4);
  }
  // Prose around one number: "Jane started growing Sphere 3 hours ago" → "3".
  const words = line.replace(/\\[a-zA-Z]+/g, '').match(/[a-z]{3,}/gi) ?? [];
  if (words.length >= 2 && !/[$\\=^_{}]/.test(line)) {
    const nums = line.match(PROSE_NUMBER) ?? [];
    if (nums.length === 1) line = nums[0].replace('−', '-');
  }
  const t = stripMathDelimiters(line);
  return t.length ? t : null;
}

/** Gap between inline math spans that lists them as one answer: "$1$ and $2$", "$21,16$ or $11$". */
const SPAN_CONNECTOR = /^(?:[ \t]|,|;|\band\b|\bor\b)*$/i;

/**
 * The last display/inline math span in the text (inline spans stay on one line; an escaped `\$`
 * is a dollar sign, not a delimiter), joined with ", " to the spans directly before it that are
 * separated only by "and" / "or" / commas.
 */
function lastMathSpan(text: string): string | null {
  const re =
    /(?<!\\)\$\$([\s\S]+?)(?<!\\)\$\$|\\\[([\s\S]+?)\\\]|\\\(([^\n]+?)\\\)|(?<!\\)\$((?:\\\$|[^$\n])+?)(?<!\\)\$/g;
  const spans: BoxSpan[] = [];
  let m: RegExpExecArray | null;
  while ((m = re.exec(text)) !== null) {
    const body = (m[1] ?? m[2] ?? m[3] ?? m[4] ?? '').trim();
    if (body) spans.push({ content: body, start: m.index, end: m.index + m[0].length });
  }
  if (!spans.length) return null;
  const parts = [spans[spans.length - 1].content];
  for (let k = spans.length - 2; k >= 0; k--) {
    const gap = text.slice(spans[k].end, spans[k + 1].start);
    if (!gap.trim() || !SPAN_CONNECTOR.test(gap)) break;
    parts.unshift(spans[k].content);
  }
  return parts.join(', ');
}

/** The final answer of a solution or model output (see the file comment), or null. */
export function extractAnswer(text: string): string | null {
  if (typeof text !== 'string' || !text) return null;
  const boxed = lastBoxed(text);
  if (boxed !== null && boxed.trim()) {
    // "The final answer is X" stated after the last box overrides it (a later, explicit commitment).
    const boxes = findBoxed(text);
    const after = boxes[boxes.length - 1].end;
    if (/final answer is/i.test(text.slice(after))) {
      const later = answerPhrase(text, after);
      if (later) return later;
    }
    return boxed.trim();
  }
  const hashes = text.match(/####\s*([^\n]*)/g);
  if (hashes) {
    const v = hashes[hashes.length - 1].replace(/^####\s*/, '');
    const t = stripMathDelimiters(v);
    if (t) return t;
  }
  const phrase = answerPhrase(text);
  if (phrase) return phrase;
  return lastMathSpan(text);
}

/**
 * Reference answer of a dataset solution: GSM8K `… #### 18` → "18"; MATH-style solutions ending in
 * "The answer is: X" → X; otherwise the last boxed answer. Null when none is found.
 */
export function goldAnswer(solution: string): string | null {
  const hashes = solution.match(/####\s*([^\n]*)/g);
  if (hashes) return stripMathDelimiters(hashes[hashes.length - 1].replace(/^####\s*/, '')) || null;
  const at = solution.lastIndexOf('The answer is');
  if (at >= 0) {
    const rest = solution.slice(at + 'The answer is'.length).replace(/^:?\s*/, '');
    if (rest.trim()) return stripMathDelimiters(rest);
  }
  return lastBoxed(solution);
}
