/**
 * The world of the client tests: every city has a temperature only the `weather` tool knows (a hash of
 * its name, 0-39), a task that asks for it (reward 1 for exactly the number), and the script a
 * ScriptedPolicy plays (testkit/gateway/scripted-policy.ts): to a question it answers with a `weather`
 * call exactly as Qwen3's chat template renders one, to a tool result with the number (even k) or the
 * number and a unit (odd k, reward 0), so the two episodes of a group differ and RL has a gradient.
 * Shared by the agent modules (agents/*.ts), the harness and the tests; no I/O.
 */
import { createHash } from 'node:crypto';
import { defineTask, type TaskItem } from 'arbor';

/** The temperature of `city` (an integer from 0 to 39), as text. */
export function temperature(city: string): string {
  return String(createHash('sha256').update(`weather/${city}`).digest().readUInt32BE(0) % 40);
}

/** A JSON schema of an object with string properties (the AI SDK's jsonSchema and openai's `parameters` take it). */
type ObjectSchema = {
  type: 'object';
  properties: Record<string, { type: 'string' }>;
  required: string[];
  additionalProperties: boolean;
};

/** The tool as an OpenAI function (name, description, JSON schema of its arguments). */
export const WEATHER_FUNCTION: { name: string; description: string; parameters: ObjectSchema } = {
  name: 'weather',
  description: 'temperature of a city',
  parameters: {
    type: 'object',
    properties: { city: { type: 'string' } },
    required: ['city'],
    additionalProperties: false,
  },
};

/** What an agent module reports of what its client parsed (the `info` of its answer), to compare with the script. */
export interface ClientSaw {
  /** The tool calls the client library parsed, in order. */
  toolCalls: Array<{ name: string; args: unknown }>;
  /** Tool calls the client could not parse (LangChain's invalid_tool_calls). */
  invalidToolCalls?: number;
  /** Output tokens the client read from the usage the gateway reported (summed over calls). */
  outputTokens?: number;
}

/** `weather in <city>?` for `count` three-letter cities, a fresh set per seed. */
export function weatherItems(count: number, seed: number): TaskItem[] {
  return Array.from({ length: count }, (_, i) => {
    const city = createHash('sha256').update(`city/${seed}/${i}`).digest('hex').replace(/\d/g, '').slice(0, 3);
    return { id: city, prompt: `weather in ${city}?`, answer: temperature(city) };
  });
}

export const weatherTask = defineTask({
  name: 'weather',
  makeItems: (_split, count, seed) => weatherItems(count, seed),
  reward: ({ response, item }) => (response.trim() === item.answer ? 1 : 0),
});

/** The reply of call k to the text of a prompt (special tokens kept): a tool call, or the tool's result. */
export function weatherScript(prompt: string, k: number): string | undefined {
  const results = [...prompt.matchAll(/<tool_response>\n(.*?)\n<\/tool_response>/gs)];
  if (results.length) {
    const value = results[results.length - 1][1];
    return k % 2 === 0 ? value : `${value} degrees`;
  }
  const city = /weather in (\w+)\?/.exec(prompt)?.[1];
  return city && `<tool_call>\n{"name": "weather", "arguments": {"city": "${city}"}}\n</tool_call>`;
}
