/**
 * How a task item becomes prompt tokens for an engine: the chat template of a Hugging Face tokenizer
 * when `engine.chatTemplate` is on (the template writes any BOS), else the raw prompt with BOS first
 * when the tokenizer adds one (as vLLM does for text prompts). Shared by `arbor train` and `arbor eval`
 * so both see the same prompts, and both fit them to the context with the same `fitPrompts`.
 */
import { ConfigError, DataError } from '../core/errors.js';
import type { TaskItem } from '../core/types.js';
import type { TextTokenizer } from '../engine/types.js';
import type { ToolCallFormat, ToolSpec } from '../env/types.js';

/** The tokens that end a response: every EOS id of the tokenizer (generation_config.json's too: vLLM stops on them). */
export function stopTokens(tokenizer: TextTokenizer): number[] {
  return [...(tokenizer.eosIds ?? [tokenizer.eos])];
}

export function promptEncoder(
  tokenizer: TextTokenizer,
  chatTemplate: boolean,
  kwargs?: Record<string, unknown>,
): (item: TaskItem) => number[] {
  const bos = tokenizer.bos !== undefined ? [tokenizer.bos] : [];
  const raw = (item: TaskItem) => [...bos, ...tokenizer.encode(item.prompt)];
  if (!chatTemplate || !tokenizer.encodeChat) return raw;
  const encodeChat = tokenizer.encodeChat.bind(tokenizer);
  // the template writes BOS itself where the model uses one (transformers' apply_chat_template(tokenize=True))
  return (item) => encodeChat([{ role: 'user', content: item.prompt }], { addGenerationPrompt: true, kwargs });
}

/** Where an item came from, for messages: `file:line (id)` for dataset rows, else its id. */
export function itemSource(item: TaskItem): string {
  const file = item.meta?.file;
  const line = item.meta?.line;
  return typeof file === 'string' && typeof line === 'number' ? `${file}:${line} (id ${item.id})` : `item ${item.id}`;
}

/** An agent run's rendered tool offer (the tools line / system turn), measured in tokens. */
export interface ToolOffer {
  /** Tokens of the rendered offer alone. */
  tokens: number;
  /** Tools offered. */
  tools: number;
  /** The tool-call format that rendered it (generate.format). */
  format: string;
}

/** The tool offer `format` renders for `tools`, measured with `encode` (the run's tokenizer). */
export function toolOffer(format: ToolCallFormat, tools: ToolSpec[], encode: (text: string) => number[]): ToolOffer {
  return { tokens: encode(format.renderTools(tools)).length, tools: tools.length, format: format.name };
}

/** The items kept by `fitPrompts`, and the ones left out (`task.overlong: skip`). */
export interface FittedPrompts {
  items: TaskItem[];
  skipped: number;
  /** `itemSource` of each item left out, in item order. */
  skippedSources: string[];
}

/**
 * The one prompt fitting of `arbor train` (held-out and training items) and `arbor eval`: a prompt
 * that leaves no room for a response in the model's context (its tokens ≥ the context) fails at once
 * naming its file and line (`task.overlong: error`), or is left out and counted (`skip`), instead of
 * failing a step mid-run or scoring 0 silently. A tool offer that alone fills the context is a
 * ConfigError on env.tools whatever the policy (every prompt would be left out). `contextLength`
 * undefined (remote engines, whose server knows its own limit) keeps every item.
 */
export function fitPrompts(
  items: TaskItem[],
  encode: (item: TaskItem) => number[],
  contextLength: number | undefined,
  policy: 'error' | 'skip',
  what: string,
  offer?: ToolOffer,
): FittedPrompts {
  if (contextLength === undefined) return { items, skipped: 0, skippedSources: [] };
  if (offer && offer.tokens >= contextLength) throw new ConfigError(offerTooLong(offer, contextLength), 'env.tools');
  const offerNote = offer?.tools ? `; the tools line takes ${offer.tokens} of them (env.tools offers fewer)` : '';
  const kept: TaskItem[] = [];
  const skippedSources: string[] = [];
  for (const item of items) {
    const length = encode(item).length;
    if (length < contextLength) {
      kept.push(item);
      continue;
    }
    if (policy === 'error') {
      const file = typeof item.meta?.file === 'string' ? item.meta.file : undefined;
      const line = typeof item.meta?.line === 'number' ? item.meta.line : undefined;
      const room = `leaves no room for a response in the model's context of ${contextLength}${offerNote}`;
      const message = `${itemSource(item)}: the ${what} prompt is ${length} tokens, which ${room}`;
      throw new DataError(`${message} (set task.overlong: skip to leave such items out)`, file, line, 'prompt');
    }
    skippedSources.push(itemSource(item));
  }
  if (!kept.length) {
    const why = `every ${what} prompt (${items.length}) is longer than the model's context of ${contextLength} tokens`;
    throw new DataError(`${why}${offerNote}`);
  }
  return { items: kept, skipped: skippedSources.length, skippedSources };
}

/** The tools line too long for the context: its length against the context, and the allow-list. */
function offerTooLong(offer: ToolOffer, contextLength: number): string {
  const what = `the tools line (the ${offer.format} offer of ${offer.tools} tools) is ${offer.tokens} tokens`;
  const room = `which leaves no room for a prompt in the model's context of ${contextLength} tokens`;
  const fix = 'offer only the tools the task needs with env.tools (the allow-list), or use a longer context';
  return `env.tools: ${what}, ${room}; ${fix}`;
}

/** The line that says what `task.overlong: skip` left out (undefined when nothing was). */
export function skippedLine(fit: FittedPrompts, what: string): string | undefined {
  if (!fit.skipped) return undefined;
  const shown = fit.skippedSources.slice(0, 5).join(', ') + (fit.skipped > 5 ? `, +${fit.skipped - 5} more` : '');
  return `task.overlong skip: ${fit.skipped} ${what} prompts leave no room for a response and are left out (${shown})`;
}
