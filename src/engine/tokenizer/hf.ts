/**
 * A Hugging Face tokenizer directory, offline, for both engines:
 * `tokenizer.json` through @huggingface/tokenizers, `tokenizer_config.json`'s special tokens, the chat
 * templates (chat-template.ts) and `generation_config.json`'s end ids (its sampling defaults: formats/generation-config.ts). Token ids
 * equal transformers' (checked against its fixtures); `encode` adds no special tokens unless asked.
 * Bad files are DataErrors naming the file and field. It does not download anything or train BPE.
 */
import { join } from 'node:path';
import type { Tokenizer } from '@huggingface/tokenizers';
import { DataError } from '../../core/errors.js';
import type { ChatMessage, ChatTemplateOptions, TextTokenizer } from '../types.js';
import { ChatTemplates } from './chat-template.js';
import { readJsonObject } from '../../core/files.js';
import { builtTokenizer, largestId, readTokenizerFile, type ParsedTokenizerFile } from './parsed.js';

export interface HFTokenizerOptions {
  /** The model's embedding rows (config.json `vocab_size`): a token id ≥ this is refused at load. */
  vocabSize?: number;
}

/** tokenizer.json model types @huggingface/tokenizers implements (WordLevel through its word lookup). */
const MODEL_TYPES = ['BPE', 'WordPiece', 'Unigram', 'WordLevel'];

/** The special-token names transformers' `special_tokens_map` gives templates as strings. */
const SPECIAL_TOKEN_NAMES = [
  'bos_token',
  'eos_token',
  'unk_token',
  'sep_token',
  'pad_token',
  'cls_token',
  'mask_token',
];

/** A special token in tokenizer_config.json: a string or an AddedToken dict `{content, ...}`. */
function tokenText(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  const content = (value as { content?: unknown } | null)?.content;
  return typeof content === 'string' ? content : undefined;
}

export class HFTokenizer implements TextTokenizer {
  private readonly tokenizer: Tokenizer;
  private readonly templates: ChatTemplates;
  /** BOS for a raw prompt: what tokenizer.json's post_processor adds (or legacy add_bos_token); none for Qwen. */
  readonly bos: number | undefined;
  /** tokenizer_config.json's eos_token (else generation_config's first eos_token_id): the stop token. */
  readonly eos: number;
  /** Every end id: eos, then generation_config.json's `eos_token_id` (int or list), as vLLM stops on all of them. */
  readonly eosIds: readonly number[];
  /** tokenizer_config.json's pad_token id, where defined. */
  readonly pad: number | undefined;
  /** Added tokens marked special: text → id. */
  readonly specialTokens: Record<string, number>;
  /** The special-token strings a chat template sees (`bos_token`, `eos_token`, ...), those defined only. */
  readonly specialTokensMap: Readonly<Record<string, string | string[]>>;
  /** Largest token id + 1 (Qwen3: 151669; its models have 151936 embedding rows). */
  readonly vocabSize: number;

