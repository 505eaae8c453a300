/**
 * What survives what: every run file is written atomically, a
 * fault while a file is written (a full disk, a kill) leaves the previous version and names the file,
 * resume falls back to the newest checkpoint that loads, an interrupted SFT warm-start cache is
 * retrained instead of poisoning every later run, `summary.json` counts every session's time, and a
 * run that died before its first checkpoint does not block the rerun. Faults are injected through
 * core/files.ts's test hook at exactly the file under test.
 */
import { test, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { DataError } from '../../src/core/errors.js';
import { setWriteFaultHook, writeFileAtomic } from '../../src/core/files.js';
import { parseConfig } from '../../src/run/config.js';
import { train } from '../../src/run/loop.js';
import { RunDir } from '../../src/run/rundir.js';

const root = mkdtempSync(join(tmpdir(), 'arbor-crash-'));
const sft = join(root, 'sft');
afterEach(() => setWriteFaultHook(undefined));

const enospc = (file: string) =>
  Object.assign(new Error(`ENOSPC: no space left on device, write`), { code: 'ENOSPC', path: file });

const config = (name: string, run: Record<string, unknown> = {}, sftDir = sft) =>
  parseConfig({
    run: {
      name,
      outDir: join(root, name),
      seed: 5,
      steps: 4,
      promptsPerStep: 4,
      evalEvery: 0,
      evalCount: 10,
      evalPassK: 0,
      checkpointEvery: 2,
      logTreesEvery: 0,
      trainItems: 16,
      ...run,
    },
    task: { name: 'arith', options: { digits: 1, ops: ['+'] } },
    model: { dModel: 16, nLayers: 1, nHeads: 2, dFF: 32, contextLength: 32, tieEmbeddings: true },
    sft: { steps: 20, batchSize: 16, learningRate: 0.01, examples: 64, checkpoint: sftDir },
    sampling: { maxResponseTokens: 12 },
    generate: { kind: 'iid', groupSize: 2 },
  });
const KEYS = ['step', 'reward_mean', 'loss', 'tokens_decoded', 'grad_norm'];
const pick = (dir: string) =>
  new RunDir(dir)
    .readMetrics()
    .filter((m) => m.step > 0)
    .map((m) => Object.fromEntries(KEYS.map((k) => [k, m[k]])));

test('writeFileAtomic: a fault before the rename leaves the old file whole, no temporary file, and an error naming the file', () => {
  const dir = mkdtempSync(join(root, 'atomic-'));
  const file = join(dir, 'state.json');
  writeFileAtomic(file, 'old');
  setWriteFaultHook((f) => {
    if (f === file) throw enospc(f);
  });
  assert.throws(
    () => writeFileAtomic(file, 'new'),
    (e: unknown) => e instanceof DataError && e.file === file && /state\.json: cannot write \(ENOSPC\)/.test(e.message),
  );
  assert.equal(readFileSync(file, 'utf8'), 'old');
  assert.deepEqual(readdirSync(dir), ['state.json'], 'the temporary file is removed');
  setWriteFaultHook(undefined);
  writeFileAtomic(file, new Uint8Array([104, 105]));
  assert.equal(readFileSync(file, 'utf8'), 'hi', 'bytes are written whole');
});

test(
  'a disk that fills up while the step-4 checkpoint is written: the run stops naming the file; ' +
    'resume continues from step 2 and ends equal to an uninterrupted run',
  { timeout: 300_000 },
  async () => {
    await train(config('whole'), { quiet: true });
    setWriteFaultHook((f) => {
      if (f.endsWith(join('step-4', 'state.json'))) throw enospc(f);
    });
    await assert.rejects(
      train(config('full-disk'), { quiet: true }),
      (e: unknown) => e instanceof DataError && /step-4\/state\.json: cannot write \(ENOSPC\)/.test(e.message),
    );
    setWriteFaultHook(undefined);
    assert.deepEqual(
      new RunDir(join(root, 'full-disk')).checkpoints(),
      [2],
      'step 4 never became a complete checkpoint',
    );
    await train(undefined, { quiet: true, resume: join(root, 'full-disk') });
    assert.deepEqual(pick(join(root, 'full-disk')), pick(join(root, 'whole')));
  },
);

test(
  'a damaged newest checkpoint: resume falls back to the one before it and ends equal to an uninterrupted run; summary wall_s counts both sessions',
  { timeout: 300_000 },
  async () => {
    await train(config('damaged', { steps: 2 }), { quiet: true });
    await train(undefined, { quiet: true, resume: join(root, 'damaged'), steps: 4 });
    const firstSummary = JSON.parse(readFileSync(join(root, 'damaged', 'summary.json'), 'utf8'));
    const state = join(root, 'damaged', 'checkpoints', 'step-4', 'state.json');
    writeFileSync(state, readFileSync(state, 'utf8').slice(0, 40)); // damaged after the fact
    const optimizer = join(root, 'damaged', 'checkpoints', 'step-2', 'engine', 'optimizer.safetensors');
    assert.ok(existsSync(optimizer));
    await train(undefined, { quiet: true, resume: join(root, 'damaged'), steps: 4 });
    assert.deepEqual(pick(join(root, 'damaged')), pick(join(root, 'whole')), 'steps 3-4 retrained from step 2 exactly');
    const summary = JSON.parse(readFileSync(join(root, 'damaged', 'summary.json'), 'utf8'));
    const loopSeconds = (s: number) =>
      new RunDir(join(root, 'damaged')).readMetrics().find((m) => m.step === s)!.wall_s as number;
    assert.ok(
      summary.wall_s >= loopSeconds(4),
      `wall_s ${summary.wall_s} counts the step loop of every session (${loopSeconds(4)} s)`,
    );
    assert.ok(firstSummary.wall_s > 0);
    // every checkpoint damaged: a clear error listing each
    for (const s of [2, 4]) writeFileSync(join(root, 'damaged', 'checkpoints', `step-${s}`, 'state.json'), '{"step":');
    await assert.rejects(
      train(undefined, { quiet: true, resume: join(root, 'damaged') }),
      (e: unknown) =>
        e instanceof DataError &&
        /no checkpoint loads/.test(e.message) &&
        /step-4: /.test(e.message) &&
        /step-2: /.test(e.message),
    );
  },
);

test(
  'a disk full while a new run writes config.resolved.yaml: the rerun starts again; a directory with other files is refused',
  { timeout: 300_000 },
  async () => {
    setWriteFaultHook((f) => {
      if (f.endsWith(join('first-write', 'config.resolved.yaml'))) throw enospc(f);
    });
    await assert.rejects(
      train(config('first-write'), { quiet: true }),
      (e: unknown) => e instanceof DataError && /config\.resolved\.yaml: cannot write \(ENOSPC\)/.test(e.message),
    );
    setWriteFaultHook(undefined);
    const summary = await train(config('first-write'), { quiet: true });
    assert.equal(summary.steps, 4);
    const foreign = join(root, 'foreign');
    mkdirSync(foreign);
    writeFileSync(join(foreign, 'thesis.tex'), 'mine');
    await assert.rejects(train(config('foreign'), { quiet: true }), /foreign already exists/);
    assert.equal(readFileSync(join(foreign, 'thesis.tex'), 'utf8'), 'mine');
  },
);

test('metrics truncation on resume that fails midway leaves metrics.jsonl whole', async () => {
  const dir = new RunDir(mkdtempSync(join(root, 'metrics-')));
  for (let s = 0; s <= 6; s++) dir.appendMetrics({ step: s, loss: s });
  const before = readFileSync(dir.metricsFile, 'utf8');
  setWriteFaultHook((f) => {
    if (basename(f) === 'metrics.jsonl') throw Object.assign(new Error('killed'), { code: 'EINTR' });
  });
  assert.throws(
    () => dir.truncateMetrics(3),
    (e: unknown) => e instanceof DataError && /metrics\.jsonl: cannot write/.test(e.message),
  );
  assert.equal(readFileSync(dir.metricsFile, 'utf8'), before);
  setWriteFaultHook(undefined);
  dir.truncateMetrics(3);
  assert.deepEqual(
    dir.readMetrics().map((m) => m.step),
    [0, 1, 2, 3],
  );
});

test(
  'an SFT warm-start interrupted while its cache is written is trained again, not a poisoned cache',
  { timeout: 300_000 },
  async () => {
    const cache = join(root, 'sft-cache');
    setWriteFaultHook((f) => {
      if (basename(f) === 'tokenizer.json' && dirname(f).includes('sft-cache'))
        throw Object.assign(new Error('killed'), { code: 'EINTR' });
    });
    await assert.rejects(
      train(config('sft-killed', {}, cache), { quiet: true }),
      (e: unknown) => e instanceof DataError && /tokenizer\.json: cannot write/.test(e.message),
    );
    setWriteFaultHook(undefined);
    assert.equal(existsSync(cache), false, 'nothing half-written under the cache name');
    // an older Arbor's half-written cache (weights without config.json) is retrained too
    mkdirSync(cache, { recursive: true });
    writeFileSync(join(cache, 'model.safetensors'), 'garbage');
    const summary = await train(config('sft-killed', {}, cache), { quiet: true });
    assert.equal(summary.steps, 4);
    assert.ok(['model.safetensors', 'config.json', 'tokenizer.json'].every((f) => existsSync(join(cache, f))));
    assert.ok(
      readFileSync(join(cache, 'model.safetensors')).length > 1000,
      'the garbage file was replaced by a trained model',
    );
  },
);
