#!/usr/bin/env node
/**
 * An MCP server (stdio) that lists its tools one per page (`nextCursor`), built on the SDK v1's
 * low-level `Server`, for the MCP environment's pagination test. Tools: `echo` (answers its `text`),
 * `getenv` (answers the variable `name` of its environment, '' when unset), `cwd` (its working
 * directory). No assertions here.
 */
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const str = (name) => ({ type: 'object', properties: { [name]: { type: 'string' } }, required: [name] });
const tools = [
  { name: 'echo', description: 'Answer the text.', inputSchema: str('text') },
  { name: 'getenv', description: 'Answer an environment variable.', inputSchema: str('name') },
  { name: 'cwd', description: 'Answer the working directory.', inputSchema: { type: 'object', properties: {} } },
];
const server = new Server({ name: 'arbor-paged', version: '1.0.0' }, { capabilities: { tools: {} } });
server.setRequestHandler(ListToolsRequestSchema, async (request) => {
  const at = Number(request.params?.cursor ?? 0);
  return { tools: [tools[at]], ...(at + 1 < tools.length ? { nextCursor: String(at + 1) } : {}) };
});
server.setRequestHandler(CallToolRequestSchema, async (request) => {
  const { name, arguments: args = {} } = request.params;
  const text =
    name === 'echo' ? String(args.text) : name === 'getenv' ? (process.env[String(args.name)] ?? '') : process.cwd();
  return { content: [{ type: 'text', text }] };
});
await server.connect(new StdioServerTransport());
