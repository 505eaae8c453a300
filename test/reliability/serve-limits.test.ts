/**
 * Issue 17, defect 4: `arbor serve` bounds requests (n × max_tokens by --max-batch-tokens → 413, n by
 * --max-n → 400, the context length → 400, concurrency by --max-concurrent → 429) and keeps /health
 * responsive while a heavy request samples (sampling is sliced and yields to the event loop).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { NanoModel } from '../../src/engine/model/model.js';
import { NanoSampler } from '../../src/engine/embedded/sampler.js';
import { ArborServer } from '../../src/serve/server.js';
import type { ServeLimits } from '../../src/serve/limits.js';
import { ScriptedSampler } from '../remote/scripted-sampler.js';

/** POST; `message` is the error text of either envelope (vLLM's {error: {message}} or {error: string}). */
const post = async (url: string, body: unknown) => {
  const res = await fetch(url, { method: 'POST', body: JSON.stringify(body) });
  const json = (await res.json()) as Record<string, unknown>;
  const error = json.error as string | { message?: string } | undefined;
  return {
    status: res.status,
    headers: res.headers,
    body: json,
    message: typeof error === 'object' ? error.message : error,
  };
};

async function nanoServer(limits: Partial<ServeLimits>) {
  const model = await NanoModel.create(
    { vocabSize: 64, dModel: 64, nLayers: 2, nHeads: 4, dFF: 128, contextLength: 128 },
    { seed: 1 },
  );
  const server = new ArborServer({ sampler: new NanoSampler(model), modelName: 'm', limits });
  return { server, url: await server.listen() };
}

test('n × max_tokens over --max-batch-tokens is 413, n over --max-n is 400, before any sampling', async () => {
  const engine = new ScriptedSampler();
  const server = new ArborServer({ sampler: engine, modelName: 'm', limits: { maxN: 64, maxBatchTokens: 1000 } });
  const url = await server.listen();
  try {
    // the request (n=100000, max_tokens=60): refused at once
    const started = Date.now();
    const huge = await post(`${url}/v1/completions`, { prompt: [1, 2], n: 100000, max_tokens: 60 });
    assert.equal(huge.status, 400);
    assert.match(String(huge.message), /^field "n" must be an integer in \[1, 64\] \(--max-n\), got 100000$/);
    assert.ok(Date.now() - started < 2000);
    const big = await post(`${url}/v1/completions`, { prompt: [1, 2], n: 50, max_tokens: 60 });
    assert.equal(big.status, 413);
    assert.match(
      String(big.message),
      /n × max_tokens = 50 × 60 asks for up to 3000 decoded tokens, over the limit of 1000 \(--max-batch-tokens\)/,
    );
    const gen = await post(`${url}/generate`, { input_ids: [[1], [2], [3]], sampling_params: { max_new_tokens: 400 } });
    assert.equal(gen.status, 413);
    assert.match(String(gen.message), /the batch of 3 inputs asks for up to 1200 decoded tokens/);
    assert.equal(engine.calls, 0, 'nothing was sampled');
    // at the limit it is served
    const ok = await post(`${url}/v1/completions`, { prompt: [1, 2], n: 10, max_tokens: 100 });
    assert.equal(ok.status, 200);
    assert.equal((ok.body.choices as unknown[]).length, 10);
  } finally {
    await server.close();
  }
});

test('the budget counts the tokens a continuation can decode: the context length bounds max_tokens, and a prompt that fills the context is 400', async () => {
  const { server, url } = await nanoServer({ maxBatchTokens: 1000, maxN: 64 });
  try {
    // 10 × min(1000, 128 - 3) = 1250 > 1000
    const over = await post(`${url}/v1/completions`, { prompt: [1, 2, 3], n: 10, max_tokens: 1000 });
    assert.equal(over.status, 413);
    assert.match(String(over.message), /10 × 125 asks for up to 1250/);
    const fits = await post(`${url}/v1/completions`, { prompt: [1, 2, 3], n: 2, max_tokens: 100000 });
    assert.equal(fits.status, 200);
    const full = await post(`${url}/v1/completions`, { prompt: Array(128).fill(1), max_tokens: 1 });
    assert.equal(full.status, 400);
    assert.equal(full.message, 'field "prompt": 128 tokens leave no room in the context length of 128');
  } finally {
    await server.close();
  }
});

test('more than --max-concurrent sampling requests at once: 429 with Retry-After; served again once they finish', async () => {
  const engine = new ScriptedSampler(50, 400);
  const server = new ArborServer({ sampler: engine, modelName: 'm', limits: { maxConcurrent: 2 } });
  const url = await server.listen();
  try {
    const running = [
      post(`${url}/v1/completions`, { prompt: [1], max_tokens: 2 }),
      post(`${url}/generate`, { input_ids: [1], sampling_params: { max_new_tokens: 2 } }),
    ];
    while (engine.calls < 2) await new Promise((r) => setTimeout(r, 5));
    const busy = await post(`${url}/v1/completions`, { prompt: [1], max_tokens: 2 });
    assert.equal(busy.status, 429);
    assert.equal(busy.headers.get('retry-after'), '1');
    assert.match(String(busy.message), /server busy: 2 sampling requests running \(limit 2, --max-concurrent\)/);
    const health = await fetch(`${url}/health`);
    assert.equal(health.status, 200, '/health is not limited');
    assert.deepEqual(
      (await Promise.all(running)).map((r) => r.status),
      [200, 200],
    );
    assert.equal((await post(`${url}/v1/completions`, { prompt: [1], max_tokens: 2 })).status, 200);
    assert.equal(server.guard.busyRefusals, 1);
    assert.equal(server.guard.running, 0);
  } finally {
    await server.close();
  }
});

