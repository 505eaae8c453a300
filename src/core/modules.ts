/**
 * User modules named in a config (`task.module`, a reward part's `module`, `env.module`): import one as
 * ESM (TypeScript too, once the CLI has registered tsx), pick its default export or a documented named
 * one, and apply `options` to a configurable export (a function carrying its zod `optionsSchema`).
 * Every failure is a ConfigError naming the file and the config key. Paths arrive absolute: the config
 * loader resolves them against the config file's directory (run/config.ts resolveModulePaths).
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { ConfigError, configErrorFromIssue, type ValidationIssue } from './errors.js';

/** A schema in the shape both zod generations share (the user's zod may not be ours). */
interface OptionsSchema {
  safeParse(value: unknown): { success: boolean; data?: unknown; error?: { issues: ValidationIssue[] } };
}

/** `module` imported; a load or evaluation error is a ConfigError at `key` naming the file. */
export async function importUserModule(file: string, key: string): Promise<Record<string, unknown>> {
  try {
    return (await import(pathToFileURL(file).href)) as Record<string, unknown>;
  } catch (cause) {
    throw new ConfigError(`${key}: cannot load ${file}: ${(cause as Error)?.message ?? String(cause)}`, key, file, {
      cause,
    });
  }
}

/** The module's default export, else its export named `name`; neither is a ConfigError listing what it has. */
export function moduleExport(mod: Record<string, unknown>, name: string, file: string, key: string): unknown {
  if (mod.default !== undefined) return mod.default;
  if (mod[name] !== undefined) return mod[name];
  const has = Object.keys(mod).join(', ') || 'nothing';
  throw new ConfigError(
    `${key}: ${file} has no default export and no export named "${name}" (it exports ${has})`,
    key,
    file,
  );
}

/**
 * The value a configurable export makes from `options`: a function with an `optionsSchema` is called
 * with the validated options (errors name `optionsKey.<field>`), a plain function with them as given;
 * any other value is returned as it is and then takes no options.
 */
export function applyOptions(
  value: unknown,
  options: Record<string, unknown>,
  file: string,
  optionsKey: string,
): unknown {
  if (typeof value !== 'function') {
    const keys = Object.keys(options);
    if (keys.length)
      throw new ConfigError(
        `${optionsKey}: ${file} takes no options (got ${keys.join(', ')}); define it with an options schema`,
        optionsKey,
        file,
      );
    return value;
  }
  const schema = (value as { optionsSchema?: OptionsSchema }).optionsSchema;
  let input: unknown = options;
  if (schema) {
    const parsed = schema.safeParse(options);
    if (!parsed.success) {
      const error = configErrorFromIssue(optionsKey, parsed.error!.issues[0]);
      throw new ConfigError(`${file}: ${error.message}`, error.path, file);
    }
    input = parsed.data;
  }
  try {
    return (value as (options: unknown) => unknown)(input);
  } catch (cause) {
    if (cause instanceof ConfigError) throw cause;
    throw new ConfigError(
      `${optionsKey}: ${file}: building it from its options threw: ${(cause as Error)?.message ?? cause}`,
      optionsKey,
      file,
      { cause },
    );
  }
}

/** The first of `checks` (a field name and whether it holds) that fails, as a ConfigError naming the field. */
export function checkShape(
  value: unknown,
  what: string,
  file: string,
  key: string,
  checks: Array<[field: string, ok: (v: Record<string, unknown>) => boolean]>,
): void {
  if (!value || typeof value !== 'object') {
    throw new ConfigError(
      `${key}: ${file} must export ${what}, got ${value === null ? 'null' : typeof value}`,
      key,
      file,
    );
  }
  const record = value as Record<string, unknown>;
  for (const [field, ok] of checks) {
    if (!ok(record))
      throw new ConfigError(
        `${key}: ${file}: the exported ${what} has a bad "${field}" (${describe(record[field])})`,
        `${key}.${field}`,
        file,
      );
  }
}

function describe(v: unknown): string {
  if (v === undefined) return 'missing';
  if (v === null) return 'null';
  if (typeof v === 'string') return `the string ${JSON.stringify(v.slice(0, 40))}`;
  return `a ${Array.isArray(v) ? 'list' : typeof v}`;
}

/** A digest of the user module files among `files` (for cache keys: an edited module is a new key); '' for none. */
export function moduleDigest(files: Array<string | undefined>): string {
  const present = files.filter((f): f is string => typeof f === 'string');
  if (!present.length) return '';
  const hash = createHash('sha256');
  for (const file of present) hash.update(`${file}\0${existsSync(file) ? readFileSync(file, 'utf8') : ''}\0`);
  return hash.digest('hex').slice(0, 16);
}
