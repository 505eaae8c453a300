/**
 * The `arbor` command line: train, eval, sft, serve, config, report, ui, bench. Errors that are
 * ArborErrors print as one line ("arbor: <message>"); --debug prints the stack.
 */
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ArborError } from '../core/errors.js';

const USAGE = `usage: arbor <command> [options]

commands:
  train <config.yaml> [--steps N] [--force] [--quiet]   run RL (SFT warm-start first when configured)
  train --resume <run-dir> [--steps N]                  continue a run from its last checkpoint
  eval --checkpoint <dir> --task <name> [--options JSON] [--count N] [--k K] [--seed S] [--max-tokens T]
  eval --config <run.yaml> [--task <name>] [...]        accuracy (greedy, pass@k) on a task's test split, embedded or remote engine
  sft --data file.jsonl --out <dir> [...]               supervised training from prompt/completion pairs
  serve --checkpoint <dir> [--port P] [--host H]        serve a checkpoint over HTTP (OpenAI/SGLang/Tinker APIs)
  hf-init --out <dir> [--arch qwen3] [--tokenizer DIR]  a small random Hugging Face model directory (tests, debugging)
  config --print-defaults | --check <config.yaml>       show every option with its default / validate a file
  export <run-dir> --to sft.jsonl [--min-reward R]    verified trajectories as SFT rows (arbor sft --data reads them)
  select <run-dir> --method limr|s2l --top K | --threshold X --to subset.jsonl   items chosen by reward dynamics (LIMR, S2L)
  report <run-dir>                                      regenerate report.html
  ui [runs-dir] [--port N]                              live dashboard on 127.0.0.1 (default: runs, port 8700)
  bench <name>                                          run bench/<name>.ts (same as npm run bench -- <name>)

global: --debug prints stack traces`;

export async function main(argv: string[]): Promise<number> {
  const debug = argv.includes('--debug');
  const args = argv.filter((a) => a !== '--debug');
  const [command, ...rest] = args;
  try {
    switch (command) {
      case 'train':
        return await (await import('./train.js')).trainCommand(rest);
      case 'eval':
        return await (await import('./eval.js')).evalCommand(rest);
      case 'sft':
        return await (await import('./sft.js')).sftCommand(rest);
      case 'serve':
        return await (await import('./serve.js')).serveCommand(rest);
      case 'config':
        return await (await import('./config.js')).configCommand(rest);
      case 'hf-init':
        return await (await import('./hf-init.js')).hfInitCommand(rest);
      case 'report':
        return await (await import('./report.js')).reportCommand(rest);
      case 'export':
        return await (await import('./export.js')).exportCommand(rest);
      case 'select':
        return await (await import('./select.js')).selectCommand(rest);
      case 'ui':
        return await (await import('./ui.js')).uiCommand(rest);
      case 'bench': {
        const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
        const r = spawnSync(process.execPath, ['--import', 'tsx', join(root, 'bench/run.ts'), ...rest], {
          stdio: 'inherit',
        });
        return r.status ?? 1;
      }
      case undefined:
      case 'help':
      case '--help':
      case '-h':
        console.log(USAGE);
        return command === undefined ? 2 : 0;
      default:
        console.error(`arbor: unknown command "${command}"\n\n${USAGE}`);
        return 2;
    }
  } catch (error) {
    if (error instanceof ArborError && !debug) {
      console.error(`arbor: ${error.message}`);
      return 1;
    }
    console.error(debug ? error : `arbor: ${(error as Error)?.message ?? error} (run with --debug for the stack)`);
    return 1;
  }
}
