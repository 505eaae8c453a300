/**
 * Trainer faults: the Tinker trainer client against `arbor serve` (in-process, nano model)
 * behind a proxy that injects faults. Transient ones (503 and 429 with Retry-After, a dropped poll) are
 * retried with the same X-Idempotency-Key and seq_id and the step is applied once; a reply lost after
 * the trainer received the request stops the client (the retry is refused as a reused seq_id) with the
 * step applied exactly once, as the trainer's own optimizer step counter shows; a trainer that stays
 * down fails in bounded time; a trainer that lost the future, or that jumps its step counter, stops it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EngineCallError } from '../../src/core/errors.js';
import { NanoModel } from '../../src/engine/model/model.js';
import { NanoSampler } from '../../src/engine/embedded/sampler.js';
import { NanoTrainer } from '../../src/engine/embedded/trainer.js';
import { CharTokenizer } from '../../src/engine/tokenizer/char.js';
import { TinkerTrainer } from '../../src/engine/remote/tinker.js';
import { TrainerStateError } from '../../src/engine/remote/tinker-session.js';
import { ArborServer } from '../../src/serve/server.js';
import type { Datum } from '../../src/engine/types.js';

const data: Datum[] = [
  {
    inputTokens: [1, 2, 3],
    targetTokens: [2, 3, 4],
    weights: [1, 1, 1],
    samplingLogprobs: [-0.5, -0.5, -0.5],
    advantages: [1, 1, 1],
  },
];

/** What the proxy does with one request: pass it, answer it itself, or pass it and cut the reply. */
type Fault = 'pass' | 'cut-reply' | { status: number; headers?: Record<string, string>; body?: string } | 'drop';

interface Logged {
  path: string;
  key?: string;
  seq?: number;
}

/** A proxy to `target`; `fault(path, nth)` decides per request (nth counts the requests to that path, from 1). */
async function faultyProxy(
  target: string,
  fault: (path: string, nth: number, body: Record<string, unknown>) => Fault,
  rewrite?: (path: string, reply: Record<string, unknown>) => Record<string, unknown>,
): Promise<{ url: string; server: Server; log: Logged[] }> {
  const counts = new Map<string, number>();
  const log: Logged[] = [];
  const answer = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    const body = text ? (JSON.parse(text) as Record<string, unknown>) : {};
    const path = req.url ?? '';
    const nth = (counts.get(path) ?? 0) + 1;
    counts.set(path, nth);
    log.push({
      path,
      key: req.headers['x-idempotency-key'] as string | undefined,
      seq: typeof body.seq_id === 'number' ? body.seq_id : undefined,
    });
    const f = fault(path, nth, body);
    if (f === 'drop') return void req.socket.destroy();
    if (typeof f === 'object') {
      res.writeHead(f.status, { 'content-type': 'application/json', ...f.headers });
      return void res.end(f.body ?? JSON.stringify({ detail: 'injected' }));
    }
    const upstream = await fetch(target + path, {
      method: req.method,
      body: req.method === 'GET' ? undefined : text,
      headers: { 'content-type': 'application/json' },
    });
    let reply = await upstream.text();
    if (f === 'cut-reply') return void req.socket.destroy();
    if (rewrite && upstream.ok) reply = JSON.stringify(rewrite(path, JSON.parse(reply) as Record<string, unknown>));
    res.writeHead(upstream.status, { 'content-type': 'application/json' });
    res.end(reply);
  };
  const server = createServer((req, res) => void answer(req, res).catch(() => res.destroy()));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server, log };
}

async function servedTrainer(): Promise<{ server: ArborServer; url: string; trainer: NanoTrainer }> {
  const model = await NanoModel.create(
    { vocabSize: new CharTokenizer().vocabSize, dModel: 16, nLayers: 1, nHeads: 2, dFF: 32, contextLength: 32 },
    { seed: 3 },
  );
  const trainer = new NanoTrainer(model);
  const server = new ArborServer({
    sampler: new NanoSampler(model),
    trainer,
    modelName: 'nano',
    futureWaitMs: 20,
    stateDir: mkdtempSync(join(tmpdir(), 'arbor-trainer-faults-')),
  });
  return { server, url: await server.listen(), trainer };
}

const client = (url: string, retries = 4) =>
  new TinkerTrainer({
    baseUrl: url,
    baseModel: 'nano',
    retries,
    retry: { baseDelayMs: 5, maxDelayMs: 20 },
    pollMinMs: 1,
    pollMaxMs: 5,
    heartbeatMs: 0,
  });

async function closeAll(proxy: { server: Server }, served: { server: ArborServer }): Promise<void> {
  proxy.server.closeAllConnections();
  await new Promise<void>((r) => proxy.server.close(() => r()));
  await served.server.close();
}

