/**
 * Which tools a tools module (`env: { kind: tools, module }`) offers (toolsOfModule): its `tools` export
 * object, a default export object, else every export that is a tool, named after its key. Nothing is
 * dropped silently: a non-tool in a tools object, a value with execute() whose schema is not zod (the AI
 * SDK's jsonSchema(), a plain JSON schema, none), an array, a name no format can call, or a default
 * export that is an environment are ConfigErrors naming the module and the export.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jsonSchema, tool as aiTool } from 'ai';
import { z } from 'zod';
import { z as z4 } from 'zod/v4';
import { ConfigError } from '../../src/core/errors.js';
import { defineEnvironment } from '../../src/api/define.js';
import { envFactoryFromConfig, tool, toolsOfModule } from '../../src/env/index.js';

const lookup = tool({
  description: 'look a name up',
  inputSchema: z.object({ name: z.string() }),
  execute: ({ name }) => name.length,
});
const add = tool({
  description: 'add two numbers',
  inputSchema: z.object({ a: z.number(), b: z.number() }),
  execute: ({ a, b }) => a + b,
});
const state = { init: () => ({}), clone: (s: object) => ({ ...s }) };

/** toolsOfModule's tool names, or its ConfigError's message. */
function offered(mod: Record<string, unknown>): string[] | string {
  try {
    return Object.keys(toolsOfModule(mod, 'my-tools.ts').tools);
  } catch (e) {
    assert.ok(e instanceof ConfigError, String(e));
    assert.equal(e.path, 'env.module');
    return e.message;
  }
}

test('tools: the `tools` object, else a default export object, else every export that is a tool', () => {
  // helpers and constants beside the tools are left alone; `state` is the episode state, not a tool
  assert.deepEqual(offered({ lookup, add, state, helper: (x: number) => x, LIMIT: 3 }), ['lookup', 'add']);
  assert.deepEqual(offered({ tools: { find: lookup }, add }), ['find']);
  // `export default { lookup, add }` (or a CommonJS module.exports)
  assert.deepEqual(offered({ default: { lookup, add } }), ['lookup', 'add']);
  // the AI SDK's own tool() with a zod/v4 schema is a tool as it is
  const sdk = aiTool({ description: 'x', inputSchema: z4.object({ q: z4.string() }), execute: async () => 'ok' });
  assert.deepEqual(offered({ search: sdk }), ['search']);
});

test('tools: nothing is dropped silently; each refusal names the module and the export', () => {
  assert.equal(
    offered({ tools: { lookup, helper: (x: number) => x } }),
    'env.module: my-tools.ts: "tools.helper": not a tool (make it with tool({...}))',
  );
  const json = { description: 'x', inputSchema: jsonSchema({ type: 'object' }), execute: async () => 'ok' };
  assert.match(
    String(offered({ lookup, search: json })),
    /^env\.module: my-tools\.ts: "search": its inputSchema is a JSON schema \(e\.g\. the AI SDK's jsonSchema\(\)\); tools here take zod schemas/,
  );
  assert.match(
    String(offered({ lookup, bare: { execute: () => 1 } })),
    /"bare": it has execute\(\) but no inputSchema$/,
  );
  assert.match(
    String(offered({ lookup, odd: { inputSchema: { parse: () => 1 }, execute: () => 1 } })),
    /"odd": its inputSchema is not a zod schema \(no safeParse\)$/,
  );
  assert.match(String(offered({ tools: [lookup, add] })), /exports "tools" an array; tools are named by their keys/);
  assert.match(
    String(offered({ tools: { 'look up': lookup } })),
    /"tools\.look up": a tool name is made of A-Z a-z 0-9 _ - \. \(found " "\)$/,
  );
  assert.match(
    String(offered({ default: defineEnvironment({ tools: { lookup } }) })),
    /default export is a function \(a defineEnvironment\(\.\.\.\)\?\): use env\.kind: module/,
  );
  assert.equal(
    offered({ helper: () => 1, LIMIT: 3 }),
    'env.module: my-tools.ts exports no tools (objects with a zod inputSchema and an execute function; ' +
      'it exports helper, LIMIT)',
  );
});

test('env.kind tools: a module whose default export is an object of tools, loaded from a file', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'arbor-tools-module-'));
  try {
    const toolsUrl = new URL('../../src/env/tools.ts', import.meta.url).href;
    const zodUrl = import.meta.resolve('zod');
    writeFileSync(
      join(dir, 'default-tools.ts'),
      `import { z } from '${zodUrl}';\nimport { tool } from '${toolsUrl}';\n` +
        `const shout = tool({ description: 'Upper-case text.', inputSchema: z.object({ text: z.string() }), ` +
        `execute: async ({ text }) => text.toUpperCase() });\nexport default { shout };\n`,
    );
    const factory = await envFactoryFromConfig({ kind: 'tools', module: './default-tools.ts' }, { baseDir: dir });
    const env = await factory.create();
    await env.reset({ id: 'x', prompt: 'p', answer: 'a' }, { seed: 0, timeoutMs: 100 });
    assert.deepEqual(
      env.tools.map((t) => t.name),
      ['shout'],
    );
    await env.close();
    await factory.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
