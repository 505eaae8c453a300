/**
 * The stdio transport of an MCP server process (an SDK `Transport`): spawns the command, frames JSON-RPC
 * over stdin/stdout with the SDK's own `ReadBuffer`/`serializeMessage`, and, unlike the SDK's
 * `StdioClientTransport`, keeps what a supervisor needs: the exit code or signal, the tail of stderr,
 * and stderr appended to a log file (each line prefixed with the pid) instead of Arbor's own stderr.
 * `close()` ends stdin, then SIGTERM, then SIGKILL (2 s apart), and returns only once the process is gone.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ReadBuffer, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

/** Where a server's stderr goes: appended to `file`, shown in Arbor's stderr, or dropped. */
export type StderrTarget = { kind: 'log'; file: string } | { kind: 'inherit' } | { kind: 'ignore' };

export interface ServerProcessOptions {
  command: string;
  args: string[];
  /** Added to the SDK's safe default variables (HOME, PATH, USER...). */
  env: Record<string, string>;
  cwd?: string;
  stderr: StderrTarget;
}

/** Characters of stderr kept for error messages. */
const STDERR_TAIL_CHARS = 2000;
/** Milliseconds between the steps of the stop sequence (stdin end, SIGTERM, SIGKILL). */
const STOP_STEP_MS = 2000;

/** Append to a log file; a log that cannot be written (disk full, directory gone) never stops the server. */
export function appendLog(file: string, text: string): void {
  try {
    appendFileSync(file, text);
  } catch {
    // the tail kept in memory still reaches error messages
  }
}

export class ServerProcessTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: <T extends JSONRPCMessage>(message: T) => void;

  private child: ChildProcess | undefined;
  private readonly buffer = new ReadBuffer();
  private exited: Promise<void> | undefined;
  private tail = '';
  /** Why the process ended ('' while it runs): `exit code 1`, `signal SIGKILL`, a spawn error. */
  exitReason = '';

  constructor(private readonly options: ServerProcessOptions) {}

  /** The process id (null before start and once it is gone). */
  get pid(): number | null {
    return this.exitReason === '' ? (this.child?.pid ?? null) : null;
  }

  /** The last characters the process wrote to stderr (kept whatever the target). */
  get stderrTail(): string {
    return this.tail.trim();
  }

  start(): Promise<void> {
    if (this.child) throw new Error('ServerProcessTransport: already started');
    const o = this.options;
    const stderr = o.stderr.kind === 'inherit' ? 'inherit' : 'pipe';
    const env = { ...getDefaultEnvironment(), ...o.env };
    // the log directory first: nothing is spawned when it cannot be made
    if (o.stderr.kind === 'log') mkdirSync(dirname(o.stderr.file), { recursive: true });
    const child = spawn(o.command, o.args, { env, cwd: o.cwd, stdio: ['pipe', 'pipe', stderr], shell: false });
    this.child = child;
    this.exited = new Promise((resolve) => child.once('close', () => resolve()));
    const target = o.stderr;
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (chunk: string) => this.onStderr(chunk));
    child.stdout?.on('data', (chunk: Buffer) => this.onStdout(chunk));
    child.stdout?.on('error', (error) => this.onerror?.(error));
    child.stdin?.on('error', (error) => this.onerror?.(error));
    child.once('close', (code, signal) => {
      if (this.exitReason === '') this.exitReason = signal ? `signal ${signal}` : `exit code ${code ?? '?'}`;
      this.onclose?.();
    });
    return new Promise((resolve, reject) => {
      child.once('spawn', () => {
        if (target.kind === 'log') {
          const line = [o.command, ...o.args].join(' ');
          appendLog(target.file, `# ${new Date().toISOString()} pid ${child.pid} started: ${line}\n`);
        }
        resolve();
      });
      child.once('error', (error) => {
        // a spawn failure (ENOENT...) ends the process before it ran; later errors leave it to 'close'
        if (this.exitReason === '' && child.pid === undefined) this.exitReason = error.message;
        reject(error);
        this.onerror?.(error);
      });
    });
  }

  private onStderr(chunk: string): void {
    this.tail = (this.tail + chunk).slice(-STDERR_TAIL_CHARS);
    const target = this.options.stderr;
    if (target.kind !== 'log') return;
    const lines = chunk.replace(/\n$/, '').split('\n');
    appendLog(target.file, lines.map((l) => `[${this.child?.pid}] ${l}\n`).join(''));
  }

  private onStdout(chunk: Buffer): void {
    this.buffer.append(chunk);
    for (;;) {
      let message: JSONRPCMessage | null;
      try {
        message = this.buffer.readMessage();
      } catch (error) {
        // a line that is not JSON-RPC (a server logging to stdout): reported, the stream goes on
        this.onerror?.(error as Error);
        continue;
      }
      if (message === null) return;
      this.onmessage?.(message);
    }
  }

  send(message: JSONRPCMessage): Promise<void> {
    const stdin = this.child?.stdin;
    if (!stdin || this.exitReason !== '') return Promise.reject(new Error('Not connected'));
    return new Promise((resolve) => {
      if (stdin.write(serializeMessage(message))) resolve();
      else stdin.once('drain', resolve);
    });
  }

  /** Stop the process (stdin end, SIGTERM, SIGKILL) and wait until it is gone. */
  async close(): Promise<void> {
    const child = this.child;
    if (!child || !this.exited) return;
    const gone = this.exited;
    const within = (ms: number) =>
      Promise.race([gone.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms).unref())]);
    if (child.exitCode === null && child.signalCode === null) {
      child.stdin?.end();
      if (!(await within(STOP_STEP_MS))) {
        child.kill('SIGTERM');
        if (!(await within(STOP_STEP_MS))) child.kill('SIGKILL');
      }
    }
    await gone;
    this.buffer.clear();
  }
}
