/**
 * The vLLM routes' view of the two tokenizers `arbor serve` and the agent gateway serve (ServeTokenizer,
 * serve/text.ts): a Hugging Face tokenizer or the nano char tokenizer, each with the `source` that
 * builds it again in serve/request-worker.ts's thread. Kept apart from serve/engine.ts so that thread
 * loads the tokenizers only, not the engine.
 */
import { CharTokenizer } from '../engine/nano/tokenizer.js';
import { HFTokenizer } from '../engine/tokenizer/hf.js';
import type { ServeTokenizer, TokenizerSource } from './text.js';

/** The vLLM routes' view of an HF tokenizer. */
export function hfServeTokenizer(t: HFTokenizer): ServeTokenizer {
  return {
    source: { kind: 'hf', dir: t.dir },
    encode: (text, addSpecialTokens) => t.encode(text, { addSpecialTokens }),
    decode: (ids, skipSpecial) => t.decode(ids, !skipSpecial),
    tokenString: (id) => t.idToToken(id),
    chat: t.hasChatTemplate ? (messages, options) => t.applyChatTemplate(messages, options) : undefined,
  };
}

/** The vLLM routes' view of the nano char tokenizer (its BOS is the special token added to a raw prompt). */
export function charServeTokenizer(t: CharTokenizer): ServeTokenizer {
  return {
    source: { kind: 'char', json: t.toJSON() },
    encode: (text, addSpecialTokens) => (addSpecialTokens ? [t.bos, ...t.encode(text)] : t.encode(text)),
    decode: (ids, skipSpecial) => t.decode(ids, !skipSpecial),
  };
}

/** The served tokenizer a `source` describes, built again from its files or data. */
export function serveTokenizerOf(source: TokenizerSource): ServeTokenizer {
  if (source.kind === 'hf') return hfServeTokenizer(HFTokenizer.fromDirectory(source.dir));
  return charServeTokenizer(CharTokenizer.fromJSON(source.json, 'the served char tokenizer'));
}
