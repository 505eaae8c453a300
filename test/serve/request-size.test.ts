/**
 * `arbor serve` under the largest request it allows (--max-request-bytes, default 16 MiB): a body over
 * the limit is refused (413, naming the flag) by its size alone, before it is parsed; the largest
 * allowed body is parsed, and its prompt text encoded, off the event loop (serve/request-worker.ts), so
 * /health keeps answering in under 200 ms meanwhile; the worker's ids equal the tokenizer's own. Servers
 * are assembled in process as the CLI assembles them (serve/engine.ts) over a tiny nano checkpoint (the
 * char tokenizer) and a tiny random Qwen3 with the real Qwen3 tokenizer.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { request } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { promisify } from 'node:util';
import { serveCommand } from '../../src/cli/serve.js';
import { saveCheckpoint } from '../../src/engine/formats/checkpoint.js';
import { NanoModel } from '../../src/engine/model/model.js';
import { CharTokenizer } from '../../src/engine/tokenizer/char.js';
import { loadServeEngine } from '../../src/serve/engine.js';
import { DEFAULT_LIMITS, type ServeLimits } from '../../src/serve/limits.js';
import { CODEC_INLINE } from '../../src/serve/request-worker.js';
import { ArborServer } from '../../src/serve/server.js';
import { tinyQwen3 } from '../../testkit/serve/hf-fixture.js';

/** The slowest /health answer allowed while the big request is served. */
const HEALTH_MS = 200;

let root: string;
let nanoDir: string;
let qwenDir: string;

before(async () => {
  root = mkdtempSync(join(tmpdir(), 'arbor-request-size-'));
  nanoDir = join(root, 'nano');
  const tokenizer = new CharTokenizer();
  const config = { vocabSize: tokenizer.vocabSize, dModel: 32, nLayers: 1, nHeads: 2, dFF: 64, contextLength: 128 };
  saveCheckpoint(nanoDir, await NanoModel.create(config, { seed: 1 }), tokenizer);
  qwenDir = tinyQwen3(root);
});
after(() => rmSync(root, { recursive: true, force: true }));

/** A server as `arbor serve --checkpoint DIR [limits]` assembles it, and its tokenizer. */
async function serve(checkpoint: string, limits: Partial<ServeLimits> = {}) {
  const engine = await loadServeEngine({ checkpoint });
  const server = new ArborServer({ ...engine.options, limits: { ...engine.options.limits, ...limits } });
  return { server, url: await server.listen(), tokenizer: engine.options.tokenizer! };
}

/** A JSON body of exactly `bytes` bytes: `make(text)` with ASCII text as long as fits (characters = bytes). */
function sized(bytes: number, make: (text: string) => unknown): string {
  const room = bytes - JSON.stringify(make('')).length;
  return JSON.stringify(make('ab+12=3; '.repeat(Math.ceil(room / 9)).slice(0, room)));
}

/** POST `body` as given; the status and the error message of either envelope. */
async function post(url: string, body: string): Promise<{ status: number; message: string; json: any }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  const json = (await res.json()) as any;
  return { status: res.status, message: String(json.error?.message ?? json.error ?? ''), json };
}

/** POST the body in `file` from another process (as a client would: its own writing costs this one nothing). */
async function postFrom(file: string, url: string): Promise<{ status: number; message: string }> {
  const script =
    'const [file, url] = process.argv.slice(1);' +
    "fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, " +
    "body: require('node:fs').readFileSync(file) }).then(async (r) => " +
    'console.log(JSON.stringify({ status: r.status, json: await r.json() })))';
  const { stdout } = await promisify(execFile)(process.execPath, ['-e', script, file, url], { maxBuffer: 1 << 20 });
  const { status, json } = JSON.parse(stdout) as { status: number; json: any };
  return { status, message: String(json.error?.message ?? json.error ?? '') };
}

/**
 * Send `body` to `url` from another process and poll /health every 25 ms until it is answered: the reply
 * and each /health answer's latency, counted from when the poll was due (the server runs in this
 * process, so an event loop blocked while the poller waits delays the timer, and is counted too).
 */
async function whilePolling(base: string, url: string, body: string) {
  const file = join(root, 'body.json');
  writeFileSync(file, body);
  // the first fetch of a process loads its HTTP client (~100 ms): not the server's time
  await (await fetch(`${base}/health`)).json();
  let done = false;
  const big = postFrom(file, url).finally(() => (done = true));
  const latencies: number[] = [];
  let due = performance.now();
  while (!done) {
    const res = await fetch(`${base}/health`);
    assert.equal(res.status, 200);
    await res.json();
    const answered = performance.now();
    latencies.push(answered - due);
    due = answered + 25;
    await delay(25);
  }
  return { reply: await big, latencies };
}

