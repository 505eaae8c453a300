/**
 * A two-question conversation on the openai client (v4): the item's prompt, then, with the reply kept in
 * the history as received, a follow-up user message ("And tomorrow?"). On Qwen3's template the second
 * request renders the first reply without its `<think>` block, so its prompt no longer extends the first
 * call: the gateway forks the episode there. Returns the second reply.
 */
import OpenAI from 'openai';
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { defineAgent } from 'arbor';

export default defineAgent(async (item, ctx) => {
  const client = new OpenAI({ baseURL: ctx.baseURL, apiKey: ctx.apiKey, maxRetries: 0 });
  const messages: ChatCompletionMessageParam[] = [{ role: 'user', content: item.prompt }];
  const first = await client.chat.completions.create({ model: ctx.model, messages }, { signal: ctx.signal });
  messages.push(first.choices[0].message, { role: 'user', content: 'And tomorrow?' });
  const second = await client.chat.completions.create({ model: ctx.model, messages }, { signal: ctx.signal });
  return second.choices[0].message.content ?? '';
});
