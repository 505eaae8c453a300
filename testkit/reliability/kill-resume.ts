/**
 * Kill-and-resume trials: `arbor train` on a small config in a child process, killed with
 * SIGKILL at a random moment or inside a chosen file write, then resumed (`--resume`, or started
 * again when it died before its first checkpoint) until it finishes; the final metrics must equal an
 * uninterrupted run's. Shared by the test (a few trials) and `npm run bench -- reliability`.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import YAML from 'yaml';
import { Rng } from '../../src/core/rng.js';
import { RunDir } from '../../src/run/rundir.js';
import { tinyRun } from './tiny-run.js';

const ENTRY = ['--import', 'tsx', 'testkit/reliability/kill-on-write.ts'];
export const COMPARED = ['step', 'reward_mean', 'loss', 'tokens_decoded', 'grad_norm', 'eval_greedy_acc'];

/** The trial config: tiny, checkpoints every 2 steps, evaluations every 3 (both are kill targets). */
export function trialConfig(root: string, name: string, steps = 6): string {
  const file = join(root, `${name}.yaml`);
  writeFileSync(
    file,
    YAML.stringify(tinyRun(root, name, { steps, evalEvery: 3, checkpointEvery: 2, logTreesEvery: 2 })),
  );
  return file;
}

const picked = (dir: string) =>
  JSON.stringify(
    new RunDir(dir)
      .readMetrics()
      .filter((m) => m.step > 0)
      .map((m) => COMPARED.map((k) => m[k] ?? null)),
  );

function arbor(
  args: string[],
  env: Record<string, string> = {},
): { status: number | null; killed: boolean; stderr: string } {
  const r = spawnSync(process.execPath, [...ENTRY, ...args], {
    encoding: 'utf8',
    env: { ...process.env, ...env },
    timeout: 300_000,
  });
  return { status: r.status, killed: r.signal === 'SIGKILL', stderr: r.stderr };
}

/** Start a run and SIGKILL it after `ms`; resolves with whether the kill found it still running. */
function killAfter(args: string[], ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...ENTRY, ...args], { stdio: 'ignore' });
    const timer = setTimeout(() => child.kill('SIGKILL'), ms);
    child.on('exit', (_code, signal) => {
      clearTimeout(timer);
      resolve(signal === 'SIGKILL');
    });
  });
}

/** Resume until done (or start again when no checkpoint was written); at most 4 attempts. */
function finish(config: string, dir: string): string | undefined {
  for (let attempt = 0; attempt < 4; attempt++) {
    const hasCheckpoint = existsSync(dir) && new RunDir(dir).checkpoints().length > 0;
    const r = hasCheckpoint ? arbor(['train', '--resume', dir, '--quiet']) : arbor(['train', config, '--quiet']);
    if (r.status === 0) return undefined;
    if (attempt === 3) return r.stderr.trim().split('\n').slice(-3).join(' | ');
  }
  return 'unreachable';
}

export interface TrialReport {
  trials: number;
  identical: number;
  /** Trials whose run the kill found still running (the others finished first). */
  killed: number;
  details: Array<{ kill: string; killed: boolean; identical: boolean; error?: string }>;
  referenceSeconds: number;
}

/**
 * `random` kills at uniform moments of an uninterrupted run; `targets` kill inside those files'
 * writes; `enospc` targets fail those writes with ENOSPC (the run must stop naming the file).
 */
export async function killResumeTrials(
  root: string,
  o: {
    random: number;
    targets: Array<{ file: string; at: number }>;
    enospc?: Array<{ file: string; at: number }>;
    seed: number;
  },
): Promise<TrialReport & { enospc: TrialReport['details'] }> {
  mkdirSync(root, { recursive: true });
  const reference = trialConfig(root, 'reference');
  arbor(['train', reference, '--quiet', '--steps', '0']); // only the shared SFT cache, before the timed run
  const started = Date.now();
  const again = arbor(['train', reference, '--quiet', '--force']);
  const referenceSeconds = (Date.now() - started) / 1000;
  if (again.status !== 0) throw new Error(`the uninterrupted run failed: ${again.stderr}`);
  const expected = picked(join(root, 'reference'));
  const rng = new Rng(o.seed);
  const report: TrialReport & { enospc: TrialReport['details'] } = {
    trials: 0,
    identical: 0,
    killed: 0,
    details: [],
    referenceSeconds,
    enospc: [],
  };
  const record = (kill: string, killed: boolean, dir: string, error?: string) => {
    const identical = !error && picked(dir) === expected;
    report.trials++;
    if (identical) report.identical++;
    if (killed) report.killed++;
    report.details.push({ kill, killed, identical, ...(error ? { error } : {}) });
  };
  for (let i = 0; i < o.random; i++) {
    const name = `random-${i}`;
    const config = trialConfig(root, name);
    const ms = Math.round((0.05 + 0.9 * rng.next()) * referenceSeconds * 1000);
    const killed = await killAfter(['train', config, '--quiet', '--force'], ms);
    record(`SIGKILL at ${ms} ms`, killed, join(root, name), finish(config, join(root, name)));
  }
  for (const [i, t] of o.targets.entries()) {
    const name = `target-${i}`;
    const config = trialConfig(root, name);
    const { killed } = arbor(['train', config, '--quiet', '--force'], {
      ARBOR_KILL_ON: t.file,
      ARBOR_KILL_AT: String(t.at),
    });
    record(`SIGKILL inside write ${t.at} of ${t.file}`, killed, join(root, name), finish(config, join(root, name)));
  }
  for (const [i, t] of (o.enospc ?? []).entries()) {
    const name = `enospc-${i}`;
    const config = trialConfig(root, name);
    const r = arbor(['train', config, '--quiet', '--force'], {
      ARBOR_KILL_ON: t.file,
      ARBOR_KILL_AT: String(t.at),
      ARBOR_FAULT: 'enospc',
    });
    const named = r.status === 1 && r.stderr.includes(t.file) && r.stderr.includes('ENOSPC');
    const error = named
      ? finish(config, join(root, name))
      : `the run did not stop naming ${t.file} (exit ${r.status}): ${r.stderr.trim().slice(-300)}`;
    report.enospc.push({
      kill: `ENOSPC at write ${t.at} of ${t.file}`,
      killed: named,
      identical: !error && picked(join(root, name)) === expected,
      ...(error ? { error } : {}),
    });
  }
  return report;
}
