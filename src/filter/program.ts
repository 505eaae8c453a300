/**
 * The `program` reward: a reward function written as a small JavaScript module, run in the sandbox.
 *
 * The module's signature:
 *
 * ```js
 * // ESM (or CommonJS: module.exports = function reward(...) {...})
 * export default function reward({ response, answer, prompt, meta, id }) {
 *   // response: the model's response text; answer: item.answer; prompt: item.prompt;
 *   // meta: item.meta (or {}); id: item.id
 *   return 0.5;                                   // a finite number, or
 *   return { reward: 1, components: { fmt: 1 } }; // a reward plus named finite components
 * }                                               // (may be async: a Promise of either)
 * ```
 *
 * The reward must lie in `range` (default [-10, 10]). Each call runs a fresh node process under the
 * sandbox limits (no network, no child processes, no writes outside its temp dir, CPU / memory /
 * wall bounds): the module is written to the temp dir, a small harness imports it, reads the inputs
 * as JSON on stdin and prints the result as JSON on stdout behind a per-call marker (the module may
 * print freely). Any failure (a throw, a timeout, a crash, a missing default export, a value that is
 * not a finite number in range) throws an Error with a clear message, which `scoreSafely` maps to
 * the failure reward.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { ConfigError, SandboxError } from '../core/errors.js';
import { runSandboxed } from './sandbox/run.js';
import type { SandboxLimits } from './sandbox/limits.js';
import type { RewardFunction } from './types.js';

export interface ProgramRewardOptions {
  /** Module source text. Exactly one of `source` and `path`. */
  source?: string;
  /** Path of the module file (read once, when the reward is built). */
  path?: string;
  limits?: Partial<SandboxLimits>;
  name?: string;
  /** Allowed reward range, inclusive (default [-10, 10]). */
  range?: [number, number];
}

export const PROGRAM_DEFAULT_LIMITS: Partial<SandboxLimits> = {
  wallMs: 5000,
  cpuSeconds: 5,
  memoryMB: 256,
  maxProcesses: 8,
  outputBytes: 256 * 1024,
};

/** Marks NaN / ±Infinity in the harness's JSON (JSON itself would turn them into null). */
const NON_FINITE = '@@non-finite:';

const HARNESS = (moduleFile: string) => `import { readFileSync } from 'node:fs';
const marker = process.argv[2];
const nonFinite = (k, v) => (typeof v === 'number' && !Number.isFinite(v) ? '${NON_FINITE}' + v : v);
const emit = (value) => { process.stdout.write('\\n' + marker + JSON.stringify(value, nonFinite) + '\\n'); };
let input;
try {
  input = JSON.parse(readFileSync(0, 'utf8'));
} catch (e) {
  emit({ ok: false, error: 'bad input: ' + e.message });
  process.exit(1);
}
try {
  const mod = await import('./${moduleFile}');
  const fn = typeof mod.default === 'function' ? mod.default : typeof mod.reward === 'function' ? mod.reward : null;
  if (!fn) throw new Error('the module has no default export function (export default function reward({ response, answer, prompt, meta }) {...})');
  const value = await fn(input);
  emit({ ok: true, value: value === undefined ? null : value });
  process.exit(0);
} catch (e) {
  emit({ ok: false, error: (e && e.code ? '[' + e.code + '] ' : '') + String((e && e.stack) || e) });
  process.exit(1);
}
`;

function describe(v: unknown): string {
  try {
    return JSON.stringify(v)?.slice(0, 200) ?? String(v);
  } catch {
    return String(v);
  }
}

