/**
 * `npm run bench -- fleet [--steps 40] [--unavailable 10]`: a remote run survives its servers (issue
 * 35), on one machine with `arbor serve` processes on loopback (a tiny Qwen3 with LoRA: three vLLM-like
 * samplers and a Tinker trainer; testkit/remote/fleet.ts). Writes bench/out/fleet.json with headline:
 * - fleet_kill_one_of_three_survived: 1 when a run whose sampler 2 of 3 is SIGKILLed at step 12 finishes;
 * - fleet_throughput_after_kill: finished trajectories per second of the steps after the kill (two
 *   samplers, the kill's own disruption included) over the steps before it (three), warm-up excluded;
 * - fleet_rejoin_logprob_max_diff: the killed sampler, started again empty mid-run, rejoins; after the
 *   run, max |Δ log-prob| between it and another sampler on one seeded sequence under the adapter;
 * - trainer_restart_resume_survived: 1 when, after the trainer is SIGKILLed at step 5 and started again,
 *   `--resume` finishes the run;
 * - steps_applied_twice: optimizer steps the trainer counted beyond the run's (its own step counter);
 * - all_down_exit_seconds: `arbor train` exits 1 this long after both its samplers are SIGKILLed, with
 *   engine.sampler.unavailableSeconds `--unavailable` (goal: at most that + 10).
 * Records the commit and the machine's load (1-minute load average before and after each part).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import YAML from 'yaml';
import { parseConfig } from '../src/run/config.js';
import { train } from '../src/run/loop.js';
import { RunDir } from '../src/run/rundir.js';
import {
  fleetRunConfig,
  maxDiff,
  portClosed,
  sampleWith,
  startServers,
  stepRows,
  tinyModel,
  waitFor,
  type ServeProcess,
} from '../testkit/remote/fleet.js';
import { printTable, repoDir, writeBenchJson } from './util.js';

function arg(args: string[], name: string, fallback: number): number {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : fallback;
}

const KILL_AT = 12;
const RESTART_AT = 26;

/** Stop every process of a part and check their ports are closed. */
async function stopAll(all: ServeProcess[]): Promise<void> {
  await Promise.all(all.map((p) => p.kill9()));
  for (const p of all) if (!(await portClosed(p.port))) throw new Error(`port ${p.port} is still open`);
}

/** Trajectories per second over rows [from, to] (1-based steps): their trajectories over their wall time. */
function throughput(rows: Array<Record<string, number>>, from: number, to: number): number {
  const wall = (step: number) => (step === 0 ? 0 : rows[step - 1].wall_s);
  const trajectories = rows.slice(from - 1, to).reduce((a, m) => a + m.trajectories, 0);
  return trajectories / (wall(to) - wall(from - 1));
}

async function killOneOfThree(root: string, steps: number): Promise<Record<string, unknown>> {
  const model = tinyModel(root);
  const { trainer, samplers, all } = await startServers(model, join(root, 'kill-state'), 3);
  const load = [loadavg()[0]];
  try {
    const config = fleetRunConfig({
      name: 'kill',
      root,
      model,
      trainer: trainer.url,
      samplers: samplers.map((s) => s.url),
      steps,
      promptsPerStep: 8,
      maxResponseTokens: 16,
    });
    const dir = join(root, 'kill');
    const run = train(parseConfig(config), { quiet: true });
    run.catch(() => {});
    await waitFor(() => stepRows(dir).length >= KILL_AT, 600_000, `step ${KILL_AT}`);
    await samplers[1].kill9();
    const killedAfter = stepRows(dir).length;
    await waitFor(() => stepRows(dir).length >= RESTART_AT, 600_000, `step ${RESTART_AT}`);
    const restartedAfter = stepRows(dir).length;
    await samplers[1].start();
    let survived = 1;
    try {
      await run;
    } catch (error) {
      survived = 0;
      console.error(`the run failed: ${(error as Error).message}`);
    }
    const rows = stepRows(dir);
    if (rows.length !== steps) survived = 0;
    const before = throughput(rows, 3, killedAfter);
    const after = throughput(rows, killedAfter + 1, restartedAfter);
    const prompt = [10, 20, 30, 40, 11];
    const rejoined = await sampleWith(samplers[1].url, 'arbor-lora', prompt, 7);
    const other = await sampleWith(samplers[0].url, 'arbor-lora', prompt, 7);
    load.push(loadavg()[0]);
    return {
      survived,
      throughput_before: before,
      throughput_after: after,
      ratio: after / before,
      rejoin_logprob_max_diff: maxDiff(rejoined, other),
      killed_after_step: killedAfter,
      restarted_after_step: restartedAfter,
      retries: rows.reduce((a, m) => a + (m.sampler_retries ?? 0), 0),
      resyncs: rows.reduce((a, m) => a + (m.sampler_resyncs ?? 0), 0),
      healthy_by_step: rows.map((m) => m.sampler_servers_healthy),
      trees_error: rows.reduce((a, m) => a + (m.trees_error ?? 0), 0),
      loadavg_1min: load,
    };
  } finally {
    await stopAll(all);
  }
}

