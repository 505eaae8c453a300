/**
 * Text on `arbor serve`'s vLLM routes: the served tokenizer (a Hugging Face tokenizer, the nano char
 * tokenizer, or none with --skip-tokenizer-init), stop strings over the incrementally decoded output as
 * vLLM's detokenizer applies them (vllm-project/vllm@e372329 vllm/v1/engine/detokenizer.py,
 * StopChecker.check_stop_strings), and the completion `logprobs` object (openai/completion/
 * serving.py@cc139d8 `_create_completion_logprobs`) and chat `logprobs.content` list. Token strings are
 * decoded one id at a time (vLLM uses the incremental detokenizer's piece, equal for whole tokens).
 */
import type { ChatMessage, ChatTemplateOptions } from '../engine/types.js';
import type { GenerationDefaults, TokenizerSource } from '../engine/open.js';

/** How to build a served tokenizer again from its files or data (in serve/request-worker.ts's thread). */
export type { TokenizerSource };

/** What the vLLM routes need of a tokenizer. */
export interface ServeTokenizer {
  /** Where long texts can be encoded off the event loop: the same tokenizer, rebuilt (absent: always inline). */
  source?: TokenizerSource;
  /** Token ids of `text`; `addSpecialTokens` adds what the tokenizer adds to a raw prompt (a BOS). */
  encode(text: string, addSpecialTokens: boolean): number[];
  /** `skipSpecial`: vLLM's skip_special_tokens (drop special tokens such as the EOS). */
  decode(ids: number[], skipSpecial: boolean): string;
  /** The raw vocabulary string of an id (`Ġthe`), as transformers' convert_ids_to_tokens. */
  tokenString?(id: number): string | undefined;
  /** Render messages with the chat template (Hugging Face tokenizers only). */
  chat?(messages: ChatMessage[], options: ChatTemplateOptions): string;
}

/** The serving defaults of a model: its end ids and generation_config.json's sampling defaults. */
export interface ModelDefaults {
  /** Every id that ends a completion unless `ignore_eos` (generation_config's eos_token_id ∪ eos). */
  eosIds: number[];
  /** vLLM `--generation-config auto`: request fields left out take these. */
  generation: GenerationDefaults;
}

/** Trailing U+FFFD: the bytes of a character not yet complete (the incremental detokenizer holds them back). */
function stable(text: string): string {
  let end = text.length;
  while (end > 0 && text.charCodeAt(end - 1) === 0xfffd) end--;
  return text.slice(0, end);
}

/**
 * One continuation's text as vLLM builds it: decoded after every token, and cut at the first stop
 * string found in the new characters (list order decides between two found at once), before the stop
 * string, or after it with `include_stop_str_in_output`. Streamed deltas hold back the last
 * (longest stop − 1) characters while a stop string could still cut them (vLLM's stop_buffer_length).
 */
export class StopText {
  private tokens: number[] = [];
  /** The text so far (cut at the stop string once one was found). */
  text = '';
  /** The stop string that ended the text (vLLM's stop_reason), once found. */
  stop: string | undefined;
  private emitted = 0;
  private readonly hold: number;

  constructor(
    private readonly decode: (ids: number[]) => string,
    private readonly stops: readonly string[],
    private readonly includeStop: boolean,
  ) {
    this.hold = stops.length && !includeStop ? Math.max(...stops.map((s) => s.length)) - 1 : 0;
  }

  /** Append output tokens; returns how many of them were taken before a stop string ended the text. */
  push(ids: readonly number[]): number {
    if (this.stop !== undefined) return 0;
    const all = this.tokens.concat(ids);
    const whole = stable(this.decode(all));
    // the common case: no stop string anywhere, one decode
    if (!this.stops.some((s) => whole.includes(s))) {
      this.tokens = all;
      this.text = whole;
      return ids.length;
    }
    for (let i = 0; i < ids.length; i++) {
      this.tokens.push(ids[i]);
      const text = stable(this.decode(this.tokens));
      const fresh = text.length - this.text.length;
      this.text = text;
      if (fresh <= 0) continue;
      for (const s of this.stops) {
        // vLLM: output_text.find(stop, -new_char_count - len(stop)): only where the new characters reach
        const at = text.indexOf(s, Math.max(0, text.length - fresh - s.length));
        if (at < 0) continue;
        this.text = text.slice(0, this.includeStop ? at + s.length : at);
        this.stop = s;
        return i + 1;
      }
    }
    return ids.length;
  }

