/**
 * A LangChain.js agent: `ChatOpenAI` pointed at the gateway (`configuration.baseURL`, `apiKey`) with the
 * `weather` tool bound (`bindTools`), `invoke` in a loop that answers each tool call with a ToolMessage,
 * until a reply has no tool calls (at most 3 turns). Reports the parsed and the unparsable tool calls.
 */
import { HumanMessage, ToolMessage, type BaseMessage } from '@langchain/core/messages';
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
  }).bindTools([weather]);
  const messages: BaseMessage[] = [new HumanMessage(item.prompt)];
  const saw: ClientSaw = { toolCalls: [], invalidToolCalls: 0, outputTokens: 0 };
  for (let turn = 0; turn < 3; turn++) {
    const reply = await model.invoke(messages, { signal: ctx.signal });
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
