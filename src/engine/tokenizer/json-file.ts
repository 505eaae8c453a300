/**
 * Reading the JSON files of a Hugging Face model directory (tokenizer.json, tokenizer_config.json,
 * generation_config.json): a missing required file, malformed JSON or a top level that is not an
 * object is a DataError naming the file. It does not validate fields; the readers do.
 */
import { existsSync, readFileSync } from 'node:fs';
import { DataError } from '../../core/errors.js';

/** The object in `file`; undefined when the file is absent and `optional`. */
export function readJsonObject(file: string, optional: true): Record<string, unknown> | undefined;
export function readJsonObject(file: string, optional?: false): Record<string, unknown>;
export function readJsonObject(file: string, optional = false): Record<string, unknown> | undefined {
  if (!existsSync(file)) {
    if (optional) return undefined;
    throw new DataError(`${file}: no such file`, file);
  }
  let value: unknown;
  try {
    value = JSON.parse(readFileSync(file, 'utf8'));
  } catch (cause) {
    throw new DataError(`${file}: invalid JSON (${(cause as Error).message})`, file, undefined, undefined, { cause });
  }
  if (!value || typeof value !== 'object' || Array.isArray(value)) {
    throw new DataError(`${file}: expected a JSON object at the top level`, file);
  }
  return value as Record<string, unknown>;
}
