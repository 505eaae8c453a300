import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NanoModel } from '../../src/engine/model/model.js';
import { NanoSampler } from '../../src/engine/embedded/sampler.js';
import { NanoTrainer } from '../../src/engine/embedded/trainer.js';
import { CharTokenizer } from '../../src/engine/tokenizer/char.js';
import { loadCheckpoint, saveCheckpoint } from '../../src/engine/formats/checkpoint.js';
import { runSft } from '../../src/engine/embedded/sft.js';
import { ArborServer } from '../../src/serve/server.js';
import { parseConfig } from '../../src/run/config.js';
import { train } from '../../src/run/loop.js';
import { RunDir } from '../../src/run/rundir.js';
import { getTask } from '../../src/tasks/index.js';

test(
  'arbor train over HTTP (OpenAI-compatible sampler + Tinker-compatible trainer → arbor serve) matches the in-process run',
  { timeout: 240_000 },
  async () => {
    const root = mkdtempSync(join(tmpdir(), 'arbor-remote-'));
    // a small warm-started checkpoint both runs start from
    const tokenizer = new CharTokenizer();
    const model = await NanoModel.create(
      { vocabSize: tokenizer.vocabSize, dModel: 32, nLayers: 2, nHeads: 2, dFF: 64, contextLength: 48 },
      { seed: 2 },
    );
    const task = getTask('arith', { digits: 1, ops: ['+'] });
    const demos = task.makeItems('train', 80, 1).map((i) => ({ prompt: i.prompt, completion: task.demonstration(i) }));
    await runSft(model, tokenizer, demos, { steps: 40, batchSize: 16, learningRate: 0.01, seed: 1 });
    const ckpt = join(root, 'ckpt');
    saveCheckpoint(ckpt, model, tokenizer);
    // the server: its own copy of the model behind the HTTP APIs
    const served = await loadCheckpoint(ckpt);
    const server = new ArborServer({
      sampler: new NanoSampler(served.model),
      trainer: new NanoTrainer(served.model),
      modelName: 'arbor-nano',
    });
    const url = await server.listen();
    const common = {
      task: { name: 'arith', options: { digits: 1, ops: ['+'] } },
      sft: { enabled: false },
      sampling: { maxResponseTokens: 16 },
      generate: { kind: 'treepo', groupSize: 4, segmentLength: 4, branchingFactor: 2, initialDivergence: 2 },
      optimize: { advantage: { kind: 'tree' } },
      trainer: { learningRate: 0.001 },
    };
    const run = (name: string) => ({
      name,
      outDir: join(root, name),
      seed: 4,
      steps: 3,
      promptsPerStep: 4,
      evalEvery: 0,
      evalCount: 10,
      evalPassK: 2,
      checkpointEvery: 0,
      logTreesEvery: 0,
      trainItems: 40,
    });
    try {
      const local = await train(parseConfig({ ...common, run: run('local'), model: { checkpoint: ckpt } }), {
        quiet: true,
      });
      const remote = await train(
        parseConfig({
          ...common,
          run: run('remote'),
          engine: {
            kind: 'remote',
            sampler: { api: 'openai', servers: [url], model: 'arbor-nano' },
            trainer: { url },
            tokenizer: ckpt,
          },
        }),
        { quiet: true },
      );
      const a = new RunDir(join(root, 'local')).readMetrics().filter((m) => m.step > 0);
      const b = new RunDir(join(root, 'remote')).readMetrics().filter((m) => m.step > 0);
      assert.equal(b.length, 3);
      for (let i = 0; i < 3; i++) {
        // same seeds → same samples, rewards and token counts; losses equal up to float rounding
        assert.equal(b[i].tokens_decoded, a[i].tokens_decoded, `step ${i + 1} tokens decoded`);
        assert.equal(b[i].reward_mean, a[i].reward_mean, `step ${i + 1} reward`);
        assert.equal(b[i].trajectories, a[i].trajectories);
        assert.ok(
          Math.abs((b[i].loss as number) - (a[i].loss as number)) <= 1e-4 + 1e-3 * Math.abs(a[i].loss as number),
          `step ${i + 1} loss ${b[i].loss} vs ${a[i].loss}`,
        );
        assert.ok(
          Math.abs((b[i].grad_norm as number) - (a[i].grad_norm as number)) <=
            1e-3 * Math.max(1, a[i].grad_norm as number),
          `step ${i + 1} grad norm`,
        );
      }
      assert.equal(remote.heldout_acc_end, local.heldout_acc_end);
      assert.ok(
        (server.counters['/v1/completions'] ?? 0) > 0 &&
          (server.counters['/api/v1/forward_backward'] ?? 0) === 3 &&
          (server.counters['/api/v1/optim_step'] ?? 0) === 3,
      );
      // async over HTTP: production of the next batch overlaps training (the producer is in-process,
      // remote samplers serve what they hold); every trained token is still at most 1 version old
      await train(
        parseConfig({
          ...common,
          run: { ...run('remote-async'), steps: 4, mode: 'async', maxStaleness: 1 },
          optimize: { advantage: { kind: 'tree' }, loss: { kind: 'ppo_clip', correction: { kind: 'tis', cap: 2 } } },
          engine: {
            kind: 'remote',
            sampler: { api: 'openai', servers: [url], model: 'arbor-nano' },
            trainer: { url },
            tokenizer: ckpt,
          },
        }),
        { quiet: true },
      );
      const c = new RunDir(join(root, 'remote-async')).readMetrics().filter((m) => m.step > 0);
      assert.equal(c.length, 4);
      assert.ok(
        c.every((m) => (m.staleness_max as number) <= 1 && m.trees_trained === 4),
        JSON.stringify(c.map((m) => [m.staleness_max, m.trees_trained])),
      );
      assert.ok(
        c.every((m) => typeof m.is_weight_mean === 'number'),
        'the TIS correction ran through the remote trainer (extra forward for the proximal policy)',
      );
    } finally {
      await server.close();
    }
  },
);
