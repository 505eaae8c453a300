/**
 * Agent runs end to end: `arbor train` with `generate.kind: agent` on the calculator task,
 * once with the built-in environment and uniform turn trees + fork advantages, once with the tool
 * served by the example MCP server (examples/mcp/calc-server.mjs) over stdio. A tiny model with a
 * short multi-turn warm start: the run must finish, log the agent metrics, render the tools the
 * environment listed into every prompt, execute tool calls, keep trainer and sampler log-probs equal
 * before each step's update, and resume exactly from a checkpoint.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { treeFromJSON } from '../../src/core/tree.js';
import { CharTokenizer } from '../../src/engine/tokenizer/char.js';
import { parseConfig } from '../../src/run/config.js';
import { train } from '../../src/run/loop.js';
import { RunDir } from '../../src/run/rundir.js';

const root = mkdtempSync(join(tmpdir(), 'arbor-agent-run-'));
const config = (name: string, overrides: Record<string, unknown> = {}) =>
  parseConfig({
    run: {
      name,
      outDir: join(root, name),
      seed: 2,
      steps: 4,
      promptsPerStep: 6,
      evalEvery: 2,
      evalCount: 12,
      evalPassK: 0,
      checkpointEvery: 2,
      logTreesEvery: 1,
      trainItems: 200,
    },
    task: {
      name: 'calculator',
      options: { minDigitsA: 1, maxDigitsA: 2, minDigitsB: 1, maxDigitsB: 1, demoToolRate: 1 },
    },
    env: { kind: 'calculator' },
    model: { dModel: 32, nLayers: 2, nHeads: 2, dFF: 64, contextLength: 64, tieEmbeddings: false },
    // one warm start for both runs: the MCP server lists the same tool, so the prompts are the same
    sft: { steps: 120, batchSize: 32, learningRate: 0.01, examples: 400, checkpoint: join(root, 'sft') },
    sampling: { maxResponseTokens: 40 },
    generate: { kind: 'agent', groupSize: 4, maxTurns: 3, maxTurnTokens: 16 },
    trainer: { learningRate: 0.0003 },
    ...overrides,
  });

function checkRun(out: string, promptStart: string): void {
  const metrics = new RunDir(out).readMetrics();
  const steps = metrics.filter((m) => m.step > 0);
  assert.equal(steps.length, 4);
  for (const m of steps) {
    for (const k of [
      'agent_episodes',
      'agent_turns_per_episode',
      'agent_tool_calls',
      'agent_tool_success_rate',
      'agent_end_answer',
    ])
      assert.equal(typeof m[k], 'number', `${k} logged`);
    assert.ok(
      (m.logprob_gap_max as number) < 1e-4,
      `sampler and trainer agree before the update (${m.logprob_gap_max})`,
    );
  }
  assert.ok(
    steps.reduce((a, m) => a + (m.agent_tool_calls as number), 0) > 0,
    'the warm-started policy calls the tool',
  );
  assert.equal(typeof metrics[0].eval_tool_call_rate, 'number', 'held-out evaluation runs whole episodes');
  const tok = new CharTokenizer();
  const trees = readFileSync(join(out, 'trees', 'step-1.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => treeFromJSON(l));
  for (const t of trees)
    assert.ok(
      tok.decode(t.nodes['0'].tokens).startsWith(promptStart),
      'the tools the environment lists are offered in the prompt',
    );
  const called = trees.flatMap((t) => Object.values(t.nodes)).filter((n) => n.parent !== null && n.mask.includes(0));
  assert.ok(called.length > 0, 'some turns carry an observation');
  for (const n of called)
    assert.match(
      tok.decode(n.tokens.filter((_, i) => n.mask[i] === 0)),
      /^\n[=!] /,
      "observations are the environment's lines, masked",
    );
}

test(
  'agent run: built-in calculator, uniform turn trees with fork advantages, resumable',
  { timeout: 600_000 },
  async () => {
    const c = config('builtin', {
      generate: { kind: 'agent', groupSize: 4, branching: 'uniform', rootCopies: 2, maxTurns: 3, maxTurnTokens: 16 },
      optimize: { advantage: { kind: 'fork' } },
    });
    await train(c, { quiet: true });
    checkRun(join(root, 'builtin'), 'tools: calc(expr)\n');
    // resume from step 2 and compare the last steps with the uninterrupted run
    const again = config('builtin-resumed', {
      ...c,
      run: { ...c.run, name: 'builtin-resumed', outDir: join(root, 'builtin-resumed'), steps: 2 },
    });
    await train(again, { quiet: true });
    await train(undefined, { quiet: true, resume: join(root, 'builtin-resumed'), steps: 4 });
    const a = new RunDir(join(root, 'builtin')).readMetrics().filter((m) => m.step > 2);
    const b = new RunDir(join(root, 'builtin-resumed')).readMetrics().filter((m) => m.step > 2);
    assert.deepEqual(
      b.map((m) => [m.step, m.reward_mean, m.agent_tool_calls, m.tokens_decoded]),
      a.map((m) => [m.step, m.reward_mean, m.agent_tool_calls, m.tokens_decoded]),
    );
  },
);

test('agent run: the calculator tool served by an MCP server over stdio', { timeout: 600_000 }, async () => {
  await train(
    config('mcp', { env: { kind: 'mcp', command: process.execPath, args: ['examples/mcp/calc-server.mjs'] } }),
    { quiet: true },
  );
  checkRun(join(root, 'mcp'), 'tools: calc(expr)\n');
});

test('agent run: async mode, the rollout worker opens its own MCP environment', { timeout: 600_000 }, async () => {
  const c = config('async', {
    env: { kind: 'mcp', command: process.execPath, args: ['examples/mcp/calc-server.mjs'] },
  });
  await train(parseConfig({ ...c, run: { ...c.run, mode: 'async', maxStaleness: 1 } }), { quiet: true });
  const steps = new RunDir(join(root, 'async')).readMetrics().filter((m) => m.step > 0);
  assert.equal(steps.length, 4);
  assert.ok(
    steps.some((m) => (m.staleness_max as number) === 1),
    'batches were produced a step ahead',
  );
  assert.ok(steps.reduce((a, m) => a + (m.agent_tool_calls as number), 0) > 0);
});
