/**
 * vLLM-compatible tool-call parsing (src/serve/tool-calls.ts) at the module's level: spec agent-gateway §6
 * tests 1-8 on model-like outputs (Qwen3's `<tool_call>` blocks, Llama 3.1's `<|python_tag|>` JSON), the
 * arguments as Python's json.dumps writes them (expected strings recorded from CPython 3.11.7 running vLLM's
 * extract_tool_calls), the `tool_choice` rules and messages, the finish reasons, and the stream: for random
 * texts and random delta splits, what ToolCallStream sends equals the one-shot parse, and hermes content is
 * sent as early as it is certain.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  parseToolCalls,
  resolveToolChoice,
  toolFinishReason,
  ToolCallStream,
  type ToolCallParserName,
  type ToolChoice,
} from '../../src/serve/tool-calls.js';
import { BadRequest, vllmError } from '../../src/serve/validate.js';

/** vLLM-style ids, numbered so that two parses of one text can be compared. */
function ids(): () => string {
  let n = 0;
  return () => `chatcmpl-tool-${(n++).toString(16).padStart(32, '0')}`;
}

const PARIS = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>';
const LONDON = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "London", "unit": "celsius"}}\n</tool_call>';
const QWEN3_THINKING = '<think>\nThe user asks for the weather in Paris; I should call get_weather.\n</think>\n\n';

test('1: one Qwen3 call → tool_calls[0] with string arguments, content null, finish tool_calls', () => {
  const parse = parseToolCalls('hermes', PARIS, ids());
  assert.deepEqual(parse, {
    content: null,
    toolCalls: [
      {
        id: 'chatcmpl-tool-00000000000000000000000000000000',
        type: 'function',
        function: { name: 'get_weather', arguments: '{"city": "Paris"}' },
      },
    ],
    failed: false,
  });
  assert.equal(toolFinishReason({ kind: 'auto' }, 'stop', parse.toolCalls.length), 'tool_calls');
});

test('1: a call after a thinking block is parsed; the think block is content (no reasoning parser, as vLLM)', () => {
  const parse = parseToolCalls('hermes', QWEN3_THINKING + PARIS, ids());
  assert.equal(parse.content, QWEN3_THINKING);
  assert.equal(parse.toolCalls[0].function.arguments, '{"city": "Paris"}');
  // a call written inside the think block counts too, and content stops at it
  const inside = '<think>\nmaybe ' + PARIS + '\n</think>\n\nDone.';
  const parsed = parseToolCalls('hermes', inside, ids());
  assert.equal(parsed.content, '<think>\nmaybe ');
  assert.equal(parsed.toolCalls.length, 1);
});

test('2: two calls → indices in order, content = text before the first tag, text between and after dropped', () => {
  const text = `I'll check both cities.\n${PARIS}\nand then\n${LONDON}\nThat is all.`;
  const parse = parseToolCalls('hermes', text, ids());
  assert.equal(parse.content, "I'll check both cities.\n");
  assert.deepEqual(
    parse.toolCalls.map((c) => [c.id.slice(-1), c.function.name, c.function.arguments]),
    [
      ['0', 'get_weather', '{"city": "Paris"}'],
      ['1', 'get_weather', '{"city": "London", "unit": "celsius"}'],
    ],
  );
  assert.equal(parse.failed, false);
});

test("3: text then a call → content is exactly the text before the tag (vLLM keeps the template's newline)", () => {
  const parse = parseToolCalls('hermes', `Let me look that up.\n${PARIS}`, ids());
  assert.equal(parse.content, 'Let me look that up.\n');
  // blank text before the call (Python's str.strip, U+00A0 included) becomes null, as vLLM's serving does
  assert.equal(parseToolCalls('hermes', ` \n\u00a0${PARIS}`, ids()).content, null);
  // no call at all: the text is the content, untouched
  assert.deepEqual(parseToolCalls('hermes', 'It is sunny.\n', ids()), {
    content: 'It is sunny.\n',
    toolCalls: [],
    failed: false,
  });
});

