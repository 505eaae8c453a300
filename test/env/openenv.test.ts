import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { ConfigError, DataError } from '../../src/core/errors.js';
import { Rng } from '../../src/core/rng.js';
import { openenvEnvironmentFactory, openenvOptionsSchema, renderObservation } from '../../src/env/openenv.js';
import type { EnvironmentFactory, ToolCall } from '../../src/env/types.js';
import type { TaskItem } from '../../src/core/types.js';
import {
  startGuessServer,
  startReplayServer,
  type ExchangeFixture,
  type TestServer,
} from '../../testkit/env/openenv-server.js';

const cleanup: Array<TestServer | EnvironmentFactory> = [];
after(async () => {
  for (const c of cleanup.reverse()) await c.close();
});
const item: TaskItem = { id: 'g1', prompt: 'guess', answer: '' };
const opts = { timeoutMs: 5000 };
const call = (name: string, args: Record<string, unknown>): ToolCall => ({
  name,
  arguments: args,
  raw: JSON.stringify({ name, args }),
});
const turn = (text: string) => ({ text, calls: [] });

async function guessServer(options: { maxSessions?: number; ignoreSeed?: boolean } = {}) {
  const s = await startGuessServer(options);
  cleanup.push(s);
  return s;
}
function factory(options: Record<string, unknown>): EnvironmentFactory {
  const f = openenvEnvironmentFactory({ kind: 'openenv', ...options } as never);
  cleanup.push(f);
  return f;
}
const settle = () => new Promise((r) => setTimeout(r, 50));
const targetFor = (seed: number) => 1 + new Rng(seed).int(100);

test('openenv ws: a text episode plays to done with rewards; close sends {"type":"close"}', async () => {
  const s = await guessServer();
  const f = factory({ url: s.url, observationField: 'feedback' });
  const env = await f.create();
  assert.deepEqual(env.tools, []);
  assert.deepEqual(await env.reset(item, { seed: 11, timeoutMs: 5000 }), {
    observation: 'Guess a number from 1 to 100.',
  });
  const target = targetFor(11);
  const wrong = await env.step(turn(`I guess ${target === 1 ? 2 : target - 1}`), opts);
  assert.deepEqual(wrong.results, [{ name: '', content: target === 1 ? 'lower' : 'higher', isError: false }]);
  assert.equal(wrong.reward, 0);
  assert.equal(wrong.done, false);
  const right = await env.step(turn(`so it is ${target}`), opts);
  assert.deepEqual(right.results, [{ name: '', content: 'correct', isError: false }]);
  assert.equal(right.reward, 1);
  assert.equal(right.done, true);
  assert.deepEqual(right.metrics, { toolCalls: 0, toolErrors: 0, toolTimeouts: 0 });
  assert.deepEqual(await (env as unknown as { serverState(): Promise<unknown> }).serverState(), {
    episode_id: 'g1',
    step_count: 2,
  });
  await env.close();
  assert.equal(s.stats.closeMessages, 1);
  assert.equal(s.stats.sessionsOpened, 1);
});

test('openenv: the default observation is compact JSON unless it is one string field', () => {
  assert.equal(renderObservation({ feedback: 'higher', attempts: 2 }, ''), '{"feedback":"higher","attempts":2}');
  assert.equal(renderObservation({ echoed_message: 'hi' }, ''), 'hi');
  assert.equal(renderObservation({}, ''), '');
  assert.equal(renderObservation({ attempts: 2, feedback: 'x' }, 'attempts'), '2');
});

test('openenv: the recorded echo_env exchange replays byte for byte (episode and its fork)', async () => {
  const fixture = JSON.parse(
    readFileSync(new URL('../../testkit/env/fixtures/openenv-exchange.json', import.meta.url), 'utf8'),
  ) as ExchangeFixture;
  const server = await startReplayServer(fixture);
  cleanup.push(server);
  const f = factory({ ...fixture.client, url: server.url });
  const env = await f.create();
  assert.deepEqual(
    env.tools.map((t) => t.name),
    ['echo_message', 'echo_with_length'],
  );
  assert.deepEqual(env.tools[0].inputSchema, {
    properties: { message: { type: 'string' } },
    required: ['message'],
    type: 'object',
  });
  assert.match(env.tools[0].description, /^Echo back the provided message\./);
  assert.deepEqual(await env.reset(fixture.item, { seed: fixture.seed, timeoutMs: 5000 }), { observation: '' });
  const r1 = await env.step(
    { text: '', calls: [call('echo_message', { message: 'Hi!' }), call('echo_with_length', { message: 'Hi!' })] },
    opts,
  );
  assert.deepEqual(r1.results, [
    { name: 'echo_message', content: 'Hi!', isError: false },
    { name: 'echo_with_length', content: '{"message":"Hi!","length":3}', isError: false },
  ]);
  assert.equal(r1.reward, undefined);
  const r2 = await env.step({ text: '', calls: [call('echo_message', {})] }, opts);
  assert.equal(r2.results[0].isError, true);
  assert.match(r2.results[0].content, /^invalid_args: Error calling tool 'echo_message'/);
  assert.deepEqual(r2.metrics, { toolCalls: 1, toolErrors: 1, toolTimeouts: 0 });
  const fork = await env.fork();
  await fork.close();
  await env.close();
  await settle();
  assert.deepEqual(server.mismatches, []);
  assert.deepEqual(
    server.consumed,
    fixture.sessions.map((s) => s.length),
  );
});