/** /health latencies (ms) measured every ~20 ms while `heavy` runs; returns them with the heavy request's time. */
async function healthUnderLoad(
  url: string,
  heavy: unknown,
): Promise<{ latencies: number[]; heavyMs: number; status: number }> {
  const latencies: number[] = [];
  let done = false;
  const started = Date.now();
  const request = post(`${url}/v1/completions`, heavy).then((r) => {
    done = true;
    return r;
  });
  await new Promise((r) => setTimeout(r, 10));
  for (let i = 0; i < 2000 && !done; i++) {
    const t = performance.now();
    const res = await fetch(`${url}/health`);
    await res.json();
    if (!done) latencies.push(performance.now() - t);
    await new Promise((r) => setTimeout(r, 20));
  }
  const r = await request;
  return { latencies, heavyMs: Date.now() - started, status: r.status };
}

test('/health stays responsive while a heavy request samples (sliced sampling); without slicing it would wait for the whole request', async () => {
  const heavy = { prompt: [1, 2, 3], n: 256, max_tokens: 100, seed: 5, temperature: 1 };
  const sliced = await nanoServer({ maxN: 512, maxBatchTokens: 100_000 });
  let a: Awaited<ReturnType<typeof healthUnderLoad>>;
  try {
    a = await healthUnderLoad(sliced.url, heavy);
  } finally {
    await sliced.server.close();
  }
  const maxA = Math.max(...a.latencies);
  const sorted = [...a.latencies].sort((x, y) => x - y);
  const p50 = sorted[Math.floor(sorted.length / 2)];
  console.log(
    `# /health under a ${heavy.n}×${heavy.max_tokens}-token request (${a.heavyMs} ms): ` +
      `${a.latencies.length} probes, p50 ${p50.toFixed(1)} ms, max ${maxA.toFixed(1)} ms`,
  );
  assert.equal(a.status, 200);
  assert.ok(a.latencies.length >= 5, `only ${a.latencies.length} /health answers during ${a.heavyMs} ms`);
  assert.ok(
    maxA < Math.max(400, a.heavyMs / 4),
    `/health took up to ${maxA.toFixed(0)} ms during a ${a.heavyMs} ms request`,
  );
  // the control: one unsliced sampler call blocks the event loop for the whole request
  const blocking = await nanoServer({ maxN: 512, maxBatchTokens: 100_000, sliceTokens: Number.MAX_SAFE_INTEGER });
  try {
    const b = await healthUnderLoad(blocking.url, heavy);
    console.log(
      `# control without slicing (${b.heavyMs} ms): ${b.latencies.length} probes, max ${Math.max(0, ...b.latencies).toFixed(1)} ms`,
    );
    assert.ok(b.latencies.length <= 2, `unsliced: ${b.latencies.length} /health answers during the request`);
  } finally {
    await blocking.server.close();
  }
});

test('Tinker sessions and unfetched futures are bounded (the oldest go first)', async () => {
  const server = new ArborServer({ sampler: new ScriptedSampler(), modelName: 'm' });
  for (let i = 0; i < 10_050; i++)
    await server.handleRequest('POST', '/api/v1/create_session', JSON.stringify({ sdk_version: '0.24.1' }));
  assert.equal(server.tinker.heartbeats('session-1'), undefined, 'the oldest session was dropped');
  assert.equal(server.tinker.heartbeats('session-10050'), 0);
  const sizes = server.tinker as unknown as { sessions: Map<string, unknown>; futures: Map<string, unknown> };
  assert.equal(sizes.sessions.size, 10_000);
  await server.handleRequest(
    'POST',
    '/api/v1/create_sampling_session',
    JSON.stringify({ session_id: 'session-10050', base_model: 'm' }),
  );
  let accepted = 0;
  for (let i = 0; i < 10_020; i++) {
    const r = await server.handleRequest(
      'POST',
      '/api/v1/asample',
      JSON.stringify({
        sampling_session_id: 'sampling-10051',
        prompt: { chunks: [{ tokens: [1] }] },
        sampling_params: { max_tokens: 1 },
      }),
    );
    if (r.status === 200) accepted++;
    if (i % 16 === 0) await new Promise((r) => setImmediate(r));
  }
  await new Promise((r) => setTimeout(r, 50));
  assert.ok(accepted > 10_000, `${accepted} accepted`);
  assert.ok(sizes.futures.size <= 10_001 && sizes.futures.size >= 9_900, `${sizes.futures.size} futures kept`);
});
