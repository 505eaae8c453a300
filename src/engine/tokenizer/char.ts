/**
 * Character-level tokenizer for the built-in tasks: special tokens first (<pad>=0, <bos>=1, <eos>=2,
 * <sep>=3, <unk>=4), then one id per character of the charset. Unknown characters map to <unk>.
 * Saved with every checkpoint as tokenizer.json so a checkpoint decodes its own ids.
 */
import { DataError } from '../../core/errors.js';

export const SPECIAL_TOKENS = ['<pad>', '<bos>', '<eos>', '<sep>', '<unk>'] as const;

/** Printable ASCII (space..~) plus newline. */
export const defaultCharset = '\n' + Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i)).join('');

export interface TokenizerJSON {
  kind: 'char';
  specials: string[];
  charset: string;
}

export class CharTokenizer {
  readonly specialTokens: Record<string, number>;
  readonly pad = 0;
  readonly bos = 1;
  readonly eos = 2;
  readonly sep = 3;
  readonly unk = 4;
  private readonly toId = new Map<string, number>();
  private readonly toChar: string[];

  constructor(readonly charset: string = defaultCharset) {
    this.specialTokens = Object.fromEntries(SPECIAL_TOKENS.map((s, i) => [s, i]));
    this.toChar = [...SPECIAL_TOKENS];
    for (const ch of charset) {
      if (this.toId.has(ch)) continue;
      this.toId.set(ch, this.toChar.length);
      this.toChar.push(ch);
    }
  }

  get vocabSize(): number {
    return this.toChar.length;
  }

  encode(text: string): number[] {
    const out: number[] = [];
    for (const ch of text) out.push(this.toId.get(ch) ?? this.unk);
    return out;
  }

  /** Decode ids; special tokens are dropped unless `keepSpecial`. */
  decode(ids: ArrayLike<number>, keepSpecial = false): string {
    let s = '';
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i];
      if (id < SPECIAL_TOKENS.length) {
        if (keepSpecial) s += this.toChar[id];
        continue;
      }
      s += this.toChar[id] ?? '';
    }
    return s;
  }

  toJSON(): TokenizerJSON {
    return { kind: 'char', specials: [...SPECIAL_TOKENS], charset: this.charset };
  }

  static fromJSON(json: unknown, source = 'tokenizer.json'): CharTokenizer {
    const j = json as TokenizerJSON;
    if (!j || j.kind !== 'char' || typeof j.charset !== 'string')
      throw new DataError(`${source}: not a char tokenizer (expected {kind: "char", charset})`, source);
    if (JSON.stringify(j.specials) !== JSON.stringify(SPECIAL_TOKENS))
      throw new DataError(
        `${source}: unexpected special tokens ${JSON.stringify(j.specials)}`,
        source,
        undefined,
        'specials',
      );
    return new CharTokenizer(j.charset);
  }
}
