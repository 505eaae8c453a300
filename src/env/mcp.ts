/**
 * MCP tool environments: any Model Context Protocol server started as a local process
 * (stdio transport, mcp-process.ts) becomes a tool environment. Its tools are listed (following
 * `nextCursor`), checked against the `tools` allow-list, and offered to the policy as `ToolSpec`s; each
 * policy turn's tool calls are sent with `tools/call` through the official SDK v1 `Client`.
 *
 * Two process models (`stateful`):
 * - false (default): one server process shared by every episode of the run; `fork()` is free. Right
 *   for servers whose tools keep no per-episode state (search, calculators, read-only files). Episodes
 *   see each other's writes on a stateful server such as `examples/mcp/kv-server.mjs`.
 * - true: one process per episode; `fork()` starts a fresh process and replays the episode's action
 *   log (every call that reached the server, in order, results ignored). Replay assumes the server is
 *   deterministic; a call that timed out may or may not have changed the server's state, and is replayed
 *   like the others.
 *
 * Tool errors are data: an unknown tool, bad arguments, a tool that reports `isError` or a timeout
 * become `ToolResult{isError: true}`. A server process that exits is an infrastructure failure, not a
 * tool error: the call in flight, or any later call of an episode whose process died, throws a
 * recoverable `EnvironmentError` (the generator makes that episode's tree an error tree). Exits are
 * logged and the process is restarted (shared mode) or replaced (stateful mode) while fewer than
 * `restart.maxRestarts` exits fall in the last `restart.windowSeconds`; past that, or when a server
 * does not start again, every use of the factory throws a fatal `EnvironmentError` naming the command.
 * Server stderr goes to `<logDir>/mcp.stderr.log` by default (`stderr: log`), lines prefixed by pid.
 *
 * This file holds the environments and the factory (the supervisor); the options are in mcp-options.ts,
 * one process and its client session in mcp-connection.ts, the stdio transport in mcp-process.ts.
 */
import { z } from 'zod';
import { configErrorFromIssue, DataError, EnvironmentError } from '../core/errors.js';
import type { TaskItem } from '../core/types.js';
import { checkCall, describeCommand, McpConnection, type CallOutcome, type LoggedCall } from './mcp-connection.js';
import { mcpOptionsSchema, mcpStderrLogFile, type McpOptions, type McpRuntime } from './mcp-options.js';
import { appendLog, type StderrTarget } from './mcp-process.js';
import type {
  Environment,
  EnvironmentFactory,
  StepOptions,
  StepResult,
  ToolCall,
  ToolResult,
  ToolSpec,
} from './types.js';

export {
  mcpOptionsSchema,
  mcpRestartSchema,
  mcpStderrLogFile,
  type McpOptions,
  type McpRuntime,
} from './mcp-options.js';
export { checkCall, contentToText, McpConnection } from './mcp-connection.js';

/** Per-episode state an environment carries into its forks. */
interface EpisodeState {
  log: LoggedCall[];
  /** Date.now() deadline of the episode (Infinity = none), set at reset. */
  deadline: number;
  done: boolean;
}

class McpEnvironment implements Environment {
  constructor(
    private readonly factory: McpFactory,
    private conn: McpConnection,
    /** The connection belongs to this episode (stateful mode) and is closed with it. */
    private readonly owned: boolean,
    private state: EpisodeState,
  ) {}

  get tools(): ToolSpec[] {
    return this.conn.tools;
  }

  /** The server process this episode talks to (for tests and diagnostics). */
  get pid(): number | null {
    return this.conn.pid;
  }

  async reset(_item: TaskItem, _options: { seed: number; timeoutMs: number }): Promise<{ observation: string }> {
    const s = this.factory.options.episodeSeconds;
    this.state = { log: [], deadline: s > 0 ? Date.now() + s * 1000 : Infinity, done: false };
    return { observation: '' };
  }