test('4: malformed JSON in one of two calls → no calls, the whole text (tags included) as content', () => {
  const broken = '<tool_call>\n{"name": "get_weather", "arguments": {"city": London}}\n</tool_call>';
  const text = `Checking.\n${PARIS}\n${broken}`;
  const made: string[] = [];
  const parse = parseToolCalls('hermes', text, () => {
    made.push('id');
    return 'id';
  });
  assert.deepEqual(parse, { content: text, toolCalls: [], failed: true });
  assert.equal(made.length, 0, 'no ids are drawn for calls that are not returned');
  assert.equal(toolFinishReason({ kind: 'auto' }, 'stop', 0), 'stop');
});

test('5: a call cut by max_tokens → content fallback, failed, length; an unclosed whole call parses', () => {
  const cut = `${QWEN3_THINKING}<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par`;
  assert.deepEqual(parseToolCalls('hermes', cut, ids()), { content: cut, toolCalls: [], failed: true });
  assert.equal(toolFinishReason({ kind: 'auto' }, 'length', 0), 'length');
  // vLLM's regex takes an unterminated last <tool_call> to the end: whole JSON there is a call
  const unclosed = parseToolCalls(
    'hermes',
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}',
    ids(),
  );
  assert.equal(unclosed.toolCalls[0]?.function.arguments, '{"city": "Paris"}');
});

test('6: string-typed (double-encoded) arguments are decoded once; a string that is not JSON fails the text', () => {
  const doubled = '<tool_call>\n{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}\n</tool_call>';
  assert.equal(parseToolCalls('hermes', doubled, ids()).toolCalls[0]?.function.arguments, '{"city": "Paris"}');
  const notJson = '<tool_call>\n{"name": "get_weather", "arguments": "Paris"}\n</tool_call>';
  assert.deepEqual(parseToolCalls('hermes', notJson, ids()), { content: notJson, toolCalls: [], failed: true });
  for (const bad of ['{"arguments": {}}', '{"name": 7, "arguments": {}}', '[1]', '"x"', '']) {
    const text = `<tool_call>${bad}</tool_call>`;
    assert.equal(parseToolCalls('hermes', text, ids()).failed, true, bad);
  }
});

test("arguments are written as Python's json.dumps writes them (recorded from CPython 3.11.7)", () => {
  // a repeated key keeps its first place and its last value; 1.0 stays a float; \u007f is not escaped
  const args =
    '{"a": 1, "b": 1, "1": 2, "x": 1.0, "y": 1e-5, "z": 12345678901234567890, "w": "é\\n\\u00e9\\ud83d\\ude00", ' +
    '"n": NaN, "big": 1e400, "e": 1E2, "neg": -0.0, "f": 1e16, "g": 0.0001, "h": [true, null, {}], ' +
    '"c": "\\u0001\\u007f\\b\\f\\t\\r\\"\\\\/", "a": 3}';
  const recorded =
    '{"a": 3, "b": 1, "1": 2, "x": 1.0, "y": 1e-05, "z": 12345678901234567890, "w": "é\\né😀", "n": NaN, ' +
    '"big": Infinity, "e": 100.0, "neg": -0.0, "f": 1e+16, "g": 0.0001, "h": [true, null, {}], ' +
    '"c": "\\u0001\u007f\\b\\f\\t\\r\\"\\\\/"}';
  const parse = parseToolCalls('hermes', `<tool_call>\n{"name": "f", "arguments": ${args}}\n</tool_call>`, ids());
  assert.equal(parse.toolCalls[0]?.function.arguments, recorded);
  // Python refuses ints over 4300 digits (ValueError), so the text falls back
  const huge = `<tool_call>{"name": "f", "arguments": {"n": ${'9'.repeat(4301)}}}</tool_call>`;
  assert.equal(parseToolCalls('hermes', huge, ids()).failed, true);
  assert.equal(parseToolCalls('hermes', huge.replace('9', ''), ids()).failed, false);
});

