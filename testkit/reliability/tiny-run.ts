/**
 * The raw config of a small arithmetic run that trains in seconds (1-digit additions, a 2-layer
 * model, a short SFT warm-start cached under `<root>/sft`), shared by the reliability tests and
 * bench. `run` overrides merge into the run section.
 */
import { join } from 'node:path';

export function tinyRun(root: string, name: string, run: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    run: {
      name,
      outDir: join(root, name),
      seed: 4,
      steps: 6,
      promptsPerStep: 4,
      evalEvery: 0,
      evalCount: 8,
      evalPassK: 0,
      checkpointEvery: 0,
      logTreesEvery: 0,
      trainItems: 16,
      ...run,
    },
    task: { name: 'arith', options: { digits: 1, ops: ['+'] } },
    model: { dModel: 32, nLayers: 2, nHeads: 2, dFF: 64, contextLength: 32 },
    sft: { steps: 150, batchSize: 32, learningRate: 0.01, examples: 400, checkpoint: join(root, 'sft') },
    sampling: { maxResponseTokens: 10 },
    generate: { kind: 'iid', groupSize: 4 },
    trainer: { learningRate: 0.003 },
  };
}
