/**
 * The example's tool, written against Arbor's public API only: `code(name)` returns a name's secret
 * three-digit code. The codes come from a hash no model can learn to compute, so the only way to
 * answer a held-out name is to call the tool. `env: { kind: tools, module: ./tools.ts }` offers every
 * export that is a tool, named after the export.
 */
import { tool, z } from 'arbor';

/** A name's code: 100..999 from an FNV-1a hash of the name. */
export function secretCode(name: string): string {
  let h = 0x811c9dc5;
  for (const ch of name) h = Math.imul(h ^ ch.charCodeAt(0), 0x01000193) >>> 0;
  return String(100 + (h % 900));
}

export const code = tool({
  description: "a name's secret code",
  inputSchema: z.object({
    name: z
      .string()
      .regex(/^[a-z]{3}$/)
      .describe('three lowercase letters'),
  }),
  execute: ({ name }) => secretCode(name),
});
