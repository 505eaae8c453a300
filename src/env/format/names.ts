/**
 * Tool names every format can offer and call: MCP's rule (SEP-986, as the pinned SDK states it in
 * `@modelcontextprotocol/sdk@1.32.2` `dist/esm/shared/toolNameValidation.js`): 1 to 128 characters of
 * `A-Z a-z 0-9 _ - .`, case-sensitive. Formats that write names bare (`arbor`'s `@get-sum(1,2)`) read
 * exactly these characters; formats that quote names (`qwen3`'s JSON) can carry any string, but a
 * name outside the rule is reported by `toolNameProblem` so an offer fails at load, not mid-run.
 */

/** Longest MCP tool name, in characters. */
export const MAX_TOOL_NAME = 128;

/** One character of an MCP tool name. */
export const TOOL_NAME_CHAR = /[A-Za-z0-9_.-]/;

/** A whole MCP-legal tool name. */
export const TOOL_NAME = /^[A-Za-z0-9_.-]{1,128}$/;

/** Why `name` is not an MCP-legal tool name, or undefined when it is. */
export function toolNameProblem(name: string): string | undefined {
  if (!name.length) return 'a tool name cannot be empty';
  if (name.length > MAX_TOOL_NAME) {
    return `a tool name is at most ${MAX_TOOL_NAME} characters (this one has ${name.length})`;
  }
  const bad = [...new Set([...name].filter((ch) => !TOOL_NAME_CHAR.test(ch)))].map((c) => JSON.stringify(c));
  if (bad.length) return `a tool name is made of A-Z a-z 0-9 _ - . (found ${bad.join(', ')})`;
  return undefined;
}
