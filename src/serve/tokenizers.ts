/**
 * The vLLM routes' view of the two tokenizers `arbor serve` and the agent gateway serve (ServeTokenizer,
 * serve/text.ts): a Hugging Face tokenizer or the nano char tokenizer, each with the `source` that
 * builds it again in serve/request-worker.ts's thread (engine/open.ts's openTokenizer). Kept apart
 * from serve/engine.ts so that thread opens a tokenizer only: no model, no weights.
 */
import { openTokenizer, type CharTokenizer, type HFTokenizer } from '../engine/open.js';
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
  if (source.kind === 'hf') return hfServeTokenizer(openTokenizer(source));
  return charServeTokenizer(openTokenizer(source));
}
