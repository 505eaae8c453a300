/**
 * The tokenizer of a checkpoint or model directory, for either engine: `dir/tokenizer.json` is the
 * embedded engine's char tokenizer (`"kind": "char"`) or a Hugging Face tokenizer (with its
 * tokenizer_config.json, chat templates and generation_config.json). A missing or malformed file is a
 * DataError naming it; `vocabSize` refuses an HF tokenizer with ids beyond the model's embedding.
 */
import { join } from 'node:path';
import { DataError } from '../../core/errors.js';
import { CharTokenizer } from './char.js';
import { HFTokenizer, type HFTokenizerOptions } from './hf.js';
import { readTokenizerFile } from './parsed.js';

export function loadTokenizer(dir: string, options: HFTokenizerOptions = {}): CharTokenizer | HFTokenizer {
  const file = join(dir, 'tokenizer.json');
  const parsed = readTokenizerFile(file);
  if (parsed.json.kind !== 'char') return HFTokenizer.fromParsed(dir, parsed, options);
  const tokenizer = CharTokenizer.fromJSON(parsed.json, file);
  if (options.vocabSize !== undefined && tokenizer.vocabSize > options.vocabSize) {
    const why = `the char tokenizer has ${tokenizer.vocabSize} ids but the model's vocab size is ${options.vocabSize}`;
    throw new DataError(`${file}: ${why}`, file, undefined, 'vocab_size');
  }
  return tokenizer;
}
