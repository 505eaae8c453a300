/**
 * Tool calls in sampled text as vLLM returns them with `--enable-auto-tool-choice --tool-call-parser
 * hermes|llama3_json`, the request's `tool_choice` checks and the choice's finish reason; pure functions over
 * strings. Read in vllm-project/vllm: vllm/tool_parsers/hermes_tool_parser.py@becf329 and llama_tool_parser.py@13e48c2
 * (`extract_tool_calls`; llama unchanged @055e47c), vllm/entrypoints/openai/chat_completion/protocol.py@d5dba2d
 * (`check_tool_usage`), chat_completion/serving.py@5e91864 (`render_chat_request`, finish reasons) and
 * engine/serving.py@619e4b3 (`_parse_tool_calls_from_content`: blank content becomes null).
 * Arguments are re-serialised as Python's json.loads + json.dumps(ensure_ascii=False) would (key order, `1.0`,
 * NaN, big ints), by the small reader and writer at the bottom. Not done: vLLM's streamed argument diffs (a
 * stream here holds back what may still become a call and parses the whole text at the end, so streamed and
 * one-shot results are equal: spec agent-gateway §3), a reasoning parser, the llama regex timeout, Python's
 * exact recursion limit on deeply nested JSON (a JS stack overflow counts as the RecursionError).
 */
import { BadRequest } from './validate.js';
import { chatTools } from './vllm/params.js';

export const TOOL_CALL_PARSERS = ['hermes', 'llama3_json'] as const;
export type ToolCallParserName = (typeof TOOL_CALL_PARSERS)[number];

/** One OpenAI tool call as returned (`arguments`: the JSON text of the arguments, as Python's json.dumps writes it). */
export interface ParsedToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

/** One finished choice's text, parsed. */
export interface ToolCallParse {
  /** The text outside the calls as vLLM returns it (null where vLLM returns None). */
  content: string | null;
  toolCalls: ParsedToolCall[];
  /** The text held call markup (hermes `<tool_call>`; llama3_json `{` or `<|python_tag|>`) but no calls came back. */
  failed: boolean;
}

const OPEN = '<tool_call>';
const CLOSE = '</tool_call>';
const PYTHON_TAG = '<|python_tag|>';

/**
 * The calls in a finished choice's text, all or nothing as vLLM: any call that does not parse returns the whole
 * text as content. hermes: every `<tool_call>…</tool_call>` (an unterminated last one runs to the end), content
 * the text before the first tag, text between and after calls dropped; a `<tool_call>` inside `<think>` counts
 * too (vLLM without a reasoning parser). llama3_json: every `{` outside an earlier object starts an object that
 * must have `name` and `arguments` or `parameters`; with calls the content is null. `makeId` runs once per call.
 */
export function parseToolCalls(parser: ToolCallParserName, text: string, makeId: () => string): ToolCallParse {
  const found = parser === 'hermes' ? hermesCalls(text) : llama3JsonCalls(text);
  if (!found?.length) return { content: text, toolCalls: [], failed: hasCallMarkup(parser, text) };
  const before = parser === 'hermes' ? text.slice(0, text.indexOf(OPEN)) : '';
  const toolCalls = found.map((f): ParsedToolCall => ({ id: makeId(), type: 'function', function: f }));
  return { content: isPythonBlank(before, before.length) ? null : before, toolCalls, failed: false };
}

function hasCallMarkup(parser: ToolCallParserName, text: string): boolean {
  return parser === 'hermes' ? text.includes(OPEN) : text.includes(PYTHON_TAG) || text.includes('{');
}

/** hermes (becf329): findall(`<tool_call>(.*?)</tool_call>|<tool_call>(.*)`), json.loads of each capture. */
function hermesCalls(text: string): FunctionText[] | null {
  const calls: FunctionText[] = [];
  try {
    for (let open = text.indexOf(OPEN); open >= 0;) {
      const close = text.indexOf(CLOSE, open + OPEN.length);
      const call = pyLoads(text.slice(open + OPEN.length, close < 0 ? text.length : close));
      let args = pyItem(call, 'arguments');
      // becf329 decodes double-encoded arguments once; vLLM main (@055e47c) no longer does (PR #54964 open)
      if (typeof args === 'string') args = pyLoads(args);
      calls.push({ name: pyName(pyItem(call, 'name')), arguments: pyDumps(args) });
      open = close < 0 ? -1 : text.indexOf(OPEN, close + CLOSE.length);
    }
  } catch (error) {
    if (isPythonException(error)) return null;
    throw error;
  }
  return calls;
}

