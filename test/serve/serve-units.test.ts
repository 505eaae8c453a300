/**
 * Pieces of `arbor serve`'s vLLM and Tinker routes on their own: stop strings over incrementally
 * decoded text (vLLM's detokenizer rules), the completion and chat logprobs objects, the error
 * envelope's `param`, the Tinker archive's tar (read back by GNU tar and by Arbor's untar), streamed
 * generation (segments continue retained KV state, every handle released, an abort ends the rest),
 * and the sampler's top-k selection that large vocabularies need (equal to a full sort, ties included).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Rng } from '../../src/core/rng.js';
import { NanoModel } from '../../src/engine/model/model.js';
import { NanoSampler } from '../../src/engine/embedded/sampler.js';
import { chooseToken } from '../../src/engine/model/sampling.js';
import { untar } from '../../src/engine/remote/tinker-archive.js';
import { tarFiles } from '../../src/serve/tinker/archive.js';
import { generate, generateStream, type Generation } from '../../src/serve/vllm/generation.js';
import { DEFAULT_LIMITS, SampleGuard } from '../../src/serve/limits.js';
import { chatLogprobs, completionLogprobs, StopText } from '../../src/serve/text.js';
import { BadRequest, vllmError } from '../../src/serve/validate.js';

/** A decoder of ids 0..9 to "a".."j", 10 to "xy", 11 to half a character (U+FFFD until 12 completes it as "é"). */
function decode(ids: number[]): string {
  let out = '';
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i];
    if (id === 11) out += ids[i + 1] === 12 ? 'é' : '\ufffd';
    else if (id === 12) out += ids[i - 1] === 11 ? '' : '\ufffd';
    else out += id === 10 ? 'xy' : String.fromCharCode(97 + id);
  }
  return out;
}

const stopStringsTitle =
  'stop strings: the first one found in the new characters (list order breaks ties), cut before it or after it; ' +
  'deltas hold back what a stop could still cut';
test(stopStringsTitle, () => {
  const t = new StopText(decode, ['cd', 'b'], false);
  assert.equal(t.push([0, 1, 2, 3]), 2, 'b ends the text at the second token');
  assert.deepEqual([t.text, t.stop], ['a', 'b']);
  assert.equal(t.push([4]), 0, 'nothing is taken after the stop');
  const order = new StopText(decode, ['yc', 'x'], false);
  assert.equal(order.push([0, 10, 2]), 2);
  assert.deepEqual([order.text, order.stop], ['a', 'x'], 'x is found in the token that completed "xy" first');
  const keep = new StopText(decode, ['cd'], true);
  keep.push([0, 1, 2, 3, 4]);
  assert.deepEqual([keep.text, keep.stop], ['abcd', 'cd']);
  // streamed: a stop string of 3 characters holds back 2 until it can no longer be cut
  const s = new StopText(decode, ['efg'], false);
  s.push([0, 1, 2]);
  assert.equal(s.delta(false), 'a');
  s.push([3, 4, 5]);
  assert.equal(s.delta(false), 'bcd');
  s.push([6, 7]);
  assert.deepEqual([s.text, s.stop, s.delta(true)], ['abcd', 'efg', '']);
  // an incomplete character is held back, then sent whole
  const u = new StopText(decode, [], false);
  u.push([0, 11]);
  assert.equal(u.delta(false), 'a');
  u.push([12]);
  assert.equal(u.delta(false), 'é');
  assert.equal(u.sent, 2);
});

test('the completion logprobs object: the token first in its dict, at most k + 1 entries, null for an unscored position, offsets in code points', () => {
  const name = (id: number) => ['A', 'B', '😀', 'D'][id];
  const lp = completionLogprobs(
    [
      { id: 0, logprob: null, top: null },
      {
        id: 2,
        logprob: -1.5,
        top: [
          [1, -0.5],
          [3, -1],
          [2, -1.5],
        ],
      },
      { id: 1, logprob: -Infinity, top: [[1, -Infinity]] },
    ],
    1,
    name,
  );
  assert.deepEqual(lp, {
    text_offset: [0, 1, 2],
    token_logprobs: [null, -1.5, -9999],
    tokens: ['A', '😀', 'B'],
    top_logprobs: [null, { '😀': -1.5, B: -0.5 }, { B: -9999 }],
  });
  const chat = chatLogprobs(
    [
      {
        id: 3,
        logprob: -2,
        top: [
          [0, -0.1],
          [3, -2],
        ],
      },
    ],
    2,
    name,
  );
  assert.deepEqual(chat, [
    {
      token: 'D',
      logprob: -2,
      bytes: [68],
      top_logprobs: [
        { token: 'D', logprob: -2, bytes: [68] },
        { token: 'A', logprob: -0.1, bytes: [65] },
      ],
    },
  ]);
});

test("vLLM's error envelope names the field as param; a server fault is an InternalServerError", () => {
  assert.deepEqual(vllmError(new BadRequest('field "top_p" must be a number in (0, 1], got 0')), {
    error: {
      message: 'field "top_p" must be a number in (0, 1], got 0',
      type: 'BadRequestError',
      param: 'top_p',
      code: 400,
    },
  });
  assert.deepEqual(vllmError(new Error('boom')), {
    error: { message: 'boom', type: 'InternalServerError', param: null, code: 500 },
  });
});

