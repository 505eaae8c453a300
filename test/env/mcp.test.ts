import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { ConfigError, DataError, EnvironmentError } from '../../src/core/errors.js';
import { POSITIONAL_ARGS } from '../../src/env/format/arbor.js';
import { mcpEnvironmentFactory, mcpOptionsSchema } from '../../src/env/mcp.js';
import type { Environment, EnvironmentFactory, ToolCall } from '../../src/env/types.js';
import type { TaskItem } from '../../src/core/types.js';

const server = fileURLToPath(new URL('../../examples/mcp/kv-server.mjs', import.meta.url));
const pagedServer = fileURLToPath(new URL('../../testkit/env/paged-mcp-server.mjs', import.meta.url));
const item: TaskItem = { id: 'q1', prompt: 'p', answer: 'a' };
const opts = { timeoutMs: 5000 };
const factories: EnvironmentFactory[] = [];
after(async () => {
  await Promise.all(factories.map((f) => f.close()));
});

function make(extra: Record<string, unknown> = {}): EnvironmentFactory {
  const f = mcpEnvironmentFactory({
    kind: 'mcp',
    command: process.execPath,
    args: [server],
    stderr: 'ignore',
    ...extra,
  });
  factories.push(f);
  return f;
}
const call = (name: string, args: Record<string, unknown> = {}): ToolCall => ({
  name,
  arguments: args,
  raw: `${name}(${JSON.stringify(args)})`,
});
const texts = async (env: Environment, calls: ToolCall[], timeoutMs = 5000) =>
  (await env.step({ text: 't', calls }, { timeoutMs })).results.map((r) => r.content);
