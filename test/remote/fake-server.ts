/**
 * A loopback server that answers like a real vLLM / SGLang / Tinker / SkyRL deployment: each route
 * replays recorded replies (testkit/remote/fixtures/*.json) exactly — status, body bytes, and content
 * type (none for vLLM's plain-text LoRA replies) — and logs every request (method, path, headers,
 * parsed body) so tests assert both what was sent and what was parsed.
 */
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One recorded reply: JSON body, plain text, raw bytes, or a redirect. */
export interface Reply {
  status: number;
  json?: unknown;
  text?: string;
  bytes?: Buffer;
  headers?: Record<string, string>;
  /** Wait this long before answering (ms). */
  delayMs?: number;
}

export interface LoggedRequest {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: Record<string, unknown>;
  at: number;
}

export type Handler = (request: LoggedRequest, hits: number) => Reply | Promise<Reply>;

export interface FakeServer {
  url: string;
  requests: LoggedRequest[];
  /** Requests to one path. */
  to(path: string): LoggedRequest[];
  /** Stop the server; rejects when a route handler threw while it ran. */
  close(): Promise<void>;
}

/** Recorded replies of one server family, by name. */
export function fixtures(name: 'vllm' | 'sglang' | 'skyrl-tx' | 'tinker'): Record<string, Reply> {
  return JSON.parse(
    readFileSync(new URL(`../../testkit/remote/fixtures/${name}.json`, import.meta.url), 'utf8'),
  ) as Record<string, Reply>;
}

/** Replies in order; the last one repeats. */
export function sequence(...replies: Reply[]): Handler {
  return (_request, hits) => replies[Math.min(hits, replies.length) - 1];
}

export async function startFake(routes: Record<string, Handler>): Promise<FakeServer> {
  const requests: LoggedRequest[] = [];
  const hits = new Map<string, number>();
  const failures: unknown[] = [];
  const answer = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    const path = (req.url ?? '/').split('?')[0];
    const logged: LoggedRequest = {
      method: req.method ?? 'GET',
      path,
      headers: req.headers,
      body: text ? (JSON.parse(text) as Record<string, unknown>) : {},
      at: Date.now(),
    };
    requests.push(logged);
    const key = routes[`${logged.method} ${path}`] ? `${logged.method} ${path}` : path;
    const handler = routes[key];
    if (!handler) {
      // FastAPI's reply for an unknown route
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ detail: 'Not Found' }));
      return;
    }
    hits.set(key, (hits.get(key) ?? 0) + 1);
    const reply = await handler(logged, hits.get(key)!);
    if (reply.delayMs) await new Promise((r) => setTimeout(r, reply.delayMs));
    if (res.destroyed) return;
    const body =
      reply.bytes ??
      (reply.json !== undefined ? Buffer.from(JSON.stringify(reply.json)) : Buffer.from(reply.text ?? ''));
    const headers: Record<string, string> = { 'content-length': String(body.length), ...reply.headers };
    if (reply.json !== undefined) headers['content-type'] = 'application/json';
    res.writeHead(reply.status, headers);
    res.end(body);
  };
  // A route that throws (an assert inside a test's handler) answers 500, and close() rethrows it for the test.
  const server: Server = createServer((req, res) => {
    answer(req, res).catch((error: unknown) => {
      failures.push(error);
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(String(error));
    });
  });
  server.keepAliveTimeout = 1000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    requests,
    to: (path) => requests.filter((r) => r.path === path),
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      if (failures.length > 0)
        throw new Error(`fake server: ${failures.length} route handler(s) threw`, { cause: failures[0] });
    },
  };
}
