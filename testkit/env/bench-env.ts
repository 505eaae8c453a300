/**
 * Rough costs of the MCP and OpenEnv environments on this machine (no assertions):
 *   nice -n 5 node --import tsx testkit/env/bench-env.ts
 * MCP (examples/mcp/kv-server.mjs): start of a server process (spawn + initialize + tools/list), one
 * tools/call round trip on the shared process, and a stateful fork that replays 20 calls. OpenEnv
 * (testkit/env/openenv-server.ts over ws on localhost): opening a session, one step, and a fork that
 * replays reset + 20 steps.
 */
import { fileURLToPath } from 'node:url';
import { mcpEnvironmentFactory } from '../../src/env/mcp.js';
import { openenvEnvironmentFactory } from '../../src/env/openenv.js';
import type { TaskItem } from '../../src/core/types.js';
import { startGuessServer } from './openenv-server.js';

const item: TaskItem = { id: 'b', prompt: '', answer: '' };
const opts = { timeoutMs: 10_000 };
const server = fileURLToPath(new URL('../../examples/mcp/kv-server.mjs', import.meta.url));
const ms = (t0: number, n = 1) => ((performance.now() - t0) / n).toFixed(2);

const add = { text: '', calls: [{ name: 'add', arguments: { key: 'n', amount: 1 }, raw: '' }] };

async function mcp(): Promise<void> {
  const stateful = mcpEnvironmentFactory({
    kind: 'mcp',
    command: process.execPath,
    args: [server],
    stateful: true,
    spareProcesses: 0,
    stderr: 'ignore',
  });
  let t0 = performance.now();
  const starts = 3;
  const envs = [];
  for (let i = 0; i < starts; i++) envs.push(await stateful.create());
  console.log(`mcp: server start (spawn+initialize+tools/list) ${ms(t0, starts)} ms`);
  const env = envs[0];
  await env.reset(item, { seed: 1, ...opts });
  const calls = 200;
  t0 = performance.now();
  for (let i = 0; i < calls; i++) await env.step(add, opts);
  console.log(`mcp: tools/call round trip ${ms(t0, calls)} ms (${calls} sequential calls)`);
  await stateful.close();
  for (const spareProcesses of [0, 1]) {
    const f = mcpEnvironmentFactory({
      kind: 'mcp',
      command: process.execPath,
      args: [server],
      stateful: true,
      spareProcesses,
      stderr: 'ignore',
    });
    const small = await f.create();
    await small.reset(item, { seed: 1, ...opts });
    for (let i = 0; i < 20; i++) await small.step(add, opts);
    await new Promise((r) => setTimeout(r, 2000)); // let the spare start
    t0 = performance.now();
    await small.fork();
    console.log(`mcp: stateful fork replaying 20 calls, spareProcesses=${spareProcesses}: ${ms(t0)} ms`);
    await f.close();
  }
}

async function openenv(): Promise<void> {
  const s = await startGuessServer();
  const f = openenvEnvironmentFactory({ kind: 'openenv', url: s.url });
  let t0 = performance.now();
  const opens = 20;
  const envs = [];
  for (let i = 0; i < opens; i++) envs.push(await f.create());
  console.log(`openenv: open a ws session ${ms(t0, opens)} ms`);
  const env = envs[0];
  await env.reset(item, { seed: 1, ...opts });
  const steps = 200;
  t0 = performance.now();
  for (let i = 0; i < steps; i++) await env.step({ text: 'no guess', calls: [] }, opts);
  console.log(`openenv: ws step round trip ${ms(t0, steps)} ms (${steps} sequential steps)`);
  const small = envs[1];
  await small.reset(item, { seed: 1, ...opts });
  for (let i = 0; i < 20; i++) await small.step({ text: 'no guess', calls: [] }, opts);
  t0 = performance.now();
  await small.fork();
  console.log(`openenv: fork replaying reset + 20 steps ${ms(t0)} ms`);
  await f.close();
  await s.close();
}

await mcp();
await openenv();