const summary = (ms: number[]) => `${ms.length} /health answers, slowest ${Math.max(...ms).toFixed(0)} ms`;

test('the largest body the default limit allows (16 MiB of prompt text): /health answers in < 200 ms throughout', async () => {
  const { server, url } = await serve(nanoDir);
  try {
    assert.equal(server.limits.maxRequestBytes, 16 * 1024 * 1024);
    const body = sized(DEFAULT_LIMITS.maxRequestBytes, (prompt) => ({ max_tokens: 1, prompt }));
    assert.equal(Buffer.byteLength(body), DEFAULT_LIMITS.maxRequestBytes);
    const { reply, latencies } = await whilePolling(url, `${url}/v1/completions`, body);
    console.log(`# 16 MiB text prompt: ${summary(latencies)}; reply ${reply.status}`);
    // parsed and encoded whole (BOS + one id a character), then refused by the server's longest prompt
    const chars = (JSON.parse(body) as { prompt: string }).prompt.length;
    assert.equal(reply.status, 400);
    assert.equal(reply.message, `field "prompt": ${chars + 1} tokens exceed the limit of 1048576`);
    assert.ok(latencies.length >= 5, summary(latencies));
    assert.ok(Math.max(...latencies) < HEALTH_MS, summary(latencies));
    assert.equal(server.work.offThread, 2, 'the body was parsed, and its prompt encoded, in the worker thread');
  } finally {
    await server.close();
  }
});

test('the largest body of token ids (16 MiB): refused by its length in the worker, /health answers in < 200 ms', async () => {
  const { server, url } = await serve(nanoDir);
  try {
    // n ids "5" and one "15", the body exactly 16 MiB: '{"max_tokens":1,"prompt":[' + ids + ']}'
    const room = DEFAULT_LIMITS.maxRequestBytes - '{"max_tokens":1,"prompt":[]}'.length;
    const n = Math.floor((room + 1) / 2);
    const ids = `${(room + 1) % 2 ? '15,' : ''}${'5,'.repeat(n - 1 - ((room + 1) % 2))}5`;
    const body = `{"max_tokens":1,"prompt":[${ids}]}`;
    assert.equal(Buffer.byteLength(body), DEFAULT_LIMITS.maxRequestBytes);
    const { reply, latencies } = await whilePolling(url, `${url}/v1/completions`, body);
    console.log(`# 16 MiB token-id prompt: ${summary(latencies)}; reply ${reply.status}`);
    assert.equal(reply.status, 400);
    // no route takes an array that long: the worker refuses it instead of handing back 8M numbers
    const why = `an array of ${n} items, over the limit of 1048576 (the longest prompt, in tokens)`;
    assert.equal(reply.message, `field "prompt": ${why}`);
    assert.ok(Math.max(...latencies) < HEALTH_MS, summary(latencies));
    // within the limit, the length check refuses it (the same message as the sampler's checks)
    const tooLong = await post(`${url}/v1/completions`, JSON.stringify({ prompt: Array(200_000).fill(5) }));
    assert.equal(tooLong.message, 'field "prompt": 200000 tokens leave no room in the context length of 128');
    const nested = await post(`${url}/generate`, `{"input_ids":[[1],[${'5,'.repeat(1_100_000)}5]]}`);
    assert.equal(nested.status, 400);
    assert.match(nested.message, /^field "input_ids\[1\]": an array of 1100001 items, over the limit of 1048576/);
  } finally {
    await server.close();
  }
});

