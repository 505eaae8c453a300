/**
 * One training run in its own process, for benches that compare many runs: each gets a fresh WASM
 * memory (a process that builds engine after engine eventually exhausts its 4 GiB) and nothing of an
 * earlier run's heap or JIT state. Usage: node --import tsx bench/train-child.ts <args.json>, where the
 * file holds { config, options } for train(); prints the summary as JSON on the last line.
 */
import { readFileSync } from 'node:fs';
import { parseConfig } from '../src/run/config.js';
import { train, type TrainOptions } from '../src/run/loop.js';

const { config, options } = JSON.parse(readFileSync(process.argv[2], 'utf8')) as {
  config: unknown;
  options: TrainOptions;
};
const summary = await train(config === null ? undefined : parseConfig(config), { quiet: true, ...options });
console.log(JSON.stringify(summary));