test("the Tinker archive is a tar GNU tar lists and Arbor's untar reads back, the empty marker included", () => {
  const weights = Buffer.from(Array.from({ length: 1300 }, (_, i) => i % 251));
  const tar = tarFiles([
    ['adapter_config.json', Buffer.from('{"r":4}')],
    ['adapter_model.safetensors', weights],
    ['checkpoint_complete', Buffer.alloc(0)],
  ]);
  assert.equal(tar.length % 512, 0);
  const files = untar(tar);
  assert.deepEqual([...files.keys()], ['adapter_config.json', 'adapter_model.safetensors', 'checkpoint_complete']);
  assert.deepEqual(files.get('adapter_model.safetensors'), weights);
  const file = join(mkdtempSync(join(tmpdir(), 'arbor-tar-')), 'a.tar');
  writeFileSync(file, tar);
  const listed = spawnSync('tar', ['-tvf', file], { encoding: 'utf8' });
  assert.equal(listed.status, 0, listed.stderr);
  assert.match(listed.stdout, /1300 .*adapter_model\.safetensors/);
  assert.match(listed.stdout, / 0 .*checkpoint_complete/);
  // a damaged header is refused by tar (the checksum is checked)
  const bad = Buffer.from(tar);
  bad[10] ^= 0xff;
  writeFileSync(file, bad);
  assert.notEqual(spawnSync('tar', ['-tvf', file], { encoding: 'utf8' }).status, 0);
});

const streamedGenerationTitle =
  'streamed generation: segments continue the retained KV state (greedy equals one call), ' +
  'every handle is released, an abort ends what is left';
test(streamedGenerationTitle, async () => {
  const model = await NanoModel.create(
    { vocabSize: 40, dModel: 16, nLayers: 1, nHeads: 2, dFF: 32, contextLength: 64 },
    { seed: 4 },
  );
  const sampler = new NanoSampler(model);
  const guard = new SampleGuard(sampler, { ...DEFAULT_LIMITS, contextLength: 64, vocabSize: 40 });
  const g: Generation = {
    request: { tokens: [1, 2, 3], n: 3, maxTokens: 40, temperature: 0, topLogprobs: 2 },
    perContinuation: 40,
    stopTokenIds: [],
  };
  const whole = await generate(sampler, guard, g);
  const streamed = Array.from({ length: 3 }, () => ({
    tokens: [] as number[],
    logprobs: [] as number[],
    steps: 0,
    finish: null as string | null,
  }));
  const run = generateStream(sampler, guard, g);
  let step = await run.next();
  for (; !step.done; step = await run.next()) {
    for (const d of step.value) {
      streamed[d.choice].tokens.push(...d.tokens);
      streamed[d.choice].logprobs.push(...d.logprobs);
      streamed[d.choice].steps++;
      streamed[d.choice].finish = d.finishReason;
    }
  }
  for (let i = 0; i < 3; i++) {
    assert.deepEqual(streamed[i].tokens, whole.choices[i].tokens);
    assert.ok(streamed[i].logprobs.every((x, t) => Math.abs(x - whole.choices[i].logprobs[t]) < 1e-5));
    assert.deepEqual([streamed[i].steps, streamed[i].finish], [6, 'length'], 'segments of 1, 2, 4, 8, 16, 9 tokens');
  }
  assert.equal(step.value.tokensDecoded, 120);
  assert.equal(sampler.retainedCount, 0, 'no retained KV state is left behind');
  // an abort after the first segment: the rest ends "abort", handles released
  const controller = new AbortController();
  const aborted = generateStream(
    sampler,
    guard,
    { ...g, request: { ...g.request, temperature: 1, seed: 3 } },
    controller.signal,
  );
  const first = await aborted.next();
  assert.ok(!first.done && first.value.every((d) => d.tokens.length === 1 && d.finishReason === null));
  controller.abort();
  const last = await aborted.next();
  assert.ok(!last.done && last.value.every((d) => d.finishReason === 'abort'));
  assert.equal((await aborted.next()).done, true);
  assert.equal(sampler.retainedCount, 0);
});

test("the sampler's top-k selection equals a full sort (largest first, ties to the lower id), for the logprobs and for top-k sampling", () => {
  const rng = new Rng(5);
  for (let trial = 0; trial < 20; trial++) {
    const V = 500 + trial;
    // quantised logits: many ties
    const logits = Float32Array.from({ length: V }, () => Math.round(rng.normal() * 4) / 2);
    for (const k of [1, 3, 20]) {
      const choice = chooseToken(logits, 0, V, new Rng(trial), { temperature: 1, topP: 1, topK: 0, topLogprobs: k });
      const lse = Math.log(logits.reduce((s, x) => s + Math.exp(x), 0));
      const sorted = Array.from(logits.keys())
        .sort((a, b) => logits[b] - logits[a] || a - b)
        .slice(0, k);
      assert.deepEqual(
        choice.top!.map(([id]) => id),
        sorted,
        `trial ${trial} k ${k}`,
      );
      assert.ok(choice.top!.every(([id, lp]) => Math.abs(lp - (logits[id] - lse)) < 1e-9));
      // top-k sampling draws only among the same k
      for (let s = 0; s < 5; s++) {
        const t = chooseToken(logits, 0, V, new Rng(100 * trial + s), {
          temperature: 1,
          topP: 1,
          topK: k,
          topLogprobs: 0,
        });
        assert.ok(sorted.includes(t.token), `token ${t.token} outside the top ${k}`);
      }
    }
  }
});
