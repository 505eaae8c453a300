/**
 * Helpers (no assertions) for the tests against the pinned third-party MCP servers
 * (@modelcontextprotocol/server-everything and server-memory, dev dependencies): their start commands,
 * a marker argument to find their processes with `ps`, a byte tokenizer, a one-line JSON tool-call
 * format (any MCP tool name, independent of the real formats in src/env/format) and a scripted sampler
 * that lets a test act (kill a server) before a chosen policy turn.
 */
import { execFileSync } from 'node:child_process';
import type { SampleRequest, SampleResult, Sampler } from '../../src/engine/types.js';
import type { ToolCall, ToolCallFormat, ToolResult, ToolSpec } from '../../src/env/types.js';
import type { AgentRuntime } from '../../src/generate/types.js';
import type { EnvironmentFactory } from '../../src/env/types.js';
import type { mcpOptionsSchema } from '../../src/env/mcp.js';
import type { z } from 'zod';

/** The `env` section of an MCP server, as written in a config. */
export type McpInput = z.input<typeof mcpOptionsSchema>;

/** The pinned servers' entry points (defined once, in mcp-servers.ts). */
export { EVERYTHING_SERVER as EVERYTHING, MEMORY_SERVER as MEMORY } from './mcp-servers.js';
import { EVERYTHING_SERVER as EVERYTHING, MEMORY_SERVER as MEMORY } from './mcp-servers.js';

/** A unique argument the servers ignore: `ps` finds exactly this test's server processes by it. */
export function newMarker(): string {
  return `--arbor-test-${process.pid}-${Math.random().toString(36).slice(2, 10)}`;
}

/** `env` options starting server-everything over stdio (the marker is an extra, ignored argument). */
export function everythingOptions(marker: string, extra: Partial<McpInput> = {}): McpInput & { args: string[] } {
  return { kind: 'mcp', command: process.execPath, args: [EVERYTHING, 'stdio', marker], ...extra };
}

/** `env` options starting server-memory with its graph in `memoryFile`. */
export function memoryOptions(marker: string, memoryFile: string, extra: Partial<McpInput> = {}): McpInput {
  return {
    kind: 'mcp',
    command: process.execPath,
    args: [MEMORY, marker],
    env: { MEMORY_FILE_PATH: memoryFile },
    ...extra,
  };
}

/** Ids of the running processes whose command line contains `marker` (any parent: orphans too). */
export function processesWith(marker: string): number[] {
  const out = execFileSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' });
  return out
    .split('\n')
    .filter((line) => line.includes(marker) && !line.includes('ps -eo'))
    .map((line) => Number(line.trim().split(/\s+/)[0]));
}

/** The processes `processesWith(marker)` finds, killed (SIGKILL) so that a failing test does not hang on them. */
export function reapLeft(marker: string): number[] {
  const left = processesWith(marker);
  for (const pid of left) process.kill(pid, 'SIGKILL');
  return left;
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Poll `condition` every 25 ms for up to `ms`; returns whether it came true. */
export async function eventually(condition: () => boolean, ms = 10_000): Promise<boolean> {
  for (const t0 = Date.now(); Date.now() - t0 < ms; await sleep(25)) if (condition()) return true;
  return condition();
}

/** Bytes as tokens 0..255, EOS = 256. */
export const EOS = 256;
export const encodeText = (text: string): number[] => [...Buffer.from(text, 'utf8')];
export const decodeTokens = (tokens: number[]): string => Buffer.from(tokens.filter((t) => t < 256)).toString('utf8');

/** Calls are lines `call NAME {json}`; a turn without one is the final answer. */
export const lineFormat: ToolCallFormat = {
  name: 'line',
  renderTools: (tools: ToolSpec[]) => (tools.length ? `tools: ${tools.map((t) => t.name).join(' ')}\n` : ''),
  renderPrompt: (prompt, tools) => `${lineFormat.renderTools(tools)}${prompt}\n`,
  parseCalls(text: string): { calls: ToolCall[]; errors: ToolResult[] } {
    const calls: ToolCall[] = [];
    const errors: ToolResult[] = [];
    for (const line of text.split('\n')) {
      const m = /^call (\S+) (\{.*\})$/.exec(line.trim());
      if (!m) continue;
      try {
        calls.push({ name: m[1], arguments: JSON.parse(m[2]) as Record<string, unknown>, raw: line });
      } catch {
        errors.push({ name: m[1], content: `bad JSON in ${line}`, isError: true });
      }
    }
    return { calls, errors };
  },
  renderObservation: (results) => [{ text: `\n${results.map((r) => r.content).join('\n')}\n`, special: false }],
  finalAnswer: (text) => text.trim(),
};

/** An AgentRuntime over `factory` with the line format and byte tokens. */
export function lineRuntime(factory: EnvironmentFactory, tools: ToolSpec[]): AgentRuntime {
  return {
    factory,
    format: lineFormat,
    tools,
    encodePrompt: (item) => encodeText(lineFormat.renderPrompt(item.prompt, tools)),
    encodePieces: (pieces) => pieces.flatMap((p) => encodeText(p.text)),
    decodeTurn: decodeTokens,
  };
}

/**
 * Each continuation's text is `script(prompt, turn)` (turn = policy turns so far on its path);
 * `before(call)` runs before the sampler's call number `call` (0-based) answers.
 */
export class ScriptedSampler implements Sampler {
  readonly specificationVersion = 'arbor.sampler.v1' as const;
  readonly capabilities = {
    entropy: false,
    topLogprobs: false,
    forcedTokens: false,
    cacheHandles: false,
    prefixCaching: false,
  };
  calls = 0;

  constructor(
    private readonly script: (prompt: string, turn: number) => string,
    private readonly before: (call: number) => Promise<void> = async () => undefined,
  ) {}

  async sample(requests: SampleRequest[]): Promise<SampleResult[]> {
    await this.before(this.calls++);
    return requests.map((r) => {
      const text = decodeTokens(r.tokens);
      const turn = r.tokens.filter((t) => t === EOS).length;
      const completions = Array.from({ length: r.n ?? 1 }, () => {
        const tokens = [...encodeText(this.script(text, turn)), EOS];
        return { tokens, logprobs: tokens.map(() => -0.5), finishReason: 'stop' as const };
      });
      const tokensDecoded = completions.reduce((a, c) => a + c.tokens.length, 0);
      return {
        completions,
        usage: { promptTokensComputed: r.tokens.length, prefixTokensReused: 0, tokensDecoded },
        weightVersion: 0,
      };
    });
  }

  release(): void {}

  weightVersion(): number {
    return 0;
  }
}
