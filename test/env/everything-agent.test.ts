/**
 * An agent run end to end against a server no one here wrote: `@modelcontextprotocol/server-everything`
 * over stdio, offering its hyphenated `get-sum`, in both tool-call formats. A tiny embedded model is
 * warm-started on a few demonstrations of the call (rendered through the run's format, the observation
 * the server really returns, then the answer), then `arbor train` runs two steps. The logged trees and
 * metrics must show hyphenated calls parsed, executed by the server, and fed back; in qwen3 the final
 * answers carry no stop token (the "<eos>" that used to end every embedded qwen3 answer).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { leaves, treeFromJSON, type RolloutTree } from '../../src/core/tree.js';
import { saveCheckpoint } from '../../src/engine/formats/checkpoint.js';
import { NanoModel } from '../../src/engine/model/model.js';
import { runSft, type SftExample } from '../../src/engine/embedded/sft.js';
import { CharTokenizer } from '../../src/engine/tokenizer/char.js';
import { formatFromName } from '../../src/env/format/index.js';
import { envFactoryFromConfig, envOptionsSchema } from '../../src/env/index.js';
import type { ToolSpec } from '../../src/env/types.js';
import { parseConfig } from '../../src/run/config.js';
import { train } from '../../src/run/loop.js';
import { RunDir } from '../../src/run/rundir.js';
import { getTask } from '../../src/tasks/index.js';
import { everythingEnv, writeCall } from '../../testkit/env/mcp-servers.js';

const TASK = { name: 'arith', options: { digits: 1, ops: ['+'] } };
/** Per format: the model's context and the run's response budget (the qwen3 offer is ~700 characters). */
const SIZES = { arbor: { context: 96, response: 48, turn: 24 }, qwen3: { context: 1024, response: 256, turn: 96 } };

/** The tools server-everything offers under the allow-list, listed by a real server process. */
async function offeredTools(): Promise<ToolSpec[]> {
  const factory = await envFactoryFromConfig(envOptionsSchema.parse(everythingEnv(['get-sum'])), {
    baseDir: process.cwd(),
  });
  try {
    const env = await factory.create();
    await env.close();
    return env.tools;
  } finally {
    await factory.close();
  }
}

/** Demonstrations in `format`: call get-sum, read the server's answer line, answer with the sum. */
function demonstrations(format: 'arbor' | 'qwen3', tools: ToolSpec[]): SftExample[] {
  const f = formatFromName(format);
  const task = getTask(TASK.name, TASK.options);
  return task.makeItems('train', 200, 1).map((item) => {
    const [a, b] = item.prompt.match(/\d+/g)!.map(Number);
    const call = writeCall(format, { name: 'get-sum', arguments: { a, b } }, `${a},${b}`);
    const observation = f.renderObservation([
      { name: 'get-sum', content: `The sum of ${a} and ${b} is ${a + b}.`, isError: false },
    ]);
    return {
      prompt: f.renderPrompt(item.prompt, tools),
      completion: '',
      segments: [
        { text: call, role: 'policy' },
        { text: observation.map((p) => p.text).join(''), role: 'env' },
        { text: String(a + b), role: 'policy' },
      ],
    };
  });
}

for (const format of ['arbor', 'qwen3'] as const) {
  test(
    `server-everything, ${format} format: hyphenated get-sum calls are parsed, executed and fed back in a 2-step run`,
    { timeout: 600_000 },
    async () => {
      const root = mkdtempSync(join(tmpdir(), `arbor-everything-${format}-`));
      try {
        const size = SIZES[format];
        const tools = await offeredTools();
        assert.deepEqual(
          tools.map((t) => t.name),
          ['get-sum'],
        );
        const tok = new CharTokenizer();
        const model = await NanoModel.create(
          { vocabSize: tok.vocabSize, dModel: 32, nLayers: 1, nHeads: 2, dFF: 64, contextLength: size.context },
          { seed: 5 },
        );
        await runSft(model, tok, demonstrations(format, tools), {
          steps: format === 'arbor' ? 150 : 60,
          batchSize: 16,
          learningRate: 0.01,
          seed: 1,
        });
        const checkpoint = join(root, 'warm');
        saveCheckpoint(checkpoint, model, tok);
        const out = join(root, 'run');
        await train(
          parseConfig({
            run: {
              name: format,
              outDir: out,
              seed: 1,
              steps: 2,
              promptsPerStep: 4,
              evalEvery: 0,
              evalCount: 4,
              evalPassK: 0,
              checkpointEvery: 0,
              logTreesEvery: 1,
              trainItems: 50,
            },
            task: TASK,
            env: everythingEnv(['get-sum']),
            model: { checkpoint, contextLength: size.context },
            sft: { enabled: false },
            sampling: { maxResponseTokens: size.response, temperature: 0.3 },
            generate: { kind: 'agent', format, groupSize: 2, maxTurns: 2, maxTurnTokens: size.turn },
            trainer: { learningRate: 0.0003 },
          }),
          { quiet: true },
        );
        const metrics = new RunDir(out).readMetrics();
        const start = metrics.find((m) => m.step === 0)!;
        assert.ok(
          (start.eval_tool_call_rate as number) > 0,
          `greedy held-out episodes call get-sum (${start.eval_tool_call_rate})`,
        );
        assert.ok(
          (start.eval_tool_success_rate as number) > 0,
          `and the server answers them (${start.eval_tool_success_rate})`,
        );
        const steps = metrics.filter((m) => m.step > 0);
        assert.equal(steps.length, 2);
        const calls = steps.reduce((a, m) => a + (m.agent_tool_calls as number), 0);
        assert.ok(calls > 0, 'rollouts call the tool');
        assert.ok(
          steps.some((m) => (m.agent_tool_success_rate as number) > 0),
          'some rollout calls succeed',
        );
        // the logged trees: a policy turn with a hyphenated call, then the server's own answer (mask 0)
        const trees: RolloutTree[] = readFileSync(join(out, 'trees', 'step-1.jsonl'), 'utf8')
          .trim()
          .split('\n')
          .map((l) => treeFromJSON(l));
        const turns = trees
          .flatMap((t) => Object.values(t.nodes))
          .filter((n) => n.parent !== null && n.mask.includes(0));
        const decoded = turns.map((n) => ({
          policy: tok.decode(n.tokens.filter((_, i) => n.mask[i] === 1)),
          observation: tok.decode(n.tokens.filter((_, i) => n.mask[i] === 0)),
        }));
        const executed = decoded.filter(
          (d) =>
            formatFromName(format)
              .parseCalls(d.policy)
              .calls.some((c) => c.name === 'get-sum') && /The sum of \d+ and \d+ is \d+\./.test(d.observation),
        );
        assert.ok(
          executed.length > 0,
          `a get-sum call answered by the server:\n${decoded.map((d) => d.policy + ' -> ' + d.observation).join('\n')}`,
        );
        // final answers are text: no stop token name in them (the qwen3 defect on the embedded engine)
        const answers = trees.flatMap((t) => leaves(t).map((l) => l.episode?.finalAnswer ?? ''));
        assert.ok(
          answers.every((a) => !a.includes('<eos>')),
          answers.join(' | '),
        );
        assert.ok(
          answers.some((a) => /^\d+$/.test(a)),
          `some episode answers with a number: ${answers.join(' | ')}`,
        );
      } finally {
        rmSync(root, { recursive: true, force: true });
      }
    },
  );
}