  private constructor(
    readonly dir: string,
    private readonly json: Readonly<Record<string, unknown>>,
    tokenizer: Tokenizer,
    vocabSize: number,
    config: Record<string, unknown>,
    generation: Record<string, unknown>,
  ) {
    const configFile = join(dir, 'tokenizer_config.json');
    this.tokenizer = tokenizer;
    const added = (json.added_tokens ?? []) as Array<{ id: number; content: string; special?: boolean }>;
    this.specialTokens = Object.fromEntries(added.filter((t) => t.special).map((t) => [t.content, t.id]));
    this.vocabSize = vocabSize;
    const map: Record<string, string | string[]> = {};
    for (const name of SPECIAL_TOKEN_NAMES) {
      const text = tokenText(config[name]);
      if (text !== undefined) map[name] = text;
    }
    const extra = config.additional_special_tokens;
    if (Array.isArray(extra)) {
      map.additional_special_tokens = extra.map(tokenText).filter((t): t is string => t !== undefined);
    }
    this.specialTokensMap = map;
    const idOf = (name: string): number | undefined => {
      const text = map[name];
      if (typeof text !== 'string') return undefined;
      const id = this.tokenizer.token_to_id(text);
      if (id !== undefined) return id;
      const why = `${name} "${text}" is not a token of tokenizer.json`;
      throw new DataError(`${configFile}: ${why}`, configFile, undefined, name);
    };
    const generationFile = join(dir, 'generation_config.json');
    const generationEos = idList(generation.eos_token_id, generationFile);
    const eos = idOf('eos_token') ?? generationEos[0];
    if (eos === undefined) {
      const why = 'no eos_token (nor an eos_token_id in generation_config.json)';
      throw new DataError(`${configFile}: ${why}`, configFile, undefined, 'eos_token');
    }
    this.eos = eos;
    this.eosIds = [...new Set([eos, ...generationEos])];
    this.pad = idOf('pad_token');
    this.bos = this.addedBos() ?? (config.add_bos_token === true ? idOf('bos_token') : undefined);
    this.templates = ChatTemplates.load(dir, config, configFile);
  }

  /**
   * Load `dir`: tokenizer.json (required), tokenizer_config.json, the chat templates, generation_config.json.
   * A tokenizer.json this process has parsed before is not parsed again (parsed.ts).
   */
  static fromDirectory(dir: string, options: HFTokenizerOptions = {}): HFTokenizer {
    return HFTokenizer.fromParsed(dir, readTokenizerFile(join(dir, 'tokenizer.json')), options);
  }

  /** `fromDirectory` for a caller that has already read `dir`/tokenizer.json (`parsed`). */
  static fromParsed(dir: string, parsed: ParsedTokenizerFile, options: HFTokenizerOptions = {}): HFTokenizer {
    const file = join(dir, 'tokenizer.json');
    const json = parsed.json;
    if (!json.model || typeof json.model !== 'object') {
      throw new DataError(`${file}: no "model" section`, file, undefined, 'model');
    }
    const type = (json.model as { type?: unknown }).type;
    // @huggingface/tokenizers guesses a model for any other type instead of refusing it
    if (type !== undefined && !MODEL_TYPES.includes(type as string)) {
      const why = `model.type ${JSON.stringify(type)} is not supported (known: ${MODEL_TYPES.join(', ')})`;
      throw new DataError(`${file}: ${why}`, file, undefined, 'model.type');
    }
    const config = readJsonObject(join(dir, 'tokenizer_config.json'), true) ?? {};
    const generation = readJsonObject(join(dir, 'generation_config.json'), true) ?? {};
    let tokenizer: HFTokenizer;
    try {
      // transformers' default is no clean-up; @huggingface/tokenizers' default is to clean up
      const cleanUp = config.clean_up_tokenization_spaces ?? false;
      const built = builtTokenizer(parsed, { ...config, clean_up_tokenization_spaces: cleanUp });
      tokenizer = new HFTokenizer(dir, json, built, largestId(parsed) + 1, config, generation);
    } catch (cause) {
      if (cause instanceof DataError) throw cause;
      throw new DataError(`${file}: cannot load (${(cause as Error).message})`, file, undefined, undefined, { cause });
    }
    const rows = options.vocabSize;
    if (rows !== undefined && tokenizer.vocabSize > rows) {
      const why =
        `token id ${tokenizer.vocabSize - 1} is outside the model's embedding ` + `(config.json vocab_size ${rows})`;
      throw new DataError(`${file}: ${why}`, file, undefined, 'vocab_size');
    }
    return tokenizer;
  }

  /** The BOS that tokenizer.json's post_processor puts before a text with special tokens on, if any. */
  private addedBos(): number | undefined {
    const withSpecial = this.tokenizer.encode('a', { add_special_tokens: true }).ids;
    const plain = this.tokenizer.encode('a', { add_special_tokens: false }).ids;
    return withSpecial.length > plain.length && withSpecial[0] !== plain[0] ? withSpecial[0] : undefined;
  }