  /**
   * `parseErrors` (optional, as `tool-env.ts`'s ToolAction): a turn whose calls were all malformed does
   * not end the episode. Throws `EnvironmentError` when the server process is gone (see the header).
   */
  async step(
    action: { text: string; calls: ToolCall[]; parseErrors?: ToolResult[] },
    options: StepOptions,
  ): Promise<StepResult> {
    const metrics = { toolCalls: action.calls.length, toolErrors: 0, toolTimeouts: 0 };
    const onlyMalformed = action.calls.length === 0 && (action.parseErrors?.length ?? 0) > 0;
    if (onlyMalformed && !this.state.done) return { results: [], done: false, metrics };
    if (action.calls.length === 0 || this.state.done) {
      this.state.done = true;
      return { results: [], done: true, metrics };
    }
    const results: ToolResult[] = [];
    for (const call of action.calls) {
      const outcome = await this.callOne(call, options);
      if (outcome.lost) throw this.factory.lostError(this.conn, call.name);
      results.push(outcome.result);
      if (outcome.result.isError) metrics.toolErrors++;
      if (outcome.timedOut) metrics.toolTimeouts++;
    }
    return { results, done: this.state.done, metrics };
  }

  private async callOne(call: ToolCall, options: StepOptions): Promise<CallOutcome> {
    const o = this.factory.options;
    const left = this.state.deadline - Date.now();
    if (left <= 0) {
      this.state.done = true;
      const limit = `the episode's time limit (episodeSeconds=${o.episodeSeconds}) is spent`;
      const content = `tool ${call.name} not called: ${limit}`;
      return { result: { name: call.name, content, isError: true }, timedOut: true };
    }
    const checked = checkCall(call, this.tools);
    if ('error' in checked) return { result: checked.error, timedOut: false };
    const logged = { name: call.name, arguments: checked.args };
    this.state.log.push(logged);
    return this.conn.call(logged, Math.max(1, Math.min(options.timeoutMs, left)), o.maxResultChars, options.signal);
  }

  async fork(): Promise<Environment> {
    const state: EpisodeState = { ...this.state, log: [...this.state.log] };
    if (!this.conn.alive) throw this.factory.lostError(this.conn, 'fork');
    if (!this.owned) return new McpEnvironment(this.factory, this.conn, false, state);
    let lost: McpConnection | undefined;
    for (let attempt = 0; attempt < 2; attempt++) {
      // a second attempt covers a process that died while it waited as a spare or replayed
      const conn = await this.factory.startOwned();
      if (await this.replay(conn, state.log)) return new McpEnvironment(this.factory, conn, true, state);
      lost = conn;
      await this.factory.release(conn);
    }
    throw this.factory.lostError(lost!, `fork (replaying the episode's ${state.log.length} calls)`);
  }

  /** Replay logged calls on a fresh process (results ignored); false when the process died. */
  private async replay(conn: McpConnection, log: LoggedCall[]): Promise<boolean> {
    for (const call of log) {
      await conn.call(call, this.factory.options.startupTimeoutMs, 16);
      if (!conn.alive) return false;
    }
    return conn.alive;
  }

  async close(): Promise<void> {
    if (this.owned) await this.factory.release(this.conn);
  }
}

/**
 * Holds the shared process (shared mode) or tracks the per-episode ones (stateful mode), and supervises
 * them: exits are counted in a sliding window, logged, and restarted within the bound.
 */
class McpFactory implements EnvironmentFactory {
  readonly kind = 'mcp';
  readonly label: string;
  private shared: Promise<McpConnection> | undefined;
  private readonly live = new Set<McpConnection>();
  /** Started, unused processes (stateful mode), so an episode or a fork need not wait for a spawn. */
  private spares: Array<Promise<McpConnection>> = [];
  private readonly spareOf = new Map<McpConnection, Promise<McpConnection>>();
  /** Bumped by close(): a process whose start began before it is stopped as soon as it is up. */
  private generation = 0;
  /** A process has started once: from then on a failed start is fatal (a restart that failed). */
  private startedOnce = false;
  /** Date.now() of each unexpected exit inside the restart window. */
  private exits: number[] = [];
  /** Set once the run cannot go on: every later use throws it. */
  private failure: EnvironmentError | undefined;
  readonly stderr: StderrTarget;
  private readonly log: (line: string) => void;

