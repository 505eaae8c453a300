/**
 * Resource limits for one sandboxed run, with defaults and validation.
 *
 * How each limit is enforced (see run.ts):
 * - `wallMs`: a timer in the parent; on expiry the whole process group (and, when the sandbox runs
 *   under its own uid, every process of that uid) is SIGKILLed.
 * - `cpuSeconds`: RLIMIT_CPU (soft = cpuSeconds → SIGXCPU, hard = cpuSeconds + 1 → SIGKILL).
 * - `memoryMB`: RLIMIT_AS. Python gets exactly `memoryMB` of address space. Node 20 reserves a lot
 *   of virtual memory up front (code range, heap cage, thread stacks: measured ~750–800 MB before a
 *   line of user code runs), so JavaScript gets RLIMIT_AS = memoryMB + JS_ADDRESS_SPACE_OVERHEAD_MB
 *   and `--max-old-space-size=memoryMB` bounds the JS heap itself. Off-heap buffers (Buffer.alloc)
 *   are bounded only by the address-space limit, i.e. by roughly memoryMB + a few hundred MB.
 * - `maxProcesses`: RLIMIT_NPROC. The kernel counts tasks (threads included) per real uid, so it is
 *   only a per-run bound when the run has its own uid (root: a fresh uid per run). Node uses ~10
 *   threads of its own, so JavaScript runs get maxProcesses + JS_THREAD_ALLOWANCE. Without a uid of
 *   its own (non-root) the current task count of the user is added so the program can start at all.
 * - `outputBytes`: stdout + stderr together; beyond it the output is truncated and the group killed.
 * - `fileBytes`: RLIMIT_FSIZE (largest file the program may write; SIGXFSZ beyond).
 * - `openFiles`: RLIMIT_NOFILE.
 */
import { z } from 'zod';
import { ConfigError } from '../../core/errors.js';

export const JS_ADDRESS_SPACE_OVERHEAD_MB = 1024;
export const JS_THREAD_ALLOWANCE = 16;

export const sandboxLimitsSchema = z
  .object({
    wallMs: z.number().int().min(100).max(600_000),
    cpuSeconds: z.number().int().min(1).max(600),
    memoryMB: z.number().int().min(16).max(65_536),
    maxProcesses: z.number().int().min(1).max(4096),
    outputBytes: z
      .number()
      .int()
      .min(1)
      .max(256 * 1024 * 1024),
    fileBytes: z
      .number()
      .int()
      .min(0)
      .max(16 * 1024 * 1024 * 1024),
    openFiles: z.number().int().min(8).max(65_536),
  })
  .strict();

export type SandboxLimits = z.infer<typeof sandboxLimitsSchema>;

export const DEFAULT_LIMITS: SandboxLimits = {
  wallMs: 10_000,
  cpuSeconds: 5,
  memoryMB: 512,
  maxProcesses: 32,
  outputBytes: 1024 * 1024,
  fileBytes: 16 * 1024 * 1024,
  openFiles: 64,
};

/** Defaults overlaid with `partial`; throws ConfigError naming the bad key. */
export function resolveLimits(partial: Partial<SandboxLimits> = {}): SandboxLimits {
  const defined = Object.fromEntries(Object.entries(partial).filter(([, v]) => v !== undefined));
  const parsed = sandboxLimitsSchema.safeParse({ ...DEFAULT_LIMITS, ...defined });
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const key = issue.path.join('.');
    throw new ConfigError(
      `sandbox limits: ${key ? `"${key}" ` : ''}${issue.message}`,
      key ? `limits.${key}` : 'limits',
    );
  }
  return parsed.data;
}
