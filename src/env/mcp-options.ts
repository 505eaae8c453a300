/**
 * The `env: { kind: mcp }` options (the zod schema with every default and bound), the restart bound, and
 * what the run around an MCP factory provides (`McpRuntime`: where server stderr is logged, how exits are
 * reported). Shared by the connection (mcp-connection.ts) and the environments (mcp.ts).
 */
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';

export const mcpRestartSchema = z
  .object({
    maxRestarts: z
      .number()
      .int()
      .min(0)
      .max(1000)
      .default(3)
      .describe('server exits tolerated within windowSeconds (each is logged and restarted); one more fails the run'),
    windowSeconds: z
      .number()
      .min(1)
      .max(604_800)
      .default(600)
      .describe('the sliding window, in seconds, over which maxRestarts counts exits'),
  })
  .strict();

export const mcpOptionsSchema = z
  .object({
    kind: z.literal('mcp').describe('an MCP server started as a local process, spoken to over stdio'),
    command: z.string().min(1).default('node').describe('the program that starts the MCP server'),
    args: z.array(z.string()).default(['examples/mcp/kv-server.mjs']).describe('its arguments'),
    env: z
      .record(z.string())
      .default({})
      .describe("extra environment variables for the server (added to the SDK's safe defaults: HOME, PATH, USER...)"),
    cwd: z.string().default('').describe("the server's working directory ('' = Arbor's)"),
    stateful: z
      .boolean()
      .default(false)
      .describe(
        'false: one server process shared by all episodes, fork is free (tools must keep no per-episode state); ' +
          'true: one process per episode, fork starts a fresh process and replays the action log',
      ),
    startupTimeoutMs: z
      .number()
      .int()
      .min(100)
      .max(600_000)
      .default(10_000)
      .describe('time limit for starting a server process and listing its tools'),
    tools: z
      .array(z.string().min(1))
      .default([])
      .describe(
        'tool allow-list: only these tools are offered and callable (empty = every tool the server lists); ' +
          'a name the server does not list is an error at start',
      ),
    episodeSeconds: z
      .number()
      .min(0)
      .max(86_400)
      .default(0)
      .describe('wall-clock limit per episode in seconds: past it every call fails and the episode ends (0 = none)'),
    maxResultChars: z
      .number()
      .int()
      .min(16)
      .max(10_000_000)
      .default(20_000)
      .describe('a tool result longer than this is cut (the policy is told how much was cut)'),
    spareProcesses: z
      .number()
      .int()
      .min(0)
      .max(64)
      .default(1)
      .describe('stateful mode: server processes kept started and unused, so an episode or a fork need not wait'),
    stderr: z
      .enum(['log', 'inherit', 'ignore'])
      .default('log')
      .describe(
        "the server's stderr: appended to <run dir>/logs/mcp.stderr.log, lines prefixed by pid " +
          '(<tmp>/arbor-logs/ when there is no run directory: eval, config --check), ' +
          "shown in Arbor's stderr, or dropped",
      ),
    restart: mcpRestartSchema.default({}).describe('the bound on restarting a server process that exited mid-run'),
  })
  .strict();

export type McpOptions = z.infer<typeof mcpOptionsSchema>;

/** What the run around a factory provides: where logs go and how restarts are reported. */
export interface McpRuntime {
  /** Directory of `mcp.stderr.log` (default: `<os tmpdir>/arbor-logs`). */
  logDir?: string;
  /** One line per server exit / restart (default: Arbor's stderr). */
  log?: (line: string) => void;
}

/** The stderr log file of MCP servers under `logDir` (the temporary directory's when there is none). */
export function mcpStderrLogFile(logDir?: string): string {
  return join(logDir ?? join(tmpdir(), 'arbor-logs'), 'mcp.stderr.log');
}
