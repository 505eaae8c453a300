/**
 * Request validation for `arbor serve`: 400/404/409/413/429 errors that name the field, field readers
 * over the wire schemas (wire/fields.ts: a bad field is a 400 naming it), and the reply an error becomes: `{"error": "<message>"}` on the SGLang and Tinker routes, vLLM's
 * envelope `{"error": {"message", "type", "param", "code"}}` on the vLLM routes (vllm-project/vllm@
 * 00fc880 vllm/entrypoints/utils.py create_error_response: BadRequestError 400, NotFoundError 404, ...).
 */
import type { z } from 'zod';
import { ArborError } from '../core/errors.js';
import {
  booleanField,
  integerField,
  nonEmptyStringField,
  numberField,
  readField,
  tokenIdsField,
} from '../wire/fields.js';

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

const invalid = (message: string): BadRequest => new BadRequest(message);

/** One field read with its wire schema (wire/fields.ts), or a 400 naming it. */
export function field<S extends z.ZodTypeAny>(schema: S, value: unknown, name: string): z.output<S> {
  return readField(schema, value, name, invalid);
}

/** A field read with its schema; absent or null is `fallback`. */
function optional<S extends z.ZodTypeAny, F>(schema: S, value: unknown, name: string, fallback: F): z.output<S> | F {
  return value === undefined || value === null ? fallback : field(schema, value, name);
}

export function tokenList(value: unknown, name: string): number[] {
  return field(tokenIdsField, value, name);
}

export function optNum(value: unknown, name: string, fallback: number): number {
  return optional(numberField, value, name, fallback);
}

export function optInt(value: unknown, name: string, fallback: number): number {
  return optional(integerField, value, name, fallback);
}

export function optBool(value: unknown, name: string, fallback: boolean): boolean {
  return optional(booleanField, value, name, fallback);
}

export function requiredString(value: unknown, name: string): string {
  return field(nonEmptyStringField, value, name);
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
