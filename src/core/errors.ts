/**
 * Typed errors. Every Arbor error has a name, a message that names the file/field/line at fault where
 * there is one, and an optional `cause`. Expected failures inside a run (a rollout that errored, a
 * reward that timed out) are recorded as values on the tree, not thrown.
 */

export class ArborError extends Error {
  override name = 'ArborError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** Bad configuration: `path` is the dotted key (e.g. `generate.segmentLength`), `file` the source. */
export class ConfigError extends ArborError {
  override name = 'ConfigError';
  constructor(
    message: string,
    readonly path?: string,
    readonly file?: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** Bad input data: a dataset row, a checkpoint, a tree file. `line` is 1-based where known. */
export class DataError extends ArborError {
  override name = 'DataError';
  constructor(
    message: string,
    readonly file?: string,
    readonly line?: number,
    readonly field?: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** A call to an engine (local or remote) failed. `isRetryable` is derived from status when known. */
export class EngineCallError extends ArborError {
  override name = 'EngineCallError';
  readonly isRetryable: boolean;
  constructor(
    message: string,
    readonly details: { url?: string; status?: number; body?: string; isRetryable?: boolean } = {},
    options?: { cause?: unknown },
  ) {
    super(message, options);
    const s = details.status;
    this.isRetryable = details.isRetryable ?? (s === undefined ? true : s === 408 || s === 429 || s >= 500);
  }
}

/** A sandboxed program violated or hit a limit, or the sandbox itself failed. */
export class SandboxError extends ArborError {
  override name = 'SandboxError';
}

/**
 * An environment's infrastructure failed (a tool server process exited, or could not be started again).
 * `recoverable`: the run goes on and the episodes the failure cut become error trees; false: the run
 * cannot go on (the restart budget is spent, the server does not start) and fails naming `server`.
 */
export class EnvironmentError extends ArborError {
  override name = 'EnvironmentError';
  constructor(
    message: string,
    readonly details: { server: string; recoverable: boolean },
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }

  get recoverable(): boolean {
    return this.details.recoverable;
  }
}

/** A numerical problem: NaN/Inf in a loss or gradient, shape mismatch. */
export class NumericsError extends ArborError {
  override name = 'NumericsError';
}

/** The loss came out NaN or infinite: the update is skipped (nothing was accumulated). */
export class NonFiniteLossError extends NumericsError {
  override name = 'NonFiniteLossError';
}

/** True for an AbortError raised by an AbortSignal: callers let these pass unchanged. */
export function isAbortError(error: unknown): boolean {
  return error instanceof Error && (error.name === 'AbortError' || (error as { code?: string }).code === 'ABORT_ERR');
}

/** A schema-validation issue (zod's shape, typed structurally so core needs no dependency). */
export interface ValidationIssue {
  path: Array<string | number>;
  message: string;
  code: string;
  keys?: string[];
}

/**
 * The ConfigError for a failed section schema: names the dotted key under `prefix` (an unknown key is
 * reported on its parent, so its own name is appended) and keeps the validator's message.
 */
export function configErrorFromIssue(prefix: string, issue: ValidationIssue): ConfigError {
  const key = [
    prefix,
    ...issue.path,
    ...(issue.code === 'unrecognized_keys' ? (issue.keys ?? []).slice(0, 1) : []),
  ].join('.');
  return new ConfigError(`${key}: ${issue.message}`, key);
}