test('a Hugging Face tokenizer encodes and decodes in the worker: the same ids and text; /health answers meanwhile', async () => {
  const maxRequestBytes = 192 * 1024;
  const { server, url, tokenizer } = await serve(qwenDir, { maxRequestBytes });
  try {
    // over the inline size, so the worker's copy of the tokenizer encodes it: the ids equal the tokenizer's
    const text = 'The quick brown fox jumps over the lazy dog; ünïcödé 数字 42.\n'.repeat(400);
    assert.ok(text.length > CODEC_INLINE);
    const tokenized = await post(`${url}/tokenize`, JSON.stringify({ prompt: text }));
    assert.equal(tokenized.status, 200, tokenized.message);
    assert.deepEqual(tokenized.json.tokens, tokenizer.encode(text, true));
    assert.equal(server.work.offThread, 1);
    // and decodes long id lists there, to the same text
    const ids = [...tokenized.json.tokens, ...tokenized.json.tokens, ...tokenized.json.tokens] as number[];
    assert.ok(ids.length > CODEC_INLINE);
    const detokenized = await post(`${url}/detokenize`, JSON.stringify({ tokens: ids }));
    assert.equal(detokenized.json.prompt, tokenizer.decode(ids, false));
    assert.equal(server.work.offThread, 2);
    // the largest chat this server allows: rendered, encoded in the worker, refused by the context (256)
    const body = sized(maxRequestBytes, (content) => ({ max_tokens: 1, messages: [{ role: 'user', content }] }));
    assert.equal(Buffer.byteLength(body), maxRequestBytes);
    const chat = JSON.parse(body) as { messages: Array<{ role: string; content: string }> };
    const { reply, latencies } = await whilePolling(url, `${url}/v1/chat/completions`, body);
    console.log(`# ${maxRequestBytes} B chat on the Qwen3 tokenizer: ${summary(latencies)}; reply ${reply.status}`);
    const count = tokenizer.encode(tokenizer.chat!(chat.messages, { addGenerationPrompt: true }), false).length;
    assert.equal(reply.status, 400);
    assert.equal(reply.message, `field "messages": ${count} tokens leave no room in the context length of 256`);
    assert.ok(Math.max(...latencies) < HEALTH_MS, summary(latencies));
    assert.equal(server.work.offThread, 3);
  } finally {
    await server.close();
  }
});

/** POST with a Content-Length that says `declared` bytes, writing only `sent` of them; the reply. */
function postDeclared(url: string, declared: number, sent: string): Promise<{ status: number; text: string }> {
  const { port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, path: '/v1/completions', method: 'POST', headers: { 'content-length': declared } },
      (res) => {
        let text = '';
        res.on('data', (c) => (text += c));
        res.on('end', () => {
          req.destroy();
          resolve({ status: res.statusCode ?? 0, text });
        });
      },
    );
    req.on('error', reject);
    req.write(sent);
  });
}

test('a body over --max-request-bytes is refused (413, naming the flag) by its size, before it is parsed', async () => {
  const limit = 64 * 1024;
  const { server, url } = await serve(nanoDir, { maxRequestBytes: limit });
  try {
    const notJson = (bytes: number) => '{'.repeat(bytes);
    // at the limit the body is read and parsed (it is not JSON: 400)
    const at = await post(`${url}/v1/completions`, notJson(limit));
    assert.equal(at.status, 400);
    assert.equal(at.message, 'request body is not valid JSON');
    // one byte more: 413 by its declared size; a parse would have said 400
    const over = await post(`${url}/v1/completions`, notJson(limit + 1));
    assert.equal(over.status, 413);
    assert.equal(
      over.message,
      `request body of ${limit + 1} bytes is larger than ${limit} bytes (--max-request-bytes)`,
    );
    // no Content-Length (chunked): refused as soon as the bytes read pass the limit
    const chunks = [notJson(limit / 2), notJson(limit / 2), notJson(1)].map((s) => new TextEncoder().encode(s));
    const stream = new ReadableStream({
      pull: (c) => (chunks.length ? c.enqueue(chunks.shift()!) : c.close()),
    });
    const res = await fetch(`${url}/v1/completions`, { method: 'POST', body: stream, duplex: 'half' } as RequestInit);
    assert.equal(res.status, 413);
    assert.equal(
      ((await res.json()) as any).error.message,
      `request body larger than ${limit} bytes (--max-request-bytes)`,
    );
    // other routes too (Tinker, SGLang)
    const generate = await post(`${url}/generate`, notJson(limit + 1));
    assert.equal(generate.status, 413);
    assert.match(generate.message, /\(--max-request-bytes\)$/);
    assert.equal(server.work.offThread, 0, 'nothing reached the worker');
  } finally {
    await server.close();
  }
  // the default limit: a declared 16 MiB + 1 is answered 413 before the body is sent
  const defaults = await serve(nanoDir);
  try {
    const started = performance.now();
    const r = await postDeclared(defaults.url, DEFAULT_LIMITS.maxRequestBytes + 1, '{"prompt": "');
    assert.equal(r.status, 413);
    assert.match(r.text, /request body of 16777217 bytes is larger than 16777216 bytes \(--max-request-bytes\)/);
    assert.ok(performance.now() - started < 2000);
  } finally {
    await defaults.server.close();
  }
});

test('arbor serve --max-request-bytes is checked before the model loads', async () => {
  for (const value of ['0', '100', '1.5', 'lots'])
    await assert.rejects(
      serveCommand(['--checkpoint', join(root, 'missing'), '--max-request-bytes', value]),
      /--max-request-bytes/,
    );
});
