/**
 * tokenizer.json files, parsed once per process. Opening Qwen3's (11 MB, 151k tokens) costs about half a
 * second: the JSON parse, @huggingface/tokenizers' vocabulary and merge maps, the largest id. A process that
 * opens the same tokenizer again (a server over a base model and its adapters, a trainer and its sampler,
 * a test suite) finds the earlier parse by the SHA-256 of the file's bytes (about 10 ms for 11 MB): a
 * changed file is parsed again, a copy elsewhere is not. The parsed object is deep-frozen, since every
 * reader shares it. Char tokenizer files are small and never kept.
 */
import { createHash } from 'node:crypto';
import { Tokenizer } from '@huggingface/tokenizers';
import { parseJsonObject, readRequiredFile } from '../../core/files.js';

/** A parsed tokenizer.json and what has been built from it. */
export interface ParsedTokenizerFile {
  /** The file's SHA-256 (hex). */
  readonly hash: string;
  /** The file's JSON, deep-frozen. */
  readonly json: Readonly<Record<string, unknown>>;
  /** @huggingface/tokenizers objects built from `json`, by the JSON of the options they were built with. */
  readonly built: Map<string, Tokenizer>;
  /** The largest id of the model's vocabulary and the added tokens, once asked for. */
  largestId?: number;
}

/** How many distinct HF tokenizer files a process keeps parsed (the least recently used goes first). */
export const PARSED_TOKENIZERS_KEPT = 2;

const kept = new Map<string, ParsedTokenizerFile>();

/** Freezes `value` and every object it holds that is not frozen yet. */
function deepFreeze(value: object): void {
  Object.freeze(value);
  const children: unknown[] = Array.isArray(value) ? value : Object.values(value);
  for (const child of children) if (child && typeof child === 'object' && !Object.isFrozen(child)) deepFreeze(child);
}

/**
 * Freezes a parsed tokenizer.json. The model's `{token: id}` vocabulary is frozen without a look at its
 * values, which are numbers: listing Qwen3's 151k values took most of the 170 ms a full walk took.
 */
function freezeTokenizerJson(json: Record<string, unknown>): void {
  const vocab = (json.model as { vocab?: unknown } | null | undefined)?.vocab;
  if (vocab && typeof vocab === 'object' && !Array.isArray(vocab)) Object.freeze(vocab);
  deepFreeze(json);
}

/** `file` (a tokenizer.json), parsed or found parsed; a missing file or malformed JSON is a DataError naming it. */
export function readTokenizerFile(file: string): ParsedTokenizerFile {
  const bytes = readRequiredFile(file);
  const hash = createHash('sha256').update(bytes).digest('hex');
  const hit = kept.get(hash);
  if (hit) {
    kept.delete(hash);
    kept.set(hash, hit);
    return hit;
  }
  const json = parseJsonObject(bytes.toString('utf8'), file);
  freezeTokenizerJson(json);
  const parsed: ParsedTokenizerFile = { hash, json, built: new Map() };
  if (json.kind !== 'char') {
    kept.set(hash, parsed);
    for (const old of kept.keys()) if (kept.size > PARSED_TOKENIZERS_KEPT) kept.delete(old);
  }
  return parsed;
}

/** The @huggingface/tokenizers object for `parsed` with `options` (tokenizer_config.json's), built once. */
export function builtTokenizer(parsed: ParsedTokenizerFile, options: Record<string, unknown>): Tokenizer {
  const key = JSON.stringify(options);
  let tokenizer = parsed.built.get(key);
  if (!tokenizer) {
    tokenizer = new Tokenizer(parsed.json as Record<string, unknown>, options);
    parsed.built.set(key, tokenizer);
  }
  return tokenizer;
}

/** The largest id of tokenizer.json's model vocabulary and added tokens. */
export function largestId(parsed: ParsedTokenizerFile): number {
  if (parsed.largestId !== undefined) return parsed.largestId;
  const vocab = (parsed.json.model as { vocab?: unknown } | undefined)?.vocab;
  // Unigram: a list of [piece, score]; BPE, WordPiece, WordLevel: {token: id}
  let max = Array.isArray(vocab) ? vocab.length - 1 : -1;
  const ids = !Array.isArray(vocab) && vocab && typeof vocab === 'object' ? Object.values(vocab) : [];
  for (const t of (parsed.json.added_tokens ?? []) as Array<{ id?: unknown }>) ids.push(t.id);
  for (const id of ids) if (typeof id === 'number' && id > max) max = id;
  parsed.largestId = max;
  return max;
}

/** Forgets every kept parse (for tests and for a process that will not open a tokenizer again). */
export function forgetParsedTokenizers(): void {
  kept.clear();
}