  /** Token ids of `text`; `addSpecialTokens` applies tokenizer.json's post_processor (Llama 3's BOS). */
  encode(text: string, options: { addSpecialTokens?: boolean } = {}): number[] {
    const ids = this.tokenizer.encode(text, { add_special_tokens: options.addSpecialTokens ?? false }).ids;
    // legacy add_bos_token with a post_processor that adds none: transformers' slow-tokenizer behaviour
    if (options.addSpecialTokens && this.bos !== undefined && ids[0] !== this.bos) return [this.bos, ...ids];
    return ids;
  }

  /**
   * Encode text that must not produce special tokens (a tool's output in an agent observation): the
   * text of any added token in it (`<|im_end|>`, `<tool_response>`...) is encoded as ordinary text,
   * split before its last character so the added-token matcher cannot see it. Decodes to the same text.
   */
  encodePlain(text: string): number[] {
    const added = this.addedTexts();
    const ids: number[] = [];
    let start = 0;
    for (let i = 0; i < text.length;) {
      const hit = added.find((a) => text.startsWith(a, i));
      if (!hit) {
        i++;
        continue;
      }
      if (i > start) ids.push(...this.encode(text.slice(start, i)));
      ids.push(...this.encode(hit.slice(0, -1)), ...this.encode(hit.slice(-1)));
      i += hit.length;
      start = i;
    }
    if (start < text.length) ids.push(...this.encode(text.slice(start)));
    return ids;
  }

  private addedCache: string[] | undefined;
  /** Every added token's text, longest first. */
  private addedTexts(): string[] {
    if (!this.addedCache) {
      const tokens = (this.json.added_tokens ?? []) as Array<{ content: string }>;
      const added = tokens.map((t) => t.content).filter((c) => c.length > 1);
      this.addedCache = [...new Set(added)].sort((a, b) => b.length - a.length);
    }
    return this.addedCache;
  }

  /** Decode ids; special tokens are dropped unless `keepSpecial` (transformers' `decode` keeps them). */
  decode(ids: number[], keepSpecial = false): string {
    if (!ids.length) return '';
    return this.tokenizer.decode(ids, { skip_special_tokens: !keepSpecial });
  }

  /** The raw vocabulary string of `id` (`Ġthe`), undefined outside the vocabulary. */
  idToToken(id: number): string | undefined {
    return this.tokenizer.id_to_token(id);
  }

  /** transformers' `convert_ids_to_tokens` (vLLM's `/tokenize` `token_strs`). */
  convertIdsToTokens(ids: number[]): Array<string | undefined> {
    return ids.map((id) => this.tokenizer.id_to_token(id));
  }

  get hasChatTemplate(): boolean {
    return !this.templates.isEmpty;
  }

  /** The chat templates' names (`default` for a single template). */
  get chatTemplateNames(): string[] {
    return this.templates.names;
  }

  /** transformers' `apply_chat_template(tokenize=False)`; a template that fails is a DataError naming its file. */
  applyChatTemplate(messages: ChatMessage[], options: ChatTemplateOptions = {}): string {
    return this.templates.render(messages, options, this.specialTokensMap);
  }

  /** transformers' `apply_chat_template(tokenize=True)`: render, then encode without special tokens. */
  encodeChat(messages: ChatMessage[], options: ChatTemplateOptions = {}): number[] {
    return this.encode(this.applyChatTemplate(messages, options));
  }
}

/** generation_config.json `eos_token_id`: an int, a list of ints, or absent. */
function idList(value: unknown, file: string): number[] {
  if (value === undefined || value === null) return [];
  const list = Array.isArray(value) ? value : [value];
  if (!list.every((id) => Number.isInteger(id) && id >= 0)) {
    const why = `eos_token_id must be a token id or a list of them (got ${JSON.stringify(value)})`;
    throw new DataError(`${file}: ${why}`, file, undefined, 'eos_token_id');
  }
  return list as number[];
}