test('7: Llama 3.1: <|python_tag|>{…} and {…}; {…} parse, content null; prose with braces stays content', () => {
  const tagged = parseToolCalls(
    'llama3_json',
    '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}',
    ids(),
  );
  assert.equal(tagged.content, null);
  assert.deepEqual(tagged.toolCalls[0]?.function, { name: 'get_weather', arguments: '{"city": "Paris"}' });
  const two = parseToolCalls(
    'llama3_json',
    '{"name": "get_weather", "parameters": {"city": "Paris"}}; {"name": "get_time", "arguments": {"tz": "CET"}}',
    ids(),
  );
  assert.deepEqual(
    two.toolCalls.map((c) => [c.id.slice(-1), c.function.name, c.function.arguments]),
    [
      ['0', 'get_weather', '{"city": "Paris"}'],
      ['1', 'get_time', '{"tz": "CET"}'],
    ],
  );
  // text around calls is dropped, floats as Python writes them (recorded: content None, `1.50` → `1.5`)
  const around = parseToolCalls(
    'llama3_json',
    'Sure: {"name": "a", "parameters": {"q": 1.50}} and {"name": "b", "arguments": null}',
    ids(),
  );
  assert.deepEqual(
    [around.content, around.toolCalls.map((c) => [c.function.name, c.function.arguments])],
    [
      null,
      [
        ['a', '{"q": 1.5}'],
        ['b', 'null'],
      ],
    ],
  );
  const prose = 'Use the JSON {"a": 1} as input.';
  assert.deepEqual(parseToolCalls('llama3_json', prose, ids()), { content: prose, toolCalls: [], failed: true });
  assert.deepEqual(parseToolCalls('llama3_json', 'No braces here.', ids()), {
    content: 'No braces here.',
    toolCalls: [],
    failed: false,
  });
  // vLLM skips a `{` right at the last object's end, so adjacent objects reach an inner `{}` without name: content
  const adjacent = '{"name": "a", "parameters": {}}{"name": "b", "parameters": {}}';
  assert.deepEqual(parseToolCalls('llama3_json', adjacent, ids()), { content: adjacent, toolCalls: [], failed: true });
  // code after a call fails the whole text, as vLLM's raw_decode at `{ return` raises
  const code = '{"name": "a", "parameters": {}}; function f() { return 1; }';
  assert.equal(parseToolCalls('llama3_json', code, ids()).content, code);
});

const WITH_PARSER = { autoToolChoice: true, parser: 'hermes' } as const;
const WITHOUT = { autoToolChoice: false } as const;
const TOOLS = [
  { type: 'function', function: { name: 'get_weather', parameters: { type: 'object' } } },
  { type: 'function', function: { name: 'get_time' } },
];

const SUPPORTED = 'Only named tools, "none", "auto" or "required" are supported.';

function rejects(run: () => unknown, message: string): void {
  assert.throws(run, (error: unknown) => {
    assert.ok(error instanceof BadRequest);
    assert.equal(error.message, message);
    assert.equal(vllmError(error).error.param, 'tool_choice');
    return true;
  });
}

