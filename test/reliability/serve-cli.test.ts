/**
 * Issue 17, defect 10 (the `arbor serve` part): a busy port is a one-line error naming the port (no
 * stack trace); completions stop at the end-of-sequence token by default (`ignore_eos` turns it off);
 * a checkpoint whose weights are NaN/Inf is refused on load. Also: `serve --help` and unknown flags.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { createServer } from 'node:net';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NanoModel } from '../../src/engine/model/model.js';
import { CharTokenizer } from '../../src/engine/tokenizer/char.js';
import { saveCheckpoint } from '../../src/engine/formats/checkpoint.js';
import { ArborServer } from '../../src/serve/server.js';
import { ScriptedSampler } from '../remote/scripted-sampler.js';

const dir = mkdtempSync(join(tmpdir(), 'arbor-serve-cli-'));
const tokenizer = new CharTokenizer();
const shape = { vocabSize: tokenizer.vocabSize, dModel: 8, nLayers: 1, nHeads: 2, dFF: 16, contextLength: 32 };
const arbor = (args: string[]) =>
  spawnSync(process.execPath, ['bin/arbor.mjs', ...args], { encoding: 'utf8', timeout: 60_000 });

test('serve on a busy port: exit 1 with one line naming the port, no stack trace', async () => {
  const ckpt = join(dir, 'ok');
  saveCheckpoint(ckpt, await NanoModel.create(shape, { seed: 1 }), tokenizer);
  const blocker = createServer();
  await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', r));
  const port = (blocker.address() as { port: number }).port;
  try {
    const r = arbor(['serve', '--checkpoint', ckpt, '--port', String(port)]);
    assert.equal(r.status, 1, r.stderr);
    assert.equal(
      r.stderr,
      `arbor: serve: port ${port} on 127.0.0.1 is already in use (another server is listening there; pick another with --port)\n`,
    );
    assert.doesNotMatch(r.stderr + r.stdout, /\n\s+at /, 'no stack trace');
  } finally {
    blocker.close();
  }
});

test('serve refuses a checkpoint with NaN or infinite weights, naming the tensors', async () => {
  const model = await NanoModel.create(shape, { seed: 1 });
  model.params.data.fill(Number.NaN);
  const ckpt = join(dir, 'nan');
  saveCheckpoint(ckpt, model, tokenizer);
  const r = arbor(['serve', '--checkpoint', ckpt, '--port', '0']);
  assert.equal(r.status, 1, r.stderr);
  const nanWeightsError = new RegExp(
    String.raw`^arbor: .*nan\/model\.safetensors has NaN or infinite weights in 11 tensor\(s\): ` +
      String.raw`tok_emb \(\d+ of \d+\), layers\.0\.attn_norm \(8 of 8\), layers\.0\.wq \(64 of 64\), \.\.\.; ` +
      String.raw`a checkpoint with NaN or infinite values cannot be used\n$`,
  );
  assert.match(r.stderr, nanWeightsError);
  const one = await NanoModel.create(shape, { seed: 1 });
  one.params.get('final_norm')[3] = Number.POSITIVE_INFINITY;
  saveCheckpoint(join(dir, 'inf'), one, tokenizer);
  const r2 = arbor(['serve', '--checkpoint', join(dir, 'inf'), '--port', '0']);
  assert.equal(r2.status, 1);
  assert.match(
    r2.stderr,
    /has NaN or infinite weights in 1 tensor\(s\): final_norm \(1 of 8\); a checkpoint with NaN or infinite values cannot be used\n$/,
  );
});

test('serve --help lists the limits; an unknown flag or a bad number is an error naming it', () => {
  const help = arbor(['serve', '--help']);
  assert.equal(help.status, 0);
  const flags = [
    '--weights-root',
    '--max-n',
    '--max-batch-tokens',
    '--max-concurrent',
    '--max-request-bytes',
    '--slice-tokens',
    '--name',
    '--max-model-len',
    '--threads',
    '--skip-tokenizer-init',
    '--enable-lora',
    '--lora-modules',
    '--max-lora-rank',
    '--max-loras',
  ];
  for (const flag of flags) assert.match(help.stdout, new RegExp(`${flag} `));
  assert.match(help.stdout, /VLLM_ALLOW_RUNTIME_LORA_UPDATING/);
  assert.match(help.stdout, /Hugging Face model directory/);
  const unknown = arbor(['serve', '--checkpoint', 'x', '--max-tokenz', '3']);
  assert.equal(unknown.status, 1);
  assert.match(unknown.stderr, /Unknown option '--max-tokenz'/);
  const bad = arbor(['serve', '--checkpoint', 'x', '--max-n', '0']);
  assert.equal(bad.status, 1);
  assert.match(bad.stderr, /--max-n must be in \[1, 1000000\], got 0/);
});

test('completions and /generate stop at EOS by default; ignore_eos continues; explicit stop tokens still apply', async () => {
  const engine = new ScriptedSampler(50);
  const probe = (await engine.sample([{ tokens: [1, 2], maxTokens: 30, seed: 4 }]))[0].completions[0].tokens;
  const at = probe.findIndex((t, i) => i >= 3 && probe.indexOf(t) === i);
  const eos = probe[at];
  const server = new ArborServer({ sampler: engine, modelName: 'm', eosTokenId: eos });
  const body = { prompt: [1, 2], max_tokens: 30, seed: 4, return_token_ids: true };
  const stopped = (await server.handleRequest('POST', '/v1/completions', JSON.stringify(body))).body as {
    choices: Array<{ token_ids: number[]; finish_reason: string }>;
  };
  assert.deepEqual(stopped.choices[0].token_ids, probe.slice(0, at + 1));
  assert.equal(stopped.choices[0].finish_reason, 'stop');
  const full = (await server.handleRequest('POST', '/v1/completions', JSON.stringify({ ...body, ignore_eos: true })))
    .body as typeof stopped;
  assert.deepEqual(full.choices[0].token_ids, probe);
  assert.equal(full.choices[0].finish_reason, 'length');
  const gen = (
    await server.handleRequest(
      'POST',
      '/generate',
      JSON.stringify({ input_ids: [1, 2], sampling_params: { max_new_tokens: 30, sampling_seed: 4 } }),
    )
  ).body as { output_ids: number[]; meta_info: { finish_reason: { type: string } } };
  assert.deepEqual(gen.output_ids, probe.slice(0, at + 1));
  assert.equal(gen.meta_info.finish_reason.type, 'stop');
  const earlier = (
    await server.handleRequest('POST', '/v1/completions', JSON.stringify({ ...body, stop_token_ids: [probe[1]] }))
  ).body as typeof stopped;
  assert.deepEqual(earlier.choices[0].token_ids, probe.slice(0, probe.indexOf(probe[1]) + 1));
});

test("arbor serve end to end: the tokenizer's EOS ends completions; /health answers", { timeout: 60_000 }, async () => {
  const ckpt = join(dir, 'e2e');
  saveCheckpoint(ckpt, await NanoModel.create(shape, { seed: 3 }), tokenizer);
  const child = spawn(process.execPath, ['bin/arbor.mjs', 'serve', '--checkpoint', ckpt, '--port', '0'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  try {
    const url = await new Promise<string>((resolve, reject) => {
      let out = '';
      const timer = setTimeout(() => reject(new Error(`no URL in ${out}`)), 30_000);
      child.stdout.on('data', (d) => {
        out += d;
        const m = /at (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
        if (m) {
          clearTimeout(timer);
          resolve(m[1]);
        }
      });
      child.on('exit', (code) => reject(new Error(`serve exited ${code}`)));
    });
    assert.equal((await fetch(`${url}/health`)).status, 200);
    const res = await fetch(`${url}/v1/completions`, {
      method: 'POST',
      body: JSON.stringify({ prompt: [1, 5], n: 64, max_tokens: 24, seed: 9, return_token_ids: true, temperature: 2 }),
    });
    const choices = ((await res.json()) as { choices: Array<{ token_ids: number[]; finish_reason: string }> }).choices;
    const withEos = choices.filter((c) => c.token_ids.includes(tokenizer.eos));
    assert.ok(withEos.length > 0, 'EOS was sampled somewhere');
    for (const c of withEos) {
      assert.equal(c.token_ids.indexOf(tokenizer.eos), c.token_ids.length - 1, 'nothing after EOS');
      assert.equal(c.finish_reason, 'stop');
    }
    // text prompts go through the checkpoint's char tokenizer (its BOS first), and text comes back
    const text = await fetch(`${url}/v1/completions`, {
      method: 'POST',
      body: JSON.stringify({ prompt: '1+2=', max_tokens: 4, seed: 1, return_token_ids: true }),
    });
    const choice = (
      (await text.json()) as { choices: Array<{ text: string; token_ids: number[]; prompt_token_ids: number[] }> }
    ).choices[0];
    assert.deepEqual(choice.prompt_token_ids, [tokenizer.bos, ...tokenizer.encode('1+2=')]);
    assert.equal(choice.text, tokenizer.decode(choice.token_ids));
  } finally {
    child.kill('SIGTERM');
  }
});
