/**
 * Any MCP-legal tool name (1-128 of A-Z a-z 0-9 _ - .; src/env/format/names.ts) round-trips through
 * both formats: the offer names it, and a call the policy writes in the format's syntax parses back to
 * the same name and arguments. Garbage is still rejected with a message that says why. The real list
 * comes from server-everything (12 of its 13 tools have a hyphen).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError } from '../../src/core/errors.js';
import { arborFormat, POSITIONAL_ARGS, resolvePositionalArguments } from '../../src/env/format/arbor.js';
import { formatFromName } from '../../src/env/format/index.js';
import { toolNameProblem, TOOL_NAME } from '../../src/env/format/names.js';
import { qwen3Format } from '../../src/env/format/qwen3.js';
import { envFactoryFromConfig, envOptionsSchema } from '../../src/env/index.js';
import type { ToolSpec } from '../../src/env/types.js';
import { everythingEnv, writeCall } from '../../testkit/env/mcp-servers.js';

const sum: ToolSpec = {
  name: 'get-sum',
  description: 'Returns the sum of two numbers',
  inputSchema: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'] },
};
const spec = (name: string): ToolSpec => ({ ...sum, name });
const NAMES = ['get-sum', 'a.b_c-1', 'x', '1st', '-lead', 'trail.', 'A'.repeat(128), 'UPPER_case.v2-beta'];

test('the MCP rule: what is a name and what is not', () => {
  for (const n of NAMES) assert.equal(toolNameProblem(n), undefined, n);
  assert.match(toolNameProblem('')!, /cannot be empty/);
  assert.match(toolNameProblem('A'.repeat(129))!, /at most 128 characters \(this one has 129\)/);
  assert.match(toolNameProblem('get sum')!, /found " "/);
  assert.match(toolNameProblem('a/b,c')!, /found "\/", ","/);
  assert.equal(TOOL_NAME.test('get-sum'), true);
  assert.equal(TOOL_NAME.test('get:sum'), false);
});

for (const format of ['arbor', 'qwen3'] as const) {
  test(`${format}: every MCP-legal name is offered and parses back (JSON arguments)`, () => {
    const f = formatFromName(format);
    for (const name of NAMES) {
      const offer = f.renderTools([spec(name)]);
      assert.ok(offer.includes(format === 'arbor' ? ` ${name}(a,b)` : `"name": "${name}"`), `${name} in the offer`);
      const turn = `let me add. ${writeCall(format, { name, arguments: { a: 34, b: 40 } })}`;
      const { calls, errors } = f.parseCalls(turn);
      assert.deepEqual(errors, [], name);
      assert.deepEqual(
        calls.map((c) => [c.name, c.arguments]),
        [[name, { a: 34, b: 40 }]],
        name,
      );
      assert.equal(f.finalAnswer(`${writeCall(format, { name, arguments: {} })} 74`), '74');
    }
  });
}

test('arbor: hyphenated positional calls (the issue: "@get-sum(34,40)" parsed as "@get")', () => {
  const f = arborFormat();
  const { calls, errors } = f.parseCalls('@get-sum(34,40) and @a.b_c-1(x) @echo (hi)');
  assert.deepEqual(errors, []);
  assert.deepEqual(
    calls.map((c) => [c.name, c.arguments, c.raw]),
    [
      ['get-sum', { [POSITIONAL_ARGS]: '34,40' }, '@get-sum(34,40)'],
      ['a.b_c-1', { [POSITIONAL_ARGS]: 'x' }, '@a.b_c-1(x)'],
      ['echo', { [POSITIONAL_ARGS]: 'hi' }, '@echo (hi)'],
    ],
  );
  assert.deepEqual(resolvePositionalArguments(calls[0].arguments, sum.inputSchema), { args: { a: 34, b: 40 } });
  assert.equal(f.renderTools([sum, spec('echo')]), 'tools: get-sum(a,b) echo(a,b)\n');
});

test('arbor: garbage is still rejected, saying why', () => {
  const f = arborFormat();
  const cases: Array<[string, string, RegExp]> = [
    ['@ get-sum(1,2)', '', /expected a tool name \(A-Z a-z 0-9 _ - \.\) after "@"/],
    ['@get-sum', 'get-sum', /expected "\(" or "\{" after the tool name/],
    ['@get-sum.', 'get-sum.', /expected "\(" or "\{"/],
    ['@get:sum(1,2)', 'get', /expected "\(" or "\{"/],
    ['@get-sum(1,2', 'get-sum', /unbalanced "\("/],
    ['@get-sum{"a":}', 'get-sum', /bad JSON/],
    [`@${'a'.repeat(129)}(1)`, '', /at most 128 characters/],
  ];
  for (const [turn, name, why] of cases) {
    const { calls, errors } = f.parseCalls(turn);
    assert.deepEqual(calls, [], turn);
    assert.equal(errors.length, 1, turn);
    assert.equal(errors[0].name, name, turn);
    assert.match(errors[0].content, why, turn);
  }
  // a 128-character name is the longest that parses
  assert.equal(f.parseCalls(`@${'a'.repeat(128)}(1)`).calls[0].name.length, 128);
});

test('arbor: a tool it cannot name bare fails the offer (ConfigError on env.tools); qwen3 quotes it', () => {
  assert.throws(
    () => arborFormat().renderTools([sum, spec('get sum')]),
    (e: unknown) =>
      e instanceof ConfigError && e.path === 'env.tools' && /cannot offer tool "get sum".*found " "/.test(e.message),
  );
  const q = qwen3Format();
  assert.ok(q.renderTools([spec('get sum')]).includes('"name": "get sum"'));
  assert.deepEqual(q.parseCalls(writeCall('qwen3', { name: 'get sum', arguments: { a: 1 } })).calls[0].name, 'get sum');
});

test('qwen3: garbage is still rejected, saying why', () => {
  const q = qwen3Format();
  const cases: Array<[string, RegExp]> = [
    ['<tool_call>\n{"name": "get-sum", "arguments": {"a": 1}\n</tool_call>', /bad JSON/],
    ['<tool_call>\n{"arguments": {"a": 1}}\n</tool_call>', /expected \{"name": string, "arguments": object\}/],
    ['<tool_call>\n{"name": "", "arguments": {}}\n</tool_call>', /expected \{"name": string/],
    ['<tool_call>\n{"name": "get-sum", "arguments": [1, 2]}\n</tool_call>', /"arguments" must be a JSON object/],
    ['<tool_call>\n{"name": "get-sum", "arguments": {}}', /<tool_call> without <\/tool_call>/],
  ];
  for (const [turn, why] of cases) {
    const { calls, errors } = q.parseCalls(turn);
    assert.deepEqual(calls, [], turn);
    assert.equal(errors.length, 1, turn);
    assert.match(errors[0].content, why, turn);
  }
});

test('server-everything: its real tool list round-trips through both formats', { timeout: 60_000 }, async () => {
  const factory = await envFactoryFromConfig(envOptionsSchema.parse(everythingEnv()), { baseDir: process.cwd() });
  try {
    const env = await factory.create();
    const tools = env.tools;
    await env.close();
    const names = tools.map((t) => t.name);
    assert.ok(names.includes('get-sum') && names.includes('echo'), names.join(', '));
    assert.ok(names.filter((n) => n.includes('-')).length >= 10, `hyphenated: ${names.join(', ')}`);
    for (const format of ['arbor', 'qwen3'] as const) {
      const f = formatFromName(format);
      const offer = f.renderTools(tools);
      for (const t of tools) {
        assert.equal(toolNameProblem(t.name), undefined, t.name);
        assert.ok(
          offer.includes(format === 'arbor' ? ` ${t.name}(` : `"name": "${t.name}"`),
          `${format} offers ${t.name}`,
        );
      }
      // one turn calling every tool, each with its own name as an argument
      const turn = tools.map((t) => writeCall(format, { name: t.name, arguments: { k: t.name } })).join('\n');
      const { calls, errors } = f.parseCalls(turn);
      assert.deepEqual(errors, []);
      assert.deepEqual(
        calls.map((c) => [c.name, c.arguments.k]),
        names.map((n) => [n, n]),
        format,
      );
    }
  } finally {
    await factory.close();
  }
});
