/**
 * MCP tool environments (issue 13): any Model Context Protocol server started as a local process
 * (stdio transport) becomes a tool environment. Its tools are listed (following `nextCursor`) and
 * offered to the policy as `ToolSpec`s; each policy turn's tool calls are sent with `tools/call`.
 *
 * Uses the official SDK v1 (`@modelcontextprotocol/sdk` 1.32): `Client` + `StdioClientTransport`, as
 * in modelcontextprotocol/typescript-sdk v1.x@2d889f2 `docs/client.md` (child env = the SDK's safe
 * default variables + `env`; `close()` ends stdin, then SIGTERM, then SIGKILL).
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
 * Errors are data: an unknown tool, bad arguments, a tool that reports `isError`, a timeout, or a
 * server that crashed become `ToolResult{isError: true}` with a clear message; `step()` never throws
 * for them (an abort of the caller's signal is rethrown unchanged).
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { configErrorFromIssue, DataError } from '../core/errors.js';
import type { TaskItem } from '../core/types.js';
import { resolvePositionalArguments } from './format/arbor.js';
import type { Environment, EnvironmentFactory, StepOptions, StepResult, ToolCall, ToolResult, ToolSpec } from './types.js';

export const mcpOptionsSchema = z
  .object({
    kind: z.literal('mcp').describe('an MCP server started as a local process, spoken to over stdio'),
    command: z.string().min(1).default('node').describe('the program that starts the MCP server'),
    args: z.array(z.string()).default(['examples/mcp/kv-server.mjs']).describe('its arguments'),
    env: z.record(z.string()).default({}).describe("extra environment variables for the server (added to the SDK's safe defaults: HOME, PATH, USER...)"),
    cwd: z.string().default('').describe("the server's working directory ('' = Arbor's)"),
    stateful: z
      .boolean()
      .default(false)
      .describe('false: one server process shared by all episodes, fork is free (tools must keep no per-episode state); true: one process per episode, fork starts a fresh process and replays the action log'),
    startupTimeoutMs: z.number().int().min(100).max(600_000).default(10_000).describe('time limit for starting a server process and listing its tools'),
    tools: z.array(z.string().min(1)).default([]).describe('tool allow-list: only these tools are offered and callable (empty = every tool the server lists)'),
    episodeSeconds: z.number().min(0).max(86_400).default(0).describe('wall-clock limit per episode in seconds: past it every call fails and the episode ends (0 = none)'),
    maxResultChars: z.number().int().min(16).max(10_000_000).default(20_000).describe('a tool result longer than this is cut (the policy is told how much was cut)'),
    spareProcesses: z.number().int().min(0).max(64).default(1).describe('stateful mode: server processes kept started and unused, so a new episode or a fork does not wait for a process to start'),
    stderr: z.enum(['inherit', 'ignore']).default('inherit').describe("the server's stderr: shown in Arbor's stderr, or dropped"),
  })
  .strict();

export type McpOptions = z.infer<typeof mcpOptionsSchema>;

/** One logged call (what `fork()` replays in stateful mode). */
interface LoggedCall {
  name: string;
  arguments: Record<string, unknown>;
}

/** Outcome of one call on a connection. */
interface CallOutcome {
  result: ToolResult;
  timedOut: boolean;
}

/**
 * The call's JSON arguments, or the error result when the tool is not offered or the arguments are
 * positional text (the `arbor` format) that does not fit the tool's schema.
 */
export function checkCall(call: ToolCall, tools: ToolSpec[]): { args: Record<string, unknown> } | { error: ToolResult } {
  const spec = tools.find((t) => t.name === call.name);
  if (spec === undefined) {
    return { error: { name: call.name, content: `unknown tool ${JSON.stringify(call.name)}; available tools: ${tools.map((t) => t.name).join(', ') || '(none)'}`, isError: true } };
  }
  const resolved = resolvePositionalArguments(call.arguments, spec.inputSchema);
  return 'error' in resolved ? { error: { name: call.name, content: `${call.name}: ${resolved.error}`, isError: true } } : resolved;
}

