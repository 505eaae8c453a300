/**
 * The same agent on the official openai client (v4) with a hand-written tool loop: each reply appended
 * to the history as received, each tool call answered with a `tool` message, until a reply calls no
 * tool (at most 3 turns). Train it with `env.module: ./openai-agent.ts`.
 */
import OpenAI from 'openai';
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { defineAgent } from 'arbor';
import { temperature, WEATHER_TOOL } from './weather.js';

export default defineAgent(async (item, ctx) => {
  const client = new OpenAI({ baseURL: ctx.baseURL, apiKey: ctx.apiKey, maxRetries: 0 });
  const messages: ChatCompletionMessageParam[] = [{ role: 'user', content: item.prompt }];
  for (let turn = 0; turn < 3; turn++) {
    const reply = await client.chat.completions.create(
      { model: ctx.model, messages, tools: [{ type: 'function', function: WEATHER_TOOL }], max_tokens: 64 },
      { signal: ctx.signal },
    );
    const message = reply.choices[0].message;
    messages.push(message);
    if (!message.tool_calls?.length) return message.content ?? '';
    for (const call of message.tool_calls) {
      const { city } = JSON.parse(call.function.arguments) as { city: string };
      messages.push({ role: 'tool', tool_call_id: call.id, content: temperature(city) });
    }
  }
  return '';
});
