#!/usr/bin/env node
/**
 * A tiny MCP server over stdio: an in-memory key-value store with four tools (`get`, `set`, `list`,
 * `add`) plus `sleep` (for timeout tests). Deterministic; the store lives as long as the process.
 * Used by Arbor's MCP environment tests and README example:
 *   env: { kind: mcp, command: node, args: [examples/mcp/kv-server.mjs] }
 * Built with the official SDK v1 (`McpServer` + `StdioServerTransport`), following
 * modelcontextprotocol/typescript-sdk v1.x@2d889f2 docs/server.md.
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

const store = new Map();
const text = (t) => ({ content: [{ type: 'text', text: t }] });
const server = new McpServer({ name: 'arbor-kv', version: '1.0.0' });

server.registerTool(
  'get',
  { description: 'Read the value stored under a key.', inputSchema: { key: z.string().min(1) } },
  async ({ key }) => (store.has(key) ? text(store.get(key)) : { ...text(`no such key: ${key}`), isError: true }),
);
server.registerTool(
  'set',
  {
    description: 'Store a string value under a key (replaces any old value).',
    inputSchema: { key: z.string().min(1), value: z.string() },
  },
  async ({ key, value }) => {
    store.set(key, value);
    return text('ok');
  },
);
server.registerTool('list', { description: 'List the stored keys, sorted, one per line.', inputSchema: {} }, async () =>
  text([...store.keys()].sort().join('\n')),
);
server.registerTool(
  'add',
  {
    description: 'Add a number to the integer stored under a key (missing = 0); returns the new value.',
    inputSchema: { key: z.string().min(1), amount: z.number().int() },
  },
  async ({ key, amount }) => {
    const old = store.has(key) ? Number(store.get(key)) : 0;
    if (!Number.isInteger(old)) return { ...text(`not an integer: ${key}`), isError: true };
    const next = String(old + amount);
    store.set(key, next);
    return text(next);
  },
);
server.registerTool(
  'sleep',
  {
    description: 'Wait for ms milliseconds, then answer "slept".',
    inputSchema: { ms: z.number().int().min(0).max(60_000) },
  },
  async ({ ms }) => {
    await new Promise((resolve) => setTimeout(resolve, ms));
    return text('slept');
  },
);

await server.connect(new StdioServerTransport());
