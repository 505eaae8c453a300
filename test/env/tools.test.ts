import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { z as z4 } from 'zod/v4';
import { Toolset, tool, toolJsonSchema, truncateObservation, zod3ToJsonSchema } from '../../src/env/tools.js';
import { toolEnvironmentFactory, type ToolAction } from '../../src/env/tool-env.js';
import { envFactoryFromConfig, envOptionsSchema, knownEnvKinds } from '../../src/env/index.js';
import { arborFormat, POSITIONAL_ARGS } from '../../src/env/format/arbor.js';
import { ConfigError } from '../../src/core/errors.js';
import type { TaskItem } from '../../src/core/types.js';

const item: TaskItem = { id: 'x', prompt: 'p', answer: '' };
const call = (name: string, args: Record<string, unknown>) => ({ name, arguments: args, raw: `@${name}` });

test('zod schemas become JSON schema (object, string, number, int, boolean, enum, array, optional, default, describe)', () => {
  const schema = z.object({
    s: z.string().min(1).max(5).describe('a string'),
    n: z.number().min(0).max(10),
    i: z.number().int().describe('an int'),
    b: z.boolean().optional(),
    e: z.enum(['x', 'y']),
    a: z.array(z.number().int()).describe('ints'),
    d: z.number().default(3),
    o: z.object({ k: z.string() }).optional(),
  });
  assert.deepEqual(zod3ToJsonSchema(schema), {
    type: 'object',
    properties: {
      s: { type: 'string', minLength: 1, maxLength: 5, description: 'a string' },
      n: { type: 'number', minimum: 0, maximum: 10 },
      i: { type: 'integer', description: 'an int' },
      b: { type: 'boolean' },
      e: { type: 'string', enum: ['x', 'y'] },
      a: { type: 'array', items: { type: 'integer' }, description: 'ints' },
      d: { type: 'number', default: 3 },
      o: { type: 'object', properties: { k: { type: 'string' } }, required: ['k'] },
    },
    required: ['s', 'n', 'i', 'e', 'a'],
  });
  assert.deepEqual(toolJsonSchema(z4.object({ q: z4.string().describe('query'), k: z4.number().int().optional() })), {
    type: 'object',
    properties: { q: { type: 'string', description: 'query' }, k: { type: 'integer' } },
    required: ['q'],
  });
});

test('Toolset: validation names the field, unknown tools, throwing tools, timeouts, truncation', async () => {
  let aborted = false;
  const tools = {
    add: tool({
      description: 'add',
      inputSchema: z.object({ a: z.number().int(), b: z.number().int() }),
      execute: async ({ a, b }) => a + b,
    }),
    boom: tool({
      description: 'throws',
      inputSchema: z.object({}),
      execute: async () => {
        throw new Error('kaput');
      },
    }),
    slow: tool({
      description: 'never ends',
      inputSchema: z.object({}),
      execute: (_input, { abortSignal }) =>
        new Promise((_resolve, reject) =>
          abortSignal.addEventListener('abort', () => {
            aborted = true;
            reject(new Error('aborted'));
          }),
        ),
    }),
    big: tool({ description: 'long output', inputSchema: z.object({}), execute: () => 'x'.repeat(100) }),
    obj: tool({ description: 'object output', inputSchema: z.object({}), execute: () => ({ ok: true }) }),
  };
  const set = new Toolset(tools, { maxObservationChars: 10 });
  assert.deepEqual(
    set.specs.map((s) => s.name),
    ['add', 'boom', 'slow', 'big', 'obj'],
  );
  const ctx = { state: undefined, timeoutMs: 50 };
  assert.deepEqual((await set.call(call('add', { a: 2, b: 3 }), ctx)).result, {
    name: 'add',
    content: '5',
    isError: false,
  });
  assert.deepEqual((await set.call(call('add', { [POSITIONAL_ARGS]: '2, 40' }), ctx)).result.content, '42');
  const bad = await set.call(call('add', { a: 2, b: 'x' }), { ...ctx });
  assert.equal(bad.result.isError, true);
  assert.match(bad.result.content, /add: bad argument "b"/);
  assert.match((await set.call(call('add', { a: 1.5, b: 1 }), ctx)).result.content, /bad argument "a"/);
  assert.match((await set.call(call('nope', {}), ctx)).result.content, /unknown tool "nope"/);
  const boom = await set.call(call('boom', {}), ctx);
  assert.deepEqual([boom.result.isError, boom.result.content, boom.timedOut], [true, 'boom: kaput', false]);
  const t0 = Date.now();
  const slow = await set.call(call('slow', {}), ctx);
  assert.equal(slow.timedOut, true);
  assert.match(slow.result.content, /slow: timed out after 50 ms/);
  assert.ok(Date.now() - t0 < 1000);
  assert.equal(aborted, true, 'the tool saw its AbortSignal fire');
  assert.equal((await set.call(call('big', {}), ctx)).result.content, 'xxxxxxxxxx...[truncated 90 chars]');
  assert.equal((await new Toolset(tools).call(call('obj', {}), ctx)).result.content, '{"ok":true}');
  assert.equal(truncateObservation('abc', 3), 'abc');
});

interface Counter {
  n: number;
  log: string[];
}

