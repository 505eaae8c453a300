/**
 * Command-line parsing shared by the `arbor` subcommands: node's `util.parseArgs` in strict mode, so
 * an unknown flag, a missing value or a stray argument is an error naming it, and every command
 * answers `--help` with its own options. Numbers are checked here (finite, integer, bounds).
 */
import { parseArgs } from 'node:util';
import { ArborError } from '../core/errors.js';

export interface FlagSpec {
  type: 'string' | 'boolean';
  /** Placeholder in the help text (`N`, `DIR`, ...); strings only. */
  value?: string;
  doc: string;
}

export interface CommandSpec {
  /** `arbor <name>`. */
  name: string;
  /** The positional part of the usage line, e.g. `<config.yaml>`. */
  positionals: string;
  /** How many positional arguments are allowed. */
  minPositionals?: number;
  maxPositionals: number;
  summary: string;
  flags: Record<string, FlagSpec>;
}

export interface NumberBounds {
  min?: number;
  max?: number;
  integer?: boolean;
}

/** A parsed command line: typed accessors that name the flag in every error. */
export class Flags {
  constructor(
    readonly spec: CommandSpec,
    private readonly values: Record<string, string | boolean | undefined>,
    readonly positionals: string[],
  ) {}

  get help(): boolean {
    return this.values.help === true;
  }

  string(name: string): string | undefined {
    const v = this.values[name];
    return typeof v === 'string' ? v : undefined;
  }

  bool(name: string): boolean {
    return this.values[name] === true;
  }

  number(name: string, fallback: number, bounds?: NumberBounds): number;
  number(name: string, fallback: undefined, bounds?: NumberBounds): number | undefined;
  number(name: string, fallback: number | undefined, bounds: NumberBounds = {}): number | undefined {
    const v = this.string(name);
    return v === undefined ? fallback : parseNumber(name, v, bounds);
  }
}

/** `--name`'s value as a number within bounds, or an error naming the flag. */
export function parseNumber(name: string, v: string, bounds: NumberBounds = {}): number {
  const n = v.trim() === '' ? NaN : Number(v);
  if (!Number.isFinite(n)) throw new ArborError(`--${name} must be a number, got "${v}"`);
  if (bounds.integer && !Number.isInteger(n)) throw new ArborError(`--${name} must be an integer, got "${v}"`);
  if ((bounds.min !== undefined && n < bounds.min) || (bounds.max !== undefined && n > bounds.max))
    throw new ArborError(`--${name} must be in [${bounds.min ?? '-∞'}, ${bounds.max ?? '∞'}], got ${v}`);
  return n;
}

/** Parse `argv` against `spec` (strict); `--help`/`-h` is always accepted. */
export function parseCommand(argv: string[], spec: CommandSpec): Flags {
  const options: Record<string, { type: 'string' | 'boolean'; short?: string }> = {
    help: { type: 'boolean', short: 'h' },
  };
  for (const [name, f] of Object.entries(spec.flags)) options[name] = { type: f.type };
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({ args: argv, options, allowPositionals: true, strict: true });
  } catch (error) {
    const message = (error as Error).message.replace(/\. To specify a positional argument starting with a '-'.*$/s, '');
    throw new ArborError(`${spec.name}: ${message} (arbor ${spec.name} --help lists its options)`);
  }
  const flags = new Flags(spec, parsed.values as Record<string, string | boolean | undefined>, parsed.positionals);
  if (flags.help) return flags;
  const n = parsed.positionals.length;
  if (n > spec.maxPositionals || n < (spec.minPositionals ?? 0)) {
    throw new ArborError(
      `${spec.name}: expected ${spec.positionals || 'no arguments'} besides the options, got ` +
        `${n ? parsed.positionals.map((p) => JSON.stringify(p)).join(' ') : 'none'} (arbor ${spec.name} --help)`,
    );
  }
  return flags;
}

/** The `--help` text of a command: usage, summary, every flag with its doc. */
export function helpText(spec: CommandSpec): string {
  const rows = Object.entries(spec.flags).map(([name, f]) => [
    `--${name}${f.type === 'string' ? ` ${f.value ?? 'VALUE'}` : ''}`,
    f.doc,
  ]);
  rows.push(['--help, -h', 'print this help']);
  const width = Math.max(...rows.map((r) => r[0].length));
  return (
    `usage: arbor ${spec.name}${spec.positionals ? ` ${spec.positionals}` : ''} [options]\n\n${spec.summary}\n\n` +
    `options:\n${rows.map(([a, b]) => `  ${a.padEnd(width)}  ${b}`).join('\n')}\n`
  );
}

/** Print a command's help on stdout; the exit code 0. */
export function printHelp(spec: CommandSpec): number {
  process.stdout.write(helpText(spec));
  return 0;
}

/** Value of `--name`, or undefined when absent; throws when the flag has no value. (Commands not yet on parseCommand.) */
export function flag(argv: string[], name: string): string | undefined {
  const i = argv.indexOf(`--${name}`);
  if (i < 0) return undefined;
  const v = argv[i + 1];
  if (v === undefined || v.startsWith('--')) throw new ArborError(`--${name} needs a value`);
  return v;
}

/** Numeric value of `--name`, `fallback` when absent. (Commands not yet on parseCommand.) */
export function numberFlag(argv: string[], name: string, fallback: number, bounds: NumberBounds = {}): number {
  const v = flag(argv, name);
  return v === undefined ? fallback : parseNumber(name, v, bounds);
}
