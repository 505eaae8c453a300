#!/usr/bin/env node
/**
 * A tiny MCP server over stdio with one tool, `calc(expr)`: exact integer arithmetic (+ - * / and
 * parentheses; a division must be exact). The same tool as Arbor's built-in `calculator` environment,
 * served over the Model Context Protocol, so examples/calculator-mcp.yaml trains the calculator task
 * against an external tool server:
 *   env: { kind: mcp, command: node, args: [examples/mcp/calc-server.mjs] }
 * Built with the official SDK v1 (`McpServer` + `StdioServerTransport`).
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

/** Recursive descent over BigInt: expr = term (('+'|'-') term)*, term = factor (('*'|'/') factor)*. */
function evaluate(source) {
  const s = source.replace(/\s+/g, '');
  if (!s || s.length > 200 || !/^[0-9+\-*/()]+$/.test(s)) throw new Error('only integers, + - * / and parentheses');
  let i = 0;
  const factor = () => {
    if (s[i] === '-') return (i++, -factor());
    if (s[i] === '(') {
      i++;
      const v = expr();
      if (s[i++] !== ')') throw new Error('unbalanced parentheses');
      return v;
    }
    const m = /^[0-9]+/.exec(s.slice(i));
    if (!m) throw new Error(`unexpected "${s[i] ?? 'end'}" at ${i}`);
    i += m[0].length;
    return BigInt(m[0]);
  };
  const term = () => {
    let v = factor();
    while (s[i] === '*' || s[i] === '/') {
      const op = s[i++];
      const w = factor();
      if (op === '*') v *= w;
      else {
        if (w === 0n || v % w !== 0n) throw new Error('division is not exact');
        v /= w;
      }
    }
    return v;
  };
  const expr = () => {
    let v = term();
    while (s[i] === '+' || s[i] === '-') v = s[i++] === '+' ? v + term() : v - term();
    return v;
  };
  const v = expr();
  if (i !== s.length) throw new Error(`unexpected "${s[i]}" at ${i}`);
  return v;
}

const server = new McpServer({ name: 'arbor-calc', version: '1.0.0' });
server.registerTool(
  'calc',
  {
    description: 'Evaluate an integer arithmetic expression.',
    inputSchema: { expr: z.string().min(1).describe('e.g. 123*45') },
  },
  async ({ expr }) => {
    try {
      return { content: [{ type: 'text', text: String(evaluate(expr)) }] };
    } catch (error) {
      return { content: [{ type: 'text', text: error.message }], isError: true };
    }
  },
);
await server.connect(new StdioServerTransport());
