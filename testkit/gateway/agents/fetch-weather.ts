/**
 * The example's weather agent with no client library: `fetch` of the gateway's /v1/chat/completions,
 * the `weather` call executed and sent back as a `tool` message, until a reply calls no tool (at most 3
 * turns). The gateway bench times it beside the AI SDK agent: what the gateway costs without a client's own.
 */
import { defineAgent } from 'arbor';
import { temperature, WEATHER_TOOL } from '../../../examples/ai-sdk-agent/weather.js';

type Message = {
  role: string;
  content: string | null;
  tool_calls?: Array<{ id: string; function: { arguments: string } }>;
};

export default defineAgent(async (item, ctx) => {
  const messages: Array<Record<string, unknown>> = [{ role: 'user', content: item.prompt }];
  for (let turn = 0; turn < 3; turn++) {
    const res = await fetch(`${ctx.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ctx.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: ctx.model,
        messages,
        tools: [{ type: 'function', function: WEATHER_TOOL }],
        max_tokens: 64,
      }),
      signal: ctx.signal,
    });
    if (!res.ok) throw new Error(`the gateway answered ${res.status}: ${await res.text()}`);
    const message = ((await res.json()) as { choices: Array<{ message: Message }> }).choices[0].message;
    messages.push(message);
    if (!message.tool_calls?.length) return message.content ?? '';
    for (const call of message.tool_calls) {
      const { city } = JSON.parse(call.function.arguments) as { city: string };
      messages.push({ role: 'tool', tool_call_id: call.id, content: temperature(city) });
    }
  }
  return '';
});
