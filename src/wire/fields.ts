/**
 * The JSON field types of request bodies both sides of a wire speak (OpenAI/vLLM completions, Tinker),
 * as zod schemas whose messages are what a server answers after naming the field: a number, an integer,
 * a boolean, a non-empty string, a list of token ids. `readField` reads one field with its schema and
 * throws `field "<name>" <message>` (a path inside the field follows the name: `field "stop[2]" ...`);
 * a message that starts with `:` follows the quoted name directly (`field "stop": ...`).
 */
import { z } from 'zod';

const NUMBER = 'must be a number';
const TOKEN_IDS = 'must be an array of token ids (non-negative integers)';
const NON_EMPTY = 'must be a non-empty string';

/** A finite number. */
export const numberField = z.number({ invalid_type_error: NUMBER, required_error: NUMBER }).finite(NUMBER);

/** An integer (a number first). */
export const integerField = numberField.int('must be an integer');

/** true or false. */
export const booleanField = z.boolean({ invalid_type_error: 'must be a boolean', required_error: 'must be a boolean' });

/** A string of at least one character. */
export const nonEmptyStringField = z
  .string({ invalid_type_error: NON_EMPTY, required_error: NON_EMPTY })
  .min(1, NON_EMPTY);

const isTokenId = (t: unknown): t is number => Number.isInteger(t) && (t as number) >= 0;

/** Token ids: a list of non-negative integers (the message names the list, not the element). */
export const tokenIdsField = z
  .array(z.unknown(), { invalid_type_error: TOKEN_IDS, required_error: TOKEN_IDS })
  .refine((list): list is number[] => list.every(isTokenId), TOKEN_IDS);

/** The 400 message of a field's issue: `field "<name><path>" <message>`. */
export function fieldMessage(field: string, issue: z.ZodIssue): string {
  const path = issue.path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${p}`)).join('');
  const gap = issue.message.startsWith(':') ? '' : ' ';
  return `field "${field}${path}"${gap}${issue.message}`;
}

/** The value of one field read with its schema, or `invalid(message)` thrown with the message naming the field. */
export function readField<S extends z.ZodTypeAny>(
  schema: S,
  value: unknown,
  field: string,
  invalid: (message: string) => Error,
): z.output<S> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw invalid(fieldMessage(field, parsed.error.issues[0]));
  return parsed.data as z.output<S>;
}

/**
 * A whole request body read with its object schema: the parsed body, or `invalid(message)` for the
 * first bad field, named by its path (`field "stop_token_ids" must be ...`).
 */
export function readRequest<S extends z.ZodTypeAny>(
  schema: S,
  body: unknown,
  invalid: (message: string) => Error,
): z.output<S> {
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data as z.output<S>;
  const issue = parsed.error.issues[0];
  const [head, ...rest] = issue.path;
  if (head === undefined) throw invalid(`the body ${issue.message}`);
  throw invalid(fieldMessage(String(head), { ...issue, path: rest }));
}
