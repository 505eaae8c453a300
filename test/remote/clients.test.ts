import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ArborServer } from '../../src/serve/server.js';
import { OpenAICompletionsSampler, entropyFromTopK } from '../../src/engine/remote/openai-completions.js';
import { SGLangSampler } from '../../src/engine/remote/sglang.js';
import { rendezvous } from '../../src/engine/remote/balancer.js';
import { JsonClient } from '../../src/engine/remote/http.js';
import { EngineCallError } from '../../src/core/errors.js';
import { ScriptedSampler } from './scripted-sampler.js';
import type { SampleCompletion, SampleRequest, Sampler } from '../../src/engine/types.js';

const request = { tokens: [1, 2, 3, 4], n: 3, maxTokens: 6, seed: 11, stopTokens: [7], topLogprobs: 2 };

test('openai-completions client over arbor serve returns exactly what the engine sampled', async () => {
  const engine = new ScriptedSampler();
  const server = new ArborServer({ sampler: engine, modelName: 'm' });
  const url = await server.listen();
  try {
    const client = new OpenAICompletionsSampler({ servers: [url], model: 'm' });
    const [viaHttp] = await client.sample([request]);
    const [direct] = await new ScriptedSampler().sample([request]);
    assert.equal(viaHttp.completions.length, 3);
    for (let i = 0; i < 3; i++) {
      assert.deepEqual(viaHttp.completions[i].tokens, direct.completions[i].tokens);
      assert.deepEqual(viaHttp.completions[i].logprobs, direct.completions[i].logprobs);
      assert.equal(viaHttp.completions[i].finishReason, direct.completions[i].finishReason);
      assert.deepEqual(viaHttp.completions[i].topLogprobs, direct.completions[i].topLogprobs);
    }
    assert.equal(viaHttp.usage.tokensDecoded, direct.usage.tokensDecoded);
    // the request body carries the vLLM fields
    const body = client.requestBody(request);
    assert.deepEqual(body.prompt, [1, 2, 3, 4]);
    assert.deepEqual(body.stop_token_ids, [7]);
    assert.equal(body.return_tokens_as_token_ids, true);
    assert.equal(body.cache_salt, 'arbor-v0');
  } finally {
    await server.close();
  }
});

test('sglang client over arbor serve: batched n, logprobs, finish reasons', async () => {
  // the engine behind the server records what it sampled for each copy (one request per copy)
  const engine = new ScriptedSampler(8);
  const served: Array<{ request: SampleRequest; completion: SampleCompletion }> = [];
  const recording: Sampler = {
    specificationVersion: engine.specificationVersion,
    capabilities: engine.capabilities,
    weightVersion: () => engine.weightVersion(),
    release: () => undefined,
    async sample(requests, options) {
      const results = await engine.sample(requests, options);
      requests.forEach((request, i) => served.push({ request, completion: results[i].completions[0] }));
      return results;
    },
  };
  const server = new ArborServer({ sampler: recording, modelName: 'm' });
  const url = await server.listen();
  try {
    const client = new SGLangSampler({ servers: [url] });
    const [r] = await client.sample([
      { tokens: [5, 6], n: 4, maxTokens: 4, seed: 3, stopTokens: [4], returnEntropy: true },
    ]);
    // copy i went to the engine with sampling_seed seed + 7919·i, as one request of one continuation
    assert.deepEqual(
      served.map((x) => x.request.seed).sort((a, b) => a! - b!),
      [3, 3 + 7919, 3 + 2 * 7919, 3 + 3 * 7919],
    );
    assert.ok(
      served.every(
        (x) =>
          x.request.n === 1 &&
          x.request.maxTokens === 4 &&
          x.request.stopTokens?.join() === '4' &&
          x.request.tokens.join() === '5,6',
      ),
    );
    assert.equal(r.completions.length, 4);
    r.completions.forEach((c, i) => {
      const engineSide = served.find((x) => x.request.seed === 3 + 7919 * i)!.completion;
      assert.deepEqual(c.tokens, engineSide.tokens, `copy ${i} tokens`);
      assert.deepEqual(c.logprobs, engineSide.logprobs, `copy ${i} log-probs`);
      assert.equal(c.finishReason, engineSide.finishReason, `copy ${i} finish reason`);
      assert.deepEqual(
        c.entropies,
        engineSide.topLogprobs!.map(entropyFromTopK),
        `copy ${i} entropies from the top-k the engine returned`,
      );
    });
    // the case exercises both finish reasons
    assert.deepEqual(new Set(r.completions.map((c) => c.finishReason)), new Set(['stop', 'length']));
    assert.equal(
      r.usage.tokensDecoded,
      served.reduce((a, x) => a + x.completion.tokens.length, 0),
    );
  } finally {
    await server.close();
  }
});

