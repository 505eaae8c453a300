import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { evalCommand } from '../../src/cli/eval.js';
import { ConfigError } from '../../src/core/errors.js';
import { loadCheckpoint, saveCheckpoint } from '../../src/engine/formats/checkpoint.js';
import { NanoModel } from '../../src/engine/model/model.js';
import { NanoSampler } from '../../src/engine/embedded/sampler.js';
import { runSft } from '../../src/engine/embedded/sft.js';
import { CharTokenizer } from '../../src/engine/tokenizer/char.js';
import { ArborServer } from '../../src/serve/server.js';
import { getTask } from '../../src/tasks/index.js';

async function captured(argv: string[]): Promise<Record<string, unknown>> {
  const lines: string[] = [];
  const log = console.log;
  console.log = (...a: unknown[]) => void lines.push(a.join(' '));
  try {
    assert.equal(await evalCommand(argv), 0);
  } finally {
    console.log = log;
  }
  return JSON.parse(lines.join('\n'));
}

test(
  'arbor eval: a checkpoint in-process and the same model behind arbor serve (via --config) give the same results',
  { timeout: 120_000 },
  async () => {
    const root = mkdtempSync(join(tmpdir(), 'arbor-eval-'));
    const tokenizer = new CharTokenizer();
    const model = await NanoModel.create(
      { vocabSize: tokenizer.vocabSize, dModel: 32, nLayers: 2, nHeads: 2, dFF: 64, contextLength: 48 },
      { seed: 3 },
    );
    const task = getTask('arith', { digits: 1, ops: ['+'] });
    const demos = task.makeItems('train', 80, 1).map((i) => ({ prompt: i.prompt, completion: task.demonstration(i) }));
    await runSft(model, tokenizer, demos, { steps: 60, batchSize: 16, learningRate: 0.01, seed: 1 });
    const ckpt = join(root, 'ckpt');
    saveCheckpoint(ckpt, model, tokenizer);
    const server = new ArborServer({ sampler: new NanoSampler((await loadCheckpoint(ckpt)).model), modelName: 'm' });
    const url = await server.listen();
    try {
      const options = JSON.stringify({ digits: 1, ops: ['+'] });
      const local = await captured([
        '--task',
        'arith',
        '--options',
        options,
        '--checkpoint',
        ckpt,
        '--count',
        '12',
        '--k',
        '2',
        '--max-tokens',
        '24',
      ]);
      const config = join(root, 'remote.yaml');
      writeFileSync(
        config,
        [
          'task: { name: arith, options: { digits: 1, ops: ["+"] } }',
          'sampling: { maxResponseTokens: 24 }',
          `engine: { kind: remote, sampler: { api: openai, servers: ["${url}"], model: m }, tokenizer: ${JSON.stringify(ckpt)} }`,
        ].join('\n'),
      );
      const remote = await captured(['--config', config, '--count', '12', '--k', '2', '--seed', '0']);
      assert.equal(local.count, 12);
      assert.equal(remote.count, 12);
      assert.equal(remote.greedy_accuracy, local.greedy_accuracy);
      assert.equal(remote.pass_at_2, local.pass_at_2);
      assert.deepEqual(remote.samples, local.samples);
      assert.ok((server.counters['/v1/completions'] ?? 0) > 0, 'the remote evaluation went over HTTP');
      await assert.rejects(
        evalCommand(['--task', 'arith', '--checkpoint', ckpt, '--options', '{digits']),
        (e: unknown) => e instanceof ConfigError && /--options: not valid JSON/.test(e.message),
      );
    } finally {
      await server.close();
      rmSync(root, { recursive: true, force: true });
    }
  },
);
