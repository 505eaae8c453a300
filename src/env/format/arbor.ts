/**
 * `arbor`: the embedded engine's compact tool-call format. The char-level model pays one token per
 * character in a ~128-256 token context, so everything is short and ASCII:
 *
 *   tools offered:  "tools: calc(expr) get(key) set(key,value)\n" before the prompt
 *   a call:         "@calc((12+3)*4)"  positional arguments, split at top-level commas for a tool with
 *                   several parameters ("@set(c,19)"), the whole text for a one-parameter tool
 *                   "@set{"key":"c","value":19}"  JSON object arguments (always allowed); a name is
 *                   any MCP-legal one ("@get-sum(34,40)", "@a.b_c-1{}": names.ts)
 *   observation:    "\n= 60\n" (one "= result\n" line per result, errors "! message\n"), after the EOS
 *                   that ended the turn; the next policy turn follows it directly.
 *
 * Several calls per turn are allowed. Positional calls come back with their raw argument text under
 * POSITIONAL_ARGS; `resolvePositionalArguments` maps it onto a tool's JSON-schema parameters (every
 * environment that receives arbor calls uses it; `Toolset` does). Malformed calls (no name, no
 * bracket, unbalanced brackets, bad JSON) become error results, never exceptions.
 */
import { ConfigError } from '../../core/errors.js';
import type { JsonSchema, TextPiece, ToolCall, ToolCallFormat, ToolResult, ToolSpec } from '../types.js';
import { MAX_TOOL_NAME, toolNameProblem } from './names.js';

/** Key under which a positional call's raw argument text travels until a tool schema resolves it. */
export const POSITIONAL_ARGS = '$positional';

/** Longest raw call text quoted in an error message. */
const RAW_QUOTE = 40;

interface Span {
  start: number;
  end: number;
  call?: ToolCall;
  error?: ToolResult;
}

/** The longest run of MCP tool-name characters (names.ts); its length is checked after the match. */
const NAME = /^[A-Za-z0-9_.-]+/;

/** Index just past the bracket closing the one at `open` (quotes respected), or -1 when unbalanced. */
export function matchBracket(text: string, open: number): number {
  const pairs: Record<string, string> = { '(': ')', '{': '}', '[': ']' };
  const stack: string[] = [];
  let quote = false;
  for (let i = open; i < text.length; i++) {
    const ch = text[i];
    if (quote) {
      if (ch === '\\') i++;
      else if (ch === '"') quote = false;
      continue;
    }
    if (ch === '"') quote = true;
    else if (pairs[ch]) stack.push(pairs[ch]);
    else if (ch === ')' || ch === '}' || ch === ']') {
      if (stack.pop() !== ch) return -1;
      if (!stack.length) return i + 1;
    }
  }
  return -1;
}

function errorSpan(start: number, end: number, text: string, name: string, why: string): Span {
  const raw = text.slice(start, Math.min(end, start + RAW_QUOTE));
  return { start, end, error: { name, content: `malformed call ${JSON.stringify(raw)}: ${why}`, isError: true } };
}

/** One call starting at the "@" at `at`. */
function scanCall(text: string, at: number): Span {
  const m = NAME.exec(text.slice(at + 1));
  if (!m) return errorSpan(at, at + 1, text, '', 'expected a tool name (A-Z a-z 0-9 _ - .) after "@"');
  const name = m[0];
  if (name.length > MAX_TOOL_NAME) {
    return errorSpan(at, at + 1 + name.length, text, '', `a tool name is at most ${MAX_TOOL_NAME} characters`);
  }
  let i = at + 1 + name.length;
  while (text[i] === ' ' || text[i] === '\t') i++;
  const open = text[i];
  if (open !== '(' && open !== '{') return errorSpan(at, i, text, name, 'expected "(" or "{" after the tool name');
  const close = matchBracket(text, i);
  if (close < 0) return errorSpan(at, text.length, text, name, `unbalanced "${open}"`);
  const raw = text.slice(at, close);
  const inner = text.slice(i + 1, close - 1).trim();
  if (open === '(') {
    const args = inner === '' ? {} : { [POSITIONAL_ARGS]: inner };
    return { start: at, end: close, call: { name, arguments: args, raw } };
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text.slice(i, close));
  } catch (e) {
    return errorSpan(at, close, text, name, `bad JSON arguments (${(e as Error).message})`);
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed))
    return errorSpan(at, close, text, name, 'arguments must be a JSON object');
  return { start: at, end: close, call: { name, arguments: parsed as Record<string, unknown>, raw } };
}

function scan(text: string): Span[] {
  const spans: Span[] = [];
  let i = text.indexOf('@');
  while (i >= 0) {
    const span = scanCall(text, i);
    spans.push(span);
    i = text.indexOf('@', Math.max(span.end, i + 1));
  }
  return spans;
}

/** Split at top-level commas (brackets and double quotes respected). */
function splitTopLevel(text: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let quote = false;
  let last = 0;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (quote) {
      if (ch === '\\') i++;
      else if (ch === '"') quote = false;
    } else if (ch === '"') quote = true;
    else if ('([{'.includes(ch)) depth++;
    else if (')]}'.includes(ch)) depth--;
    else if (ch === ',' && depth === 0) {
      parts.push(text.slice(last, i).trim());
      last = i + 1;
    }
  }
  parts.push(text.slice(last).trim());
  return parts;
}

