/**
 * The sampler fleet (src/engine/remote/fleet.ts) against restartable vLLM- and SGLang-like servers on
 * loopback that lose their adapter (or their weight version) when they restart, as real ones do. Each
 * reply encodes the adapter the server held (its log-probs are -(version + 1) / 10), so a test sees
 * exactly which weights produced it: failed requests go to other servers with the same body, a server
 * that comes back is loaded before it serves, and a reply never comes from older weights than it says.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { SamplerFleet, SamplerFleetError, type ServerSync } from '../../src/engine/remote/fleet.js';
import { OpenAICompletionsSampler } from '../../src/engine/remote/openai-completions.js';
import { SGLangSampler } from '../../src/engine/remote/sglang.js';
import { serverSync } from '../../src/engine/remote/weight-sync.js';
import { EngineCallError } from '../../src/core/errors.js';
import { runCharts } from '../../src/ui/client/chart-defs.js';
import type { SampleRequest } from '../../src/engine/types.js';

/** A vLLM- or SGLang-like server that can be killed (connections cut, state lost) and started again on its port. */
class FlakyServer {
  port = 0;
  private server: Server | undefined;
  /** The adapter loaded (vLLM / SGLang LoRA) or the weights (update_weights_from_disk): version from the path. */
  adapter: { name: string; version: number } | undefined;
  diskVersion: string | undefined;
  /** Requests since the last start: path and, for samples, the model asked for. */
  log: string[] = [];
  samples = 0;
  delayMs = 0;
  /** Answer /v1/completions and /generate with this status while set (a sick server). */
  failWith: number | undefined;

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async start(): Promise<this> {
    this.log = [];
    const server = createServer((req, res) => void this.answer(req, res));
    await new Promise<void>((resolve) => server.listen(this.port, '127.0.0.1', resolve));
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
    return this;
  }