test('transient trainer faults (503 and 429 with Retry-After, a dropped poll) are retried with the same idempotency key and seq_id; the step is applied once', async () => {
  const served = await servedTrainer();
  const proxy = await faultyProxy(served.url, (path, nth) => {
    if (path === '/api/v1/forward_backward' && nth === 1) return { status: 503 };
    if (path === '/api/v1/optim_step' && nth === 1) return { status: 429, headers: { 'retry-after': '0.3' } };
    if (path === '/api/v1/retrieve_future' && nth === 2) return 'drop';
    return 'pass';
  });
  const trainer = client(proxy.url);
  try {
    await trainer.forwardBackward(data, { kind: 'importance_sampling' });
    const started = Date.now();
    await trainer.optimStep({ learningRate: 1e-3 });
    assert.ok(Date.now() - started >= 280, 'the 429 waited its Retry-After');
    assert.equal(served.trainer.optimizer.step, 1, 'applied once');
    assert.equal(trainer.trainerStep, 1);
    for (const path of ['/api/v1/forward_backward', '/api/v1/optim_step']) {
      const sent = proxy.log.filter((l) => l.path === path);
      assert.equal(sent.length, 2, path);
      assert.equal(sent[0].seq, sent[1].seq, `${path}: the retry keeps its seq_id`);
      assert.ok(sent[0].key && sent[0].key === sent[1].key, `${path}: the retry keeps its X-Idempotency-Key`);
    }
    assert.equal(trainer.session.retries, 3);
  } finally {
    trainer.session.close();
    await closeAll(proxy, served);
  }
});

test('a reply lost after the trainer received optim_step: the retry is refused as a reused seq_id and the client stops; the step was applied once', async () => {
  const served = await servedTrainer();
  const proxy = await faultyProxy(served.url, (path, nth) =>
    path === '/api/v1/optim_step' && nth === 1 ? 'cut-reply' : 'pass',
  );
  const trainer = client(proxy.url);
  try {
    await trainer.forwardBackward(data, { kind: 'importance_sampling' });
    await assert.rejects(trainer.optimStep({ learningRate: 1e-3 }), (e: unknown) => {
      assert.ok(e instanceof TrainerStateError, String(e));
      assert.match(e.message, /optim_step \(seq_id 2\) may have been applied/);
      assert.match(e.message, /HTTP 409/);
      assert.match(e.message, /arbor train --resume/);
      return true;
    });
    // wait for the trainer's queue: the one optim_step it received runs once
    for (let i = 0; i < 100 && served.trainer.optimizer.step < 1; i++) await new Promise((r) => setTimeout(r, 10));
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(served.trainer.optimizer.step, 1, 'applied exactly once, not twice');
  } finally {
    trainer.session.close();
    await closeAll(proxy, served);
  }
});

test('a trainer that stays down fails in bounded time, naming the attempts and how to resume', async () => {
  const dead = createServer();
  await new Promise<void>((r) => dead.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(dead.address() as AddressInfo).port}`;
  await new Promise<void>((r) => dead.close(() => r()));
  const trainer = client(url, 3);
  const started = Date.now();
  await assert.rejects(trainer.forwardBackward(data, { kind: 'importance_sampling' }), (e: unknown) => {
    assert.ok(e instanceof EngineCallError);
    assert.match(e.message, /did not answer create_session after 4 attempts \(engine\.trainer\.retries 3\)/);
    assert.match(e.message, /ECONNREFUSED/);
    assert.match(e.message, /arbor train --resume/);
    return true;
  });
  assert.ok(Date.now() - started < 2000, `${Date.now() - started} ms`);
  trainer.session.close();
});

test('a trainer that lost the future (restarted) or reports a step applied twice stops the client', async () => {
  const served = await servedTrainer();
  let lose = false;
  let jump = false;
  const proxy = await faultyProxy(
    served.url,
    (path) =>
      lose && path === '/api/v1/retrieve_future' ? { status: 404, body: '{"detail":"future not found"}' } : 'pass',
    (path, reply) => {
      const metrics = reply.metrics as Record<string, number> | undefined;
      if (jump && path === '/api/v1/retrieve_future' && reply.type === 'optim_step' && metrics)
        return { ...reply, metrics: { ...metrics, step: metrics.step + 1 } };
      return reply;
    },
  );
  const trainer = client(proxy.url);
  try {
    await trainer.forwardBackward(data, { kind: 'importance_sampling' });
    await trainer.optimStep({ learningRate: 1e-3 });
    jump = true;
    await trainer.forwardBackward(data, { kind: 'importance_sampling' });
    await assert.rejects(
      trainer.optimStep({ learningRate: 1e-3 }),
      /reports optimizer step 3 after 1: an optimizer step was applied more than once/,
    );
    jump = false;
    lose = true;
    await assert.rejects(
      trainer.forwardBackward(data, { kind: 'importance_sampling' }),
      (e: unknown) =>
        e instanceof TrainerStateError && /no longer knows future .* \(did it restart\?\)/.test(e.message),
    );
  } finally {
    trainer.session.close();
    await closeAll(proxy, served);
  }
});
