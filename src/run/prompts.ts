/**
 * How a task item becomes prompt tokens for an engine: the chat template of a Hugging Face tokenizer
 * when `engine.chatTemplate` is on, else the raw prompt; BOS first when the tokenizer has one. Shared
 * by `arbor train` and `arbor eval` so both see the same prompts.
 */
import type { TaskItem } from '../core/types.js';
import type { TextTokenizer } from '../engine/types.js';

export function promptEncoder(tokenizer: TextTokenizer, chatTemplate: boolean): (item: TaskItem) => number[] {
  const text = (item: TaskItem) => (chatTemplate && tokenizer.applyChatTemplate ? tokenizer.applyChatTemplate([{ role: 'user', content: item.prompt }]) : item.prompt);
  return (item) => [...(tokenizer.bos !== undefined ? [tokenizer.bos] : []), ...tokenizer.encode(text(item))];
}