test('8: tool_choice: defaults, none, and vLLM 400s with its messages', () => {
  const auto: ToolChoice = { kind: 'auto' };
  const none: ToolChoice = { kind: 'none' };
  assert.deepEqual(resolveToolChoice(TOOLS, undefined, WITH_PARSER), auto, 'tools without tool_choice → auto');
  assert.deepEqual(resolveToolChoice(undefined, undefined, WITHOUT), none, 'neither → none');
  assert.deepEqual(resolveToolChoice([], undefined, WITHOUT), none, 'empty tools are no tools');
  assert.deepEqual(resolveToolChoice(TOOLS, 'none', WITHOUT), none, '"none" → no parsing');
  assert.deepEqual(resolveToolChoice(undefined, 'none', WITHOUT), none);
  assert.deepEqual(resolveToolChoice(TOOLS, null, WITH_PARSER), auto, 'null with tools parses when it can');
  assert.deepEqual(resolveToolChoice(TOOLS, null, WITHOUT), none);
  assert.deepEqual(resolveToolChoice([], 'auto', WITH_PARSER), none, 'auto over no tools parses nothing');
  rejects(
    () => resolveToolChoice(undefined, 'auto', WITH_PARSER),
    'field "tool_choice": When using `tool_choice`, `tools` must be set.',
  );
  rejects(
    () => resolveToolChoice(null, 'required', WITH_PARSER),
    'field "tool_choice": When using `tool_choice`, `tools` must be set.',
  );
  const autoNeedsParser =
    'field "tool_choice": "auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set';
  rejects(() => resolveToolChoice(TOOLS, undefined, WITHOUT), autoNeedsParser);
  rejects(() => resolveToolChoice(TOOLS, 'auto', { autoToolChoice: true }), autoNeedsParser);
  rejects(() => resolveToolChoice(TOOLS, 'auto', { autoToolChoice: false, parser: 'hermes' }), autoNeedsParser);
  rejects(
    () => resolveToolChoice(TOOLS, 'any', WITH_PARSER),
    `field "tool_choice": Invalid value for \`tool_choice\`: any! ${SUPPORTED}`,
  );
  rejects(
    () => resolveToolChoice(TOOLS, true, WITH_PARSER),
    `field "tool_choice": Invalid value for \`tool_choice\`: True! ${SUPPORTED}`,
  );
  assert.throws(() => resolveToolChoice({ name: 'x' }, 'auto', WITH_PARSER), /^BadRequest: field "tools"/);
});

test('8: tool_choice: required and named functions', () => {
  assert.deepEqual(resolveToolChoice(TOOLS, 'required', WITH_PARSER), { kind: 'required' });
  assert.deepEqual(resolveToolChoice([], 'required', WITHOUT), { kind: 'none' }, 'required over no tools is none');
  const named = { type: 'function', function: { name: 'get_time' } };
  assert.deepEqual(resolveToolChoice(TOOLS, named, WITH_PARSER), { kind: 'named', name: 'get_time' });
  assert.deepEqual(resolveToolChoice(TOOLS, { function: { name: 'get_time' } }, WITH_PARSER), {
    kind: 'named',
    name: 'get_time',
  });
  const usage = 'Correct usage: `{"type": "function", "function": {"name": "my_function"}}`';
  rejects(
    () => resolveToolChoice(TOOLS, { type: 'function', function: { name: 'get_stock' } }, WITH_PARSER),
    'field "tool_choice": The tool specified in `tool_choice` does not match any of the specified `tools`',
  );
  rejects(
    () => resolveToolChoice(TOOLS, { type: 'function' }, WITH_PARSER),
    `field "tool_choice": Invalid value for \`function\`: \`None\` in \`tool_choice\`! ${usage}`,
  );
  rejects(
    () => resolveToolChoice(TOOLS, { function: {} }, WITH_PARSER),
    `field "tool_choice": Expected field \`name\` in \`function\` in \`tool_choice\`! ${usage}`,
  );
  rejects(
    () => resolveToolChoice(TOOLS, { function: { name: '' } }, WITH_PARSER),
    `field "tool_choice": Invalid \`name\` in \`function\`: \`\` in \`tool_choice\`! ${usage}`,
  );
  rejects(
    () => resolveToolChoice(TOOLS, { type: 'tool', function: { name: 'get_time' } }, WITH_PARSER),
    'field "tool_choice": "type" must be "function"',
  );
  // vLLM@5e91864 answers required and named requests with 400 when no parser runs
  rejects(
    () => resolveToolChoice(TOOLS, 'required', WITHOUT),
    'field "tool_choice": tool_choice="required" requires --tool-call-parser to be set',
  );
  rejects(
    () => resolveToolChoice(TOOLS, named, WITHOUT),
    'field "tool_choice": tool_choice="function=ChatCompletionNamedFunction(name=\'get_time\') type=\'function\'" ' +
      'requires --tool-call-parser to be set',
  );
});

