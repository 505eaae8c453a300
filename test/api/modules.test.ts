/**
 * User modules named in a config: the public define* helpers, `task.module`, reward
 * parts of kind module and `env: { kind: module | tools }` load from paths relative to the config file,
 * their exports and options are checked (a ConfigError naming the file and the field), and errors in
 * user code are data (a reward that throws or hangs) or a clear error naming the module (a task).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { defineEnvironment, defineReward, defineTask, tool, z, ConfigError, DataError } from 'arbor';
import { configCommand } from '../../src/cli/config.js';
import { envFactoryFromConfig } from '../../src/env/index.js';
import { loadReward } from '../../src/filter/registry.js';
import { scoreBatch } from '../../src/filter/reward.js';
import { loadConfig, parseConfig } from '../../src/run/config.js';
import { taskFromConfig } from '../../src/tasks/index.js';
import type { TaskItem } from '../../src/core/types.js';

const kit = resolve('testkit/api');
const dir = mkdtempSync(join(tmpdir(), 'arbor-api-modules-'));
const item: TaskItem = { id: 'a', prompt: '1+1=', answer: '2' };

/** A module file in the temp dir (plain ESM: shapes that are wrong on purpose). */
function moduleFile(name: string, source: string): string {
  const file = join(dir, name);
  writeFileSync(file, source);
  return file;
}

/** Asserts that `promise` rejects with an error of `type` whose message matches every pattern. */
async function rejectsWith(
  promise: Promise<unknown>,
  type: abstract new (...args: never[]) => Error,
  ...patterns: RegExp[]
): Promise<void> {
  await assert.rejects(promise, (e: unknown) => {
    assert.ok(e instanceof type, `expected ${type.name}, got ${(e as Error)?.name}: ${(e as Error)?.message}`);
    for (const p of patterns) assert.match((e as Error).message, p);
    return true;
  });
}

test('defineReward: numbers and { reward } results; a bad return value is an error; options validated', async () => {
  const short = defineReward('short', ({ response }) => (response.length < 3 ? 1 : 0));
  assert.deepEqual(await short.score({ response: 'ab', item }), { reward: 1, components: { short: 1 }, info: {} });
  const parts = defineReward('parts', () => ({ reward: 0.5, components: { a: 1, b: 0 } }));
  assert.deepEqual(await parts.score({ response: '', item }), { reward: 0.5, components: { a: 1, b: 0 }, info: {} });
  const bad = defineReward('bad', () => 'yes' as unknown as number);
  await assert.rejects(bad.score({ response: '', item }), /reward "bad" returned string/);
  const scaled = defineReward(z.object({ scale: z.number().max(10) }).strict(), ({ scale }) =>
    defineReward('s', () => scale),
  );
  assert.equal((await scaled({ scale: 2 }).score({ response: '', item })).reward, 2);
  assert.throws(() => scaled({ scale: 20 }), /less than or equal to 10/);
  assert.equal(scaled.optionsSchema.safeParse({ scale: 1, other: 1 }).success, false);
});

test('defineTask: a score function is the verifier, named after the task; no demonstration says why', async () => {
  const task = defineTask({
    name: 't',
    makeItems: () => [item],
    reward: ({ response, item: i }) => (response === i.answer ? 1 : 0),
  });
  assert.equal(task.reward.name, 't');
  assert.equal((await task.reward.score({ response: '2', item })).reward, 1);
  assert.equal(task.description, 't');
  assert.throws(
    () => task.demonstration(item),
    (e: unknown) => e instanceof ConfigError && /sft\.steps: 0/.test(e.message),
  );
});