test('openenv mcp mode: tools from list_tools, call_tool per call, unknown tools answered locally', async () => {
  const s = await guessServer();
  const env = await factory({ url: s.url, action: { mode: 'mcp' } }).create();
  assert.deepEqual(
    env.tools.map((t) => t.name),
    ['guess'],
  );
  await env.reset(item, { seed: 5, timeoutMs: 5000 });
  const t = targetFor(5);
  const r = await env.step(
    { text: '', calls: [call('guess', { n: t }), call('guess', { n: t }), call('peek', {})] },
    opts,
  );
  assert.deepEqual(r.results[0], { name: 'guess', content: 'correct', isError: false });
  assert.match(r.results[1].content, /not called: the environment ended the episode/);
  assert.match(r.results[2].content, /not called|unknown tool/);
  assert.equal(r.reward, 1);
  assert.equal(r.done, true);
  assert.deepEqual(r.metrics, { toolCalls: 3, toolErrors: 2, toolTimeouts: 0 });
  const env2 = await factory({ url: s.url, action: { mode: 'mcp' } }).create();
  await env2.reset(item, { seed: 5, timeoutMs: 5000 });
  const r2 = await env2.step({ text: '', calls: [call('peek', {}), call('guess', { n: 'x' })] }, opts);
  assert.match(r2.results[0].content, /unknown tool "peek"; available tools: guess/);
  assert.deepEqual(r2.results[1], {
    name: 'guess',
    content: 'invalid_args: invalid argument n: an integer is required',
    isError: true,
  });
  const malformed = {
    text: '<tool_call>{',
    calls: [],
    parseErrors: [{ name: '', content: 'bad JSON', isError: true }],
  };
  assert.equal((await env2.step(malformed as never, opts)).done, false);
  assert.equal((await env2.step({ text: 'done', calls: [] }, opts)).done, true);
});

test('openenv ws: server error messages become error results; the session survives them', async () => {
  const s = await guessServer();
  const env = await factory({ url: s.url, action: { mode: 'text', field: 'message' } }).create();
  await env.reset(item, { seed: 1, timeoutMs: 5000 });
  const boom = await env.step(turn('boom'), opts);
  assert.equal(boom.results[0].isError, true);
  assert.match(
    boom.results[0].content,
    /^http:\/\/127\.0\.0\.1:\d+: server error \(EXECUTION_ERROR\): the environment raised: boom$/,
  );
  assert.equal(boom.done, false);
  assert.deepEqual(boom.metrics, { toolCalls: 0, toolErrors: 1, toolTimeouts: 0 });
  const bad = await factory({ url: s.url, action: { mode: 'text', field: 'text' } }).create();
  await bad.reset(item, { seed: 1, timeoutMs: 5000 });
  const v = await bad.step(turn('7'), opts);
  assert.match(v.results[0].content, /server error \(VALIDATION_ERROR\): Invalid message/);
  const ok = await env.step(turn('50'), opts);
  assert.equal(ok.results[0].isError, false);
  assert.match(ok.results[0].content, /"attempts":1/);
});

test('openenv ws: a timeout ends the episode with an error result, never a hang', async () => {
  const s = await guessServer();
  const env = await factory({ url: s.url }).create();
  await env.reset(item, { seed: 1, timeoutMs: 5000 });
  const t0 = Date.now();
  const r = await env.step(turn('slow 5'), { timeoutMs: 200 });
  assert.ok(Date.now() - t0 < 1200, 'returned at the timeout');
  assert.match(r.results[0].content, /no answer to step within 200 ms/);
  assert.equal(r.done, true);
  assert.deepEqual(r.metrics, { toolCalls: 0, toolErrors: 1, toolTimeouts: 1 });
});

