/**
 * Contrastive prompting (CUDA-L1): the exemplar database on hand data (selection, order, dedup,
 * eviction, state round trip, option checks), the exact rendered context and its fitting, the
 * producer's prompts with it off (unchanged) and on (exactly the chosen exemplars, prompt tokens with
 * mask 0, candidates recorded with their grades), and a 2-step train() with it on.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  contrastiveContext,
  contrastivePrompt,
  encodeContrastive,
  ExemplarDB,
  type Exemplar,
  type ExemplarState,
} from '../../src/control/contrastive.js';
import { ConfigError } from '../../src/core/errors.js';
import { leaves, ROOT_ID, trajectory } from '../../src/core/tree.js';
import { CharTokenizer } from '../../src/engine/tokenizer/char.js';
import { parseConfig } from '../../src/run/config.js';
import { train } from '../../src/run/loop.js';
import { Producer } from '../../src/run/producer.js';
import { RunDir } from '../../src/run/rundir.js';
import { getTask, gradeClosest, type ClosestMeta } from '../../src/tasks/index.js';
import { RecordingSampler } from '../../testkit/control/recording-sampler.js';

const on = { kind: 'cuda_l1' as const, best: 2, worst: 1, capacity: 4, maxChars: 8 };
const e = (text: string, score: number, step = 1): Exemplar => ({ text, score, step });

test('ExemplarDB: keeps distinct one-line candidates best first, older first on ties', () => {
  const db = new ExemplarDB(on);
  db.observe(
    'p',
    [
      { text: ' 9+1\n', score: 0.9 },
      { text: '9', score: 0.5 },
      { text: '', score: 1 },
    ],
    1,
  );
  db.observe(
    'p',
    [
      { text: '9+1', score: 0.9 },
      { text: '1\n+\n9', score: 0.9 },
      { text: 'x', score: NaN },
    ],
    2,
  );
  db.observe('p', [{ text: '123456789012', score: 0.1 }], 3);
  assert.deepEqual(db.state.p, [e('9+1', 0.9, 1), e('1 + 9', 0.9, 2), e('9', 0.5, 1), e('12345678', 0.1, 3)]);
});

test('ExemplarDB: select shows the best and the worst; eviction keeps both ends', () => {
  const db = new ExemplarDB(on, { p: [e('a', 0.9), e('b', 0.7), e('c', 0.5), e('d', 0.2)] });
  assert.deepEqual(db.select('p'), [e('a', 0.9), e('b', 0.7), e('d', 0.2)]);
  assert.deepEqual(db.select('unknown'), []);
  assert.deepEqual(new ExemplarDB({ ...on, worst: 0 }, db.state).select('p'), [e('a', 0.9), e('b', 0.7)]);
  assert.deepEqual(new ExemplarDB({ ...on, best: 0, worst: 2 }, db.state).select('p'), [e('c', 0.5), e('d', 0.2)]);
  assert.deepEqual(new ExemplarDB(on, { p: [e('a', 0.9), e('b', 0.7)] }).select('p'), [e('a', 0.9), e('b', 0.7)]);
  db.observe(
    'p',
    [
      { text: 'e', score: 0.6 },
      { text: 'f', score: 0 },
    ],
    2,
  );
  // capacity 4, worst 1: the top three and the lowest stay
  assert.deepEqual(db.state.p, [e('a', 0.9), e('b', 0.7), e('e', 0.6, 2), e('f', 0, 2)]);
});

test('ExemplarDB: state is plain data, copied in, and the option sums are checked', () => {
  const state: ExemplarState = { p: [e('a', 0.9)] };
  const db = new ExemplarDB(on, state);
  db.observe('p', [{ text: 'b', score: 1 }], 2);
  assert.deepEqual(state, { p: [e('a', 0.9)] }, 'the caller’s state is not changed');
  const copy = new ExemplarDB(on, JSON.parse(JSON.stringify(db.state)) as ExemplarState);
  assert.deepEqual(copy.select('p'), db.select('p'));
  assert.throws(
    () => new ExemplarDB({ ...on, best: 3, worst: 2 }),
    (error: unknown) =>
      error instanceof ConfigError &&
      error.path === 'contrastive.capacity' &&
      /best \+ worst \(5\)/.test(error.message),
  );
});

test('config: contrastive defaults to off; cuda_l1 fills its documented defaults; bounds are checked', () => {
  assert.deepEqual(parseConfig({}).control.contrastive, { kind: 'none' });
  assert.deepEqual(parseConfig({ control: { contrastive: { kind: 'cuda_l1' } } }).control.contrastive, {
    kind: 'cuda_l1',
    best: 2,
    worst: 1,
    capacity: 16,
    maxChars: 40,
  });
  assert.throws(
    () => parseConfig({ control: { contrastive: { kind: 'cuda_l1', best: 17 } } }),
    (error: unknown) => error instanceof ConfigError && error.path === 'control.contrastive.best',
  );
});

test('the context: one "score text" line per exemplar, lowest first; fitting drops the last ones', () => {
  const shown = [e('9+1', 0.9), e('9', 0.5), e('x', 0)];
  assert.equal(contrastiveContext(shown), '0.00 x\n0.50 9\n0.90 9+1\n');
  const item = { id: '1 9 ~ 10:', prompt: '1 9 ~ 10:', answer: '10' };
  assert.equal(contrastivePrompt(item, shown).prompt, '0.00 x\n0.50 9\n0.90 9+1\n1 9 ~ 10:');
  assert.equal(contrastivePrompt(item, []), item);
  const tokenizer = new CharTokenizer();
  const encode = (i: { prompt: string }) => tokenizer.encode(i.prompt);
  assert.equal(encodeContrastive(item, shown, encode, 100).shown, 3);
  // 9 prompt characters + "0.90 9+1\n" (9) + "0.50 9\n" (7) = 25: the worst line (7 more) does not fit
  const two = encodeContrastive(item, shown, encode, 25);
  assert.equal(tokenizer.decode(two.tokens), '0.50 9\n0.90 9+1\n1 9 ~ 10:');
  assert.equal(two.shown, 2);
  assert.deepEqual(encodeContrastive(item, shown, encode, 3), { tokens: encode(item), shown: 0 });
});

// producer runs over a scripted sampler: continuation k of a prompt "a b ~ t:" answers x (invalid), a, b, a+b
const script = (prompt: string, k: number) => {
  const [, a, b] = /(\d+) (\d+) ~ \d+:$/.exec(prompt) ?? [];
  return ['x', a, b, `${a}+${b}`][k % 4];
};
const producerConfig = (contrastive: unknown) =>
  parseConfig({
    run: { seed: 5, promptsPerStep: 4, trainItems: 4 },
    task: { name: 'closest', options: { count: 2, maxTarget: 30 } },
    sampling: { maxResponseTokens: 8 },
    generate: { kind: 'iid', groupSize: 4 },
    control: { contrastive },
  });
const items = getTask('closest', { count: 2, maxTarget: 30 }).makeItems('train', 4, 5);
const request = (step: number, control = {}) => ({ step, carried: [], data: { epoch: 0, cursor: 0 }, control });

async function produceWith(contrastive: unknown, step: number, control = {}) {
  const tokenizer = new CharTokenizer();
  const sampler = new RecordingSampler(tokenizer, script);
  const producer = await Producer.create(producerConfig(contrastive), sampler, tokenizer);
  const result = await producer.produce(request(step, control));
  await producer.close();
  return { result, prompts: [...new Set(sampler.prompts)].sort() };
}

test('off: prompts are the plain prompts, and a recorded database is left as it was', async () => {
  const plain = items.map((i) => i.prompt).sort();
  const recorded = { [items[0].id]: [e('9', 0.5)] };
  const off = await produceWith({ kind: 'none' }, 1, { exemplars: recorded });
  assert.deepEqual(off.prompts, plain, 'off ignores a recorded database');
  assert.deepEqual((off.result.control as { exemplars?: unknown }).exemplars, recorded, 'and leaves it as it was');
  assert.equal(off.result.info.contrastive_prompts, undefined);
  const unset = await produceWith(undefined, 1);
  assert.deepEqual(unset.prompts, plain);
  assert.equal((unset.result.control as { exemplars?: unknown }).exemplars, undefined);
  // on, with nothing recorded yet: the same prompts
  const empty = await produceWith(on, 1);
  assert.deepEqual(empty.prompts, plain);
  assert.equal(empty.result.info.contrastive_prompts, 0);
});

test('on: each group is graded into the database, and its prompt later shows exactly the chosen ones', async () => {
  const first = await produceWith(on, 1);
  const state = (first.result.control as { exemplars: ExemplarState }).exemplars;
  for (const item of items) {
    const [, a, b] = /(\d+) (\d+)/.exec(item.prompt)!;
    const expected = [...new Set(['x', a, b, `${a}+${b}`])].map((text) => ({
      text,
      score: gradeClosest(text, item.meta as unknown as ClosestMeta, 2).score,
      step: 1,
    }));
    const byText = (x: Exemplar, y: Exemplar) => (x.text < y.text ? -1 : 1);
    assert.deepEqual([...state[item.id]].sort(byText), expected.sort(byText), item.prompt);
    const scores = state[item.id].map((x) => x.score);
    assert.deepEqual(
      scores,
      [...scores].sort((x, y) => y - x),
      'best first',
    );
  }
  // a hand-made database for one prompt: best 2 and worst 1 of four, the third best left out
  const hand = { [items[0].id]: [e('9+1', 0.9), e('9', 0.5), e('1', 0.3), e('x', 0)] };
  const second = await produceWith(on, 2, { exemplars: hand });
  const context = '0.00 x\n0.50 9\n0.90 9+1\n';
  const expectedPrompts = items.map((i, k) => (k === 0 ? context + i.prompt : i.prompt)).sort();
  assert.deepEqual(second.prompts, expectedPrompts);
  assert.equal(second.result.info.contrastive_prompts, 1);
  assert.equal(second.result.info.contrastive_exemplars, 3);
  const tree = second.result.batch.find((b) => b.item.id === items[0].id)!.tree;
  const tokenizer = new CharTokenizer();
  const root = tree.nodes[ROOT_ID];
  assert.equal(tokenizer.decode(root.tokens), context + items[0].prompt);
  assert.ok(
    root.mask.every((m) => m === 0),
    'the context is prompt: mask 0',
  );
  for (const leaf of leaves(tree)) {
    const path = trajectory(tree, leaf.id);
    assert.deepEqual(path.promptTokens, root.tokens, 'the learner sees the context the policy sampled under');
  }
  // the database grows with this step's candidates for the same prompt
  const grown = (second.result.control as { exemplars: ExemplarState }).exemplars[items[0].id];
  assert.ok(grown.some((x) => x.step === 2) && grown.some((x) => x.text === '9+1'));
});

const root = mkdtempSync(join(tmpdir(), 'arbor-contrastive-'));
after(() => rmSync(root, { recursive: true, force: true }));

test('train(): two steps with contrastive prompts on a tiny model', { timeout: 120_000 }, async () => {
  const outDir = join(root, 'run');
  await train(
    parseConfig({
      run: {
        name: 'contrastive',
        outDir,
        seed: 1,
        steps: 2,
        promptsPerStep: 4,
        trainItems: 4,
        evalEvery: 0,
        evalCount: 8,
        evalPassK: 0,
        checkpointEvery: 2,
        logTreesEvery: 2,
      },
      task: { name: 'closest', options: { count: 2, maxTarget: 30 } },
      model: { dModel: 16, nLayers: 1, nHeads: 2, dFF: 32, contextLength: 96 },
      sft: { steps: 5, batchSize: 8, examples: 32 },
      sampling: { maxResponseTokens: 8 },
      generate: { kind: 'iid', groupSize: 3 },
      control: { contrastive: { kind: 'cuda_l1' } },
    }),
    { quiet: true },
  );
  const metrics = new RunDir(outDir).readMetrics().filter((m) => m.step > 0);
  assert.deepEqual(
    metrics.map((m) => m.contrastive_prompts),
    [0, 4],
    'step 2 draws the same 4 prompts again, each with its step-1 candidates',
  );
  assert.ok(metrics.every((m) => Number.isFinite(m.loss)));
  const state = JSON.parse(readFileSync(join(outDir, 'checkpoints', 'step-2', 'state.json'), 'utf8'));
  const pool = getTask('closest', { count: 2, maxTarget: 30 }).makeItems('train', 4, 1);
  assert.deepEqual(Object.keys(state.pipeline.control.exemplars).sort(), pool.map((i) => i.id).sort());
  const logged = readFileSync(join(outDir, 'trees', 'step-2.jsonl'), 'utf8')
    .trim()
    .split('\n');
  const tokenizer = new CharTokenizer();
  for (const line of logged) {
    const tree = JSON.parse(line) as { nodes: Record<string, { tokens: number[] }> };
    assert.match(tokenizer.decode(tree.nodes[ROOT_ID].tokens), /^(\d\.\d\d [^\n]*\n)+\d+ \d+ ~ \d+:$/);
  }
});