test('defineEnvironment: tools with state; a fresh factory per load; a custom create() passes through', async () => {
  const counter = defineEnvironment({
    tools: {
      add: tool({
        inputSchema: z.object({ n: z.number() }),
        execute: ({ n }, { state }: { state: { total: number } }) => String((state.total += n)),
      }),
    },
    state: { init: () => ({ total: 0 }), clone: (s: { total: number }) => ({ ...s }) },
  });
  const factory = counter();
  assert.notEqual(counter(), factory);
  const env = await factory.create();
  await env.reset(item, { seed: 0, timeoutMs: 1000 });
  const step = await env.step(
    { text: '', calls: [{ name: 'add', arguments: { n: 3 }, raw: '' }] },
    { timeoutMs: 1000 },
  );
  assert.deepEqual(step.results, [{ name: 'add', content: '3', isError: false }]);
  assert.throws(() => counter({ extra: 1 }), /Unrecognized key/);
  let closed = 0;
  const custom = defineEnvironment({ create: async () => env, close: async () => void closed++ })();
  assert.equal(await custom.create(), env);
  await custom.close();
  assert.equal(closed, 1);
});

test('config: module paths resolve against the config file; task.module is task "module"; clashes are errors', () => {
  const file = join(dir, 'sub', 'run.yaml');
  mkdirSync(join(dir, 'sub'), { recursive: true });
  writeFileSync(
    file,
    [
      'task: { module: ./task.ts, options: { offset: 3 } }',
      'reward: { parts: [{ kind: module, module: ../reward.ts }, { kind: task, weight: 0.5 }] }',
      'env: { kind: module, module: /abs/env.ts }',
    ].join('\n'),
  );
  const config = loadConfig(file);
  assert.equal(config.task.name, 'module');
  assert.equal(config.task.module, join(dir, 'sub', 'task.ts'));
  assert.deepEqual(config.reward.parts[0], { kind: 'module', weight: 1, module: join(dir, 'reward.ts'), options: {} });
  assert.equal((config.env as { module: string }).module, '/abs/env.ts');
  // a config object resolves against the working directory, or the baseDir given
  assert.equal(parseConfig({ task: { module: 'x.ts' } }).task.module, resolve('x.ts'));
  assert.equal(parseConfig({ task: { module: 'x.ts' } }, 'c', '/base').task.module, '/base/x.ts');
  // the resolved config (config.resolved.yaml) parses back to itself
  assert.deepEqual(parseConfig(JSON.parse(JSON.stringify(config))).task, config.task);
  assert.throws(
    () => parseConfig({ task: { module: 'x.ts', name: 'arith' } }),
    /task\.module: give either task\.module or task\.name/,
  );
  assert.throws(
    () => parseConfig({ task: { module: 'x.ts', mix: [{ name: 'arith' }] } }),
    /task\.module: give either task\.module or task\.mix/,
  );
  assert.throws(() => parseConfig({ reward: { parts: [{ kind: 'module' }] } }), /reward\.parts\.0\.module/);
});

test('task.module: a defineTask module with options; option errors name task.options.<key> and the file', async () => {
  const module = join(kit, 'count-task.ts');
  const task = await taskFromConfig({ name: 'module', module, options: { offset: 1000 } });
  assert.equal(task.name, 'count');
  const test = task.makeItems('test', 3, 0);
  assert.deepEqual(
    test.map((i) => i.prompt),
    ['1000+1=', '1005+1=', '1010+1='],
  );
  assert.equal((await task.reward.score({ response: '1001', item: test[0] })).reward, 1);
  assert.equal(task.demonstration(test[1]), '1006');
  await rejectsWith(
    taskFromConfig({ name: 'module', module, options: { offset: -1 } }),
    ConfigError,
    /task\.options\.offset/,
    /count-task\.ts/,
  );
  await rejectsWith(
    taskFromConfig({ name: 'module', module, options: { ofset: 1 } }),
    ConfigError,
    /task\.options\.ofset/,
  );
});

