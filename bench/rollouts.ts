/**
 * `npm run bench -- rollouts [config]`: iid vs TreePO rollouts from the same warm-start checkpoint,
 * on the same prompts, with the same number of final trajectories per prompt. Reports tokens decoded,
 * prefix tokens reused, prompt tokens computed, sampler calls, wall time and the reward of the
 * sampled leaves. Each configuration is run `repeats` times (median wall time). Headline:
 * treepo_token_reduction = 1 − decoded(treepo) / decoded(iid) and treepo_wall_speedup =
 * wall(iid) / wall(treepo), for the default TreePO setting of the config.
 */
import { Rng } from '../src/core/rng.js';
import { leaves, responseTokens } from '../src/core/tree.js';
import { buildEngine } from '../src/engine/build.js';
import { scoreBatch } from '../src/filter/reward.js';
import { generatorFromConfig } from '../src/generate/index.js';
import { loadConfig } from '../src/run/config.js';
import { warmStartFor } from '../src/run/warm-start.js';
import { getTask } from '../src/tasks/index.js';
import { benchProgress, printTable, writeBenchJson } from './util.js';

export async function main(args: string[]): Promise<void> {
  const file = args[0] ?? 'examples/arith-treepo.yaml';
  const config = loadConfig(file);
  const task = getTask(config.task.name, config.task.options);
  const progress = benchProgress();
  const { tokenizer, sampler, origin } = await buildEngine(config, {
    warmStart: warmStartFor(config, task),
    log: (l) => progress.line(l),
    update: (l, milestone) => progress.update(l, milestone),
  });
  const G = 16;
  const prompts = 32;
  const items = task.makeItems('test', prompts, config.run.seed + 11);
  const inputs = items.map((item) => ({
    item,
    promptTokens: [...(tokenizer.bos !== undefined ? [tokenizer.bos] : []), ...tokenizer.encode(item.prompt)],
  }));
  const L = config.generate.kind === 'treepo' ? config.generate.segmentLength : 8;
  const variants: Array<{ name: string; spec: Record<string, unknown> }> = [
    { name: 'iid', spec: { kind: 'iid', groupSize: G } },
    {
      name: `treepo L=${L} b=2 (default)`,
      spec: { kind: 'treepo', groupSize: G, segmentLength: L, branchingFactor: 2, initialDivergence: 2 },
    },
    {
      name: `treepo L=${L / 2} b=2`,
      spec: {
        kind: 'treepo',
        groupSize: G,
        segmentLength: Math.max(1, L / 2),
        branchingFactor: 2,
        initialDivergence: 2,
      },
    },
    {
      name: `treepo L=${L * 2} b=2`,
      spec: { kind: 'treepo', groupSize: G, segmentLength: L * 2, branchingFactor: 2, initialDivergence: 2 },
    },
    {
      name: `treepo L=${L} b=4`,
      spec: { kind: 'treepo', groupSize: G, segmentLength: L, branchingFactor: 4, initialDivergence: 4 },
    },
  ];
  const repeats = 5;
  const rows: Array<Record<string, string | number | null>> = [];
  for (const v of variants) {
    const generator = generatorFromConfig(v.spec);
    const walls: number[] = [];
    let stats = undefined as undefined | Awaited<ReturnType<typeof generator.grow>>['stats'];
    let reward = 0;
    for (let r = 0; r < repeats; r++) {
      const t = performance.now();
      const out = await generator.grow(inputs, {
        sampler,
        rng: new Rng(config.run.seed).fork(`bench/${r}`),
        step: 0,
        stopTokens: [tokenizer.eos],
        maxResponseTokens: config.sampling.maxResponseTokens,
        temperature: 1,
        topP: 1,
        topK: 0,
        treeIdPrefix: 'b',
      });
      walls.push(performance.now() - t);
      stats = out.stats;
      const ls = out.trees.flatMap((tree) => leaves(tree).map((leaf) => ({ tree, leaf })));
      const scores = await scoreBatch(
        task.reward,
        ls.map(({ tree, leaf }) => {
          const tokens = responseTokens(tree, leaf.id);
          return { item: items[Number(tree.id.slice(1))], response: tokenizer.decode(tokens) };
        }),
      );
      reward = scores.reduce((s, x) => s + x.reward, 0) / scores.length;
    }
    walls.sort((a, b) => a - b);
    rows.push({
      generator: v.name,
      trajectories: stats!.trajectories,
      tokens_decoded: stats!.tokensDecoded,
      prefix_reused: stats!.prefixTokensReused,
      prompt_computed: stats!.promptTokensComputed,
      sampler_calls: stats!.samplerCalls,
      wall_ms: walls[Math.floor(walls.length / 2)],
      mean_reward: reward,
    });
  }
  const iid = rows[0];
  for (const r of rows) {
    r.token_reduction = 1 - (r.tokens_decoded as number) / (iid.tokens_decoded as number);
    r.wall_speedup = (iid.wall_ms as number) / (r.wall_ms as number);
  }
  printTable(rows);
  writeBenchJson(
    'rollouts',
    {
      treepo_token_reduction: rows[1].token_reduction as number,
      treepo_wall_speedup: rows[1].wall_speedup as number,
    },
    { config: file, prompts, trajectories_per_prompt: G, warm_start: origin, rows },
  );
}
