/**
 * How a task item becomes prompt tokens for an engine: the chat template of a Hugging Face tokenizer
 * when `engine.chatTemplate` is on (the template writes any BOS), else the raw prompt with BOS first
 * when the tokenizer adds one (as vLLM does for text prompts). Shared by `arbor train` and `arbor eval`
 * so both see the same prompts.
 */
import { DataError } from '../core/errors.js';
import type { TaskItem } from '../core/types.js';
import type { TextTokenizer } from '../engine/types.js';

/** The tokens that end a response: every EOS id of the tokenizer (generation_config.json's too, as vLLM stops on them). */
export function stopTokens(tokenizer: TextTokenizer): number[] {
  return [...(tokenizer.eosIds ?? [tokenizer.eos])];
}

export function promptEncoder(tokenizer: TextTokenizer, chatTemplate: boolean, kwargs?: Record<string, unknown>): (item: TaskItem) => number[] {
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

/**
 * Checked once when a run loads its items: a prompt that leaves no room for a response in the
 * model's context fails the run at once naming its file and line (`task.overlong: error`), or is left
 * out and counted (`skip`), instead of failing a step mid-run.
 */
export function fitPrompts(items: TaskItem[], encode: (item: TaskItem) => number[], contextLength: number | undefined, policy: 'error' | 'skip', what: string): { items: TaskItem[]; skipped: number } {
  if (contextLength === undefined) return { items, skipped: 0 };
  const kept: TaskItem[] = [];
  for (const item of items) {
    const length = encode(item).length;
    if (length < contextLength) {
      kept.push(item);
      continue;
    }
    if (policy === 'error') {
      const file = typeof item.meta?.file === 'string' ? item.meta.file : undefined;
      throw new DataError(`${itemSource(item)}: the ${what} prompt is ${length} tokens, which leaves no room for a response in the model's context of ${contextLength} (set task.overlong: skip to leave such items out)`, file, typeof item.meta?.line === 'number' ? item.meta.line : undefined, 'prompt');
    }
  }
  if (!kept.length) throw new DataError(`every ${what} prompt (${items.length}) is longer than the model's context of ${contextLength} tokens`);
  return { items: kept, skipped: items.length - kept.length };
}