test('task.module: a wrong shape, missing export or missing file: a ConfigError naming file and field', async () => {
  const spec = (module: string, options = {}) => ({ name: 'module', module, options });
  const noMakeItems = moduleFile(
    'no-make-items.mjs',
    'export default { name: "t", reward: { name: "r", score: async () => ({ reward: 0 }) }, demonstration: () => "" };',
  );
  await rejectsWith(
    taskFromConfig(spec(noMakeItems)),
    ConfigError,
    /task\.module: .*no-make-items\.mjs/,
    /bad "makeItems" \(missing\)/,
  );
  const err = await taskFromConfig(spec(noMakeItems)).catch((e: ConfigError) => e);
  assert.equal((err as ConfigError).path, 'task.module.makeItems');
  assert.equal((err as ConfigError).file, noMakeItems);
  const badReward = moduleFile(
    'bad-reward.mjs',
    'export default { name: "t", makeItems: () => [], reward: () => 1, demonstration: () => "" };',
  );
  await rejectsWith(taskFromConfig(spec(badReward)), ConfigError, /bad "reward" \(a function\)/);
  const named = moduleFile('named.mjs', 'export const helper = 1; export const other = 2;');
  await rejectsWith(
    taskFromConfig(spec(named)),
    ConfigError,
    /no default export and no export named "task" \(it exports helper, other\)/,
  );
  await rejectsWith(
    taskFromConfig(spec(join(dir, 'missing.ts'))),
    ConfigError,
    /task\.module: cannot load .*missing\.ts/,
  );
  const plain = moduleFile(
    'plain.mjs',
    'export const task = { name: "p", makeItems: () => [], demonstration: () => "",' +
      ' reward: { name: "r", score: async () => ({ reward: 0 }) } };',
  );
  assert.equal((await taskFromConfig(spec(plain))).name, 'p');
  await rejectsWith(
    taskFromConfig(spec(plain, { a: 1 })),
    ConfigError,
    /task\.options: .*plain\.mjs takes no options \(got a\)/,
  );
});

test('task.module: makeItems that throws or returns bad items: an error naming module, call, field', async () => {
  const base =
    'reward: { name: "r", score: async () => ({ reward: 0 }) }, demonstration: () => { throw new Error("no demo"); }';
  const throwing = moduleFile(
    'throwing.mjs',
    `export default { name: "t", makeItems: () => { throw new Error("boom"); }, ${base} };`,
  );
  const task = await taskFromConfig({ name: 'module', module: throwing });
  assert.throws(
    () => task.makeItems('train', 5, 0),
    (e: unknown) =>
      e instanceof ConfigError && e.message === `task.module: ${throwing}: makeItems("train", 5, 0) threw: boom`,
  );
  assert.throws(() => task.demonstration(item), /demonstration\(item "a"\) threw: no demo/);
  const badItems = moduleFile(
    'bad-items.mjs',
    `export default { name: "t", makeItems: () => [{ id: "a", prompt: "p", answer: 2 }], ${base} };`,
  );
  const bad = await taskFromConfig({ name: 'module', module: badItems });
  assert.throws(
    () => bad.makeItems('test', 1, 0),
    (e: unknown) =>
      e instanceof DataError &&
      e.field === 'answer' &&
      /item 0: "answer" must be a string \(got number\)/.test(e.message),
  );
  const dupes = moduleFile(
    'dupes.mjs',
    'export default { name: "t", makeItems: () => [{ id: "a", prompt: "p", answer: "" },' +
      ` { id: "a", prompt: "q", answer: "" }], ${base} };`,
  );
  const dup = await taskFromConfig({ name: 'module', module: dupes });
  assert.throws(() => dup.makeItems('train', 2, 0), /item 1: id "a" is not unique/);
});

test('reward module: options checked by its schema; a throw or hang scores reward.failureReward', async () => {
  const module = join(kit, 'length-reward.ts');
  const reward = await loadReward({
    parts: [{ kind: 'module', module, weight: 1, options: { maxChars: 2, failOn: '!' } }],
  });
  const inputs = ['ab', 'abc', 'a'].map((response, i) => ({
    response,
    item: { ...item, prompt: i === 2 ? 'x!' : 'x' },
  }));
  const results = await scoreBatch(reward, inputs, { timeoutMs: 1000, failureReward: -7 });
  assert.deepEqual(
    results.map((r) => r.reward),
    [1, 0, -7],
  );
  assert.match(String(results[2].info.error), /the prompt contains "!"/);
  await rejectsWith(
    loadReward({ parts: [{ kind: 'module', module, weight: 1, options: { maxChars: 0 } }] }),
    ConfigError,
    /reward\.parts\.0\.options\.maxChars/,
    /length-reward\.ts/,
  );
  const hanging = moduleFile('hang.mjs', 'export default { name: "hang", score: () => new Promise(() => {}) };');
  const hang = await loadReward({ parts: [{ kind: 'module', module: hanging, weight: 1, options: {} }] });
  const [timedOut] = await scoreBatch(hang, [{ response: '', item }], { timeoutMs: 50, failureReward: -1 });
  assert.equal(timedOut.reward, -1);
  assert.match(String(timedOut.info.error), /reward "hang" timed out after 50 ms/);
  const notReward = moduleFile('not-reward.mjs', 'export default { name: "x" };');
  await rejectsWith(
    loadReward({ parts: [{ kind: 'module', module: notReward, weight: 1, options: {} }] }),
    ConfigError,
    /reward\.parts\.0\.module: .*not-reward\.mjs: the exported reward \(defineReward\) has a bad "score" \(missing\)/,
  );
});