/** llama3_json (13e48c2): raw_decode from every `{` past the last object's end (`start <= end` skips one). */
function llama3JsonCalls(text: string): FunctionText[] | null {
  const calls: FunctionText[] = [];
  try {
    for (let at = text.indexOf('{'); at >= 0;) {
      const [value, after] = new PyJsonReader(text, false).value(at);
      calls.push(llamaCall(value));
      at = text.indexOf('{', after + 1);
    }
  } catch (error) {
    if (isPythonException(error)) return null;
    throw error;
  }
  return calls;
}

interface FunctionText {
  name: string;
  arguments: string;
}

function llamaCall(value: PyValue): FunctionText {
  const name = pyName(pyItem(value, 'name'));
  const args = value instanceof Map && value.has('arguments') ? value.get('arguments')! : pyItem(value, 'parameters');
  return { name, arguments: pyDumps(args) };
}

/**
 * One streamed choice: `push` each text delta in order and send what it returns as content now; `end` (once)
 * gives the rest of the content and the calls. The content sent plus `end().content` equals
 * `parseToolCalls(...).content ?? ''` of the whole text, and the calls are equal, by construction: the text is
 * parsed once at the end, and only a prefix that is content whatever follows is sent early. hermes: the text
 * before the first `<tool_call>`, less a possible partial tag at the end, and nothing while that prefix is blank
 * (vLLM nulls blank content when calls follow). llama3_json: nothing until a `{` that cannot start a call is
 * complete (then every character is content), since a later call would null all content; plain prose waits.
 */
export class ToolCallStream {
  private text = '';
  /** Characters of `text` returned as content so far. */
  private sent = 0;
  /** hermes: index of the first `<tool_call>`, -1 while none. */
  private openAt = -1;
  /** llama3_json: where the next `{` may start (past the last complete call object). */
  private scanFrom = 0;
  /** llama3_json: the text length at which an unfinished object is read again. */
  private retryAt = 0;
  /** llama3_json: a `{` failed for good, so the whole text is content. */
  private settled = false;

  constructor(
    readonly parser: ToolCallParserName,
    private readonly makeId: () => string,
  ) {}

  push(delta: string): string {
    const searchFrom = Math.max(0, this.text.length - OPEN.length + 1);
    this.text += delta;
    const safe = this.parser === 'hermes' ? this.hermesSafe(searchFrom) : this.llamaSafe();
    if (safe <= this.sent) return '';
    const out = this.text.slice(this.sent, safe);
    this.sent = safe;
    return out;
  }

  end(): { content: string; toolCalls: ParsedToolCall[]; failed: boolean } {
    const parse = parseToolCalls(this.parser, this.text, this.makeId);
    const content = parse.content ?? '';
    if (!content.startsWith(this.text.slice(0, this.sent))) {
      throw new Error('ToolCallStream sent text that is not content'); // unreachable: see the class comment
    }
    return { content: content.slice(this.sent), toolCalls: parse.toolCalls, failed: parse.failed };
  }

  /** hermes: like vLLM@055e47c's `_extract_content`, which holds back a `partial_tag_overlap` too. */
  private hermesSafe(searchFrom: number): number {
    if (this.openAt < 0) this.openAt = this.text.indexOf(OPEN, searchFrom);
    const limit = this.openAt >= 0 ? this.openAt : this.text.length - partialTagOverlap(this.text, OPEN);
    return this.sent === 0 && isPythonBlank(this.text, limit) ? 0 : limit;
  }

  private llamaSafe(): number {
    if (!this.settled && this.text.length >= this.retryAt) this.settled = this.llamaSettles();
    return this.settled ? this.text.length : 0;
  }