const pidOf = (env: Environment) => (env as unknown as { pid: number | null }).pid;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
async function waitFor(condition: () => boolean, what: string): Promise<void> {
  for (let t0 = Date.now(); !condition(); await sleep(25))
    if (Date.now() - t0 > 10_000) assert.fail(`timed out waiting for ${what}`);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

test('mcp: tools are listed as ToolSpecs and calls run per episode; a turn without calls ends it', async () => {
  const env = await make().create();
  assert.deepEqual(
    env.tools.map((t) => t.name),
    ['get', 'set', 'list', 'add', 'sleep'],
  );
  const set = env.tools.find((t) => t.name === 'set')!;
  assert.equal(set.description, 'Store a string value under a key (replaces any old value).');
  assert.deepEqual(set.inputSchema.required, ['key', 'value']);
  assert.equal('$schema' in set.inputSchema, false);
  assert.deepEqual(await env.reset(item, { seed: 1, timeoutMs: 5000 }), { observation: '' });
  const r = await env.step(
    {
      text: 't',
      calls: [call('set', { key: 'x', value: '5' }), call('add', { key: 'x', amount: 2 }), call('get', { key: 'x' })],
    },
    opts,
  );
  assert.deepEqual(r.results, [
    { name: 'set', content: 'ok', isError: false },
    { name: 'add', content: '7', isError: false },
    { name: 'get', content: '7', isError: false },
  ]);
  assert.equal(r.done, false);
  assert.deepEqual(r.metrics, { toolCalls: 3, toolErrors: 0, toolTimeouts: 0 });
  // positional arguments of the arbor format ("@add(x,5)") are resolved against the tool's schema
  const positional = await env.step(
    { text: 't', calls: [call('add', { [POSITIONAL_ARGS]: 'x,5' }), call('add', { [POSITIONAL_ARGS]: 'x,5,6' })] },
    opts,
  );
  assert.deepEqual(positional.results[0], { name: 'add', content: '12', isError: false });
  assert.deepEqual(positional.results[1], {
    name: 'add',
    content: 'add: takes 2 arguments (key, amount), got 3',
    isError: true,
  });
  const malformed = await env.step(
    { text: '<tool_call>{oops', calls: [], parseErrors: [{ name: '', content: 'bad JSON', isError: true }] } as never,
    opts,
  );
  assert.deepEqual(malformed, { results: [], done: false, metrics: { toolCalls: 0, toolErrors: 0, toolTimeouts: 0 } });
  const end = await env.step({ text: 'the answer is 7', calls: [] }, opts);
  assert.equal(end.done, true);
  assert.deepEqual(end.results, []);
});

test('mcp: tool allow-list filters what is offered and callable; isError from the tool is honoured', async () => {
  const env = await make({ tools: ['get', 'set'] }).create();
  await env.reset(item, { seed: 1, timeoutMs: 5000 });
  assert.deepEqual(
    env.tools.map((t) => t.name),
    ['get', 'set'],
  );
  const r = await env.step({ text: 't', calls: [call('list'), call('get', { key: 'missing' })] }, opts);
  assert.equal(r.results[0].isError, true);
  assert.match(r.results[0].content, /unknown tool "list"; available tools: get, set/);
  assert.deepEqual(r.results[1], { name: 'get', content: 'no such key: missing', isError: true });
  assert.deepEqual(r.metrics, { toolCalls: 2, toolErrors: 2, toolTimeouts: 0 });
});

test('mcp: stateful episodes are isolated (own process); shared mode shares one process', async () => {
  const stateful = make({ stateful: true, spareProcesses: 0 });
  const a = await stateful.create();
  const b = await stateful.create();
  assert.notEqual(pidOf(a), pidOf(b));
  await a.reset(item, { seed: 1, timeoutMs: 5000 });
  await b.reset(item, { seed: 2, timeoutMs: 5000 });
  await texts(a, [call('set', { key: 'k', value: 'A' })]);
  assert.deepEqual(await texts(b, [call('list')]), ['']);
  assert.deepEqual(await texts(a, [call('get', { key: 'k' })]), ['A']);

  const shared = make();
  const c = await shared.create();
  const d = await shared.create();
  assert.equal(pidOf(c), pidOf(d));
  await texts(c, [call('set', { key: 'k', value: 'C' })]);
  assert.deepEqual(await texts(d, [call('get', { key: 'k' })]), ['C']);
  const cf = await c.fork();
  assert.equal(pidOf(cf), pidOf(c));
  await cf.close();
  assert.ok(alive(pidOf(c)!), 'closing a shared-mode episode leaves the shared server running');
});

test('mcp: stateful fork starts a fresh process and replays the action log; branches then diverge', async () => {
  const env = await make({ stateful: true }).create();
  await env.reset(item, { seed: 3, timeoutMs: 5000 });
  await texts(env, [call('add', { key: 'n', amount: 3 }), call('add', { key: 'n', amount: 4 }), call('nope')]);
  const fork = await env.fork();
  assert.notEqual(pidOf(fork), pidOf(env));
  assert.deepEqual(await texts(fork, [call('get', { key: 'n' })]), ['7']);
  await texts(fork, [call('add', { key: 'n', amount: 100 })]);
  assert.deepEqual(await texts(env, [call('get', { key: 'n' })]), ['7']);
  assert.deepEqual(await texts(fork, [call('get', { key: 'n' })]), ['107']);
  const forkPid = pidOf(fork)!;
  await fork.close();
  assert.equal(alive(forkPid), false);
});

test('mcp: bad arguments and a timeout become error results, never exceptions', async () => {
  const env = await make().create();
  await env.reset(item, { seed: 1, timeoutMs: 5000 });
  const bad = await env.step({ text: 't', calls: [call('add', { key: 'x' })] }, opts);
  assert.equal(bad.results[0].isError, true);
  assert.match(bad.results[0].content, /Input validation error.*amount/);
  const slow = await env.step(
    { text: 't', calls: [call('sleep', { ms: 3000 }), call('set', { key: 'after', value: '1' })] },
    { timeoutMs: 150 },
  );
  assert.deepEqual(slow.results[0], { name: 'sleep', content: 'tool sleep timed out after 150 ms', isError: true });
  assert.deepEqual(slow.results[1], { name: 'set', content: 'ok', isError: false });
  assert.deepEqual(slow.metrics, { toolCalls: 2, toolErrors: 1, toolTimeouts: 1 });
});

test('mcp: episodeSeconds ends the episode once spent', async () => {
  const env = await make({ episodeSeconds: 0.2 }).create();
  await env.reset(item, { seed: 1, timeoutMs: 5000 });
  const r = await env.step({ text: 't', calls: [call('sleep', { ms: 2000 }), call('list')] }, opts);
  assert.match(r.results[0].content, /timed out after \d+ ms/);
  assert.match(r.results[1].content, /episodeSeconds=0.2/);
  assert.equal(r.done, true);
  assert.equal(r.metrics.toolTimeouts, 2);
});

test('mcp: a killed server cuts its episode (a recoverable EnvironmentError); the next episode gets a fresh shared server', async () => {
  const f = make();
  const env = await f.create();
  await env.reset(item, { seed: 1, timeoutMs: 5000 });
  const pid = pidOf(env)!;
  process.kill(pid, 'SIGKILL');
  await new Promise((r) => setTimeout(r, 200));
  await assert.rejects(
    env.step({ text: 't', calls: [call('list')] }, opts),
    (e: unknown) =>
      e instanceof EnvironmentError &&
      e.recoverable &&
      /MCP server `.*kv-server\.mjs` \(pid \d+\) exited \(signal SIGKILL\); the episode is cut/.test(e.message),
  );
  const next = await f.create();
  assert.notEqual(pidOf(next), pid);
  assert.deepEqual(await texts(next, [call('set', { key: 'a', value: 'b' })]), ['ok']);
});

test('mcp: close stops the process (per-episode and factory-wide)', async () => {
  const stateful = make({ stateful: true, spareProcesses: 0 });
  const env = await stateful.create();
  const pid = pidOf(env)!;
  assert.ok(alive(pid));
  await env.close();
  assert.equal(alive(pid), false);
  const shared = make();
  const other = await shared.create();
  const spid = pidOf(other)!;
  assert.ok(alive(spid));
  await shared.close();
  assert.equal(alive(spid), false);
});

test('mcp: a server that cannot start is a DataError naming the command; bad options a ConfigError', async () => {
  const f = make({
    command: process.execPath,
    args: ['-e', "process.stdin.resume(); process.stdin.on('end', () => process.exit())"],
    startupTimeoutMs: 300,
  });
  await assert.rejects(
    f.create(),
    (e: unknown) =>
      e instanceof DataError && /cannot start MCP server .*-e process.stdin.*startupTimeoutMs=300/.test(e.message),
  );
  await assert.rejects(
    make({ command: '/nonexistent/mcp-server' }).create(),
    (e: unknown) =>
      e instanceof DataError &&
      e.field === 'env.command' &&
      /cannot start MCP server `\/nonexistent\/mcp-server .*`: .*ENOENT/.test(e.message),
  );
  assert.throws(
    () => mcpEnvironmentFactory({ kind: 'mcp', startupTimeoutMs: 5 }),
    (e: unknown) => e instanceof ConfigError && e.path === 'env.startupTimeoutMs',
  );
  assert.equal(mcpOptionsSchema.parse({ kind: 'mcp' }).stateful, false);
});

test('mcp: listTools follows nextCursor; env and cwd reach the server process', async () => {
  const dir = fileURLToPath(new URL('../../testkit/env/', import.meta.url));
  const env = await make({ args: [pagedServer], env: { ARBOR_MCP_TEST: 'yes' }, cwd: dir }).create();
  assert.deepEqual(
    env.tools.map((t) => t.name),
    ['echo', 'getenv', 'cwd'],
  );
  await env.reset(item, { seed: 1, timeoutMs: 5000 });
  assert.deepEqual(
    await texts(env, [call('echo', { text: 'a\nb' }), call('getenv', { name: 'ARBOR_MCP_TEST' }), call('cwd')]),
    ['a\nb', 'yes', dir.replace(/\/$/, '')],
  );
});

test('mcp: stateful mode keeps spare processes ready (a dead spare is skipped); close stops them too', async () => {
  const f = make({ stateful: true, spareProcesses: 2 });
  const ids = () => (f as unknown as { processIds(): number[] }).processIds();
  const env = await f.create();
  await waitFor(() => ids().length === 3, 'two spares');
  const spares = ids().filter((p) => p !== pidOf(env));
  await env.reset(item, { seed: 1, timeoutMs: 5000 });
  await texts(env, [call('set', { key: 'a', value: '1' })]);
  process.kill(spares[0], 'SIGKILL');
  const fork = await env.fork();
  assert.ok(
    spares.includes(pidOf(fork)!) || !ids().includes(spares[0]),
    'the fork runs on a spare (or on a fresh process after the dead spare)',
  );
  assert.notEqual(pidOf(fork), spares[0]);
  assert.deepEqual(await texts(fork, [call('get', { key: 'a' })]), ['1']);
  await waitFor(() => ids().length === 4 && !ids().includes(spares[0]), 'the spares refilled');
  const all = ids();
  await f.close();
  for (const p of all) assert.equal(alive(p), false, `process ${p} stopped`);
});
