/**
 * Issue 25 item 6, end to end on one machine: one `arbor serve` process is the Tinker trainer (LoRA on a
 * tiny Hugging Face Qwen3), a second `arbor serve --enable-lora` is vLLM, and a short Arbor run goes
 * through `engine.kind: remote` (sampler api openai on the second, trainer on the first, weightSync
 * vllm_load_lora_adapter). Every published adapter travels trainer → Tinker archive → Arbor's PEFT
 * conversion → /v1/load_lora_adapter on the vLLM side; afterwards that server lists the adapter and
 * samples differently with it than with the base.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { single } from '../../src/filter/types.js';
import { parseConfig } from '../../src/run/config.js';
import { train } from '../../src/run/loop.js';
import { RunDir } from '../../src/run/rundir.js';
import { getTask, registerTask } from '../../src/tasks/index.js';
import { post, spawnServe, tinyQwen3 } from '../../testkit/serve/hf-fixture.js';

/**
 * A random model never answers arith right (every reward 0, every advantage 0, no gradient): this
 * test task keeps arith's prompts and rewards a response's length, which varies between samples.
 * Registered for the test only: other test files share this process (scripts/run-tests.mjs) and list the tasks.
 */
const registerLengthTask = () =>
  registerTask('e2e-length', z.object({}).strict(), () => {
    const arith = getTask('arith', { digits: 1, ops: ['+'] });
    return {
      ...arith,
      name: 'e2e-length',
      reward: { name: 'length', score: async ({ response }) => single('length', Math.min(1, response.length / 40)) },
    };
  });

test(
  'Arbor trains a LoRA through arbor serve (Tinker) and syncs every version into a second arbor serve (vLLM)',
  { timeout: 180_000 },
  async (t) => {
    const unregister = registerLengthTask();
    t.after(unregister);
    const root = mkdtempSync(join(tmpdir(), 'arbor-serve-e2e-'));
    const dir = tinyQwen3(root);
    const [tinker, vllm] = await Promise.all([
      spawnServe(['--checkpoint', dir, '--name', 'tiny', '--state-dir', join(root, 'tinker-state')]),
      spawnServe(['--checkpoint', dir, '--name', 'tiny', '--enable-lora']),
    ]);
    try {
      const prompts = ['3+4=', '1+2=', '7+1=', 'The sum is'];
      const greedy = async (model: string) =>
        Promise.all(
          prompts.map(async (prompt) => {
            const r = await post(`${vllm.url}/v1/completions`, {
              model,
              prompt,
              max_tokens: 8,
              temperature: 0,
              ignore_eos: true,
              return_token_ids: true,
            });
            assert.equal(r.status, 200, r.text);
            return (r.json!.choices as Array<{ token_ids: number[] }>)[0].token_ids;
          }),
        );
      const before = await greedy('tiny');
      await train(
        parseConfig({
          run: {
            name: 'e2e',
            outDir: join(root, 'run'),
            seed: 1,
            steps: 3,
            promptsPerStep: 2,
            evalEvery: 0,
            evalCount: 4,
            checkpointEvery: 0,
            logTreesEvery: 0,
            trainItems: 8,
          },
          task: { name: 'e2e-length' },
          sft: { enabled: false },
          sampling: { maxResponseTokens: 6 },
          generate: { kind: 'treepo', groupSize: 4, segmentLength: 3, branchingFactor: 2, initialDivergence: 2 },
          optimize: { advantage: { kind: 'tree' } },
          trainer: { learningRate: 0.05 },
          engine: {
            kind: 'remote',
            sampler: { api: 'openai', servers: [vllm.url], model: 'tiny' },
            trainer: { url: tinker.url, baseModel: 'tiny', loraRank: 8 },
            tokenizer: dir,
            weightSync: { kind: 'vllm_load_lora_adapter', loraName: 'arbor-lora', adapterDir: join(root, 'adapters') },
          },
        }),
        { quiet: true },
      );
      const metrics = new RunDir(join(root, 'run')).readMetrics().filter((m) => m.step > 0);
      assert.equal(metrics.length, 3);
      // the trainer saved each version as LoRA sampler weights; each was converted for the vLLM side
      const runs = readdirSync(join(root, 'tinker-state', 'sampler_weights'));
      assert.equal(runs.length, 1, 'one model trained');
      const published = readdirSync(join(root, 'tinker-state', 'sampler_weights', runs[0])).sort();
      assert.ok(published.length >= 3, `published ${published.join(', ')}`);
      const converted = readdirSync(join(root, 'adapters'));
      assert.equal(converted.length, published.length);
      // the vLLM side serves the last adapter under the sync's name
      const models = (await (await fetch(`${vllm.url}/v1/models`)).json()) as {
        data: Array<{ id: string; root: string; parent: string | null }>;
      };
      const card = models.data.find((m) => m.id === 'arbor-lora');
      assert.ok(card, JSON.stringify(models.data));
      assert.equal(card.parent, 'tiny');
      assert.equal(card.root, join(root, 'adapters', `${runs[0]}-arbor-v${published.length}`));
      // and samples differently with it than with the base (which it did not change)
      const tuned = await greedy('arbor-lora');
      assert.deepEqual(await greedy('tiny'), before, 'the base model on the vLLM side is unchanged');
      assert.ok(
        tuned.some((ids, i) => ids.join() !== before[i].join()),
        'the trained adapter changes the sampled tokens',
      );
    } finally {
      await Promise.all([tinker.stop(), vllm.stop()]);
      rmSync(root, { recursive: true, force: true });
    }
  },
);
