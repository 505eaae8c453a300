// The warm start of an agent run takes chat transcripts from `sft.transcripts` (a path relative to
// the config file) or from the task's own `transcript(item)`, and SFT encodes them with the run's own
// prompt encoder into the rollout's ids; the cache key follows the file's content, not its name.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DataError } from '../../src/core/errors.js';
import { leaves, trajectory } from '../../src/core/tree.js';
import type { TaskItem } from '../../src/core/types.js';
import { sftSequence } from '../../src/engine/build.js';
import { CharTokenizer } from '../../src/engine/tokenizer/char.js';
import { calculatorEnvironmentFactory } from '../../src/env/builtin/calculator.js';
import { arborFormat } from '../../src/env/format/arbor.js';
import type { TranscriptMessage } from '../../src/env/transcript.js';
import { openAgentEnv } from '../../src/run/agent-runtime.js';
import { loadConfig } from '../../src/run/config.js';
import { sftCacheDir, warmStartFor } from '../../src/run/warm-start.js';
import { getTask } from '../../src/tasks/index.js';
import { rollout } from '../../testkit/transcripts/scripted-episode.js';

const messages = (prompt: string, a: number, b: number): TranscriptMessage[] => [
  { role: 'user', content: prompt },
  {
    role: 'assistant',
    content: null,
    tool_calls: [
      { id: 'x', type: 'function', function: { name: 'calc', arguments: JSON.stringify({ expr: `${a}*${b}` }) } },
    ],
  },
  { role: 'tool', tool_call_id: 'x', content: String(a * b) },
  { role: 'assistant', content: String(a * b) },
];

function setup(): { dir: string; config: ReturnType<typeof loadConfig> } {
  const dir = mkdtempSync(join(tmpdir(), 'arbor-warm-transcripts-'));
  writeFileSync(join(dir, 'demos.jsonl'), JSON.stringify({ messages: messages('347*28=', 347, 28) }) + '\n');
  const yaml =
    'task: { name: calculator }\ngenerate: { kind: agent, format: arbor }\nenv: { kind: calculator }\n' +
    'sft: { transcripts: demos.jsonl, examples: 3 }\n';
  writeFileSync(join(dir, 'config.yaml'), yaml);
  return { dir, config: loadConfig(join(dir, 'config.yaml')) };
}

test('sft.transcripts: the warm start encodes each line to the rollout of the same episode', async () => {
  const { dir, config } = setup();
  const agent = (await openAgentEnv(config))!;
  try {
    assert.equal(config.sft.transcripts, join(dir, 'demos.jsonl'), 'resolved against the config file');
    const warm = warmStartFor(config, getTask('calculator'), agent);
    const examples = warm.examples();
    assert.equal(examples.length, 1);
    const tokenizer = new CharTokenizer();
    const rendered = sftSequence(tokenizer, examples[0], warm.encodePrompt!(tokenizer));
    const turns = ['@calc(347*28)', '9716'].map((s) => [...tokenizer.encode(s), tokenizer.eos]);
    const item = { id: '347*28=', prompt: '347*28=', answer: '9716' };
    const tree = await rollout({
      format: arborFormat(),
      tokenizer,
      factory: calculatorEnvironmentFactory(),
      item,
      turns,
    });
    const t = trajectory(tree, leaves(tree)[0].id);
    assert.deepEqual([rendered.prompt, rendered.completion, rendered.mask], [t.promptTokens, t.tokens, t.mask]);
    // the cache key follows the file's content
    const before = sftCacheDir(config);
    writeFileSync(join(dir, 'demos.jsonl'), JSON.stringify({ messages: messages('12*12=', 12, 12) }) + '\n');
    assert.notEqual(sftCacheDir(config), before);
  } finally {
    await agent.factory.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("Task.transcript: the warm start renders the task's own transcripts; a wrong prompt is named", async () => {
  const { dir, config } = setup();
  const agent = (await openAgentEnv(config))!;
  try {
    const noFile = { ...config, sft: { ...config.sft, transcripts: undefined } };
    const base = getTask('calculator');
    const meta = (item: TaskItem) => item.meta as { a: number; b: number };
    const task = { ...base, transcript: (item: TaskItem) => messages(item.prompt, meta(item).a, meta(item).b) };
    const examples = warmStartFor(noFile, task, agent).examples();
    assert.equal(examples.length, 3);
    const items = base.makeItems('train', 3, config.run.seed + 1);
    assert.deepEqual(
      examples.map((e) => e.segments?.map((s) => s.text)),
      items.map((i) => [`@calc(${meta(i).a}*${meta(i).b})`, '\n', '= ', i.answer, '\n', i.answer]),
    );
    const wrong = { ...base, transcript: (item: TaskItem) => messages(`${item.prompt}?`, 1, 2) };
    assert.throws(
      () => warmStartFor(noFile, wrong, agent).examples(),
      (e: unknown) => e instanceof DataError && e.field === 'messages[0].content' && /item's prompt/.test(e.message),
    );
  } finally {
    await agent.factory.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