function coerce(value: string, schema: JsonSchema | undefined): unknown {
  const type = schema?.type;
  if (/^".*"$/s.test(value)) {
    try {
      const s = JSON.parse(value);
      if (type === 'string' || typeof s === 'string') return s;
    } catch {
      // keep the raw text: the schema check names the field
    }
  }
  if ((type === 'number' || type === 'integer') && /^[-+]?\d+(\.\d+)?([eE][-+]?\d+)?$/.test(value))
    return Number(value);
  if (type === 'boolean' && (value === 'true' || value === 'false')) return value === 'true';
  if ((type === 'array' || type === 'object') && /^[[{]/.test(value)) {
    try {
      return JSON.parse(value);
    } catch {
      return value;
    }
  }
  return value;
}

/**
 * Arguments for a tool: a positional arbor call's raw text mapped onto the schema's parameters (in
 * declaration order; one parameter takes the whole text), coerced to the declared scalar types.
 * Arguments without POSITIONAL_ARGS come back unchanged. An arity mismatch is `{ error }`.
 */
export function resolvePositionalArguments(
  args: Record<string, unknown>,
  inputSchema: JsonSchema,
): { args: Record<string, unknown> } | { error: string } {
  if (!(POSITIONAL_ARGS in args)) return { args };
  const raw = String(args[POSITIONAL_ARGS]);
  const properties = (inputSchema.properties ?? {}) as Record<string, JsonSchema>;
  const names = Object.keys(properties);
  const required = Array.isArray(inputSchema.required) ? (inputSchema.required as string[]) : [];
  if (!names.length) return { error: `takes no arguments, got ${JSON.stringify(raw)}` };
  const values = names.length === 1 ? [raw] : splitTopLevel(raw);
  if (values.length > names.length)
    return { error: `takes ${names.length} arguments (${names.join(', ')}), got ${values.length}` };
  const out: Record<string, unknown> = {};
  values.forEach((v, k) => (out[names[k]] = coerce(v, properties[names[k]])));
  const missing = required.filter((r) => !(r in out));
  if (missing.length) return { error: `missing argument ${missing.join(', ')} (takes ${names.join(', ')})` };
  return { args: out };
}

/** A tool's parameter names, for the one-line offer. */
function parameterNames(spec: ToolSpec): string[] {
  return Object.keys(((spec.inputSchema ?? {}) as { properties?: Record<string, unknown> }).properties ?? {});
}

/** The observation text for results, without pieces (what a demonstration shows). */
export function arborObservationText(results: ToolResult[]): string {
  return arborFormat()
    .renderObservation(results)
    .map((p) => p.text)
    .join('');
}

/**
 * The policy turns of an arbor transcript (turns with their observations, as a multi-turn response
 * decodes): observation lines ("= ..." / "! ...") separate turns. The last entry is the final turn
 * ('' when the transcript ends on an observation); a transcript without observations is one turn.
 */
export function arborPolicyTurns(transcript: string): string[] {
  const turns: string[] = [];
  let current: string[] = [];
  let afterObservation = false;
  for (const line of transcript.split('\n')) {
    if (/^[=!] /.test(line) || line === '=' || line === '!') {
      if (current.length) turns.push(current.join('\n'));
      current = [];
      afterObservation = true;
      continue;
    }
    current.push(line);
    afterObservation = false;
  }
  turns.push(afterObservation ? '' : current.join('\n'));
  return turns.map((t) => t.replace(/^\n+|\n+$/g, ''));
}

export function arborFormat(): ToolCallFormat {
  return {
    name: 'arbor',
    renderTools(tools: ToolSpec[]): string {
      if (!tools.length) return '';
      // a name is written bare, so only an MCP-legal one can be read back from a call
      for (const t of tools) {
        const problem = toolNameProblem(t.name);
        if (problem) {
          const why = `the arbor format cannot offer tool ${JSON.stringify(t.name)}: ${problem}`;
          throw new ConfigError(`${why} (leave it out with env.tools, or use generate.format: qwen3)`, 'env.tools');
        }
      }
      return `tools: ${tools.map((t) => `${t.name}(${parameterNames(t).join(',')})`).join(' ')}\n`;
    },
    renderPrompt(prompt: string, tools: ToolSpec[]): string {
      return this.renderTools(tools) + prompt;
    },
    parseCalls(turnText: string): { calls: ToolCall[]; errors: ToolResult[] } {
      const calls: ToolCall[] = [];
      const errors: ToolResult[] = [];
      for (const span of scan(turnText)) {
        if (span.call) calls.push(span.call);
        if (span.error) errors.push(span.error);
      }
      return { calls, errors };
    },
    renderObservation(results: ToolResult[]): TextPiece[] {
      if (!results.length) return [];
      const pieces: TextPiece[] = [{ text: '\n', special: true }];
      for (const r of results) {
        pieces.push(
          { text: r.isError ? '! ' : '= ', special: true },
          { text: r.content, special: false },
          { text: '\n', special: true },
        );
      }
      return pieces;
    },
    finalAnswer(turnText: string): string {
      let out = '';
      let last = 0;
      for (const span of scan(turnText)) {
        out += turnText.slice(last, span.start);
        last = span.end;
      }
      return (out + turnText.slice(last)).trim();
    },
  };
}