async function trainerRestart(root: string): Promise<Record<string, unknown>> {
  const model = tinyModel(root);
  const { trainer, samplers, all } = await startServers(model, join(root, 'restart-state'), 2);
  const load = [loadavg()[0]];
  const steps = 12;
  try {
    const config = fleetRunConfig({
      name: 'restart',
      root,
      model,
      trainer: trainer.url,
      samplers: samplers.map((s) => s.url),
      steps,
      checkpointEvery: 2,
    });
    const dir = join(root, 'restart');
    const run = train(parseConfig(config), { quiet: true });
    let error = '';
    run.catch((e: Error) => (error = e.message));
    await waitFor(() => stepRows(dir).length >= 5, 600_000, 'step 5');
    await trainer.kill9();
    const killed = Date.now();
    const failed = await run.then(
      () => false,
      () => true,
    );
    const stopSeconds = (Date.now() - killed) / 1000;
    const resumedFrom = Math.max(0, ...new RunDir(dir).checkpoints());
    await trainer.start();
    let survived = 1;
    try {
      await train(undefined, { resume: dir, quiet: true });
    } catch (e) {
      survived = 0;
      console.error(`the resumed run failed: ${(e as Error).message}`);
    }
    const rows = stepRows(dir);
    if (rows.map((m) => m.step).join() !== Array.from({ length: steps }, (_, i) => i + 1).join()) survived = 0;
    const state = JSON.parse(readFileSync(join(dir, `checkpoints/step-${steps}/engine/tinker-state.json`), 'utf8')) as {
      trainerStep?: number;
    };
    const twice = rows.filter((m, i) => i > 0 && m.trainer_step - rows[i - 1].trainer_step > 1).length;
    load.push(loadavg()[0]);
    return {
      survived: failed ? survived : 0,
      steps_applied_twice: twice + Math.max(0, (state.trainerStep ?? steps) - steps),
      trainer_step_final: state.trainerStep ?? null,
      trainer_step_by_step: rows.map((m) => m.trainer_step),
      stopped_seconds_after_kill: stopSeconds,
      stop_error: error.slice(0, 400),
      first_resumed_step: resumedFrom + 1,
      first_resumed_logprob_gap_max: rows[resumedFrom]?.logprob_gap_max ?? null,
      logprob_gap_max_by_step: rows.map((m) => m.logprob_gap_max),
      loadavg_1min: load,
    };
  } finally {
    await stopAll(all);
  }
}

async function allDown(root: string, unavailable: number): Promise<Record<string, unknown>> {
  const model = tinyModel(root);
  const { trainer, samplers, all } = await startServers(model, join(root, 'down-state'), 2);
  const load = [loadavg()[0]];
  const file = join(root, 'down.yaml');
  const dir = join(root, 'down');
  const config = fleetRunConfig({
    name: 'down',
    root,
    model,
    trainer: trainer.url,
    samplers: samplers.map((s) => s.url),
    steps: 40,
    checkpointEvery: 2,
    unavailableSeconds: unavailable,
  });
  writeFileSync(file, YAML.stringify(config));
  const child = spawn(process.execPath, ['bin/arbor.mjs', 'train', file], {
    cwd: repoDir,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (d) => (output += d));
  child.stderr.on('data', (d) => (output += d));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  try {
    await waitFor(() => stepRows(dir).length >= 3, 600_000, 'step 3');
    await Promise.all(samplers.map((s) => s.kill9()));
    const killed = Date.now();
    const code = await exited;
    const seconds = (Date.now() - killed) / 1000;
    const named = samplers.every((s) => output.includes(`${s.url}: `));
    load.push(loadavg()[0]);
    return {
      exit_code: code,
      exit_seconds: seconds,
      unavailable_seconds: unavailable,
      names_every_server: named,
      message: output
        .split('\n')
        .filter((l) => l.startsWith('arbor:') || l.startsWith('  http'))
        .join('\n'),
      loadavg_1min: load,
    };
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
    await exited;
    await stopAll(all);
  }
}

export async function main(args: string[]): Promise<void> {
  const steps = arg(args, 'steps', 40);
  const unavailable = arg(args, 'unavailable', 10);
  const root = mkdtempSync(join(tmpdir(), 'arbor-bench-fleet-'));
  try {
    const kill = await killOneOfThree(root, steps);
    const restart = await trainerRestart(root);
    const down = await allDown(root, unavailable);
    const headline = {
      fleet_kill_one_of_three_survived: kill.survived as number,
      fleet_rejoin_logprob_max_diff: kill.rejoin_logprob_max_diff as number,
      trainer_restart_resume_survived: restart.survived as number,
      steps_applied_twice: restart.steps_applied_twice as number,
      all_down_exit_seconds: down.exit_code === 1 ? (down.exit_seconds as number) : null,
      fleet_throughput_after_kill: kill.ratio as number,
    };
    printTable(Object.entries(headline).map(([name, value]) => ({ name, value })));
    writeBenchJson('fleet', headline, {
      settings: { steps, kill_at: KILL_AT, restart_at: RESTART_AT, unavailable_seconds: unavailable },
      machine_load: { cores: availableParallelism() },
      kill_one_of_three: kill,
      trainer_restart: restart,
      all_down: down,
    });
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}
