/**
 * The `code` reward: run the response's program in the sandbox against the item's tests.
 *
 * The code is the last fenced block tagged python/py/python3, js/javascript/node/mjs/cjs or untagged
 * (```), else the whole response. Tests come from `item.meta`:
 * - `tests: [{ input?: string, expected: string }]`: the program reads `input` on stdin and must
 *   print `expected` (compared after trimming the whole output and trailing whitespace of each
 *   line; CRLF is treated as LF);
 * - or `testCode: string`: assert-style code appended after the program; passes when it exits 0.
 * Optional `meta.language` ('python' | 'javascript') overrides the block's tag.
 *
 * Reward = fraction of tests passed. `info.tests` holds each test's status: passed, wrong_answer,
 * runtime_error, timeout, memory or output_limit; `info.isolation` the sandbox layers in force.
 */
import { z } from 'zod';
import { DataError } from '../core/errors.js';
import type { TaskItem } from '../core/types.js';
import { runSandboxed, type SandboxLanguage, type SandboxResult } from './sandbox/run.js';
import type { SandboxLimits } from './sandbox/limits.js';
import { single, type RewardFunction } from './types.js';

export type TestStatus = 'passed' | 'wrong_answer' | 'runtime_error' | 'timeout' | 'memory' | 'output_limit';

export interface CodeTest {
  input?: string;
  expected: string;
}

export interface CodeRewardOptions {
  /** Language of the programs; default: meta.language, else the fenced block's tag, else python. */
  language?: SandboxLanguage;
  limits?: Partial<SandboxLimits>;
  name?: string;
  /** Tests run at the same time for one response (default 2). */
  concurrency?: number;
}

/** Limits per test run unless overridden. */
export const CODE_DEFAULT_LIMITS: Partial<SandboxLimits> = {
  wallMs: 10_000,
  cpuSeconds: 5,
  memoryMB: 512,
  maxProcesses: 16,
  outputBytes: 1024 * 1024,
};

const PY_TAGS = new Set(['python', 'py', 'python3']);
const JS_TAGS = new Set(['js', 'javascript', 'node', 'mjs', 'cjs', 'nodejs']);

/** The last python/js/untagged fenced block (and the language its tag names), else the whole text. */
export function extractCode(response: string): { code: string; language?: SandboxLanguage } {
  const re = /```[ \t]*([\w+-]*)[^\n]*\n([\s\S]*?)```/g;
  let last: { code: string; language?: SandboxLanguage } | undefined;
  for (const m of response.matchAll(re)) {
    const tag = m[1].toLowerCase();
    if (tag === '') last = { code: m[2] };
    else if (PY_TAGS.has(tag)) last = { code: m[2], language: 'python' };
    else if (JS_TAGS.has(tag)) last = { code: m[2], language: 'javascript' };
  }
  return last ?? { code: response };
}

/** Whole output trimmed, trailing whitespace of each line dropped, CRLF as LF. */
export function normalizeOutput(s: string): string {
  return s
    .replace(/\r\n?/g, '\n')
    .split('\n')
    .map((l) => l.trimEnd())
    .join('\n')
    .trim();
}

const metaSchema = z.object({
  tests: z
    .array(z.object({ input: z.string().optional(), expected: z.string() }).passthrough())
    .min(1)
    .optional(),
  testCode: z.string().min(1).optional(),
  language: z.enum(['python', 'javascript']).optional(),
});

/** Validate the item's tests; DataError naming the item and field when the shape is wrong. */
export function parseCodeMeta(item: TaskItem): { tests?: CodeTest[]; testCode?: string; language?: SandboxLanguage } {
  const meta = item.meta;
  if (!meta || (meta.tests === undefined && meta.testCode === undefined)) {
    throw new DataError(
      `item "${item.id}": code reward needs meta.tests (array of {input?, expected}) or meta.testCode (string)`,
      undefined,
      undefined,
      'meta.tests',
    );
  }
  const parsed = metaSchema.safeParse(meta);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = ['meta', ...issue.path]
      .map((p) => (typeof p === 'number' ? `[${p}]` : `.${p}`))
      .join('')
      .replace(/^\./, '')
      .replace(/\.\[/g, '[');
    throw new DataError(`item "${item.id}": ${field}: ${issue.message}`, undefined, undefined, field);
  }
  return parsed.data;
}

function statusOf(r: SandboxResult, passedCheck: () => boolean): TestStatus {
  if (r.outputTruncated || r.killedReason === 'output') return 'output_limit';
  if (r.timedOut || r.killedReason === 'wall' || r.killedReason === 'cpu') return 'timeout';
  if (r.killedReason === 'memory') return 'memory';
  if (r.exitCode !== 0 || r.signal) return 'runtime_error';
  return passedCheck() ? 'passed' : 'wrong_answer';
}

async function mapLimit<T, R>(items: T[], limit: number, fn: (t: T, i: number) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i], i);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, worker));
  return out;
}

export function codeReward(options: CodeRewardOptions = {}): RewardFunction {
  const limits = { ...CODE_DEFAULT_LIMITS, ...options.limits };
  const concurrency = options.concurrency ?? 2;
  return {
    name: options.name ?? 'code',
    async score({ response, item }, context) {
      const meta = parseCodeMeta(item);
      const extracted = extractCode(response);
      const language = options.language ?? meta.language ?? extracted.language ?? 'python';
      const signal = context?.signal;
      const runs: Array<{ code: string; stdin?: string; expected?: string }> = meta.tests
        ? meta.tests.map((t) => ({ code: extracted.code, stdin: t.input, expected: t.expected }))
        : [{ code: `${extracted.code}\n\n${meta.testCode}\n` }];
      let isolation: unknown;
      const results = await mapLimit(runs, concurrency, async (run, index) => {
        if (signal?.aborted) throw signal.reason ?? new Error('aborted');
        const r = await runSandboxed({ language, code: run.code, stdin: run.stdin, limits, signal });
        if (r.killedReason === 'aborted') {
          const e = new Error('code reward aborted');
          e.name = 'AbortError';
          throw e;
        }
        isolation ??= r.isolation;
        const status = statusOf(
          r,
          () => run.expected === undefined || normalizeOutput(r.stdout) === normalizeOutput(run.expected),
        );
        return {
          index,
          status,
          wallMs: r.wallMs,
          ...(status === 'passed'
            ? {}
            : {
                stderr: r.stderr.slice(-500),
                ...(status === 'wrong_answer' ? { stdout: r.stdout.slice(0, 500) } : {}),
              }),
        };
      });
      const passed = results.filter((t) => t.status === 'passed').length;
      return single(this.name, passed / results.length, {
        language,
        passed,
        total: results.length,
        tests: results,
        isolation,
      });
    },
  };
}
