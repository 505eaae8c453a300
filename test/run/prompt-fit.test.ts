/**
 * One prompt fitting for `arbor train` and `arbor eval` (src/run/prompts.ts `fitPrompts`): the same
 * config gives the same decision in both, `task.overlong: skip` is honoured by eval and said (count,
 * sources), and a tools line too long for the context is a ConfigError on env.tools that gives its
 * length in tokens against the context and suggests the allow-list — in train and in eval alike.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { evaluateModel } from '../../src/run/evaluate-model.js';
import { ConfigError, DataError } from '../../src/core/errors.js';
import type { TaskItem } from '../../src/core/types.js';
import { saveCheckpoint } from '../../src/engine/formats/checkpoint.js';
import { NanoModel } from '../../src/engine/model/model.js';
import { CharTokenizer } from '../../src/engine/tokenizer/char.js';
import { arborFormat } from '../../src/env/format/arbor.js';
import { parseConfig } from '../../src/run/config.js';
import { train } from '../../src/run/loop.js';
import { taskFromConfig } from '../../src/tasks/index.js';
import { fitPrompts, skippedLine, toolOffer } from '../../src/run/prompts.js';
import { everythingEnv } from '../../testkit/env/mcp-servers.js';

const item = (id: string, prompt: string, meta?: Record<string, unknown>): TaskItem => ({
  id,
  prompt,
  answer: '1',
  meta,
});
const encode = (i: TaskItem) => [0, ...Array.from(i.prompt, (c) => c.charCodeAt(0))];

test('fitPrompts with a tool offer: a tools line that fills the context is a ConfigError on env.tools', () => {
  const tok = new CharTokenizer();
  const tools = ['get-sum', 'echo', 'get-env'].map((name) => ({
    name,
    description: '',
    inputSchema: { type: 'object' },
  }));
  const offer = toolOffer(arborFormat(), tools, (text) => tok.encode(text));
  assert.deepEqual(offer, { tokens: 'tools: get-sum() echo() get-env()\n'.length, tools: 3, format: 'arbor' });
  const items = [item('a', 'x')];
  assert.throws(
    () => fitPrompts(items, encode, offer.tokens, 'skip', 'held-out', offer),
    (e: unknown) =>
      e instanceof ConfigError &&
      e.path === 'env.tools' &&
      e.message.includes(`the tools line (the arbor offer of 3 tools) is ${offer.tokens} tokens`) &&
      e.message.includes(`context of ${offer.tokens} tokens`) &&
      e.message.includes('env.tools (the allow-list)'),
  );
  // a line that fits, but not with this prompt: the item's error says how much the line takes
  const long = item('b', 'y'.repeat(60), { file: 'q.jsonl', line: 3 });
  assert.throws(
    () => fitPrompts([long], encode, offer.tokens + 10, 'error', 'training', offer),
    (e: unknown) =>
      e instanceof DataError &&
      e.line === 3 &&
      e.message.includes(`q.jsonl:3 (id b): the training prompt is 61 tokens`) &&
      e.message.includes(`the tools line takes ${offer.tokens} of them`),
  );
  assert.deepEqual(fitPrompts(items, encode, offer.tokens + 1, 'error', 'held-out', offer).items, items);
});

test('skippedLine: says how many and which were left out', () => {
  const items = Array.from({ length: 8 }, (_, i) => item(`i${i}`, i < 7 ? 'x'.repeat(20) : 'x'));
  const fit = fitPrompts(items, encode, 10, 'skip', 'held-out');
  assert.equal(fit.skipped, 7);
  assert.equal(
    skippedLine(fit, 'held-out'),
    'task.overlong skip: 7 held-out prompts leave no room for a response and are left out ' +
      '(item i0, item i1, item i2, item i3, item i4, +2 more)',
  );
  assert.equal(skippedLine(fitPrompts(items.slice(7), encode, 10, 'skip', 'held-out'), 'held-out'), undefined);
});

/** Train and test files of 30 rows each; test row 18 (id test:18) is far longer than a 32-token context. */
function overlongDataset(dir: string): { train: string; test: string } {
  const rows = Array.from({ length: 30 }, (_, i) =>
    JSON.stringify({ question: `${i % 5}+1=`, answer: String((i % 5) + 1) }),
  );
  const files = { train: join(dir, 'train.jsonl'), test: join(dir, 'test.jsonl') };
  writeFileSync(files.train, rows.join('\n') + '\n');
  rows[17] = JSON.stringify({ question: `${'9'.repeat(60)}+1=`, answer: '1' + '0'.repeat(60) });
  writeFileSync(files.test, rows.join('\n') + '\n');
  return files;
}