export function programReward(options: ProgramRewardOptions): RewardFunction {
  if ((options.source === undefined) === (options.path === undefined)) {
    throw new ConfigError('program reward: give exactly one of "source" and "path"', 'source');
  }
  let source: string;
  if (options.path !== undefined) {
    try {
      source = readFileSync(options.path, 'utf8');
    } catch (cause) {
      throw new ConfigError(
        `program reward: cannot read ${options.path} (${(cause as NodeJS.ErrnoException).code ?? String(cause)})`,
        'path',
        options.path,
        { cause },
      );
    }
  } else source = options.source!;
  const [lo, hi] = options.range ?? [-10, 10];
  if (!(Number.isFinite(lo) && Number.isFinite(hi) && lo <= hi))
    throw new ConfigError(`program reward: bad range [${lo}, ${hi}]`, 'range');
  const moduleFile = /^\s*export\s/m.test(source) ? 'reward.mjs' : 'reward.cjs';
  const limits = { ...PROGRAM_DEFAULT_LIMITS, ...options.limits };
  const name = options.name ?? 'program';
  const fail = (why: string) => new SandboxError(`program reward "${name}": ${why}`);

  return {
    name,
    async score({ response, item }, context) {
      const marker = `@@arbor-result-${randomBytes(8).toString('hex')}@@`;
      const input = { response, answer: item.answer, prompt: item.prompt, meta: item.meta ?? {}, id: item.id };
      const r = await runSandboxed({
        language: 'javascript',
        code: HARNESS(moduleFile),
        files: { [moduleFile]: source },
        args: [marker],
        stdin: JSON.stringify(input),
        limits,
        signal: context?.signal,
      });
      if (r.killedReason === 'aborted') {
        const e = new Error(`program reward "${name}" aborted`);
        e.name = 'AbortError';
        throw e;
      }
      if (r.timedOut || r.killedReason === 'wall' || r.killedReason === 'cpu')
        throw fail(
          `timed out (${r.killedReason === 'cpu' ? `${limits.cpuSeconds} s CPU` : `${limits.wallMs} ms wall`})`,
        );
      if (r.killedReason === 'memory') throw fail(`ran out of memory (${limits.memoryMB} MB)`);
      if (r.outputTruncated) throw fail(`printed more than ${limits.outputBytes} bytes`);
      const line = r.stdout
        .split('\n')
        .reverse()
        .find((l) => l.startsWith(marker));
      if (!line)
        throw fail(
          `the program produced no result (exit ${r.exitCode ?? r.signal}): ${r.stderr.trim().slice(-500) || 'no error output'}`,
        );
      let parsed: { ok: boolean; value?: unknown; error?: string };
      try {
        parsed = JSON.parse(line.slice(marker.length));
      } catch {
        throw fail('the harness printed an unreadable result');
      }
      if (!parsed.ok) throw fail(`the reward function threw: ${String(parsed.error).slice(0, 1000)}`);
      const value = parsed.value;
      const isNonFinite = (v: unknown) => typeof v === 'string' && v.startsWith(NON_FINITE);
      if (isNonFinite(value)) throw fail(`returned ${(value as string).slice(NON_FINITE.length)}, not a finite number`);
      let reward: unknown;
      let components: Record<string, number> = {};
      if (typeof value === 'number') reward = value;
      else if (value && typeof value === 'object' && !Array.isArray(value) && 'reward' in value) {
        reward = (value as { reward: unknown }).reward;
        const comps = (value as { components?: unknown }).components;
        if (comps !== undefined) {
          if (!comps || typeof comps !== 'object' || Array.isArray(comps))
            throw fail(`"components" must be an object of numbers, got ${describe(comps)}`);
          for (const [k, v] of Object.entries(comps)) {
            if (typeof v !== 'number' || !Number.isFinite(v))
              throw fail(
                `component "${k}" is ${isNonFinite(v) ? (v as string).slice(NON_FINITE.length) : describe(v)}, not a finite number`,
              );
            components[`${name}.${k}`] = v;
          }
        }
      } else throw fail(`returned ${describe(value)}; expected a number or { reward: number, components?: {...} }`);
      if (typeof reward !== 'number' || !Number.isFinite(reward))
        throw fail(
          `reward is ${isNonFinite(reward) ? (reward as string).slice(NON_FINITE.length) : describe(reward)}, not a finite number`,
        );
      if (reward < lo || reward > hi) throw fail(`reward ${reward} is outside [${lo}, ${hi}]`);
      components = { [name]: reward, ...components };
      return {
        reward,
        components,
        info: {
          wallMs: r.wallMs,
          isolation: r.isolation,
          ...(r.stdout.length > line.length + 1 ? { output: r.stdout.replace(line, '').trim().slice(0, 500) } : {}),
        },
      };
    },
  };
}
