/**
 * Shared setup of the fleet tests and `npm run bench -- fleet`: a tiny random Qwen3 with a
 * 101-token character tokenizer, `arbor serve` processes on loopback that can be killed with SIGKILL and
 * started again on the same port (a Tinker trainer with a state directory, vLLM-like samplers with
 * `--enable-lora`), the raw config of a short remote LoRA run over them, and checks that no process or
 * port is left behind.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { makeHfModel } from '../../src/engine/hf/make.js';
import { RunDir } from '../../src/run/rundir.js';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
export const REWARD_MODULE = fileURLToPath(new URL('./fleet-reward.ts', import.meta.url));

/** A tiny Qwen3ForCausalLM (1 layer, 32 wide) with the character tokenizer of the AI SDK example. */
export function tinyModel(root: string): string {
  const out = join(root, 'model');
  if (!existsSync(out))
    makeHfModel({
      out,
      architecture: 'Qwen3ForCausalLM',
      hiddenSize: 32,
      layers: 1,
      heads: 2,
      kvHeads: 1,
      headDim: 16,
      intermediateSize: 64,
      tokenizer: join(REPO, 'examples/ai-sdk-agent/tokenizer'),
      seed: 1,
      maxPositionEmbeddings: 128,
    });
  return out;
}

/** An `arbor serve` process: killed with SIGKILL (state lost), started again on its port. */
export class ServeProcess {
  port = 0;
  child: ChildProcessWithoutNullStreams | undefined;
  output = '';

  constructor(readonly args: string[]) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Start (on the port it had, if any) and wait until it serves. */
  async start(): Promise<this> {
    const child = spawn(process.execPath, ['bin/arbor.mjs', 'serve', ...this.args, '--port', String(this.port)], {
      cwd: REPO,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    this.child = child;
    this.output = '';
    child.stdout.on('data', (d) => (this.output += d));
    child.stderr.on('data', (d) => (this.output += d));
    this.port = await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`arbor serve printed no URL in 60 s:\n${this.output}`)), 60_000);
      const check = () => {
        const m = /at http:\/\/127\.0\.0\.1:(\d+)/.exec(this.output);
        if (!m) return;
        clearTimeout(timer);
        resolve(Number(m[1]));
      };
      child.stdout.on('data', check);
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`arbor serve exited ${code}:\n${this.output}`));
      });
    });
    return this;
  }

  /** SIGKILL, and wait for the process to be gone. */
  async kill9(): Promise<void> {
    const child = this.child;
    this.child = undefined;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  }
}

/** A trainer (Tinker API, LoRA, its state in `stateDir`) and `samplers` vLLM-like servers over `model`. */
export async function startServers(
  model: string,
  stateDir: string,
  samplers: number,
): Promise<{ trainer: ServeProcess; samplers: ServeProcess[]; all: ServeProcess[] }> {
  const trainer = new ServeProcess(['--checkpoint', model, '--name', 'tiny', '--state-dir', stateDir]);
  const fleet = Array.from(
    { length: samplers },
    () => new ServeProcess(['--checkpoint', model, '--name', 'tiny', '--enable-lora']),
  );
  const all = [trainer, ...fleet];
  try {
    await Promise.all(all.map((p) => p.start()));
  } catch (error) {
    await Promise.all(all.map((p) => p.kill9()));
    throw error;
  }
  return { trainer, samplers: fleet, all };
}

export interface FleetRunOptions {
  name: string;
  root: string;
  model: string;
  trainer: string;
  samplers: string[];
  steps: number;
  checkpointEvery?: number;
  promptsPerStep?: number;
  maxResponseTokens?: number;
  unavailableSeconds?: number;
  trainerRetries?: number;
}

/** The raw config of a remote LoRA run: vLLM-like samplers, weight sync by LoRA hot-load, fast fault handling. */
export function fleetRunConfig(o: FleetRunOptions): Record<string, unknown> {
  return {
    run: {
      name: o.name,
      outDir: join(o.root, o.name),
      seed: 1,
      steps: o.steps,
      promptsPerStep: o.promptsPerStep ?? 4,
      evalEvery: 0,
      evalCount: 4,
      evalPassK: 0,
      checkpointEvery: o.checkpointEvery ?? 0,
      logTreesEvery: 0,
      trainItems: 32,
    },
    task: { name: 'arith', options: { digits: 1, ops: ['+'] } },
    reward: { parts: [{ kind: 'module', module: REWARD_MODULE }] },
    sft: { enabled: false },
    sampling: { maxResponseTokens: o.maxResponseTokens ?? 8 },
    generate: { kind: 'iid', groupSize: 4 },
    trainer: { learningRate: 0.05 },
    engine: {
      kind: 'remote',
      sampler: {
        api: 'openai',
        servers: o.samplers,
        model: 'tiny',
        retries: 3,
        requestTimeoutSeconds: 20,
        unavailableSeconds: o.unavailableSeconds ?? 60,
        probeSeconds: 0.1,
      },
      trainer: { url: o.trainer, baseModel: 'tiny', loraRank: 4, retries: o.trainerRetries ?? 2 },
      tokenizer: o.model,
      weightSync: { kind: 'vllm_load_lora_adapter', loraName: 'arbor-lora', adapterDir: join(o.root, 'adapters') },
    },
  };
}

/** The run's metrics rows of RL steps (step > 0). */
export function stepRows(dir: string): Array<Record<string, number>> {
  if (!existsSync(join(dir, 'metrics.jsonl'))) return [];
  return new RunDir(dir).readMetrics().filter((m) => m.step > 0) as unknown as Array<Record<string, number>>;
}

/** Poll until `ready()` or `timeoutMs`. */
export async function waitFor(ready: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!ready()) {
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Resolves true when nothing listens on `port` any more. */
export function portClosed(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', () => resolve(true));
  });
}

/** A completion of `prompt` under `model` (greedy off: seeded), with its token ids and log-probs. */
export async function sampleWith(
  url: string,
  model: string,
  prompt: number[],
  seed: number,
): Promise<{ tokens: number[]; logprobs: number[] }> {
  const res = await fetch(`${url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      model,
      prompt,
      max_tokens: 12,
      seed,
      logprobs: 1,
      return_token_ids: true,
      ignore_eos: true,
    }),
  });
  const json = (await res.json()) as {
    choices: Array<{ token_ids: number[]; logprobs: { token_logprobs: number[] } }>;
  };
  if (!res.ok) throw new Error(`${url}: HTTP ${res.status}: ${JSON.stringify(json)}`);
  return { tokens: json.choices[0].token_ids, logprobs: json.choices[0].logprobs.token_logprobs };
}

/** Largest |a − b| of two equal-length log-prob lists (Infinity when the tokens differ). */
export function maxDiff(
  a: { tokens: number[]; logprobs: number[] },
  b: { tokens: number[]; logprobs: number[] },
): number {
  if (a.tokens.join() !== b.tokens.join()) return Infinity;
  return Math.max(0, ...a.logprobs.map((x, i) => Math.abs(x - b.logprobs[i])));
}
