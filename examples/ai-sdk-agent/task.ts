/**
 * The example's task: "weather in abc?" asks for a city's temperature, which only the `weather` tool
 * knows (weather.ts). A hash puts one city in five in the test split, so held-out cities were never seen
 * in training. The warm start imitates a careless teacher: it looks the weather up for `demoToolRate`
 * of the cities and otherwise answers from a hunch (a temperature in the twenties), so the warm-started
 * model mostly guesses; RL through the agent's own AI SDK loop must teach it to call the tool.
 */
import { defineTask, Rng, z, type TaskItem } from 'arbor';
import { temperature, WEATHER_TOOL } from './weather.js';

const options = z
  .object({
    demoToolRate: z.number().min(0).max(1).default(0.3).describe('share of demonstrations that call the tool'),
  })
  .strict();

const letters = 'abcdefghijklmnopqrstuvwxyz';

/** True for the cities of the test split (a fixed fifth of all names). */
function isTest(city: string): boolean {
  return Number(temperature(`split/${city}`)) % 5 === 0;
}

export default defineTask(options, ({ demoToolRate }) => ({
  name: 'weather',
  description: "a city's temperature, which only the weather tool knows",
  makeItems(split, count, seed) {
    const rng = new Rng(seed).fork(`weather/${split}`);
    const items = new Map<string, TaskItem>();
    for (let tries = 0; items.size < count && tries < count * 100; tries++) {
      const city = Array.from({ length: 3 }, () => letters[rng.int(letters.length)]).join('');
      if (isTest(city) !== (split === 'test') || items.has(city)) continue;
      items.set(city, { id: city, prompt: `weather in ${city}?`, answer: temperature(city) });
    }
    return [...items.values()];
  },
  reward: ({ response, item }) => (response.trim() === item.answer ? 1 : 0),
  // the conversation the AI SDK agent has with a good (tool-calling) or careless (guessing) policy
  agentTranscript(item) {
    const tools = [{ type: 'function', function: WEATHER_TOOL }];
    const user = { role: 'user', content: item.prompt };
    const teacher = new Rng(0).fork(`teacher/${item.id}`);
    if (teacher.next() >= demoToolRate)
      return { tools, messages: [user, { role: 'assistant', content: String(20 + teacher.int(10)) }] };
    const call = {
      id: 'c1',
      type: 'function',
      function: { name: 'weather', arguments: JSON.stringify({ city: item.id }) },
    };
    return {
      tools,
      messages: [
        user,
        { role: 'assistant', content: null, tool_calls: [call] },
        { role: 'tool', tool_call_id: 'c1', content: item.answer },
        { role: 'assistant', content: item.answer },
      ],
    };
  },
}));