test('env module: defineEnvironment with options; a bad export names env.module; tools take tool()s', async () => {
  const factory = await envFactoryFromConfig(
    { kind: 'module', module: join(kit, 'notes-env.ts'), options: { maxValue: 10 } },
    { baseDir: dir },
  );
  const env = await factory.create();
  assert.deepEqual(
    env.tools.map((t) => t.name),
    ['note', 'read'],
  );
  await env.reset({ ...item, answer: '7' }, { seed: 0, timeoutMs: 1000 });
  const wrote = await env.step(
    { text: '', calls: [{ name: 'note', arguments: { key: 'answer', value: 7 }, raw: '' }] },
    { timeoutMs: 1000 },
  );
  assert.equal(wrote.reward, 1);
  const tooBig = await env.step(
    { text: '', calls: [{ name: 'note', arguments: { key: 'x', value: 11 }, raw: '' }] },
    { timeoutMs: 1000 },
  );
  assert.equal(tooBig.results[0].isError, true);
  await factory.close();
  await rejectsWith(
    envFactoryFromConfig({ kind: 'module', module: join(kit, 'notes-env.ts'), options: { max: 1 } }, { baseDir: dir }),
    ConfigError,
    /env\.options\.max/,
  );
  const notEnv = moduleFile('not-env.mjs', 'export const environment = { create: async () => ({}) };');
  await rejectsWith(
    envFactoryFromConfig({ kind: 'module', module: notEnv }, { baseDir: dir }),
    ConfigError,
    /env\.module: .*not-env\.mjs: the exported environment \(defineEnvironment\) has a bad "close" \(missing\)/,
  );
  const tools = await envFactoryFromConfig(
    { kind: 'tools', module: resolve('examples/custom-task/tools.ts') },
    { baseDir: dir },
  );
  const toolEnv = await tools.create();
  assert.deepEqual(
    toolEnv.tools.map((t) => t.name),
    ['code'],
  );
  await toolEnv.reset(item, { seed: 0, timeoutMs: 1000 });
  const looked = await toolEnv.step(
    { text: '', calls: [{ name: 'code', arguments: { name: 'abc' }, raw: '' }] },
    { timeoutMs: 1000 },
  );
  assert.match(looked.results[0].content, /^\d{3}$/);
});

test('arbor config --check loads the modules a config names and reports a bad one with the config file', async () => {
  writeFileSync(join(dir, 'bad-check.mjs'), 'export default { name: "r" };');
  const file = join(dir, 'check.yaml');
  writeFileSync(
    file,
    `task: { module: ${join(kit, 'count-task.ts')} }\nreward: { parts: [{ kind: module, module: ./bad-check.mjs }] }\n`,
  );
  await rejectsWith(
    configCommand(['--check', file]),
    ConfigError,
    new RegExp(`^${file}: reward\\.parts\\.0\\.module: .*bad-check\\.mjs.*"score"`),
  );
  writeFileSync(
    file,
    `task: { module: ${join(kit, 'count-task.ts')}, options: { offset: 2 } }\n` +
      `reward: { parts: [{ kind: module, module: ${join(kit, 'length-reward.ts')} }] }\n`,
  );
  const lines: string[] = [];
  const log = console.log;
  console.log = (line: string) => void lines.push(line);
  try {
    assert.equal(await configCommand(['--check', file]), 0);
  } finally {
    console.log = log;
  }
  assert.deepEqual(lines, [`${file}: ok`]);
});
