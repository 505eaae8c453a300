/**
 * The pinned third-party MCP reference servers (dev dependencies) as `env` sections, and a tool call
 * written the way a policy writes it in each format (what a rendered offer asks the model to emit), and
 * `arbor` run as a child process with the server processes it starts watched by an environment mark.
 * Helpers only: they assert nothing.
 */
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pythonJson } from '../../src/env/format/qwen3.js';
import type { ToolCall } from '../../src/env/types.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '../..');

/** `@modelcontextprotocol/server-everything` (2026.8.31) over stdio. */
export const EVERYTHING_SERVER = join(root, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');

/** `@modelcontextprotocol/server-memory` (2026.8.31) over stdio. */
export const MEMORY_SERVER = join(root, 'node_modules/@modelcontextprotocol/server-memory/dist/index.js');

/** The `env` section that starts server-everything, offering `tools` (all when empty). */
export function everythingEnv(tools: string[] = [], env: Record<string, string> = {}): Record<string, unknown> {
  return { kind: 'mcp', command: process.execPath, args: [EVERYTHING_SERVER, 'stdio'], tools, env };
}

/** A call as the policy writes it: arbor `@name{json}` (or positional `@name(text)`), qwen3 a <tool_call> block. */
export function writeCall(format: 'arbor' | 'qwen3', call: Omit<ToolCall, 'raw'>, positional?: string): string {
  if (format === 'qwen3')
    return `<tool_call>\n${pythonJson({ name: call.name, arguments: call.arguments })}\n</tool_call>`;
  return positional !== undefined ? `@${call.name}(${positional})` : `@${call.name}${JSON.stringify(call.arguments)}`;
}

/**
 * Pids of the live processes whose environment holds `ARBOR_TEST_MARK=<mark>` (an `env.env` entry given
 * to the servers of one test), read from /proc (Linux). Zombies have no environment and do not count.
 */
export function markedPids(mark: string): number[] {
  const needle = Buffer.from(`ARBOR_TEST_MARK=${mark}\0`);
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/environ`).includes(needle)) pids.push(Number(entry));
    } catch {
      // gone, or not ours
    }
  }
  return pids;
}

/** What `runArbor` saw: exit status, output, wall time and the marked server pids seen while it ran. */
export interface ArborExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  ms: number;
  serverPids: number[];
}

/**
 * `node bin/arbor.mjs <args>` as a child (cwd: the repository), watching for servers marked `mark`
 * every 20 ms. `onStderr` sees the stderr so far (return a signal to send it to the child, once). A
 * child still running after `limitMs` is killed (SIGKILL) and reported with its signal.
 */
export function runArbor(
  args: string[],
  mark: string,
  limitMs: number,
  onStderr?: (text: string) => NodeJS.Signals | undefined,
): Promise<ArborExit> {
  const started = Date.now();
  const child = spawn(process.execPath, [join(root, 'bin/arbor.mjs'), ...args], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  let signalled = false;
  const seen = new Set<number>();
  const watch = setInterval(() => markedPids(mark).forEach((p) => seen.add(p)), 20);
  const limit = setTimeout(() => child.kill('SIGKILL'), limitMs);
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => {
    stderr += d.toString();
    const signal = signalled ? undefined : onStderr?.(stderr);
    if (signal) {
      signalled = true;
      child.kill(signal);
    }
  });
  return new Promise((resolve, reject) => {
    child.on('error', (error) => {
      clearInterval(watch);
      clearTimeout(limit);
      reject(error);
    });
    child.on('close', (code, signal) => {
      clearInterval(watch);
      clearTimeout(limit);
      resolve({ code, signal, stdout, stderr, ms: Date.now() - started, serverPids: [...seen] });
    });
  });
}
