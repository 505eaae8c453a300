/**
 * The HTTP plumbing `arbor serve` and the agent gateway share (serve/server.ts, serve/gateway.ts):
 * reading a bounded request body, parsing it as JSON (a 400 when it is not; large bodies are parsed
 * off the event loop by serve/request-worker.ts), and writing a reply (JSON, a raw body, or
 * server-sent events as they come, stopped when the client leaves).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { BadRequest, TooLarge, type ServeReply } from './validate.js';

/**
 * The body of a request, refused (413) past `limit` bytes by its size alone: at once when its
 * Content-Length says so, else as soon as the bytes read pass it (nothing is parsed). `setting` names
 * what sets the limit, for the message.
 */
export async function readBody(req: IncomingMessage, limit: number, setting = '--max-request-bytes'): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  const over = (size: string) => new TooLarge(`request body ${size}larger than ${limit} bytes (${setting})`);
  if (Number.isFinite(declared) && declared > limit) throw over(`of ${declared} bytes is `);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limit) throw over('');
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

/** A request body as JSON (an empty body is `{}`); 400 when it is not JSON. */
export function parseJson(body: string | Buffer): unknown {
  const text = typeof body === 'string' ? body : body.toString('utf8');
  if (!text.trim()) return {};
  try {
    return JSON.parse(text);
  } catch {
    throw new BadRequest('request body is not valid JSON');
  }
}

/** Write a reply: JSON, a raw body, or server-sent events as they come (stopped when the client leaves). */
export async function send(res: ServerResponse, reply: ServeReply): Promise<void> {
  if (res.headersSent || res.destroyed) {
    await drainFirst(reply);
    return;
  }
  if (reply.events) {
    const headers = { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' };
    res.writeHead(reply.status, { ...headers, ...reply.headers });
    // iterating at least once runs the stream's own cleanup (its concurrency slot) even for a client already gone
    for await (const event of reply.events) {
      if (res.destroyed) break;
      res.write(event);
    }
    res.end();
    return;
  }
  const raw = reply.raw;
  const data = raw ? raw.data : JSON.stringify(reply.body);
  const type = raw ? raw.contentType : 'application/json';
  res.writeHead(reply.status, { 'content-type': type, 'content-length': Buffer.byteLength(data), ...reply.headers });
  res.end(data);
}

/** A stream nobody will read: start it and close it, so its cleanup runs. */
async function drainFirst(reply: ServeReply): Promise<void> {
  if (!reply.events) return;
  for await (const _ of reply.events) break;
}

/**
 * A signal that aborts when the client goes away before its reply is written (vLLM: @with_cancellation):
 * the engine stops the request between decode steps.
 */
export function disconnectSignal(res: ServerResponse): AbortSignal {
  const disconnected = new AbortController();
  res.once('close', () => {
    if (!res.writableFinished) disconnected.abort();
  });
  return disconnected.signal;
}
