/**
 * The LangChain.js agent streamed: `ChatOpenAI.bindTools([weather]).stream(...)`, the chunks merged with
 * `concat` into the reply the loop appends (tool-call chunks merged by index), a ToolMessage per call,
 * until a reply has no tool calls (at most 3 turns). Reports the parsed and the unparsable tool calls.
 */
import { HumanMessage, ToolMessage, type AIMessageChunk, type BaseMessage } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';
import { ChatOpenAI } from '@langchain/openai';
import { defineAgent, z } from 'arbor';
import { temperature, WEATHER_FUNCTION, type ClientSaw } from '../weather.js';
import { recordingFetch } from './wire.js';

const weather = tool(async ({ city }: { city: string }) => temperature(city), {
  name: WEATHER_FUNCTION.name,
  description: WEATHER_FUNCTION.description,
  schema: z.object({ city: z.string() }),
});

export default defineAgent(async (item, ctx) => {
  const model = new ChatOpenAI({
    model: ctx.model,
    apiKey: ctx.apiKey,
    configuration: { baseURL: ctx.baseURL, fetch: recordingFetch },
    maxRetries: 0,
    streaming: true,
  }).bindTools([weather]);
  const messages: BaseMessage[] = [new HumanMessage(item.prompt)];
  const saw: ClientSaw = { toolCalls: [], invalidToolCalls: 0, outputTokens: 0 };
  for (let turn = 0; turn < 3; turn++) {
    let reply: AIMessageChunk | undefined;
    for await (const chunk of await model.stream(messages, { signal: ctx.signal }))
      reply = reply ? reply.concat(chunk) : chunk;
    if (!reply) throw new Error('the stream ended without a chunk');
    messages.push(reply);
    saw.invalidToolCalls! += reply.invalid_tool_calls?.length ?? 0;
    saw.outputTokens! += reply.usage_metadata?.output_tokens ?? 0;
    if (!reply.tool_calls?.length) return { response: reply.text, info: { ...saw } };
    for (const call of reply.tool_calls) {
      saw.toolCalls.push({ name: call.name, args: call.args });
      const result = temperature((call.args as { city: string }).city);
      messages.push(new ToolMessage({ content: result, tool_call_id: call.id! }));
    }
  }
  throw new Error('no answer after 3 turns');
});
