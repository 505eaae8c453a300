/** Request validation for `arbor serve`: 400/404/409 errors that name the field, and field readers. */
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
  if (!Array.isArray(value) || !value.every((t) => Number.isInteger(t) && t >= 0)) throw new BadRequest(`field "${field}" must be an array of token ids (non-negative integers)`);
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
export function boundedInt(value: unknown, field: string, fallback: number, min: number, max: number, hint = ''): number {
  const v = optInt(value, field, fallback);
  if (v < min || v > max) throw new BadRequest(`field "${field}" must be an integer in [${min}, ${max}]${hint}, got ${v}`);
  return v;
}

/** A number within [min, max], or a 400 naming the field and the bounds. */
export function boundedNum(value: unknown, field: string, fallback: number, min: number, max: number): number {
  const v = optNum(value, field, fallback);
  if (v < min || v > max) throw new BadRequest(`field "${field}" must be a number in [${min}, ${max}], got ${v}`);
  return v;
}