  /** The text not sent yet: everything once `finished`, else all but what a stop string could still cut. */
  delta(finished: boolean): string {
    const end = Math.max(this.emitted, this.text.length - (finished ? 0 : this.hold));
    const out = this.text.slice(this.emitted, end);
    this.emitted = end;
    return out;
  }

  /** Characters sent so far (vLLM's previous_text_lens, the first text_offset of a streamed chunk). */
  get sent(): number {
    return pyLen(this.text.slice(0, this.emitted));
  }
}

/** vLLM's CompletionLogProbs (wire/openai-completions.ts), every list present. */
export type CompletionLogprobs = {
  text_offset: number[];
  token_logprobs: Array<number | null>;
  tokens: string[];
  top_logprobs: Array<Record<string, number> | null>;
};

/** One position of a logprobs object: the token, its log-prob (null for the first prompt token) and the top-k. */
export interface LogprobEntry {
  id: number;
  logprob: number | null;
  /** The top-k (id, log-prob) pairs at this position (null where logprob is null). */
  top: ReadonlyArray<readonly [number, number]> | null;
}

/** vLLM clamps log-probs to this floor (−inf is not JSON). */
const FLOOR = -9999;

/** Python's len(): code points, not UTF-16 units. */
export function pyLen(text: string): number {
  let n = 0;
  for (const _ of text) n++;
  return n;
}

/** The dict entries of one position: the token itself first, then the top-k without it (vLLM's order). */
function positionEntries(e: LogprobEntry): Array<[number, number]> {
  const out: Array<[number, number]> = [[e.id, e.logprob ?? FLOOR]];
  for (const [id, lp] of e.top ?? []) if (id !== e.id) out.push([id, lp]);
  return out;
}

/**
 * The completions `logprobs` object: `tokens` (decoded strings, or `token_id:<id>`), `token_logprobs`,
 * `top_logprobs` (dicts of at most k + 1 entries: the token and the top k) and `text_offset`
 * (cumulative length of the token strings from `initialOffset`). A null log-prob (the first prompt
 * token of an echo) gives a null entry in both lists.
 */
export function completionLogprobs(
  entries: readonly LogprobEntry[],
  k: number,
  name: (id: number) => string,
  initialOffset = 0,
): CompletionLogprobs {
  const out: CompletionLogprobs = { text_offset: [], token_logprobs: [], tokens: [], top_logprobs: [] };
  let offset = initialOffset;
  for (const e of entries) {
    const token = name(e.id);
    out.tokens.push(token);
    out.text_offset.push(offset);
    offset += pyLen(token);
    if (e.logprob === null) {
      out.token_logprobs.push(null);
      out.top_logprobs.push(null);
      continue;
    }
    out.token_logprobs.push(Math.max(e.logprob, FLOOR));
    const top: Record<string, number> = {};
    positionEntries(e)
      .slice(0, k + 1)
      .forEach(([id, lp]) => (top[name(id)] = Math.max(lp, FLOOR)));
    out.top_logprobs.push(top);
  }
  return out;
}

/** One token of chat `logprobs.content` (openai/chat_completion/serving.py `_create_chat_logprobs`). */
export interface ChatLogprob {
  token: string;
  logprob: number;
  bytes: number[];
  top_logprobs: Array<{ token: string; logprob: number; bytes: number[] }>;
}

/** Chat logprobs: per token its string, log-prob, UTF-8 bytes and the first `k` entries of its dict. */
export function chatLogprobs(entries: readonly LogprobEntry[], k: number, name: (id: number) => string): ChatLogprob[] {
  const item = (id: number, lp: number) => {
    const token = name(id);
    return { token, logprob: Math.max(lp, FLOOR), bytes: [...Buffer.from(token, 'utf8')] };
  };
  return entries.map((e) => ({
    ...item(e.id, e.logprob ?? FLOOR),
    top_logprobs: positionEntries(e)
      .slice(0, k)
      .map(([id, lp]) => item(id, lp)),
  }));
}