test(
  'train and eval decide alike on the same config: error names file:line in both; eval honours skip and says so',
  { timeout: 120_000 },
  async () => {
    const dir = mkdtempSync(join(tmpdir(), 'arbor-prompt-fit-'));
    try {
      const files = overlongDataset(dir);
      const file = files.test;
      const tok = new CharTokenizer();
      const model = await NanoModel.create(
        { vocabSize: tok.vocabSize, dModel: 16, nLayers: 1, nHeads: 2, dFF: 32, contextLength: 32 },
        { seed: 1 },
      );
      const checkpoint = join(dir, 'ck');
      saveCheckpoint(checkpoint, model, tok);
      const config = (name: string, overlong: 'error' | 'skip') =>
        parseConfig({
          run: {
            name,
            outDir: join(dir, name),
            steps: 1,
            promptsPerStep: 4,
            evalEvery: 0,
            evalCount: 30,
            evalPassK: 0,
            logTreesEvery: 0,
            trainItems: 30,
          },
          task: { name: 'dataset', options: { ...files, fields: { prompt: 'question', answer: 'answer' } }, overlong },
          model: { checkpoint, contextLength: 32 },
          sft: { enabled: false },
          sampling: { maxResponseTokens: 8 },
          generate: { kind: 'iid', groupSize: 2 },
        });
      const strict = config('strict', 'error');
      let trainError: DataError | undefined;
      await assert.rejects(
        train(strict, { quiet: true }),
        (e: unknown) => e instanceof DataError && !!(trainError = e),
      );
      let evalError: DataError | undefined;
      await assert.rejects(
        evaluateModel({ config: strict, count: 30, k: 0 }),
        (e: unknown) => e instanceof DataError && !!(evalError = e),
      );
      assert.match(
        trainError!.message,
        new RegExp(`${file.replace(/[.]/g, '\\.')}:18 \\(id test:18\\): the held-out prompt is 6\\d tokens`),
      );
      assert.equal(evalError!.message, trainError!.message, 'one function decides for both');
      assert.equal(evalError!.line, 18);

      const lines: string[] = [];
      const printed: unknown[] = [];
      const stderr = console.error;
      console.error = (...a: unknown[]) => void printed.push(a);
      let report: Record<string, unknown>;
      try {
        const notice = (line: string) => void lines.push(line);
        report = await evaluateModel({ config: config('lenient', 'skip'), count: 30, k: 0, notice });
      } finally {
        console.error = stderr;
      }
      assert.deepEqual(printed, [], 'the library prints nothing: the skipped prompts come through notice');
      const heldOut = (await taskFromConfig(strict.task)).makeItems('test', 30, strict.run.seed);
      assert.equal(heldOut.length, 30);
      assert.equal(report.skipped, 1);
      assert.equal(report.count, heldOut.length - 1, 'every other held-out item is evaluated');
      const said = lines.find((l) => l.includes('task.overlong skip: 1 held-out prompts'));
      assert.ok(said?.includes(`${file}:18 (id test:18)`), lines.join('\n'));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
);

test(
  'server-everything with every tool offered: the tools line is too long for a 256-token context, in train and in eval',
  { timeout: 120_000 },
  async () => {
    const dir = mkdtempSync(join(tmpdir(), 'arbor-tools-line-'));
    try {
      const tok = new CharTokenizer();
      const model = await NanoModel.create(
        { vocabSize: tok.vocabSize, dModel: 16, nLayers: 1, nHeads: 2, dFF: 32, contextLength: 256 },
        { seed: 1 },
      );
      const checkpoint = join(dir, 'ck');
      saveCheckpoint(checkpoint, model, tok);
      const config = parseConfig({
        run: { name: 'tools', outDir: join(dir, 'tools'), steps: 1, evalCount: 4, evalPassK: 0, trainItems: 8 },
        task: { name: 'calculator' },
        env: everythingEnv(),
        model: { checkpoint, contextLength: 256 },
        sft: { enabled: false },
        generate: { kind: 'agent', format: 'arbor' },
      });
      const check = (e: unknown) =>
        e instanceof ConfigError &&
        e.path === 'env.tools' &&
        /the tools line \(the arbor offer of 1\d tools\) is \d{3,} tokens, which leaves no room for a prompt in the model's context of 256 tokens/.test(
          e.message,
        ) &&
        e.message.includes('env.tools (the allow-list)');
      await assert.rejects(train(config, { quiet: true }), check);
      await assert.rejects(evaluateModel({ config, k: 0 }), check);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
);