test('8: finish reasons: tool_calls for auto with calls or required stopped, else the engine reason', () => {
  const cases: [ToolChoice, 'stop' | 'length' | 'abort', number, string][] = [
    [{ kind: 'auto' }, 'stop', 2, 'tool_calls'],
    [{ kind: 'auto' }, 'length', 1, 'tool_calls'],
    [{ kind: 'auto' }, 'length', 0, 'length'],
    [{ kind: 'required' }, 'stop', 1, 'tool_calls'],
    [{ kind: 'required' }, 'length', 0, 'length'],
    [{ kind: 'named', name: 'f' }, 'stop', 1, 'stop'],
    [{ kind: 'named', name: 'f' }, 'length', 1, 'length'],
    [{ kind: 'none' }, 'abort', 0, 'abort'],
    [{ kind: 'none' }, 'stop', 3, 'stop'],
  ];
  for (const [choice, engine, calls, expected] of cases) {
    assert.equal(toolFinishReason(choice, engine, calls), expected, `${choice.kind} ${engine} ${calls}`);
  }
});

/** What a stream sends for `deltas`, then the rest from end(). */
function stream(
  parser: ToolCallParserName,
  deltas: string[],
): { early: string[]; end: ReturnType<ToolCallStream['end']> } {
  const s = new ToolCallStream(parser, ids());
  const early = deltas.map((d) => s.push(d));
  return { early, end: s.end() };
}

test('stream: hermes sends content as it comes, holds back a partial tag, then the calls whole', () => {
  const { early, end } = stream('hermes', [
    'Let me check.',
    '\n<tool_c',
    'all>\n{"name": "get_weather", ',
    '"arguments": {"city": "Paris"}}\n</tool_call>',
  ]);
  assert.deepEqual(early, ['Let me check.', '\n', '', '']);
  assert.equal(end.content, '');
  assert.equal(end.toolCalls[0]?.function.arguments, '{"city": "Paris"}');
  // a `<tool_c` that turns out not to be a tag is released with what follows
  assert.deepEqual(stream('hermes', ['a <tool_c', 'ool? no']).early, ['a ', '<tool_cool? no']);
  // blank text waits: it becomes null content when a call follows
  assert.deepEqual(stream('hermes', ['\n\n', PARIS]).early, ['', '']);
  assert.deepEqual(stream('hermes', ['\n\n', 'Hi']).early, ['', '\n\nHi']);
  // a broken call comes back as content at the end
  const broken = stream('hermes', ['Hi ', '<tool_call>{"name": ', '}</tool_call>']);
  assert.deepEqual(
    [broken.early, broken.end.content, broken.end.failed],
    [['Hi ', '', ''], '<tool_call>{"name": }</tool_call>', true],
  );
});

test('stream: llama3_json holds everything until a `{` cannot start a call, then sends all as it comes', () => {
  const code = stream('llama3_json', ['Here: function f() ', '{ re', 'turn 1; }', ' done']);
  assert.deepEqual(code.early, ['', 'Here: function f() { re', 'turn 1; }', ' done']);
  assert.equal(code.end.content, '');
  const json = stream('llama3_json', ['Use {"a"', ': 1}', ' here']);
  assert.deepEqual(json.early, ['', 'Use {"a": 1}', ' here'], 'a complete object without name settles it');
  const prose = stream('llama3_json', ['It is ', 'sunny.']);
  assert.deepEqual([prose.early, prose.end.content], [['', ''], 'It is sunny.'], 'prose waits: a call could follow');
  const call = stream('llama3_json', ['<|python_tag|>{"name": "get_weather", ', '"parameters": {"city": "Paris"}}']);
  assert.deepEqual([call.early, call.end.content, call.end.toolCalls.length], [['', ''], '', 1]);
});

