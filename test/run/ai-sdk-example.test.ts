/**
 * examples/ai-sdk-agent, shortened: what `npx arbor train examples/ai-sdk-agent/config.yaml`
 * runs, through the public `train` on the example's own files — the model made by `model.create` from
 * the example's character-level tokenizer and chat template, the warm start from the task's
 * `agentTranscript` rendered through that template, then RL with the unchanged AI SDK agent (agent.ts)
 * calling the run's gateway. Checked: every episode reached the gateway and none failed, the warm
 * start's conversations are the gateway's token ids (the AI SDK's first request renders to the warm
 * start's prompt, id for id), the trees are chains (no fork), and the trainer's log-probs equal the
 * sampler's. The example's learning itself (+98 points held-out) is measured by `npm run bench -- gateway`.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { train } from 'arbor';
import { treeFromJSON, leaves } from '../../src/core/tree.js';
import { HFTokenizer } from '../../src/engine/tokenizer/hf.js';
import { chatTranscriptExample } from '../../src/run/chat-transcripts.js';
import task from '../../examples/ai-sdk-agent/task.js';

test('examples/ai-sdk-agent: the AI SDK agent trains through the gateway', { timeout: 300_000 }, async () => {
  const root = mkdtempSync(join(tmpdir(), 'arbor-ai-sdk-example-'));
  const out = join(root, 'run');
  const summary = await train(
    'examples/ai-sdk-agent/config.yaml',
    {
      run: { outDir: out, steps: 2, promptsPerStep: 4, evalEvery: 0, evalCount: 8, logTreesEvery: 1 },
      model: { hf: join(root, 'model') },
      sft: { steps: 60, examples: 256, checkpoint: join(root, 'sft') },
      generate: { groupSize: 4 },
    },
    { quiet: true },
  );
  assert.equal(summary.steps, 2);
  const metrics = readFileSync(join(out, 'metrics.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, number>)
    .filter((m) => m.step > 0);
  for (const m of metrics) {
    assert.equal(m.agent_episodes, 16, `step ${m.step}: 4 prompts × 4 episodes`);
    assert.equal(m.agent_errors, 0, `step ${m.step}: no episode failed`);
    assert.ok(m.gateway_calls >= 16, `step ${m.step}: every episode called the gateway`);
    assert.equal(m.episode_forks, 0, `step ${m.step}: the template is append-only, the calls chain`);
    assert.ok(m.logprob_gap_max < 1e-4, `step ${m.step}: trainer and sampler log-probs agree (${m.logprob_gap_max})`);
  }
  // the trees' prompt is the warm start's prompt, id for id: the AI SDK's request renders to it
  const tokenizer = HFTokenizer.fromDirectory(join(root, 'model'));
  const lines = readFileSync(join(out, 'trees', 'step-1.jsonl'), 'utf8')
    .trim()
    .split('\n');
  const tree = treeFromJSON(lines[0]);
  const item = { id: tree.itemId, prompt: `weather in ${tree.itemId}?`, answer: '' };
  const demo = chatTranscriptExample(tokenizer, task().agentTranscript!(item), 'demo');
  assert.deepEqual(tree.nodes['0'].tokens, demo.ids!.prompt, "the shared prompt is the warm start's, id for id");
  assert.equal(leaves(tree).length, 4);
});
