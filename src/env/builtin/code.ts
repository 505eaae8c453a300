/**
 * Built-in `code` environment: one stateless tool, `run_python(code)` or `run_js(code)`, that runs
 * the program in the code verifier's sandbox (src/filter/sandbox: own network namespace, per-run uid,
 * rlimits, language guard) with small limits and answers with its stdout. A non-zero exit is an error
 * result with the tail of stderr; a limit hit (wall, cpu, memory, output) is an error result naming it.
 */
import { z } from 'zod';
import { runSandboxed, type SandboxLanguage, type SandboxLimits } from '../../filter/sandbox/index.js';
import { tool, type ArborTool } from '../tools.js';
import { toolEnvironmentFactory } from '../tool-env.js';
import type { EnvironmentFactory } from '../types.js';

export const codeEnvOptions = z
  .object({
    kind: z.literal('code'),
    language: z.enum(['python', 'javascript']).default('python').describe('the tool: run_python or run_js'),
    wallMs: z.number().int().min(100).max(60_000).default(3000).describe('wall-clock limit per run (ms)'),
    cpuSeconds: z.number().int().min(1).max(60).default(2).describe('CPU limit per run (s)'),
    memoryMB: z.number().int().min(16).max(4096).default(256).describe('memory limit per run (MB)'),
    outputBytes: z
      .number()
      .int()
      .min(64)
      .max(1_048_576)
      .default(16_384)
      .describe('stdout+stderr limit per run (bytes)'),
    maxObservationChars: z
      .number()
      .int()
      .min(16)
      .max(100_000)
      .default(1000)
      .describe('longest tool output passed back'),
  })
  .strict();

export type CodeEnvOptions = z.infer<typeof codeEnvOptions>;

const defaults = codeEnvOptions.parse({ kind: 'code' });

/** The sandboxed run tool for `language` with `limits`. */
export function codeTool(
  language: SandboxLanguage = 'python',
  limits: Partial<SandboxLimits> = {},
): ArborTool<{ code: string }, string> {
  const lang = language === 'python' ? 'Python 3' : 'JavaScript (Node)';
  return tool({
    description: `Run a ${lang} program in a sandbox (no network, small limits) and return what it prints.`,
    inputSchema: z.object({ code: z.string().min(1).max(20_000).describe('the program') }),
    execute: async ({ code }, { abortSignal }) => {
      const r = await runSandboxed({ language, code, limits: { maxProcesses: 8, ...limits }, signal: abortSignal });
      if (r.killedReason || r.timedOut || r.outputTruncated)
        throw new Error(
          `limit exceeded (${r.killedReason ?? (r.timedOut ? 'wall' : 'output')})${r.stdout ? `; output so far: ${r.stdout.slice(0, 200)}` : ''}`,
        );
      if (r.exitCode !== 0)
        throw new Error(`exit code ${r.exitCode}: ${r.stderr.trim().split('\n').slice(-3).join('\n')}`);
      return r.stdout;
    },
  });
}

export function codeEnvironmentFactory(options: Partial<CodeEnvOptions> = {}): EnvironmentFactory {
  const o = { ...defaults, ...options };
  const name = o.language === 'python' ? 'run_python' : 'run_js';
  const limits = { wallMs: o.wallMs, cpuSeconds: o.cpuSeconds, memoryMB: o.memoryMB, outputBytes: o.outputBytes };
  return toolEnvironmentFactory({
    kind: 'code',
    tools: { [name]: codeTool(o.language, limits) },
    maxObservationChars: o.maxObservationChars,
  });
}