test('serve rejects malformed requests with 400 naming the field', async () => {
  const server = new ArborServer({ sampler: new ScriptedSampler(), modelName: 'm' });
  const url = await server.listen();
  try {
    const res = await fetch(`${url}/v1/completions`, {
      method: 'POST',
      body: JSON.stringify({ model: 'm', prompt: [1, -2] }),
    });
    assert.equal(res.status, 400);
    assert.match(((await res.json()) as { error: { message: string } }).error.message, /field "prompt"/);
    const res2 = await fetch(`${url}/v1/completions`, { method: 'POST', body: '{not json' });
    assert.equal(res2.status, 400);
    const health = (await (await fetch(`${url}/health`)).json()) as { status: string };
    assert.equal(health.status, 'ok');
  } finally {
    await server.close();
  }
});

/** A raw server whose first `failures` answers misbehave in the given way, then proxies to `target`. */
async function flakyProxy(
  target: string,
  mode: '500' | 'drop' | 'stall' | '429',
  failures: number,
): Promise<{ url: string; server: Server; hits: () => number; paths: string[] }> {
  let hits = 0;
  const paths: string[] = [];
  const answer = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    hits++;
    paths.push(req.url ?? '');
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    if (hits <= failures) {
      if (mode === '500') {
        res.writeHead(500);
        res.end('boom');
        return;
      }
      if (mode === '429') {
        res.writeHead(429);
        res.end('slow down');
        return;
      }
      if (mode === 'drop') {
        req.socket.destroy();
        return;
      }
      return; // stall: never answer
    }
    const upstream = await fetch(target + req.url, {
      method: req.method,
      body: req.method === 'GET' ? undefined : Buffer.concat(chunks),
      headers: { 'content-type': 'application/json' },
    });
    res.writeHead(upstream.status, { 'content-type': 'application/json' });
    res.end(await upstream.text());
  };
  // as a real proxy does: an upstream it cannot reach is a 502 (or a dropped connection once headers went out)
  const server = createServer((req, res) => {
    answer(req, res).catch(() => {
      if (res.headersSent) res.destroy();
      else res.writeHead(502).end('upstream unreachable');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server, hits: () => hits, paths };
}

for (const mode of ['500', 'drop', 'stall', '429'] as const) {
  test(`retries through a server that answers ${mode}: result complete, no duplicate`, async () => {
    const engine = new ScriptedSampler();
    const backend = new ArborServer({ sampler: engine, modelName: 'm' });
    const backendUrl = await backend.listen();
    const proxy = await flakyProxy(backendUrl, mode, 2);
    try {
      const client = new OpenAICompletionsSampler({
        servers: [{ baseUrl: proxy.url, retry: { timeoutMs: mode === 'stall' ? 200 : 5000 } }],
        model: 'm',
        fleet: { probeMs: 10 },
      });
      const [r] = await client.sample([request]);
      const [direct] = await new ScriptedSampler().sample([request]);
      assert.deepEqual(
        r.completions.map((c) => c.tokens),
        direct.completions.map((c) => c.tokens),
      );
      // a 500 or 429 is retried on the server; a dropped or stalled one is taken out and probed first
      const probed = mode === 'drop' || mode === 'stall';
      assert.deepEqual(
        proxy.paths,
        probed
          ? ['/v1/completions', '/health', '/health', '/v1/completions']
          : ['/v1/completions', '/v1/completions', '/v1/completions'],
      );
      assert.equal(engine.calls, 1, 'the engine sampled exactly once');
      await client.close();
    } finally {
      proxy.server.closeAllConnections();
      proxy.server.close();
      await backend.close();
    }
  });
}

test('non-retryable 400 fails at once with a clear error; abort is not retried', async () => {
  const server = new ArborServer({ sampler: new ScriptedSampler(0, 0), modelName: 'm' });
  const url = await server.listen();
  try {
    const client = new JsonClient({ baseUrl: url, retry: { baseDelayMs: 1 } });
    await assert.rejects(
      client.call('/v1/completions', { prompt: 'x' }),
      (e: unknown) =>
        e instanceof EngineCallError &&
        e.details.status === 400 &&
        !e.isRetryable &&
        e.details.url === `${url}/v1/completions` &&
        /HTTP 400: .*field \\"prompt\\"/.test(e.message),
    );
    assert.equal(client.stats.retries, 0);
    assert.equal(client.stats.requests, 1);
    const slowEngine = new ScriptedSampler(50, 5000);
    const slow = new ArborServer({ sampler: slowEngine, modelName: 'm' });
    const slowUrl = await slow.listen();
    try {
      const controller = new AbortController();
      const sampler = new OpenAICompletionsSampler({ servers: [slowUrl], model: 'm' });
      // abort once the engine holds the request (a fixed delay races the server on a loaded machine)
      const poll = setInterval(() => {
        if (slowEngine.calls >= 1) {
          clearInterval(poll);
          controller.abort();
        }
      }, 5);
      const started = Date.now();
      // the caller's abort reason itself comes back (not wrapped in an EngineCallError), promptly, and once
      await assert.rejects(
        sampler.sample([request], { signal: controller.signal }),
        (e: unknown) =>
          e === controller.signal.reason && (e as Error).name === 'AbortError' && !(e instanceof EngineCallError),
      );
      assert.ok(
        Date.now() - started < 2000,
        `rejected after ${Date.now() - started} ms, not when the engine would have answered`,
      );
      const http = sampler.fleet.servers[0].client;
      assert.deepEqual(
        { requests: http.stats.requests, retries: http.stats.retries },
        { requests: 1, retries: 0 },
        'the aborted request was not retried',
      );
      assert.equal(slowEngine.calls, 1);
    } finally {
      await slow.close();
    }
  } finally {
    await server.close();
  }
});

test('balancer keeps an affinity key on one server and spreads keys; removing a server moves only its keys', () => {
  const urls = ['http://127.0.0.1:1', 'http://127.0.0.1:2', 'http://127.0.0.1:3'];
  const seen = new Set<string>();
  const chosen = new Map<string, string>();
  for (let i = 0; i < 30; i++) {
    const a = rendezvous(urls, `tree-${i}`, (u) => u);
    assert.equal(
      rendezvous(urls, `tree-${i}`, (u) => u),
      a,
    );
    seen.add(a);
    chosen.set(`tree-${i}`, a);
  }
  assert.equal(seen.size, 3);
  const two = urls.filter((u) => u !== urls[1]);
  for (const [key, url] of chosen)
    if (url !== urls[1])
      assert.equal(
        rendezvous(two, key, (u) => u),
        url,
        key,
      );
});

test('entropy estimate from top-k: exact when top-k holds all mass', () => {
  const h = entropyFromTopK([
    [1, Math.log(0.5)],
    [2, Math.log(0.5)],
  ]);
  assert.ok(Math.abs(h - Math.log(2)) < 1e-12);
  const h2 = entropyFromTopK([[1, Math.log(0.5)]]);
  assert.ok(Math.abs(h2 - Math.log(2)) < 1e-12);
});