  /** Whether a `{` past the last complete call can no longer start a call, whatever follows. */
  private llamaSettles(): boolean {
    for (let at = this.text.indexOf('{', this.scanFrom); at >= 0; at = this.text.indexOf('{', this.scanFrom)) {
      try {
        const [value, after] = new PyJsonReader(this.text, true).value(at);
        llamaCall(value);
        this.scanFrom = after + 1;
      } catch (error) {
        if (error instanceof PythonJsonError) return true;
        if (error !== INCOMPLETE && !(error instanceof RangeError)) throw error;
        // unfinished: read it again once the text has grown by as much again, so all reads stay linear
        this.scanFrom = at;
        this.retryAt = 2 * this.text.length - at;
        return false;
      }
    }
    // the next `{` can only come at or after the current end (never before scanFrom, which skips one)
    this.scanFrom = Math.max(this.scanFrom, this.text.length);
    return false;
  }
}

/** Length of the longest proper prefix of `tag` that `text` ends with. */
function partialTagOverlap(text: string, tag: string): number {
  for (let k = Math.min(text.length, tag.length - 1); k > 0; k--) if (text.endsWith(tag.slice(0, k))) return k;
  return 0;
}

/** Whether text[0, end) is empty or only whitespace by Python's str.strip(). */
function isPythonBlank(text: string, end: number): boolean {
  for (let i = 0; i < end; i++) if (!PYTHON_SPACE.test(text[i])) return false;
  return true;
}
/** The characters of Python's str.isspace(). */
// eslint-disable-next-line no-control-regex -- U+001C..U+001F are whitespace to Python
const PYTHON_SPACE = /[\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]/;

/** The request's tool choice after vLLM's checks (absent `tool_choice` is `undefined`, an explicit null `null`). */
export type ToolChoice = { kind: 'none' } | { kind: 'auto' } | { kind: 'required' } | { kind: 'named'; name: string };

const CORRECT_USAGE = 'Correct usage: `{"type": "function", "function": {"name": "my_function"}}`';

/**
 * vLLM's checks: tools without tool_choice → auto (none without tools); null → auto when tools and a parser,
 * else none; a tool_choice other than "none" without tools → 400; a malformed one or a named function absent
 * from tools → 400; "required" with empty tools → none; "auto" without --enable-auto-tool-choice and a parser
 * → 400 with vLLM's message, as "required" or named (5e91864); "auto" with empty tools parses nothing (none).
 */
export function resolveToolChoice(
  tools: unknown,
  toolChoice: unknown,
  server: { autoToolChoice: boolean; parser?: ToolCallParserName },
): ToolChoice {
  const list = chatTools(tools);
  const parsing = server.autoToolChoice && server.parser !== undefined;
  const choice = toolChoice === undefined ? (list?.length ? 'auto' : 'none') : toolChoice;
  if (choice === 'none') return { kind: 'none' };
  if (choice === null) return list?.length && parsing ? { kind: 'auto' } : { kind: 'none' };
  if (list === undefined) throw toolChoiceError('When using `tool_choice`, `tools` must be set.');
  if (choice !== 'auto' && choice !== 'required' && !isObject(choice)) {
    const supported = 'Only named tools, "none", "auto" or "required" are supported.';
    throw toolChoiceError(`Invalid value for \`tool_choice\`: ${pyStr(choice)}! ${supported}`);
  }
  if (choice === 'required' && list.length === 0) return { kind: 'none' };
  const name = isObject(choice) ? namedFunction(choice, list) : undefined;
  if (!parsing && choice === 'auto') {
    throw toolChoiceError('"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set');
  }
  if (!parsing) {
    const shown =
      name === undefined ? 'required' : `function=ChatCompletionNamedFunction(name=${pyRepr(name)}) type='function'`;
    throw toolChoiceError(`tool_choice="${shown}" requires --tool-call-parser to be set`);
  }
  if (name !== undefined) return { kind: 'named', name };
  return choice === 'required' ? { kind: 'required' } : list.length ? { kind: 'auto' } : { kind: 'none' };
}

