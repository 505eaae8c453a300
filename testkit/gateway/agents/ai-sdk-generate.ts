/**
 * A Vercel AI SDK v5 agent as anyone writes one for an OpenAI-compatible endpoint: `generateText` with
 * a `weather` tool and a multi-step loop (`stopWhen: stepCountIs(3)`), pointed at the run's gateway.
 * Reports what the SDK parsed (the tool calls of every step, the usage) beside its answer.
 */
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateText, jsonSchema, stepCountIs, tool } from 'ai';
import { defineAgent } from 'arbor';
import { temperature, WEATHER_FUNCTION, type ClientSaw } from '../weather.js';
import { recordingFetch } from './wire.js';

const weather = tool({
  description: WEATHER_FUNCTION.description,
  inputSchema: jsonSchema<{ city: string }>(WEATHER_FUNCTION.parameters),
  execute: async ({ city }) => temperature(city),
});

export default defineAgent(async (item, ctx) => {
  const provider = createOpenAICompatible({
    ...{ name: 'arbor', baseURL: ctx.baseURL, apiKey: ctx.apiKey, includeUsage: true },
    fetch: recordingFetch,
  });
  const result = await generateText({
    model: provider(ctx.model),
    tools: { weather },
    stopWhen: stepCountIs(3),
    prompt: item.prompt,
    abortSignal: ctx.signal,
    maxRetries: 0,
  });
  const saw: ClientSaw = {
    toolCalls: result.steps.flatMap((s) => s.toolCalls.map((c) => ({ name: c.toolName, args: c.input }))),
    outputTokens: result.totalUsage.outputTokens,
  };
  return { response: result.text, info: { ...saw } };
});
