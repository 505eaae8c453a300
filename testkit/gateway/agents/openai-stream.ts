/**
 * The openai client (v4) agent streamed: `chat.completions.create({ stream: true })` and the chunks
 * accumulated by hand (content concatenated, tool calls merged by `index`) into the assistant message
 * the loop appends, then a `tool` message per call, until a reply has no tool calls (at most 3 turns).
 */
import OpenAI, { type ClientOptions } from 'openai';
import type {
  ChatCompletionAssistantMessageParam,
  ChatCompletionMessageParam,
  ChatCompletionMessageToolCall,
} from 'openai/resources/chat/completions';
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
    const stream = await client.chat.completions.create(
      {
        model: ctx.model,
        messages,
        tools: [{ type: 'function', function: WEATHER_FUNCTION }],
        stream: true,
        stream_options: { include_usage: true },
      },
      { signal: ctx.signal },
    );
    let content = '';
    const calls: ChatCompletionMessageToolCall[] = [];
    for await (const chunk of stream) {
      saw.outputTokens! += chunk.usage?.completion_tokens ?? 0;
      const delta = chunk.choices[0]?.delta;
      content += delta?.content ?? '';
      for (const d of delta?.tool_calls ?? []) {
        const call = (calls[d.index] ??= { id: '', type: 'function', function: { name: '', arguments: '' } });
        call.id += d.id ?? '';
        call.function.name += d.function?.name ?? '';
        call.function.arguments += d.function?.arguments ?? '';
      }
    }
    const message: ChatCompletionAssistantMessageParam = { role: 'assistant', content: content || null };
    if (calls.length) message.tool_calls = calls;
    messages.push(message);
    if (!calls.length) return { response: content, info: { ...saw } };
    for (const call of calls) {
      const args = JSON.parse(call.function.arguments) as { city: string };
      saw.toolCalls.push({ name: call.function.name, args });
      messages.push({ role: 'tool', tool_call_id: call.id, content: temperature(args.city) });
    }
  }
  throw new Error('no answer after 3 turns');
});
