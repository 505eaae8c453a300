/**
 * `npm run bench -- reliability [--kills 10] [--fuzz 2000] [--serve-fuzz 10000] [--soak-steps 500]`:
 * what survives what. Writes bench/out/reliability.json:
 * - kill_resume_trials / kill_resume_identical: `arbor train` SIGKILLed at random moments and inside
 *   checkpoint writes, then resumed; identical = final metrics equal an uninterrupted run's;
 * - enospc_trials_recovered: share of ENOSPC faults (state.json, store.jsonl, the checkpoint's
 *   weights and optimizer, trainer.json, summary.json, report.html) after which the run stopped naming
 *   the file and, resumed, ended equal to an uninterrupted run;
 * - fuzz_cases / fuzz_failures: the parser fuzz (testkit/reliability/parser-fuzz.ts) plus the HTTP fuzz
 *   of `arbor serve` (testkit/reliability/serve-fuzz.ts); serve_5xx_on_client_input from the latter;
 * - soak_rss_growth_mb: RSS of a long run of short steps, last sample − first sample after step 100.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import YAML from 'yaml';
import { killResumeTrials, trialConfig } from '../testkit/reliability/kill-resume.js';
import { runParserFuzz } from '../testkit/reliability/parser-fuzz.js';
import { runServeFuzz } from '../testkit/reliability/serve-fuzz.js';
import { printTable, writeBenchJson } from './util.js';

function arg(args: string[], name: string, fallback: number): number {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : fallback;
}

/** RSS (MB) of a long run sampled every 250 ms with its step count; growth after the warm-up. */
async function soak(root: string, steps: number): Promise<{ growthMb: number; samples: Array<[number, number]> }> {
  const file = trialConfig(root, 'soak', steps);
  const cfg = YAML.parse(readFileSync(file, 'utf8'));
  // short steps, no evaluation or checkpoint until the end, trees never logged: the loop itself
  Object.assign(cfg.run, { evalEvery: 0, checkpointEvery: 0, logTreesEvery: 0, evalCount: 4 });
  cfg.sampling.maxResponseTokens = 6;
  cfg.generate.groupSize = 2;
  const { writeFileSync } = await import('node:fs');
  writeFileSync(file, YAML.stringify(cfg));
  const metrics = join(root, 'soak', 'metrics.jsonl');
  const samples: Array<[number, number]> = [];
  await new Promise<void>((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'bin/arbor.mjs', 'train', file, '--quiet', '--force'], {
      stdio: 'ignore',
    });
    const timer = setInterval(() => {
      try {
        const rss = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))?.[1] ?? NaN) / 1024;
        const step = existsSync(metrics) ? readFileSync(metrics, 'utf8').split('\n').filter(Boolean).length - 1 : 0;
        if (Number.isFinite(rss)) samples.push([step, rss]);
      } catch {
        // the process is gone between two samples
      }
    }, 100);
    child.on('exit', (code) => {
      clearInterval(timer);
      if (code === 0) resolve();
      else reject(new Error(`soak run exited ${code}`));
    });
  });
  const after = samples.filter(([s]) => s >= Math.min(100, steps / 5) && s < steps);
  const growthMb = after.length >= 2 ? after[after.length - 1][1] - after[0][1] : NaN;
  return { growthMb, samples };
}

export async function main(args: string[]): Promise<void> {
  const root = mkdtempSync(join(tmpdir(), 'arbor-reliability-'));
  const kills = arg(args, 'kills', 10);
  const trials = await killResumeTrials(root, {
    random: kills,
    targets: [
      { file: 'state.json', at: 1 },
      { file: 'state.json', at: 3 },
      { file: join('engine', 'model.safetensors'), at: 2 },
      { file: 'optimizer.safetensors', at: 1 },
      { file: 'store.jsonl', at: 2 },
      { file: 'summary.json', at: 1 },
      { file: 'report.html', at: 1 },
    ],
    enospc: [
      { file: 'state.json', at: 2 },
      { file: 'store.jsonl', at: 1 },
      { file: join('engine', 'model.safetensors'), at: 3 },
      { file: 'optimizer.safetensors', at: 2 },
      { file: 'trainer.json', at: 1 },
      { file: 'summary.json', at: 1 },
      { file: 'report.html', at: 1 },
      { file: 'config.resolved.yaml', at: 1 },
    ],
    seed: 11,
  });
  const parser = await runParserFuzz(arg(args, 'fuzz', 2000), 5);
  const serve = await runServeFuzz(arg(args, 'serve-fuzz', 10_000), { seed: 23 });
  const soaked = await soak(root, arg(args, 'soak-steps', 500));
  const parserCases = Object.values(parser.cases).reduce((a, b) => a + b, 0);
  const recovered = trials.enospc.filter((d) => d.killed && d.identical).length;
  const headline = {
    kill_resume_trials: trials.trials,
    kill_resume_identical: trials.identical,
    enospc_trials_recovered: trials.enospc.length ? recovered / trials.enospc.length : null,
    fuzz_cases: parserCases + serve.cases,
    fuzz_failures: parser.failures.length + serve.failures,
    serve_5xx_on_client_input: serve.serve5xx,
    soak_rss_growth_mb: Number.isFinite(soaked.growthMb) ? soaked.growthMb : null,
  };
  printTable(
    [...trials.details, ...trials.enospc].map((d) => ({
      fault: d.kill,
      hit: d.killed ? 'yes' : 'no',
      identical: d.identical ? 'yes' : 'NO',
      error: d.error ?? '',
    })),
  );
  printTable([
    {
      parser_cases: parserCases,
      parser_failures: parser.failures.length,
      serve_cases: serve.cases,
      serve_failures: serve.failures,
      serve_5xx: serve.serve5xx,
      soak_samples: soaked.samples.length,
      soak_growth_mb: soaked.growthMb,
    },
  ]);
  console.log(JSON.stringify({ headline }, null, 2));
  writeBenchJson('reliability', headline, {
    reference_run_seconds: trials.referenceSeconds,
    kills_found_running: trials.killed,
    trials: trials.details,
    enospc: trials.enospc,
    parser_fuzz: { cases: parser.cases, failures: parser.failures.slice(0, 10), slowest_ms: parser.slowestMs },
    serve_fuzz: {
      cases: serve.cases,
      by_body: serve.byBody,
      statuses: serve.statuses,
      failures: serve.failures,
      examples: serve.examples,
    },
    soak: { steps: arg(args, 'soak-steps', 500), rss_mb_by_step: soaked.samples },
  });
}