  constructor(
    readonly options: McpOptions,
    runtime: McpRuntime = {},
  ) {
    this.label = describeCommand(options);
    const file = mcpStderrLogFile(runtime.logDir);
    this.stderr = options.stderr === 'log' ? { kind: 'log', file } : { kind: options.stderr };
    this.log = runtime.log ?? ((line) => process.stderr.write(`${line}\n`));
  }

  /** The stderr log file (undefined unless `stderr: log`). */
  get stderrLogFile(): string | undefined {
    return this.stderr.kind === 'log' ? this.stderr.file : undefined;
  }

  async create(): Promise<Environment> {
    if (this.failure) throw this.failure;
    const fresh: EpisodeState = { log: [], deadline: Infinity, done: false };
    if (this.options.stateful) return new McpEnvironment(this, await this.startOwned(), true, fresh);
    return new McpEnvironment(this, await this.sharedConnection(), false, fresh);
  }

  /** The shared process (a process that exited was replaced when its exit was noticed). */
  private async sharedConnection(): Promise<McpConnection> {
    for (let attempt = 0; attempt < 3; attempt++) {
      this.shared ??= this.spawn();
      const current = this.shared;
      const conn = await current;
      if (conn.alive) return conn;
      if (this.failure) throw this.failure;
      if (this.shared === current) this.shared = undefined;
    }
    throw this.failure ?? this.lostError(await this.shared!, 'start');
  }

  private async spawn(): Promise<McpConnection> {
    const generation = this.generation;
    let conn: McpConnection;
    try {
      conn = await McpConnection.start(this.options, this.stderr);
    } catch (cause) {
      if (generation !== this.generation || !this.startedOnce) throw cause;
      throw this.fail(`exited and could not be started again (${(cause as Error).message})`, cause);
    }
    if (generation !== this.generation) {
      await conn.close();
      const message = `env: the MCP environment was closed while \`${conn.label}\` started`;
      throw new DataError(message, undefined, undefined, 'env');
    }
    this.startedOnce = true;
    this.live.add(conn);
    conn.onExit = () => this.noticeExit(conn);
    return conn;
  }

  /** A process exited on its own: count it, log it, replace it (or fail the factory past the bound). */
  private noticeExit(conn: McpConnection): void {
    if (!this.live.delete(conn)) return;
    const { maxRestarts, windowSeconds } = this.options.restart;
    const now = Date.now();
    this.exits = [...this.exits.filter((t) => t > now - windowSeconds * 1000), now];
    const what = conn.describeExit();
    if (this.exits.length > maxRestarts) {
      const bound = `env.restart.maxRestarts=${maxRestarts} within windowSeconds=${windowSeconds}`;
      const how = conn.exitReason ? `exited (${conn.exitReason})` : 'exited';
      this.fail(`(pid ${conn.startPid ?? '?'}) ${how}: exit ${this.exits.length}, past the restart bound (${bound})`);
      return;
    }
    const spare = this.spareOf.get(conn);
    const budget = `restart ${this.exits.length} of at most ${maxRestarts} within ${windowSeconds} s`;
    const role = spare
      ? `a spare process; starting another (${budget})`
      : this.options.stateful
        ? `an episode's process; its episode is cut, new episodes start new processes (${budget})`
        : `the shared process; restarting it (${budget})`;
    this.report(`arbor: ${what}, ${role}${this.tailNote(conn)}`);
    if (spare) {
      this.spareOf.delete(conn);
      this.spares = this.spares.filter((p) => p !== spare);
      void conn.close();
      this.refill();
    } else if (!this.options.stateful) {
      const restarted = this.spawn();
      restarted.catch(() => undefined);
      this.shared = restarted;
      void conn.close();
    }
  }

  private tailNote(conn: McpConnection): string {
    const tail = conn.stderrTail.split('\n').slice(-3).join(' | ');
    const where = this.stderrLogFile ? `; its stderr is in ${this.stderrLogFile}` : '';
    return tail ? `; its stderr ends: ${tail.slice(-300)}${where}` : where;
  }

