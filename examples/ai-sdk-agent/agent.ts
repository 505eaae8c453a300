/**
 * The agent under training, written with the Vercel AI SDK exactly as for any OpenAI-compatible
 * endpoint: `generateText` with a `weather` tool and a multi-step loop (`stopWhen`). Arbor only hands it
 * the endpoint and the episode's key (`ctx.baseURL`, `ctx.apiKey`): the run's gateway serves the policy
 * there, parses its tool calls, and records the token ids it sampled.
 */
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateText, stepCountIs, tool } from 'ai';
import { defineAgent, z } from 'arbor';
import { temperature, WEATHER_TOOL } from './weather.js';

const weather = tool({
  description: WEATHER_TOOL.description,
  inputSchema: z.object({ city: z.string().describe('the city') }),
  execute: async ({ city }) => temperature(city),
});

export default defineAgent(async (item, ctx) => {
  const provider = createOpenAICompatible({ name: 'arbor', baseURL: ctx.baseURL, apiKey: ctx.apiKey });
  const { text } = await generateText({
    model: provider(ctx.model),
    tools: { weather },
    stopWhen: stepCountIs(3),
    prompt: item.prompt,
    maxOutputTokens: 64,
    abortSignal: ctx.signal,
    maxRetries: 0,
  });
  return text;
});
