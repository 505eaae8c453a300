/**
 * Request validation for `arbor serve`: 400/404/409/413/429 errors that name the field, field readers,
 * and the reply an error becomes: `{"error": "<message>"}` on the SGLang and Tinker routes, vLLM's
 * envelope `{"error": {"message", "type", "param", "code"}}` on the vLLM routes (vllm-project/vllm@
 * 00fc880 vllm/entrypoints/utils.py create_error_response: BadRequestError 400, NotFoundError 404, ...).
 */
import { ArborError } from '../core/errors.js';

/** A 400 error naming the bad field. */
export class BadRequest extends ArborError {
  override name = 'BadRequest';
}

/** A 404: unknown route, session, model or future. */
export class NotFound extends ArborError {
  override name = 'NotFound';
}

/** A 409: a reused sequence number (as SkyRL tx answers). */
export class Conflict extends ArborError {
  override name = 'Conflict';
}

export function tokenList(value: unknown, field: string): number[] {
  if (!Array.isArray(value) || !value.every((t) => Number.isInteger(t) && t >= 0))
    throw new BadRequest(`field "${field}" must be an array of token ids (non-negative integers)`);
  return value as number[];
}

export function optNum(value: unknown, field: string, fallback: number): number {
  if (value === undefined || value === null) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value)) throw new BadRequest(`field "${field}" must be a number`);
  return value;
}

export function optInt(value: unknown, field: string, fallback: number): number {
  const v = optNum(value, field, fallback);
  if (!Number.isInteger(v)) throw new BadRequest(`field "${field}" must be an integer`);
  return v;
}

export function optBool(value: unknown, field: string, fallback: boolean): boolean {
  if (value === undefined || value === null) return fallback;
  if (typeof value !== 'boolean') throw new BadRequest(`field "${field}" must be a boolean`);
  return value;
}

export function requiredString(value: unknown, field: string): string {
  if (typeof value !== 'string' || !value) throw new BadRequest(`field "${field}" must be a non-empty string`);
  return value;
}

/** A 413: the request asks for more work than the server's limits allow (`--max-batch-tokens`). */
export class TooLarge extends ArborError {
  override name = 'TooLarge';
}

/** A 429: too many sampling requests in flight (`--max-concurrent`); retry later. */
export class TooBusy extends ArborError {
  override name = 'TooBusy';
}

/** An integer within [min, max], or a 400 naming the field and the bounds. */
export function boundedInt(
  value: unknown,
  field: string,
  fallback: number,
  min: number,
  max: number,
  hint = '',
): number {
  const v = optInt(value, field, fallback);
  if (v < min || v > max)
    throw new BadRequest(`field "${field}" must be an integer in [${min}, ${max}]${hint}, got ${v}`);
  return v;
}

/** A number within [min, max], or a 400 naming the field and the bounds. */
export function boundedNum(value: unknown, field: string, fallback: number, min: number, max: number): number {
  const v = optNum(value, field, fallback);
  if (v < min || v > max) throw new BadRequest(`field "${field}" must be a number in [${min}, ${max}], got ${v}`);
  return v;
}

/** One HTTP answer: status, JSON body, extra headers; or a raw body, or server-sent events. */
export interface ServeReply {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
  /** Sent as is instead of JSON (vLLM's plain-text LoRA replies, Tinker archives). */
  raw?: { contentType: string; data: string | Buffer };
  /** Server-sent events (`data: ...\n\n`), written as they come; `body` is unused. */
  events?: AsyncIterable<string>;
}

/** HTTP status of an error: client errors by class, anything else a server fault. */
export function errorStatus(error: unknown): number {
  if (error instanceof BadRequest) return 400;
  if (error instanceof NotFound) return 404;
  if (error instanceof Conflict) return 409;
  if (error instanceof TooLarge) return 413;
  if (error instanceof TooBusy) return 429;
  return 500;
}

/** vLLM's error `type` per status (ErrorInfo.type). */
const VLLM_TYPES: Record<number, string> = {
  400: 'BadRequestError',
  404: 'NotFoundError',
  409: 'ConflictError',
  413: 'RequestTooLargeError',
  429: 'TooManyRequestsError',
  500: 'InternalServerError',
  501: 'NotImplementedError',
};

/** vLLM's error body: the message, its type, the field at fault (`param`) where the message names one, the status. */
export function vllmError(error: unknown): {
  error: { message: string; type: string; param: string | null; code: number };
} {
  const status = errorStatus(error);
  const message = (error as Error)?.message ?? String(error);
  const param = /^field "([A-Za-z_]+)/.exec(message)?.[1] ?? null;
  return { error: { message, type: VLLM_TYPES[status] ?? 'InternalServerError', param, code: status } };
}

/** The reply of an error: vLLM's envelope on the vLLM routes, `{error: message}` elsewhere. */
export function errorReply(error: unknown, vllm = false): ServeReply {
  const status = errorStatus(error);
  const headers = status === 429 ? { 'retry-after': '1' } : undefined;
  const body = vllm ? vllmError(error) : { error: (error as Error)?.message ?? String(error) };
  return { status, body, ...(headers ? { headers } : {}) };
}
