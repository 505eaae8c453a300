/** Command-line flag parsing shared by the `arbor` subcommands (`--name value`). */
import { ArborError } from '../core/errors.js';

/** Value of `--name`, or undefined when absent; throws when the flag has no value. */
export function flag(argv: string[], name: string): string | undefined {
  const i = argv.indexOf(`--${name}`);
  if (i < 0) return undefined;
  const v = argv[i + 1];
  if (v === undefined || v.startsWith('--')) throw new ArborError(`--${name} needs a value`);
  return v;
}

/**
 * Numeric value of `--name`, `fallback` when absent; throws, naming the flag, when it is not a finite
 * number, not an integer where `integer`, or outside [min, max].
 */
export function numberFlag(argv: string[], name: string, fallback: number, bounds: { min?: number; max?: number; integer?: boolean } = {}): number {
  const v = flag(argv, name);
  if (v === undefined) return fallback;
  const n = v.trim() === '' ? NaN : Number(v);
  if (!Number.isFinite(n)) throw new ArborError(`--${name} must be a number, got "${v}"`);
  if (bounds.integer && !Number.isInteger(n)) throw new ArborError(`--${name} must be an integer, got "${v}"`);
  if ((bounds.min !== undefined && n < bounds.min) || (bounds.max !== undefined && n > bounds.max)) throw new ArborError(`--${name} must be in [${bounds.min ?? '-∞'}, ${bounds.max ?? '∞'}], got ${v}`);
  return n;
}
