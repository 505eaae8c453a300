/**
 * Tokenizers for real models: loads a Hugging Face `tokenizer.json` (and, when present,
 * `tokenizer_config.json` with its chat template and special tokens) from a local directory, offline,
 * through @huggingface/tokenizers, and renders chat templates with @huggingface/jinja. Used to turn
 * dataset prompts into token ids for remote engines (vLLM/SGLang/Tinker) and responses back to text.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { Template } from '@huggingface/jinja';
import { DataError } from '../../core/errors.js';

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string;
}

export class HFTokenizer {
  private readonly tokenizer: Tokenizer;
  private readonly template: Template | undefined;
  /** Token id of the BOS token, when the model uses one (prepended by the loop). */
  readonly bos: number | undefined;
  /** Token id that ends a response (the config's eos_token). */
  readonly eos: number;
  readonly specialTokens: Record<string, number>;

  private constructor(readonly dir: string, private readonly json: Record<string, unknown>, private readonly config: Record<string, unknown>) {
    this.tokenizer = new Tokenizer(json, config);
    const added = (json.added_tokens ?? []) as Array<{ id: number; content: string; special?: boolean }>;
    this.specialTokens = Object.fromEntries(added.filter((t) => t.special).map((t) => [t.content, t.id]));
    const tokenText = (v: unknown) => (typeof v === 'string' ? v : (v as { content?: string } | null)?.content);
    const idOf = (name: string) => {
      const text = tokenText(config[name]);
      if (!text) return undefined;
      const id = this.specialTokens[text] ?? this.tokenizer.encode(text, { add_special_tokens: false }).ids[0];
      return id;
    };
    const eos = idOf('eos_token');
    if (eos === undefined) throw new DataError(`${dir}: no eos_token in tokenizer_config.json`, join(dir, 'tokenizer_config.json'), undefined, 'eos_token');
    this.eos = eos;
    this.bos = config.add_bos_token ? idOf('bos_token') : undefined;
    const chat = config.chat_template;
    this.template = typeof chat === 'string' ? new Template(chat) : undefined;
  }

  /** Load `dir/tokenizer.json` (+ optional `dir/tokenizer_config.json`). */
  static fromDirectory(dir: string): HFTokenizer {
    const file = join(dir, 'tokenizer.json');
    if (!existsSync(file)) throw new DataError(`${dir}: no tokenizer.json`, file);
    let json: Record<string, unknown>;
    try {
      json = JSON.parse(readFileSync(file, 'utf8'));
    } catch (cause) {
      throw new DataError(`${file}: invalid JSON`, file, undefined, undefined, { cause });
    }
    const configFile = join(dir, 'tokenizer_config.json');
    const config = existsSync(configFile) ? (JSON.parse(readFileSync(configFile, 'utf8')) as Record<string, unknown>) : {};
    return new HFTokenizer(dir, json, config);
  }

  encode(text: string): number[] {
    return this.tokenizer.encode(text, { add_special_tokens: false }).ids;
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
    for (let i = 0; i < text.length; ) {
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
      const added = ((this.json.added_tokens ?? []) as Array<{ content: string }>).map((t) => t.content).filter((c) => c.length > 1);
      this.addedCache = [...new Set(added)].sort((a, b) => b.length - a.length);
    }
    return this.addedCache;
  }

  /** Decode ids; special tokens are dropped unless `keepSpecial`. */
  decode(ids: number[], keepSpecial = false): string {
    return this.tokenizer.decode(ids, { skip_special_tokens: !keepSpecial });
  }

  get hasChatTemplate(): boolean {
    return this.template !== undefined;
  }

  /** Render the chat template (with the generation prompt by default). */
  applyChatTemplate(messages: ChatMessage[], options: { addGenerationPrompt?: boolean } = {}): string {
    if (!this.template) throw new DataError(`${this.dir}: tokenizer_config.json has no chat_template`);
    const tokenText = (v: unknown) => (typeof v === 'string' ? v : (v as { content?: string } | null)?.content ?? '');
    return this.template.render({
      messages,
      add_generation_prompt: options.addGenerationPrompt ?? true,
      bos_token: tokenText(this.config.bos_token),
      eos_token: tokenText(this.config.eos_token),
    });
  }
}