/** The function name of `{"type": "function", "function": {"name": ...}}`, which must name one of the tools. */
function namedFunction(choice: Record<string, unknown>, tools: { function: { name: string } }[]): string {
  const fn = choice.function;
  if (!isObject(fn)) {
    throw toolChoiceError(`Invalid value for \`function\`: \`${pyStr(fn)}\` in \`tool_choice\`! ${CORRECT_USAGE}`);
  }
  if (!('name' in fn)) {
    throw toolChoiceError(`Expected field \`name\` in \`function\` in \`tool_choice\`! ${CORRECT_USAGE}`);
  }
  const name = fn.name;
  if (typeof name !== 'string' || !name) {
    throw toolChoiceError(`Invalid \`name\` in \`function\`: \`${pyStr(name)}\` in \`tool_choice\`! ${CORRECT_USAGE}`);
  }
  if (!tools.some((t) => t.function.name === name)) {
    throw toolChoiceError('The tool specified in `tool_choice` does not match any of the specified `tools`');
  }
  // pydantic's ChatCompletionNamedToolChoiceParam: `type` is Literal["function"], "function" when absent
  if (choice.type !== undefined && choice.type !== 'function') throw toolChoiceError(`"type" must be "function"`);
  return name;
}

function toolChoiceError(why: string): BadRequest {
  return new BadRequest(`field "tool_choice": ${why}`);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Python's str() of a JSON value, as vLLM's messages print it (containers approximately). */
function pyStr(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value === null || value === undefined) return 'None';
  if (typeof value === 'boolean') return value ? 'True' : 'False';
  return JSON.stringify(value);
}

/** Python's repr() of a string (quotes, backslash and the common control characters). */
function pyRepr(text: string): string {
  const quote = text.includes("'") && !text.includes('"') ? '"' : "'";
  const named: Record<string, string> = { '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t', [quote]: `\\${quote}` };
  return quote + [...text].map((c) => named[c] ?? c).join('') + quote;
}

/**
 * finish_reason as vLLM sets it (serving.py@5e91864): "tool_calls" when auto produced calls or required stopped
 * normally, else the engine's, a named call included ("stop" when it completes, "length" when cut).
 */
export function toolFinishReason(choice: ToolChoice, engineReason: 'stop' | 'length' | 'abort', calls: number): string {
  if (choice.kind === 'auto' && calls > 0) return 'tool_calls';
  if (choice.kind === 'required' && engineReason === 'stop') return 'tool_calls';
  return engineReason;
}

// ---- Python's json module, as far as tool calls see it (CPython _json.c scanner, json.dumps) ----

/** A number kept as the text json.dumps writes back: an int's digits, a float's repr (`1.0`, `1e-05`, `NaN`). */
class PyNumber {
  constructor(readonly repr: string) {}
}
/** A JSON value as Python holds it: a dict keeps first-insertion key order with the last value (a Map). */
type PyValue = null | boolean | string | PyNumber | PyValue[] | Map<string, PyValue>;

/** What Python would raise (JSONDecodeError, KeyError, TypeError, pydantic's ValidationError). */
class PythonJsonError extends Error {
  override name = 'PythonJsonError';
}
/** Partial reading only: the answer depends on text not yet sampled. */
const INCOMPLETE = new Error('incomplete JSON');

/** Python's RecursionError on deep nesting has no exact JS twin; a stack overflow counts as one. */
function isPythonException(error: unknown): boolean {
  return error instanceof PythonJsonError || error instanceof RangeError;
}

const LITERALS: [string, PyValue][] = [
  ['null', null],
  ['true', true],
  ['false', false],
  ['NaN', new PyNumber('NaN')],
  ['Infinity', new PyNumber('Infinity')],
  ['-Infinity', new PyNumber('-Infinity')],
];
const ESCAPES: Record<string, string> = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };
/** Python 3.11+ refuses int strings longer than this (sys.int_info.default_max_str_digits). */
const MAX_INT_DIGITS = 4300;

/**
 * Python's scanner over `text`. Every character is read through `at`, so in partial mode (a text still being
 * sampled) any decision that would look past the end throws INCOMPLETE, and any other error is final: it
 * depends only on characters already there.
 */
class PyJsonReader {
  constructor(
    private readonly text: string,
    private readonly partial: boolean,
  ) {}

  private at(i: number): string {
    if (i < this.text.length) return this.text[i];
    if (this.partial) throw INCOMPLETE;
    return '';
  }

