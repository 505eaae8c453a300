/**
 * One MCP server process and its client session (`McpConnection`): started through our stdio transport
 * (mcp-process.ts), initialised, its tools listed (all pages) and checked against the allow-list; calls
 * sent with `tools/call`, with tool errors and timeouts as data and a process exit reported as `lost`.
 * Also the helpers that turn MCP payloads into Arbor's ToolSpec / ToolResult.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { ConfigError, DataError } from '../core/errors.js';
import { resolvePositionalArguments } from './format/arbor.js';
import { ServerProcessTransport, type StderrTarget } from './mcp-process.js';
import type { McpOptions } from './mcp-options.js';
import type { ToolCall, ToolResult, ToolSpec } from './types.js';

/** One logged call (what `fork()` replays in stateful mode). */
export interface LoggedCall {
  name: string;
  arguments: Record<string, unknown>;
}

/** Outcome of one call on a connection; `lost`: the server process exited (an infrastructure failure). */
export interface CallOutcome {
  result: ToolResult;
  timedOut: boolean;
  lost?: boolean;
}

/**
 * The call's JSON arguments, or the error result when the tool is not offered or the arguments are
 * positional text (the `arbor` format) that does not fit the tool's schema.
 */
export function checkCall(
  call: ToolCall,
  tools: ToolSpec[],
): { args: Record<string, unknown> } | { error: ToolResult } {
  const spec = tools.find((t) => t.name === call.name);
  if (spec === undefined) {
    const available = tools.map((t) => t.name).join(', ') || '(none)';
    const content = `unknown tool ${JSON.stringify(call.name)}; available tools: ${available}`;
    return { error: { name: call.name, content, isError: true } };
  }
  const resolved = resolvePositionalArguments(call.arguments, spec.inputSchema);
  if ('error' in resolved)
    return { error: { name: call.name, content: `${call.name}: ${resolved.error}`, isError: true } };
  return resolved;
}

