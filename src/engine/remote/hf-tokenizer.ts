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

  private constructor(readonly dir: string, json: Record<string, unknown>, private readonly config: Record<string, unknown>) {
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