  private space(i: number): number {
    for (let c = this.at(i); c === ' ' || c === '\t' || c === '\n' || c === '\r'; c = this.at(++i));
    return i;
  }

  /** One value at i (scan_once): the value and the index after it. */
  value(i: number): [PyValue, number] {
    const c = this.at(i);
    if (c === '"') return this.string(i + 1);
    if (c === '{') return this.object(i + 1);
    if (c === '[') return this.array(i + 1);
    for (const [word, value] of LITERALS) if (c === word[0] && this.spells(i, word)) return [value, i + word.length];
    return this.number(i);
  }

  private spells(i: number, word: string): boolean {
    for (let k = 1; k < word.length; k++) if (this.at(i + k) !== word[k]) return false;
    return true;
  }

  private number(i: number): [PyValue, number] {
    let j = this.at(i) === '-' ? i + 1 : i;
    const first = this.at(j);
    if (first === '0') j++;
    else if (first >= '1' && first <= '9') {
      j++;
      while (isDigit(this.at(j))) j++;
    } else throw new PythonJsonError('Expecting value');
    let float = false;
    if (this.at(j) === '.' && isDigit(this.at(j + 1))) {
      float = true;
      j += 2;
      while (isDigit(this.at(j))) j++;
    }
    const e = this.at(j);
    if (e === 'e' || e === 'E') {
      let k = j + 1;
      const sign = this.at(k);
      if (sign === '-' || sign === '+') k++;
      const digitsFrom = k;
      while (isDigit(this.at(k))) k++;
      if (k > digitsFrom) [float, j] = [true, k]; // else Python backs off to before the 'e'
    }
    const text = this.text.slice(i, j);
    if (float) return [new PyNumber(pyFloatRepr(Number(text))), j];
    if (text.replace('-', '').length > MAX_INT_DIGITS) throw new PythonJsonError('Exceeds the limit for int digits');
    return [new PyNumber(text === '-0' ? '0' : text), j];
  }

  private string(i: number): [string, number] {
    let out = '';
    let from = i;
    for (let j = i; ;) {
      const c = this.at(j);
      if (c === '"') return [out + this.text.slice(from, j), j + 1];
      if (c === '\\') {
        out += this.text.slice(from, j);
        const kind = this.at(j + 1);
        if (kind === 'u') out += String.fromCharCode(this.hex4(j + 2));
        else if (ESCAPES[kind] !== undefined) out += ESCAPES[kind];
        else throw new PythonJsonError('Invalid \\escape');
        j += kind === 'u' ? 6 : 2;
        from = j;
      } else if (c === '') throw new PythonJsonError('Unterminated string');
      else if (c < ' ') throw new PythonJsonError('Invalid control character');
      else j++;
    }
  }

  /** Four hex digits (a surrogate pair's halves combine by themselves in a JS string). */
  private hex4(i: number): number {
    let code = 0;
    for (let k = 0; k < 4; k++) {
      const digit = this.at(i + k);
      if (!/^[0-9a-fA-F]$/.test(digit)) throw new PythonJsonError('Invalid \\uXXXX escape');
      code = code * 16 + parseInt(digit, 16);
    }
    return code;
  }

  private object(i: number): [PyValue, number] {
    const entries = new Map<string, PyValue>();
    let j = this.space(i);
    if (this.at(j) === '}') return [entries, j + 1];
    for (;;) {
      if (this.at(j) !== '"') throw new PythonJsonError('Expecting property name enclosed in double quotes');
      const [key, afterKey] = this.string(j + 1);
      j = this.space(afterKey);
      if (this.at(j) !== ':') throw new PythonJsonError("Expecting ':' delimiter");
      const [value, afterValue] = this.value(this.space(j + 1));
      entries.set(key, value);
      j = this.space(afterValue);
      const c = this.at(j);
      if (c === '}') return [entries, j + 1];
      if (c !== ',') throw new PythonJsonError("Expecting ',' delimiter");
      j = this.space(j + 1);
    }
  }