test('tool environment: state per episode, forks isolated, metrics, a turn without calls ends it, value rewards', async () => {
  const factory = toolEnvironmentFactory<Counter>({
    tools: {
      inc: tool({
        description: 'increment',
        inputSchema: z.object({ by: z.number().int() }),
        execute: async ({ by }, { state }: { state: Counter }) => {
          state.n += by;
          state.log.push(`+${by}`);
          return String(state.n);
        },
      }),
      fail: tool({
        description: 'fails',
        inputSchema: z.object({}),
        execute: async () => {
          throw new Error('no');
        },
      }),
    },
    state: { init: (it) => ({ n: Number(it.answer), log: [] }), clone: (s) => ({ n: s.n, log: [...s.log] }) },
    reward: ({ state }) => (state.n >= 10 ? 1 : 0),
    maxTurns: 3,
  });
  const env = await factory.create();
  await env.reset({ ...item, answer: '5' }, { seed: 1, timeoutMs: 100 });
  assert.deepEqual(
    env.tools.map((t) => t.name),
    ['inc', 'fail'],
  );
  const parsed = arborFormat().parseCalls('@inc(2) @fail() @inc{"by":"x"}');
  const s1 = await env.step({ text: '', calls: parsed.calls }, { timeoutMs: 100 });
  assert.deepEqual(
    s1.results.map((r) => [r.content, r.isError]),
    [
      ['7', false],
      ['fail: no', true],
      ['inc: bad argument "by": Expected number, received string', true],
    ],
  );
  assert.deepEqual(s1.metrics, { toolCalls: 3, toolErrors: 2, toolTimeouts: 0 });
  assert.deepEqual([s1.done, s1.reward], [false, 0]);
  const child = await env.fork();
  const c1 = await child.step({ text: '', calls: [call('inc', { by: 5 })] }, { timeoutMs: 100 });
  assert.deepEqual([c1.results[0].content, c1.reward], ['12', 1]);
  const p1 = await env.step({ text: '', calls: [call('inc', { by: 1 })] }, { timeoutMs: 100 });
  assert.equal(p1.results[0].content, '8', "the fork's changes did not leak into the parent");
  const c2 = await child.step({ text: '12', calls: [] }, { timeoutMs: 100 });
  assert.deepEqual([c2.done, c2.reward, c2.results], [true, 0, []], 'summed rewards = value(final) - value(initial)');
  // parse errors only: the episode goes on; the turn counts toward maxTurns (3)
  const errorsOnly: ToolAction = { text: '@x(', calls: [], parseErrors: [{ name: '', content: 'bad', isError: true }] };
  const p2 = await env.step(errorsOnly, { timeoutMs: 100 });
  assert.deepEqual([p2.done, p2.results.length], [true, 0]);
  await env.close();
  await factory.close();
});

test('env config: the union over kind, unknown kinds and keys, tools modules relative to baseDir', async () => {
  assert.deepEqual(knownEnvKinds(), ['calculator', 'kv', 'code', 'tools', 'module', 'mcp', 'openenv', 'agent']);
  assert.equal(envOptionsSchema.parse({ kind: 'calculator' }).kind, 'calculator');
  await assert.rejects(
    envFactoryFromConfig({ kind: 'nope' }, { baseDir: '.' }),
    (e: unknown) => e instanceof ConfigError && e.path === 'env.kind',
  );
  await assert.rejects(
    envFactoryFromConfig({ kind: 'kv', maxObservationChars: 0 }, { baseDir: '.' }),
    (e: unknown) => e instanceof ConfigError && e.path === 'env.maxObservationChars',
  );
  await assert.rejects(
    envFactoryFromConfig({ kind: 'kv', typo: 1 }, { baseDir: '.' }),
    (e: unknown) => e instanceof ConfigError && e.path === 'env.typo',
  );
  const dir = mkdtempSync(join(tmpdir(), 'arbor-tools-'));
  try {
    const toolsUrl = new URL('../../src/env/tools.ts', import.meta.url).href;
    const zodUrl = import.meta.resolve('zod');
    writeFileSync(
      join(dir, 'my-tools.ts'),
      `import { z } from '${zodUrl}';\nimport { tool } from '${toolsUrl}';\n` +
        `export const shout = tool({ description: 'Upper-case text.', inputSchema: z.object({ text: z.string() }), ` +
        `execute: async ({ text }) => text.toUpperCase() });\nexport const notATool = 3;\n`,
    );
    writeFileSync(join(dir, 'empty.ts'), 'export const x = 1;\n');
    const factory = await envFactoryFromConfig({ kind: 'tools', module: './my-tools.ts' }, { baseDir: dir });
    const env = await factory.create();
    await env.reset(item, { seed: 0, timeoutMs: 100 });
    assert.deepEqual(env.tools, [
      {
        name: 'shout',
        description: 'Upper-case text.',
        inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
      },
    ]);
    const r = await env.step(
      { text: '', calls: [call('shout', { [POSITIONAL_ARGS]: 'hi there' })] },
      { timeoutMs: 100 },
    );
    assert.equal(r.results[0].content, 'HI THERE');
    await assert.rejects(
      envFactoryFromConfig({ kind: 'tools', module: './empty.ts' }, { baseDir: dir }),
      (e: unknown) => e instanceof ConfigError && /exports no tools/.test(e.message),
    );
    await assert.rejects(
      envFactoryFromConfig({ kind: 'tools', module: './missing.ts' }, { baseDir: dir }),
      (e: unknown) => e instanceof ConfigError && /cannot load/.test(e.message),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