const PROSE = [
  'Sure.',
  'Let me check the weather.\n',
  ' ',
  '\n',
  '\n\n',
  '\u00a0',
  '\x1c',
  '\u0085',
  '\ufeff',
  'é😀',
  'a < b',
  'x',
  '{',
  '}',
  '{"a": 1}',
  '{ x }',
  '; ',
];
const HERMES_PIECES = [
  PARIS,
  LONDON,
  QWEN3_THINKING,
  '<tool_call>\n{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}\n</tool_call>',
  '<tool_call>\n{"name": "get_weather", "arguments": {"city": London}}\n</tool_call>',
  '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par',
  '<tool_call>',
  '</tool_call>',
  '<tool_c',
  '<',
  '</tool_',
];
const LLAMA_PIECES = [
  '<|python_tag|>',
  '{"name": "get_weather", "parameters": {"city": "Paris"}}',
  '{"name": "get_time", "arguments": {"tz": "CET", "n": 1.0}}',
  '{"name": "get_weather", "parameters": {"city": "Par',
  '{"name": 3, "parameters": {}}',
  '{"name": "f"}',
  '"name": "f"',
  '1e',
  '-Inf',
  '"\\u12',
];

test('stream: for random texts and delta splits, the stream equals the one-shot parse', () => {
  const text = (pieces: string[]) =>
    fc
      .array(fc.oneof(fc.constantFrom(...PROSE), fc.constantFrom(...pieces), fc.string({ maxLength: 4 })), {
        maxLength: 7,
      })
      .map((parts) => parts.join(''));
  const cases = fc.oneof(
    fc.record({ parser: fc.constant<ToolCallParserName>('hermes'), text: text(HERMES_PIECES) }),
    fc.record({ parser: fc.constant<ToolCallParserName>('llama3_json'), text: text(LLAMA_PIECES) }),
  );
  const splits = fc.array(fc.integer({ min: 1, max: 9 }), { minLength: 1, maxLength: 12 });
  fc.assert(
    fc.property(cases, splits, ({ parser, text }, lengths) => {
      const deltas: string[] = [];
      for (let at = 0, k = 0; at < text.length; at += lengths[k++ % lengths.length]) {
        deltas.push(text.slice(at, at + lengths[k % lengths.length]));
      }
      const { early, end } = stream(parser, deltas);
      const whole = parseToolCalls(parser, text, ids());
      assert.equal(early.join('') + end.content, whole.content ?? '');
      assert.deepEqual(end.toolCalls, whole.toolCalls);
      assert.equal(end.failed, whole.failed);
      if (parser === 'hermes') assert.equal(early.join(''), hermesCertain(text));
    }),
    { numRuns: 600, seed: 20261126 },
  );
});

/** The hermes content certain once `text` is seen: the text before the first tag or a partial one, unless blank. */
function hermesCertain(text: string): string {
  const tag = '<tool_call>';
  let end = text.indexOf(tag);
  if (end < 0) {
    end = text.length;
    for (let k = tag.length - 1; k > 0; k--) {
      if (text.endsWith(tag.slice(0, k))) {
        end = text.length - k;
        break;
      }
    }
  }
  const prefix = text.slice(0, end);
  return PYTHON_BLANK.test(prefix) ? '' : prefix;
}
/** Empty or only characters of Python's str.isspace() (U+001C..U+001F and U+0085 included, U+FEFF not). */
// eslint-disable-next-line no-control-regex -- Python counts U+001C..U+001F as whitespace
const PYTHON_BLANK = /^[\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*$/;
