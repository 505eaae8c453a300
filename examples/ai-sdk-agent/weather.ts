/**
 * The example's world: every city (three lowercase letters) has a temperature that only the `weather`
 * tool knows, a hash of its name (0-39). Shared by the agent (agent.ts, the tool it offers) and the task
 * (task.ts, the answer it checks).
 */
import { createHash } from 'node:crypto';

/** The temperature of `city` (an integer from 0 to 39), as text. */
export function temperature(city: string): string {
  const h = createHash('sha256').update(`weather/${city}`).digest();
  return String(h.readUInt32BE(0) % 40);
}

/** The tool's description and argument schema, as the agent offers it (OpenAI function format). */
export const WEATHER_TOOL = {
  name: 'weather',
  description: 'The current temperature of a city, in degrees.',
  parameters: {
    type: 'object',
    properties: { city: { type: 'string', description: 'the city' } },
    required: ['city'],
    additionalProperties: false,
  },
} as const;
