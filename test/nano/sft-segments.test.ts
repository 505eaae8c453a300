/**
 * Multi-turn SFT demonstrations (agent warm starts): a policy segment is trained on and followed by
 * EOS, an observation segment is context only — the same tokens and mask the agent generator builds.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { sftDatum } from '../../src/engine/embedded/sft.js';
import { CharTokenizer } from '../../src/engine/tokenizer/char.js';
import { parseConfig } from '../../src/run/config.js';
import { warmStartFor } from '../../src/run/warm-start.js';
import { openAgentEnv } from '../../src/run/agent-runtime.js';
import { getTask } from '../../src/tasks/index.js';

const tok = new CharTokenizer();

test('sftDatum: policy segments end with EOS and carry weight 1, observations weight 0', () => {
  const d = sftDatum(tok, {
    prompt: 'p=',
    completion: '',
    segments: [
      { text: '@c(1)', role: 'policy' },
      { text: '\n= 1\n', role: 'env' },
      { text: '1', role: 'policy' },
    ],
  });
  const seq = [
    tok.bos,
    ...tok.encode('p='),
    ...tok.encode('@c(1)'),
    tok.eos,
    ...tok.encode('\n= 1\n'),
    ...tok.encode('1'),
    tok.eos,
  ];
  assert.deepEqual([...d.inputTokens, d.targetTokens.at(-1)], seq);
  // targets: 'p' and '=' are prompt (0), then 5 + EOS policy (1), 5 observation (0), '1' + EOS policy (1)
  const expected = [0, 0, ...Array(6).fill(1), ...Array(5).fill(0), 1, 1];
  assert.deepEqual(d.weights, expected);
  const plain = sftDatum(tok, { prompt: 'p=', completion: 'ab' });
  assert.deepEqual(plain.weights, [0, 0, 1, 1, 1], 'a plain completion: every completion token and EOS');
});

test('warm start of an agent run: prompts offer the tools, demonstrations come as masked turns', async () => {
  const config = parseConfig({
    task: { name: 'calculator', options: { demoToolRate: 1 } },
    env: { kind: 'calculator' },
    generate: { kind: 'agent' },
    sft: { examples: 3 },
  });
  const env = (await openAgentEnv(config))!;
  const task = getTask('calculator', { demoToolRate: 1 });
  const examples = warmStartFor(config, task, env).examples();
  await env.factory.close();
  assert.equal(examples.length, 3);
  for (const e of examples) {
    assert.match(e.prompt, /^tools: calc\(expr\)\n\d+\*\d+=$/);
    assert.deepEqual(
      e.segments!.map((s) => s.role),
      ['policy', 'env', 'policy'],
    );
    assert.match(e.segments![0].text, /^@calc\(\d+\*\d+\)$/);
  }
  const single = warmStartFor(parseConfig({ task: { name: 'arith' } }), getTask('arith')).examples();
  assert.equal(single[0].segments, undefined, 'single-turn runs keep plain completions');
});
