/**
 * An agent on the official openai client (v4) with a hand-written tool loop: `chat.completions.create`
 * with the `weather` tool, each reply appended to the history as received, each call answered with a
 * `tool` message, until a reply has no tool calls (at most 3 turns). Reports the parsed calls and usage.
 */
import OpenAI, { type ClientOptions } from 'openai';
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { defineAgent } from 'arbor';
import { temperature, WEATHER_FUNCTION, type ClientSaw } from '../weather.js';
import { recordingFetch } from './wire.js';

export default defineAgent(async (item, ctx) => {
  const client = new OpenAI({
    ...{ baseURL: ctx.baseURL, apiKey: ctx.apiKey, maxRetries: 0 },
    // v4 types its fetch option with node-fetch's types; what it passes (a URL string, a string body) suits any fetch
    fetch: recordingFetch as unknown as ClientOptions['fetch'],
  });
  const messages: ChatCompletionMessageParam[] = [{ role: 'user', content: item.prompt }];
  const saw: ClientSaw = { toolCalls: [], outputTokens: 0 };
  for (let turn = 0; turn < 3; turn++) {
    const reply = await client.chat.completions.create(
      { model: ctx.model, messages, tools: [{ type: 'function', function: WEATHER_FUNCTION }] },
      { signal: ctx.signal },
    );
    saw.outputTokens! += reply.usage?.completion_tokens ?? 0;
    const message = reply.choices[0].message;
    messages.push(message);
    if (!message.tool_calls?.length) return { response: message.content ?? '', info: { ...saw } };
    for (const call of message.tool_calls) {
      const args = JSON.parse(call.function.arguments) as { city: string };
      saw.toolCalls.push({ name: call.function.name, args });
      messages.push({ role: 'tool', tool_call_id: call.id, content: temperature(args.city) });
    }
  }
  throw new Error('no answer after 3 turns');
});
