/**
 * The same agent on LangChain.js: `ChatOpenAI` pointed at the run's gateway with the `weather` tool
 * bound, invoked in a loop that answers each tool call with a ToolMessage until a reply calls no tool
 * (at most 3 turns). Train it with `env.module: ./langchain-agent.ts`.
 */
import { HumanMessage, ToolMessage, type BaseMessage } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';
import { ChatOpenAI } from '@langchain/openai';
import { defineAgent, z } from 'arbor';
import { temperature, WEATHER_TOOL } from './weather.js';

const weather = tool(async ({ city }: { city: string }) => temperature(city), {
  name: WEATHER_TOOL.name,
  description: WEATHER_TOOL.description,
  schema: z.object({ city: z.string() }),
});

export default defineAgent(async (item, ctx) => {
  const model = new ChatOpenAI({
    model: ctx.model,
    apiKey: ctx.apiKey,
    configuration: { baseURL: ctx.baseURL },
    maxRetries: 0,
    maxTokens: 64,
  }).bindTools([weather]);
  const messages: BaseMessage[] = [new HumanMessage(item.prompt)];
  for (let turn = 0; turn < 3; turn++) {
    const reply = await model.invoke(messages, { signal: ctx.signal });
    messages.push(reply);
    if (!reply.tool_calls?.length) return reply.text;
    for (const call of reply.tool_calls) {
      const result = await weather.invoke(call.args as { city: string });
      messages.push(new ToolMessage({ content: result, tool_call_id: call.id! }));
    }
  }
  return '';
});