/** `[label]` of the server command, for messages. */
function describeCommand(o: McpOptions): string {
  return [o.command, ...o.args].join(' ');
}

/** Tool result content as text: text parts joined by newlines, other parts summarised. */
export function contentToText(result: Record<string, unknown>): string {
  const parts = Array.isArray(result.content) ? (result.content as Array<Record<string, unknown>>) : [];
  const texts = parts.map((p) => {
    if (p.type === 'text') return String(p.text ?? '');
    if (p.type === 'resource_link') return `[resource ${String(p.uri ?? '')}]`;
    if (p.type === 'resource') {
      const r = (p.resource ?? {}) as Record<string, unknown>;
      return typeof r.text === 'string' ? r.text : `[resource ${String(r.uri ?? '')}]`;
    }
    return `[${String(p.type)} ${String(p.mimeType ?? '')}]`.replace(' ]', ']');
  });
  if (texts.length === 0 && result.structuredContent !== undefined) return JSON.stringify(result.structuredContent);
  return texts.join('\n');
}

function truncate(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}…[${text.length - max} more characters cut]`;
}

/** A ToolSpec from a `tools/list` entry (the `$schema` marker is dropped: it only costs tokens). */
function toToolSpec(tool: { name: string; description?: string; inputSchema: Record<string, unknown> }): ToolSpec {
  const { $schema: _drop, ...inputSchema } = tool.inputSchema;
  return { name: tool.name, description: tool.description ?? '', inputSchema };
}

/** One running server process and its MCP client session. */
export class McpConnection {
  private closed = false;
  /** Why the process is gone ('' while it runs). */
  exitReason = '';

  private constructor(
    private readonly client: Client,
    private readonly transport: StdioClientTransport,
    readonly label: string,
    readonly tools: ToolSpec[],
  ) {}

  /** Spawn the server, run `initialize`, list its tools (all pages), within `startupTimeoutMs`. */
  static async start(o: McpOptions): Promise<McpConnection> {
    const label = describeCommand(o);
    const transport = new StdioClientTransport({
      command: o.command,
      args: o.args,
      env: o.env,
      cwd: o.cwd === '' ? undefined : o.cwd,
      stderr: o.stderr,
    });
    const client = new Client({ name: 'arbor', version: '0.1.0' });
    const deadline = Date.now() + o.startupTimeoutMs;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within startupTimeoutMs=${o.startupTimeoutMs}`)), o.startupTimeoutMs);
    });
    try {
      const tools = await Promise.race([McpConnection.handshake(client, transport, deadline), timeout]);
      const allow = new Set(o.tools);
      const offered = o.tools.length === 0 ? tools : tools.filter((t) => allow.has(t.name));
      const conn = new McpConnection(client, transport, label, offered);
      client.onclose = () => conn.markExited('the connection closed');
      return conn;
    } catch (cause) {
      await client.close().catch(() => undefined);
      throw new DataError(`env.command: cannot start MCP server \`${label}\`: ${(cause as Error).message}`, undefined, undefined, 'env.command', { cause });
    } finally {
      clearTimeout(timer);
    }
  }

  private static async handshake(client: Client, transport: StdioClientTransport, deadline: number): Promise<ToolSpec[]> {
    await client.connect(transport, { timeout: Math.max(1, deadline - Date.now()) });
    const tools: ToolSpec[] = [];
    let cursor: string | undefined;
    do {
      const page = await client.listTools(cursor === undefined ? {} : { cursor }, { timeout: Math.max(1, deadline - Date.now()) });
      for (const t of page.tools) tools.push(toToolSpec(t as { name: string; description?: string; inputSchema: Record<string, unknown> }));
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    return tools;
  }

  /** The server process id (null once it is gone). */
  get pid(): number | null {
    return this.transport.pid;
  }

  get alive(): boolean {
    return !this.closed && this.exitReason === '';
  }

  /** Called once when the process is found gone (not after close()). */
  onExit: (() => void) | undefined;

  private markExited(reason: string): void {
    if (this.exitReason !== '') return;
    this.exitReason = reason;
    if (!this.closed) this.onExit?.();
  }

  /** Call one tool; every failure comes back as an error result (an abort is rethrown). */
  async call(call: LoggedCall, timeoutMs: number, maxChars: number, signal?: AbortSignal): Promise<CallOutcome> {
    const fail = (content: string, timedOut = false): CallOutcome => ({ result: { name: call.name, content, isError: true }, timedOut });
    if (!this.alive) return fail(`tool ${call.name} failed: the MCP server \`${this.label}\` is not running (${this.exitReason || 'closed'})`);
    try {
      const r = (await this.client.callTool({ name: call.name, arguments: call.arguments }, undefined, { timeout: timeoutMs, signal })) as Record<string, unknown>;
      return { result: { name: call.name, content: truncate(contentToText(r), maxChars), isError: r.isError === true }, timedOut: false };
    } catch (error) {
      if (signal?.aborted) throw signal.reason ?? error;
      if (error instanceof McpError && error.code === ErrorCode.RequestTimeout) return fail(`tool ${call.name} timed out after ${timeoutMs} ms`, true);
      if (error instanceof McpError && error.code === ErrorCode.ConnectionClosed) this.markExited('the server exited');
      if (!this.alive || /not connected/i.test((error as Error).message)) {
        this.markExited('the server exited');
        return fail(`tool ${call.name} failed: the MCP server \`${this.label}\` exited`);
      }
      return fail(`tool ${call.name} failed: ${(error as Error).message}`);
    }
  }

  /** Stop the process (stdin end, SIGTERM, SIGKILL: the SDK's sequence) and wait for it. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.client.close().catch(() => undefined);
  }
}

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

  async reset(_item: TaskItem, _options: { seed: number; signal?: AbortSignal; timeoutMs: number }): Promise<{ observation: string }> {
    const s = this.factory.options.episodeSeconds;
    this.state = { log: [], deadline: s > 0 ? Date.now() + s * 1000 : Infinity, done: false };
    return { observation: '' };
  }

  /** `parseErrors` (optional, as `tool-env.ts`'s ToolAction): a turn whose calls were all malformed does not end the episode. */
  async step(action: { text: string; calls: ToolCall[]; parseErrors?: ToolResult[] }, options: StepOptions): Promise<StepResult> {
    const metrics = { toolCalls: action.calls.length, toolErrors: 0, toolTimeouts: 0 };
    if (action.calls.length === 0 && (action.parseErrors?.length ?? 0) > 0 && !this.state.done) return { results: [], done: false, metrics };
    if (action.calls.length === 0 || this.state.done) {
      this.state.done = true;
      return { results: [], done: true, metrics };
    }
    const results: ToolResult[] = [];
    for (const call of action.calls) {
      const left = this.state.deadline - Date.now();
      const checked = checkCall(call, this.tools);
      let outcome: CallOutcome;
      if (left <= 0) {
        this.state.done = true;
        outcome = { result: { name: call.name, content: `tool ${call.name} not called: the episode's time limit (episodeSeconds=${this.factory.options.episodeSeconds}) is spent`, isError: true }, timedOut: true };
      } else if ('error' in checked) {
        outcome = { result: checked.error, timedOut: false };
      } else {
        const logged = { name: call.name, arguments: checked.args };
        this.state.log.push(logged);
        outcome = await this.conn.call(logged, Math.max(1, Math.min(options.timeoutMs, left)), this.factory.options.maxResultChars, options.signal);
      }
      results.push(outcome.result);
      if (outcome.result.isError) metrics.toolErrors++;
      if (outcome.timedOut) metrics.toolTimeouts++;
    }
    return { results, done: this.state.done, metrics };
  }

  async fork(): Promise<Environment> {
    const state: EpisodeState = { ...this.state, log: [...this.state.log] };
    if (!this.owned) return new McpEnvironment(this.factory, this.conn, false, state);
    let failure = '';
    for (let attempt = 0; attempt < 2; attempt++) {
      // a second attempt covers a spare process that died while it waited
      const conn = await this.factory.startOwned();
      if (await this.replay(conn, state.log)) return new McpEnvironment(this.factory, conn, true, state);
      failure = conn.exitReason || 'exited';
      await this.factory.release(conn);
    }
    throw new DataError(`env: fork: the MCP server \`${this.conn.label}\` stopped while replaying the episode's ${state.log.length} calls (${failure})`, undefined, undefined, 'env.stateful');
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

/** Holds the shared process (stateless mode) or tracks the per-episode ones (stateful mode). */
class McpFactory implements EnvironmentFactory {
  readonly kind = 'mcp';
  private shared: Promise<McpConnection> | undefined;
  private readonly live = new Set<McpConnection>();
  /** Started, unused processes (stateful mode), so an episode or a fork need not wait for a spawn. */
  private spares: Array<Promise<McpConnection>> = [];
  /** Bumped by close(): a process whose start began before it is stopped as soon as it is up. */
  private generation = 0;

  constructor(readonly options: McpOptions) {}

  async create(): Promise<Environment> {
    const fresh: EpisodeState = { log: [], deadline: Infinity, done: false };
    if (this.options.stateful) return new McpEnvironment(this, await this.startOwned(), true, fresh);
    return new McpEnvironment(this, await this.sharedConnection(), false, fresh);
  }

  /** The shared process, restarted (once, however many episodes ask) if it died since the last episode began. */
  private async sharedConnection(): Promise<McpConnection> {
    const current = this.shared;
    if (current === undefined) return (this.shared = this.spawn());
    const conn = await current.catch(() => undefined);
    if (conn?.alive) return conn;
    if (this.shared !== current && this.shared !== undefined) return this.shared;
    if (conn !== undefined) void this.release(conn);
    return (this.shared = this.spawn());
  }

  private async spawn(): Promise<McpConnection> {
    const generation = this.generation;
    const conn = await McpConnection.start(this.options);
    if (generation !== this.generation) {
      await conn.close();
      throw new DataError(`env: the MCP environment was closed while \`${conn.label}\` started`, undefined, undefined, 'env');
    }
    this.live.add(conn);
    return conn;
  }

  private refill(): void {
    while (this.spares.length < this.options.spareProcesses) {
      const p = this.spawn();
      this.spares.push(p);
      // a spare that dies while it waits is dropped and replaced; one that failed to start is noticed when taken
      p.then(
        (conn) => {
          conn.onExit = () => {
            const at = this.spares.indexOf(p);
            if (at < 0) return;
            this.spares.splice(at, 1);
            void this.release(conn);
            this.refill();
          };
        },
        () => undefined,
      );
    }
  }

  /** A process of its own for one episode (stateful mode): a ready spare if there is one. */
  async startOwned(): Promise<McpConnection> {
    while (this.spares.length > 0) {
      const next = this.spares.shift()!;
      this.refill();
      const conn = await next.catch(() => undefined);
      if (conn !== undefined) conn.onExit = undefined;
      if (conn?.alive) return conn;
      if (conn !== undefined) void this.release(conn);
    }
    const conn = await this.spawn();
    this.refill();
    return conn;
  }

  async release(conn: McpConnection): Promise<void> {
    this.live.delete(conn);
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

/** The factory for `env: { kind: mcp, ... }` (options are parsed with `mcpOptionsSchema`). */
export function mcpEnvironmentFactory(options: z.input<typeof mcpOptionsSchema> | McpOptions): EnvironmentFactory {
  const parsed = mcpOptionsSchema.safeParse(options);
  if (!parsed.success) throw configErrorFromIssue('env', parsed.error.issues[0]);
  return new McpFactory(parsed.data);
}