/** The server command line, for messages. */
export function describeCommand(o: McpOptions): string {
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

/** The tools to offer: all, or the allow-list's, in the server's order; a name it does not list is a ConfigError. */
function allowedTools(listed: ToolSpec[], allow: string[], label: string): ToolSpec[] {
  if (allow.length === 0) return listed;
  const names = new Set(listed.map((t) => t.name));
  const missing = allow.findIndex((name) => !names.has(name));
  if (missing >= 0) {
    const offered = listed.map((t) => t.name).join(', ') || '(none)';
    const name = JSON.stringify(allow[missing]);
    const message = `env.tools.${missing}: the MCP server \`${label}\` offers no tool ${name}`;
    throw new ConfigError(`${message}; it offers: ${offered}`, `env.tools.${missing}`);
  }
  const wanted = new Set(allow);
  return listed.filter((t) => wanted.has(t.name));
}

/** One running server process and its MCP client session. */
export class McpConnection {
  private closed = false;
  /** Every tool the server listed (before the allow-list). */
  listed: ToolSpec[] = [];
  /** Called once when the process is found gone (not after close()). */
  onExit: (() => void) | undefined;

  private constructor(
    private readonly client: Client,
    private readonly transport: ServerProcessTransport,
    readonly label: string,
    readonly tools: ToolSpec[],
    /** The process id it started with (kept for messages once the process is gone). */
    readonly startPid: number | null,
  ) {}

  /** Spawn the server, run `initialize`, list its tools (all pages), within `startupTimeoutMs`. */
  static async start(o: McpOptions, stderr: StderrTarget): Promise<McpConnection> {
    const label = describeCommand(o);
    const cwd = o.cwd === '' ? undefined : o.cwd;
    const transport = new ServerProcessTransport({ command: o.command, args: o.args, env: o.env, cwd, stderr });
    const client = new Client({ name: 'arbor', version: '0.1.0' });
    const deadline = Date.now() + o.startupTimeoutMs;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      const message = `no answer within startupTimeoutMs=${o.startupTimeoutMs}`;
      timer = setTimeout(() => reject(new Error(message)), o.startupTimeoutMs);
    });
    try {
      const listed = await Promise.race([McpConnection.handshake(client, transport, deadline), timeout]);
      const conn = new McpConnection(client, transport, label, allowedTools(listed, o.tools, label), transport.pid);
      conn.listed = listed;
      client.onclose = () => conn.markExited();
      return conn;
    } catch (cause) {
      await client.close().catch(() => undefined);
      if (cause instanceof ConfigError) throw cause;
      const tail = transport.stderrTail ? `; its stderr ends: ${transport.stderrTail.slice(-500)}` : '';
      const message = `env.command: cannot start MCP server \`${label}\`: ${(cause as Error).message}${tail}`;
      throw new DataError(message, undefined, undefined, 'env.command', { cause });
    } finally {
      clearTimeout(timer);
    }
  }

  private static async handshake(
    client: Client,
    transport: ServerProcessTransport,
    deadline: number,
  ): Promise<ToolSpec[]> {
    const left = () => ({ timeout: Math.max(1, deadline - Date.now()) });
    await client.connect(transport, left());
    const tools: ToolSpec[] = [];
    let cursor: string | undefined;
    do {
      const page = await client.listTools(cursor === undefined ? {} : { cursor }, left());
      for (const t of page.tools) tools.push(toToolSpec(t as Parameters<typeof toToolSpec>[0]));
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    return tools;
  }

  /** The server process id (null once it is gone). */
  get pid(): number | null {
    return this.transport.pid;
  }

  /** Why the process is gone ('' while it runs): `signal SIGKILL`, `exit code 1`. */
  get exitReason(): string {
    return this.transport.exitReason;
  }

  /** The end of the process's stderr, for messages. */
  get stderrTail(): string {
    return this.transport.stderrTail;
  }

  get alive(): boolean {
    return !this.closed && this.exitReason === '';
  }

  private markExited(): void {
    if (!this.closed) this.onExit?.();
  }

  /** Call one tool; a tool's failure comes back as an error result, a lost server as `lost` (an abort is rethrown). */
  async call(call: LoggedCall, timeoutMs: number, maxChars: number, signal?: AbortSignal): Promise<CallOutcome> {
    const fail = (content: string, timedOut = false): CallOutcome => ({
      result: { name: call.name, content, isError: true },
      timedOut,
    });
    const lost = (): CallOutcome => ({ ...fail(`tool ${call.name} failed: ${this.describeExit()}`), lost: true });
    if (!this.alive) return lost();
    try {
      const params = { name: call.name, arguments: call.arguments };
      const r = (await this.client.callTool(params, undefined, { timeout: timeoutMs, signal })) as Record<
        string,
        unknown
      >;
      const content = truncate(contentToText(r), maxChars);
      return { result: { name: call.name, content, isError: r.isError === true }, timedOut: false };
    } catch (error) {
      if (signal?.aborted) throw signal.reason ?? error;
      if (error instanceof McpError && error.code === ErrorCode.RequestTimeout) {
        return fail(`tool ${call.name} timed out after ${timeoutMs} ms`, true);
      }
      const closed = error instanceof McpError && error.code === ErrorCode.ConnectionClosed;
      if (closed || !this.alive || /not connected/i.test((error as Error).message)) return lost();
      return fail(`tool ${call.name} failed: ${(error as Error).message}`);
    }
  }

  /** `the MCP server \`cmd\` (pid N) exited (signal SIGKILL)`, or `... was closed`. */
  describeExit(): string {
    const how = this.exitReason ? `exited (${this.exitReason})` : this.closed ? 'was closed' : 'exited';
    return `the MCP server \`${this.label}\` (pid ${this.startPid ?? '?'}) ${how}`;
  }

  /** Stop the process (stdin end, SIGTERM, SIGKILL) and wait until it is gone. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.client.close().catch(() => undefined);
  }
}
