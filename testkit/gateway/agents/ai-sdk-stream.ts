/**
 * The AI SDK agent streamed: `streamText` with the `weather` tool and `stopWhen: stepCountIs(3)`, the
 * provider asking for usage in the stream (`includeUsage: true`). Reports what the SDK assembled from
 * the stream (every step's tool calls, the usage) beside its answer.
 */
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { jsonSchema, stepCountIs, streamText, tool } from 'ai';
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
  let failure: Error | undefined;
  const result = streamText({
    model: provider(ctx.model),
    tools: { weather },
    stopWhen: stepCountIs(3),
    prompt: item.prompt,
    abortSignal: ctx.signal,
    maxRetries: 0,
    // streamText reports errors here, not by rejecting: keep the first to throw it
    onError: ({ error }) => void (failure ??= error instanceof Error ? error : new Error(String(error))),
  });
  const text = await result.text;
  if (failure) throw failure;
  const steps = await result.steps;
  const saw: ClientSaw = {
    toolCalls: steps.flatMap((s) => s.toolCalls.map((c) => ({ name: c.toolName, args: c.input }))),
    outputTokens: (await result.totalUsage).outputTokens,
  };
  return { response: text, info: { ...saw } };
});