  private report(line: string): void {
    this.log(line);
    if (this.stderr.kind === 'log') appendLog(this.stderr.file, `# ${new Date().toISOString()} ${line}\n`);
  }

  /** The run cannot go on: remember (and log) the fatal error naming the server command. */
  private fail(reason: string, cause?: unknown): EnvironmentError {
    if (!this.failure) {
      const message = `MCP server \`${this.label}\` ${reason}; the run cannot go on`;
      this.failure = new EnvironmentError(message, { server: this.label, recoverable: false }, { cause });
      this.report(`arbor: ${message}`);
    }
    return this.failure;
  }

  /**
   * The error an episode gets when its process is gone: recoverable (the episode is cut, its tree
   * becomes an error tree) unless the factory has failed for good.
   */
  lostError(conn: McpConnection, during: string): EnvironmentError {
    if (this.failure) return this.failure;
    const message = `${during}: ${conn.describeExit()}; the episode is cut (an infrastructure failure, not trained on)`;
    return new EnvironmentError(message, { server: this.label, recoverable: true });
  }

  private refill(): void {
    while (!this.failure && this.spares.length < this.options.spareProcesses) {
      const p = this.spawn();
      this.spares.push(p);
      // a spare that failed to start is noticed when taken (the failure is recorded by spawn)
      p.then((conn) => this.spareOf.set(conn, p)).catch(() => undefined);
    }
  }

  /** A process of its own for one episode (stateful mode): a ready spare if there is one. */
  async startOwned(): Promise<McpConnection> {
    if (this.failure) throw this.failure;
    while (this.spares.length > 0) {
      const next = this.spares.shift()!;
      this.refill();
      const conn = await next.catch(() => undefined);
      // spawn() may have recorded a failure during the await (TypeScript keeps the narrowing from above)
      if (this.failure) throw this.failure as EnvironmentError;
      if (conn !== undefined) this.spareOf.delete(conn);
      if (conn?.alive) return conn;
      if (conn !== undefined) void this.release(conn);
    }
    const conn = await this.spawn();
    this.refill();
    return conn;
  }

  async release(conn: McpConnection): Promise<void> {
    this.live.delete(conn);
    this.spareOf.delete(conn);
    await conn.close();
  }

  /** The ids of every server process this factory runs now (spares included): diagnostics and tests. */
  processIds(): number[] {
    return [...this.live].map((c) => c.pid).filter((p): p is number => p !== null);
  }

  async close(): Promise<void> {
    this.generation++;
    this.shared = undefined;
    this.spares = [];
    await Promise.all([...this.live].map((c) => this.release(c)));
  }
}

/** What `listMcpTools` reports: every tool the server lists, and the ones offered after the allow-list. */
export interface McpToolListing {
  command: string;
  pid: number | null;
  listed: ToolSpec[];
  offered: ToolSpec[];
  stderrLogFile?: string;
}

/**
 * Start the server once, list its tools, check the allow-list, and stop it (`config --check --servers`).
 * Throws what a run would throw at start (DataError: cannot start; ConfigError: `env.tools.<i>`).
 */
export async function listMcpTools(
  options: z.input<typeof mcpOptionsSchema>,
  runtime: McpRuntime = {},
): Promise<McpToolListing> {
  const factory = mcpEnvironmentFactory(options, runtime) as McpFactory;
  const conn = await McpConnection.start(factory.options, factory.stderr);
  try {
    return {
      command: factory.label,
      pid: conn.pid,
      listed: conn.listed,
      offered: conn.tools,
      stderrLogFile: factory.stderrLogFile,
    };
  } finally {
    await conn.close();
  }
}

/** The factory for `env: { kind: mcp, ... }` (options are parsed with `mcpOptionsSchema`). */
export function mcpEnvironmentFactory(
  options: z.input<typeof mcpOptionsSchema> | McpOptions,
  runtime: McpRuntime = {},
): EnvironmentFactory & { readonly stderrLogFile?: string } {
  const parsed = mcpOptionsSchema.safeParse(options);
  if (!parsed.success) throw configErrorFromIssue('env', parsed.error.issues[0]);
  return new McpFactory(parsed.data, runtime);
}