test('openenv ws: capacity refusal, a closed server and a bad URL are DataErrors naming the URL', async () => {
  const s = await guessServer({ maxSessions: 1 });
  const f = factory({ url: s.url });
  const first = await f.create();
  const second = await f.create();
  await assert.rejects(
    second.reset(item, { seed: 1, timeoutMs: 2000 }),
    (e: unknown) => e instanceof DataError && e.message.includes(s.url) && /CAPACITY_REACHED/.test(e.message),
  );
  await first.reset(item, { seed: 1, timeoutMs: 2000 });
  await s.close();
  const r = await first.step(turn('3'), { timeoutMs: 2000 });
  assert.equal(r.results[0].isError, true);
  assert.match(r.results[0].content, /closed|socket/);
  assert.equal(r.done, true);
  await assert.rejects(
    factory({ url: s.url }).create(),
    (e: unknown) =>
      e instanceof DataError && e.message.startsWith(s.url) && /cannot open an OpenEnv session/.test(e.message),
  );
  assert.throws(
    () => openenvEnvironmentFactory({ kind: 'openenv', url: 'ftp://x' }),
    (e: unknown) => e instanceof ConfigError && e.path === 'env.url',
  );
  assert.deepEqual(openenvOptionsSchema.parse({ kind: 'openenv' }).action, { mode: 'text', field: 'message' });
});

test('openenv ws: fork opens a new session and replays the log; branches diverge; bad replay is caught', async () => {
  const s = await guessServer();
  const f = factory({ url: s.url, observationField: 'attempts' });
  const env = await f.create();
  await env.reset(item, { seed: 9, timeoutMs: 5000 });
  const t = targetFor(9);
  const low = t === 1 ? 2 : 1;
  await env.step(turn(String(low)), opts);
  await env.step(turn(String(low)), opts);
  const fork = await env.fork();
  assert.equal(s.stats.sessionsOpened, 2);
  assert.deepEqual((await fork.step(turn(String(t)), opts)).results[0].content, '3');
  assert.deepEqual((await env.step(turn(String(low)), opts)).results[0].content, '3');
  assert.equal((await env.step(turn(String(low)), opts)).done, false);
  await fork.close();

  assert.equal(s.stats.sessionsActive, 1);

  // a nondeterministic environment (it ignores the seed) answers differently on replay: fork fails loudly
  const n = await guessServer({ ignoreSeed: true });
  const e2 = await factory({ url: n.url, observationField: 'feedback' }).create();
  await e2.reset(item, { seed: 9, timeoutMs: 5000 });
  assert.equal((await e2.step(turn('50'), opts)).results[0].content, 'lower');
  await assert.rejects(
    e2.fork(),
    (e: unknown) => e instanceof DataError && /answer 1 differs.*not deterministic under its seed/.test(e.message),
  );
  await settle();
  assert.equal(n.stats.sessionsActive, 1, 'the failed fork closed its session');
  const lax = await factory({ url: n.url, observationField: 'feedback', verifyReplay: false }).create();
  await lax.reset(item, { seed: 9, timeoutMs: 5000 });
  await lax.step(turn('50'), opts);
  assert.equal(
    (await (await lax.fork()).step(turn('50'), opts)).results[0].content,
    'higher',
    'the unverified fork holds another target',
  );
});

test('openenv http mode: POST /reset and /step (stateless, single-step)', async () => {
  const s = await guessServer();
  const env = await factory({ url: s.url, transport: 'http', observationField: 'feedback' }).create();
  assert.deepEqual(await env.reset(item, { seed: 3, timeoutMs: 5000 }), {
    observation: 'Guess a number from 1 to 100.',
  });
  const target0 = targetFor(0); // each /step runs on a fresh environment (OpenEnv's stateless HTTP)
  const r = await env.step(turn(String(target0)), opts);
  assert.deepEqual(r.results, [{ name: '', content: 'correct', isError: false }]);
  assert.equal(r.done, true);
  assert.deepEqual(s.stats.httpRequests, ['POST /reset', 'POST /step']);
  const env2 = await factory({ url: s.url, transport: 'http', action: { mode: 'text', field: 'text' } }).create();
  await env2.reset(item, { seed: 3, timeoutMs: 5000 });
  const bad = await env2.step(turn('1'), opts);
  assert.equal(bad.results[0].isError, true);
  assert.match(bad.results[0].content, /POST \/step answered HTTP 422: .*extra_forbidden/);
  const fork = await env2.fork();
  assert.equal(s.stats.sessionsOpened, 0);
  await fork.close();
});