  private array(i: number): [PyValue, number] {
    const items: PyValue[] = [];
    let j = this.space(i);
    if (this.at(j) === ']') return [items, j + 1];
    for (;;) {
      const [value, after] = this.value(j);
      items.push(value);
      j = this.space(after);
      const c = this.at(j);
      if (c === ']') return [items, j + 1];
      if (c !== ',') throw new PythonJsonError("Expecting ',' delimiter");
      j = this.space(j + 1);
    }
  }
}

function isDigit(c: string): boolean {
  return c >= '0' && c <= '9' && c !== '';
}

/** json.loads: one value, whitespace around it allowed. */
function pyLoads(text: string): PyValue {
  const reader = new PyJsonReader(text, false);
  const [value, after] = reader.value(skipJsonSpace(text, 0));
  if (skipJsonSpace(text, after) !== text.length) throw new PythonJsonError('Extra data');
  return value;
}

function skipJsonSpace(text: string, i: number): number {
  while (i < text.length && ' \t\n\r'.includes(text[i])) i++;
  return i;
}

/** value[key] on a parsed JSON value: a KeyError or TypeError unless a dict holds the key. */
function pyItem(value: PyValue, key: string): PyValue {
  if (!(value instanceof Map) || !value.has(key)) throw new PythonJsonError(`no "${key}"`);
  return value.get(key)!;
}

/** pydantic's `name: str`: only a string passes. */
function pyName(value: PyValue): string {
  if (typeof value !== 'string') throw new PythonJsonError('"name" is not a string');
  return value;
}

/** json.dumps(value, ensure_ascii=False): separators ", " and ": ", keys in dict order. */
function pyDumps(value: PyValue): string {
  if (value === null) return 'null';
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (typeof value === 'string') return pyJsonString(value);
  if (value instanceof PyNumber) return value.repr;
  if (Array.isArray(value)) return `[${value.map(pyDumps).join(', ')}]`;
  return `{${[...value].map(([key, item]) => `${pyJsonString(key)}: ${pyDumps(item)}`).join(', ')}}`;
}

const JSON_ESCAPES: Record<string, string> = {
  '"': '\\"',
  '\\': '\\\\',
  '\b': '\\b',
  '\f': '\\f',
  '\n': '\\n',
  '\r': '\\r',
  '\t': '\\t',
};

/** A JSON string as json.dumps writes it without ensure_ascii: only `"`, `\` and U+0000..U+001F escaped. */
function pyJsonString(text: string): string {
  const escape = (c: string) => JSON_ESCAPES[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;
  return `"${text.replace(JSON_ESCAPED, escape)}"`;
}
// eslint-disable-next-line no-control-regex -- these are the characters json.dumps escapes
const JSON_ESCAPED = /["\\\x00-\x1f]/g;

/**
 * Python's repr of a float. JS and Python print the same shortest round-trip digits; Python lays them out in
 * fixed notation with `.0` when the decimal point is at -3..16 (0.0001, 1e15 as 1000000000000000.0), else as
 * `1e-05` / `1e+16` (at least two exponent digits).
 */
function pyFloatRepr(x: number): string {
  if (Number.isNaN(x)) return 'NaN';
  if (!Number.isFinite(x)) return x > 0 ? 'Infinity' : '-Infinity';
  if (x === 0) return Object.is(x, -0) ? '-0.0' : '0.0';
  const shortest = String(Math.abs(x));
  const [mantissa, exponent = '0'] = shortest.split('e');
  const intLength = mantissa.split('.')[0].length;
  const all = mantissa.replace('.', '');
  const lead = all.length - all.replace(/^0+/, '').length;
  const digits = all.slice(lead).replace(/0+$/, '');
  const point = intLength + Number(exponent) - lead; // x = 0.digits × 10^point
  const sign = x < 0 ? '-' : '';
  if (point <= -4 || point > 16) {
    const e = point - 1;
    const mant = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    return `${sign}${mant}e${e < 0 ? '-' : '+'}${String(Math.abs(e)).padStart(2, '0')}`;
  }
  if (point <= 0) return `${sign}0.${'0'.repeat(-point)}${digits}`;
  if (point >= digits.length) return `${sign}${digits}${'0'.repeat(point - digits.length)}.0`;
  return `${sign}${digits.slice(0, point)}.${digits.slice(point)}`;
}