  /** Like kill -9: every connection cut, nothing kept. */
  async kill(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    this.adapter = undefined;
    this.diskVersion = undefined;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private async answer(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = chunks.length ? (JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>) : {};
    const path = (req.url ?? '').split('?')[0];
    const send = (status: number, reply: unknown, text = false) => {
      if (res.destroyed) return;
      res.writeHead(status, text ? {} : { 'content-type': 'application/json' });
      res.end(text ? String(reply) : JSON.stringify(reply));
    };
    const version = (p: unknown) => Number(/v(\d+)$/.exec(String(p))?.[1] ?? NaN);
    switch (path) {
      case '/health':
        this.log.push('health');
        return send(200, '', true);
      case '/v1/unload_lora_adapter':
      case '/unload_lora_adapter':
        this.log.push('unload');
        if (this.adapter?.name !== body.lora_name) return send(404, { error: { message: 'not found' } });
        this.adapter = undefined;
        return send(200, 'Success', true);
      case '/v1/load_lora_adapter':
      case '/load_lora_adapter':
        this.log.push(`load v${version(body.lora_path)}`);
        this.adapter = { name: String(body.lora_name), version: version(body.lora_path) };
        return path.startsWith('/v1') ? send(200, 'Success', true) : send(200, { success: true });
      case '/update_weights_from_disk':
        this.log.push(`disk v${version(body.model_path)}`);
        this.diskVersion = String(body.weight_version);
        return send(200, { success: true, message: 'ok' });
      case '/v1/completions':
      case '/generate': {
        this.samples++;
        const model = path === '/generate' ? (body.lora_path as string[] | undefined)?.[0] : String(body.model);
        this.log.push(`sample ${model ?? 'base'}`);
        if (this.delayMs) await new Promise((r) => setTimeout(r, this.delayMs));
        if (this.failWith) return send(this.failWith, { error: 'sick' });
        const held = model && model !== 'base' ? this.adapter : undefined;
        if (model && model !== 'base' && !held) {
          return path === '/generate'
            ? send(400, { error: { message: `The following requested LoRA adapters are not loaded: ${model}` } })
            : send(404, { error: { message: `The model \`${model}\` does not exist.` } });
        }
        const v = held?.version ?? Number(/v(\d+)$/.exec(this.diskVersion ?? '')?.[1] ?? 0);
        const lp = -(v + 1) / 10;
        const seed = Number(
          path === '/generate'
            ? (body.sampling_params as Array<{ sampling_seed: number }>)[0].sampling_seed
            : body.seed,
        );
        const tokens = [seed % 50, (seed * 7) % 50];
        if (path === '/generate')
          return send(200, [
            {
              output_ids: tokens,
              meta_info: {
                finish_reason: { type: 'length' },
                output_token_logprobs: tokens.map((t) => [lp, t, null]),
                weight_version: this.diskVersion ?? 'default',
              },
            },
          ]);
        return send(200, {
          model,
          choices: [
            {
              index: 0,
              token_ids: tokens,
              finish_reason: 'length',
              logprobs: { token_logprobs: tokens.map(() => lp) },
            },
          ],
          usage: { prompt_tokens: 3 },
        });
      }
      default:
        return send(404, { detail: 'Not Found' });
    }
  }
}

const request = (i: number): SampleRequest => ({
  tokens: [1, 2, 3],
  maxTokens: 2,
  seed: 100 + i,
  affinityKey: `tree-${i}`,
});

/** Every reply sampled with the weights of the version it carries (the fakes encode it in the log-probs). */
function assertVersions(
  results: Array<{ weightVersion: number; completions: Array<{ logprobs: number[] }> }>,
  v: number,
) {
  for (const r of results) {
    assert.equal(r.weightVersion, v);
    assert.equal(r.completions[0].logprobs[0], -(v + 1) / 10, 'sampled with the weights of the version it carries');
  }
}

async function fleetOf(n: number): Promise<FlakyServer[]> {
  return Promise.all(Array.from({ length: n }, () => new FlakyServer().start()));
}

function vllmSampler(servers: FlakyServer[], fleet: Record<string, unknown> = {}, log?: (l: string) => void) {
  const sampler = new OpenAICompletionsSampler({
    servers: servers.map((s) => s.url),
    model: 'base',
    fleet: { probeMs: 20, requestTimeoutMs: 2000, ...fleet, log },
  });
  const spec = { kind: 'vllm_load_lora_adapter' as const, servers: [], loraName: 'policy' };
  sampler.fleet.setSync(serverSync(spec));
  const publish = (v: number) => sampler.fleet.publish({ version: v, path: `/adapters/v${v}`, adapter: 'policy' });
  return { sampler, publish };
}

test('a killed server: its requests go to the others with the same body, it is probed, and rejoins loaded with the current version', async () => {
  const servers = await fleetOf(3);
  const lines: string[] = [];
  const { sampler, publish } = vllmSampler(servers, {}, (l) => lines.push(l));
  try {
    await publish(1);
    assert.ok(servers.every((s) => s.adapter?.version === 1));
    const before = await sampler.sample(Array.from({ length: 12 }, (_, i) => request(i)));
    assertVersions(before, 1);
    const victim = servers.find((s) => s.samples > 0)!;
    victim.delayMs = 200;
    const inFlight = sampler.sample(Array.from({ length: 12 }, (_, i) => request(i)));
    await new Promise((r) => setTimeout(r, 50));
    await victim.kill();
    const during = await inFlight;
    // the same seeds on other servers with the same weights: the same tokens as before the kill
    assert.deepEqual(
      during.map((r) => r.completions[0].tokens),
      before.map((r) => r.completions[0].tokens),
    );
    assertVersions(during, 1);
    assert.ok(sampler.fleet.counters.retries >= 1, 'the requests cut by the kill were retried');
    assert.equal(sampler.fleet.healthy, 2);
    // a sync while it is down: the others load it, the run goes on
    await publish(2);
    assertVersions(await sampler.sample(Array.from({ length: 6 }, (_, i) => request(i))), 2);
    // it comes back empty: probed, loaded with version 2 before its first request
    victim.delayMs = 0;
    await victim.start();
    for (let i = 0; i < 100 && sampler.fleet.healthy < 3; i++) await new Promise((r) => setTimeout(r, 20));
    assert.equal(sampler.fleet.healthy, 3);
    assert.deepEqual(victim.log.slice(0, 3), ['health', 'unload', 'load v2']);
    assertVersions(await sampler.sample(Array.from({ length: 12 }, (_, i) => request(i))), 2);
    assert.ok(
      victim.log.slice(3).some((l) => l === 'sample policy'),
      'it serves again',
    );
    assert.equal(sampler.fleet.counters.resyncs, 1);
    assert.ok(
      lines.some((l) => l.includes(`${victim.url} is down`)),
      lines.join('\n'),
    );
    assert.ok(
      lines.some((l) => l.includes(`${victim.url} is back, at weight version 2`)),
      lines.join('\n'),
    );
  } finally {
    sampler.fleet.close();
    await Promise.all(servers.map((s) => s.kill()));
  }
});

test('a server that restarted between two requests (no failure seen) answers 404 for the adapter: it is loaded again, the reply comes from another', async () => {
  const servers = await fleetOf(2);
  const { sampler, publish } = vllmSampler(servers);
  try {
    await publish(3);
    await servers[0].kill();
    await servers[0].start();
    const results = await sampler.sample(Array.from({ length: 8 }, (_, i) => request(i)));
    assertVersions(results, 3);
    for (let i = 0; i < 100 && sampler.fleet.healthy < 2; i++) await new Promise((r) => setTimeout(r, 20));
    assert.equal(servers[0].adapter?.version, 3, 'loaded again without a restart being noticed');
    assert.ok(servers[0].log.includes('load v3'));
  } finally {
    sampler.fleet.close();
    await Promise.all(servers.map((s) => s.kill()));
  }
});

test('requests made during a weight sync wait for the new version; none is sampled with the old one', async () => {
  const servers = await fleetOf(2);
  const { sampler, publish } = vllmSampler(servers);
  const slow: ServerSync = async (client, target, signal) => {
    await new Promise((r) => setTimeout(r, 100));
    return serverSync({ kind: 'vllm_load_lora_adapter', servers: [], loraName: 'policy' })!(client, target, signal);
  };
  try {
    await publish(1);
    sampler.fleet.setSync(slow);
    const syncing = publish(2);
    const results = await sampler.sample(Array.from({ length: 8 }, (_, i) => request(i)));
    await syncing;
    assertVersions(results, 2);
  } finally {
    sampler.fleet.close();
    await Promise.all(servers.map((s) => s.kill()));
  }
});

test('every server down: requests wait unavailableSeconds, then fail naming each server and its last error', async () => {
  const servers = await fleetOf(2);
  const { sampler, publish } = vllmSampler(servers, { unavailableMs: 600 });
  try {
    await publish(1);
    await Promise.all(servers.map((s) => s.kill()));
    const started = Date.now();
    await assert.rejects(sampler.sample([request(0), request(1)]), (e: unknown) => {
      assert.ok(e instanceof SamplerFleetError, String(e));
      for (const s of servers) assert.match(e.message, new RegExp(`${s.url}: .*(ECONNREFUSED|socket hang up|connect)`));
      assert.match(e.message, /unavailableSeconds/);
      assert.match(e.message, /arbor train --resume/);
      return true;
    });
    const waited = Date.now() - started;
    assert.ok(waited >= 550 && waited < 3000, `waited ${waited} ms`);
    // a sync with no server up does not fail: the servers get it when they come back
    await publish(2);
    await servers[1].start();
    const [r] = await sampler.sample([request(0)]);
    assertVersions([r], 2);
  } finally {
    sampler.fleet.close();
    await Promise.all(servers.map((s) => s.kill()));
  }
});

test('a bad request fails at once on its first server, which stays in rotation; 5xx three times takes a server out', async () => {
  const servers = await fleetOf(2);
  const { sampler, publish } = vllmSampler(servers, { retries: 5 });
  try {
    await publish(1);
    servers[0].failWith = 400;
    servers[1].failWith = 400;
    await assert.rejects(
      sampler.sample([request(0)]),
      (e: unknown) => e instanceof EngineCallError && e.details.status === 400,
    );
    assert.equal(servers[0].samples + servers[1].samples, 1, 'not retried');
    assert.equal(sampler.fleet.healthy, 2);
    servers[1].failWith = undefined;
    servers[0].failWith = 500;
    const before = servers[0].samples;
    const results = await sampler.sample(Array.from({ length: 16 }, (_, i) => request(i)));
    assertVersions(results, 1);
    const sick = servers[0].samples - before;
    assert.ok(sick >= 3, `${sick} requests reached the sick server`);
    assert.ok(sampler.fleet.counters.downs >= 1, 'taken out after three 500s in a row');
    assert.equal(sampler.fleet.counters.retries, sick, 'each failed attempt was sent again, to the other server');
  } finally {
    sampler.fleet.close();
    await Promise.all(servers.map((s) => s.kill()));
  }
});

test('SGLang: a restarted server reports another weight_version, or says the adapter is not loaded; either way it is loaded again', async () => {
  const servers = await fleetOf(2);
  const disk = new SGLangSampler({ servers: servers.map((s) => s.url), fleet: { probeMs: 20 } });
  disk.fleet.setSync(serverSync({ kind: 'sglang_update_weights_from_disk', servers: [] }));
  try {
    await disk.fleet.publish({ version: 4, path: '/ckpt/v4' });
    assertVersions(await disk.sample(Array.from({ length: 6 }, (_, i) => request(i))), 4);
    // restarted with the base weights: it answers, but reports weight_version "default", not arbor-v4
    await servers[0].kill();
    await servers[0].start();
    const results = await disk.sample(Array.from({ length: 8 }, (_, i) => request(i)));
    assertVersions(results, 4);
    for (let i = 0; i < 100 && disk.fleet.healthy < 2; i++) await new Promise((r) => setTimeout(r, 20));
    assert.equal(servers[0].diskVersion, 'arbor-v4');
  } finally {
    disk.fleet.close();
  }
  const lora = new SGLangSampler({ servers: servers.map((s) => s.url), fleet: { probeMs: 20 } });
  lora.fleet.setSync(serverSync({ kind: 'sglang_load_lora_adapter', servers: [], loraName: 'policy' }));
  try {
    await lora.fleet.publish({ version: 5, path: '/adapters/v5', adapter: 'policy' });
    await servers[1].kill();
    await servers[1].start();
    assertVersions(await lora.sample(Array.from({ length: 8 }, (_, i) => request(i))), 5);
    for (let i = 0; i < 100 && lora.fleet.healthy < 2; i++) await new Promise((r) => setTimeout(r, 20));
    assert.equal(servers[1].adapter?.version, 5);
  } finally {
    lora.fleet.close();
    await Promise.all(servers.map((s) => s.kill()));
  }
});

test('a weight sync every server refuses fails; one a server cannot take marks only that server down', async () => {
  const servers = await fleetOf(2);
  const fleet = new SamplerFleet({ servers: servers.map((s) => s.url), probeMs: 10_000 });
  const refuse: ServerSync = async (client) => {
    if (client.baseUrl === servers[0].url || refuseAll)
      throw new EngineCallError(`${client.baseUrl}/v1/load_lora_adapter: HTTP 400: bad adapter`, { status: 400 });
    return undefined;
  };
  let refuseAll = false;
  fleet.setSync(refuse);
  try {
    await fleet.publish({ version: 1, path: '/a/v1' });
    assert.deepEqual(
      fleet.snapshot().map((s) => [s.state, s.version]),
      [
        ['down', 0],
        ['healthy', 1],
      ],
    );
    refuseAll = true;
    await assert.rejects(fleet.publish({ version: 2, path: '/a/v2' }), /failed on every server:\n.*bad adapter/);
  } finally {
    fleet.close();
    await Promise.all(servers.map((s) => s.kill()));
  }
});

test('the dashboard charts the fleet of a remote run (and only of one)', () => {
  const remote = [{ step: 1, sampler_servers_healthy: 3, sampler_retries: 0, sampler_resyncs: 0 }];
  const fleet = runCharts(remote).find((c) => c.id === 'fleet');
  assert.deepEqual(
    fleet?.metrics.map((m) => m.key),
    ['sampler_servers_healthy', 'sampler_retries', 'sampler_resyncs'],
  );
  assert.equal(
    runCharts([{ step: 1, reward_mean: 0.5 }]).some((c) => c.id === 'fleet'),
    false,
  );
});
