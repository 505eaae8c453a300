/**
 * Local servers that speak the OpenEnv protocol (meta-pytorch/OpenEnv@685de41
 * `src/openenv/core/env_server/http_server.py`, `types.py`, `serialization.py`, `mcp_types.py`), for
 * tests of `src/env/openenv.ts`. No assertions here.
 *
 * `startGuessServer`: a "guess the number" environment served like `create_app(...)`: GET `/health`,
 * `/schema`, `/state`; POST `/reset`, `/step` (a fresh environment per request, as OpenEnv does; 422 on
 * an invalid action); `/ws` sessions (one environment per socket; reset/step/state/close; error messages
 * with OpenEnv's codes). Actions: text `{"message": "..."}` (the last integer in it is the guess;
 * "boom" raises, "slow" answers after 1.5 s) or MCP `{"type":"list_tools"}` / `{"type":"call_tool",
 * "tool_name":"guess","arguments":{"n":..}}`. The target is 1 + Rng(seed).int(100); an episode ends
 * when the guess is right (reward 1) or after 7 guesses (reward 0 each wrong guess).
 *
 * `startReplayServer`: answers `/ws` sessions from a recorded exchange and notes every client message
 * that differs from the recording (the test asserts there are none).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';
import { Rng } from '../../src/core/rng.js';

type Json = Record<string, unknown>;

const GUESS_TOOL = {
  name: 'guess',
  description: 'Guess the hidden number; answers higher, lower or correct.',
  input_schema: { properties: { n: { type: 'integer' } }, required: ['n'], type: 'object' },
};

/** A ValidationError raised while reading an action (pydantic `extra="forbid"`). */
class ActionValidationError extends Error {
  constructor(readonly errors: Json[]) {
    super('Invalid message');
  }
}

/** The environment: mirrors an OpenEnv `Environment` subclass (reset / step / state). */
class GuessEnv {
  target = 1 + new Rng(0).int(100);
  attempts = 0;
  episodeId: string | null = null;
  stepCount = 0;

  /** A nondeterministic environment ignores the seed (see `startGuessServer`'s `ignoreSeed`). */
  constructor(private readonly fixedTarget?: number) {}

  reset(data: Json): Json {
    const seed = typeof data.seed === 'number' ? data.seed : 0;
    this.target = this.fixedTarget ?? 1 + new Rng(seed).int(100);
    this.attempts = 0;
    this.stepCount = 0;
    this.episodeId = typeof data.episode_id === 'string' ? data.episode_id : `episode-${seed}`;
    return { observation: { feedback: 'Guess a number from 1 to 100.', attempts: 0 }, reward: null, done: false };
  }

  private guess(n: number): { feedback: string; reward: number; done: boolean } {
    this.attempts++;
    const feedback = n < this.target ? 'higher' : n > this.target ? 'lower' : 'correct';
    return { feedback, reward: feedback === 'correct' ? 1 : 0, done: feedback === 'correct' || this.attempts >= 7 };
  }

  async step(action: Json): Promise<Json> {
    this.stepCount++;
    if (action.type === 'list_tools') return { observation: { tools: [GUESS_TOOL] }, reward: null, done: false };
    if (action.type === 'call_tool') return this.callTool(action);
    const extra = Object.keys(action).filter((k) => k !== 'message' && k !== 'metadata');
    if (extra.length > 0 || typeof action.message !== 'string') {
      throw new ActionValidationError(
        extra.length > 0
          ? extra.map((k) => ({ type: 'extra_forbidden', loc: [k], msg: 'Extra inputs are not permitted' }))
          : [{ type: 'missing', loc: ['message'], msg: 'Field required' }],
      );
    }
    if (action.message.includes('boom')) throw new Error('the environment raised: boom');
    if (action.message.includes('slow')) await new Promise((r) => setTimeout(r, 1500));
    const numbers = action.message.match(/-?\d+/g);
    if (numbers === null)
      return { observation: { feedback: 'no number found', attempts: this.attempts }, reward: 0, done: false };
    const g = this.guess(Number(numbers[numbers.length - 1]));
    return { observation: { feedback: g.feedback, attempts: this.attempts }, reward: g.reward, done: g.done };
  }

  private callTool(action: Json): Json {
    const name = String(action.tool_name);
    const args = (action.arguments ?? {}) as Json;
    const error = (error_type: string, message: string) => ({
      observation: { tool_name: name, result: null, error: { error_type, message } },
      reward: null,
      done: false,
    });
    if (name !== 'guess') return error('tool_not_found', `Tool '${name}' not found`);
    if (!Number.isInteger(args.n)) return error('invalid_args', 'invalid argument n: an integer is required');
    const g = this.guess(args.n as number);
    const result = {
      content: [{ type: 'text', text: g.feedback, annotations: null, meta: null }],
      structured_content: { result: g.feedback },
      meta: null,
      data: g.feedback,
      is_error: false,
    };
    return { observation: { tool_name: name, result, error: null }, reward: g.reward, done: g.done };
  }

  state(): Json {
    return { episode_id: this.episodeId, step_count: this.stepCount };
  }
}

export interface TestServer {
  url: string;
  close(): Promise<void>;
}

export interface GuessServer extends TestServer {
  stats: { sessionsOpened: number; sessionsActive: number; closeMessages: number; httpRequests: string[] };
}

function listen(server: Server): Promise<string> {
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)),
  );
}

function stopper(server: Server, wss: WebSocketServer): () => Promise<void> {
  return async () => {
    for (const c of wss.clients) c.terminate();
    await new Promise<void>((r) => wss.close(() => r()));
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  };
}

function reply(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

async function readBody(req: IncomingMessage): Promise<Json> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  return text === '' ? {} : (JSON.parse(text) as Json);
}

async function handleHttp(req: IncomingMessage, res: ServerResponse, stats: GuessServer['stats']): Promise<void> {
  stats.httpRequests.push(`${req.method} ${req.url}`);
  const env = new GuessEnv();
  if (req.method === 'GET' && req.url === '/health') return reply(res, 200, { status: 'healthy' });
  if (req.method === 'GET' && req.url === '/state') return reply(res, 200, env.state());
  if (req.method === 'GET' && req.url === '/schema') {
    const action = {
      properties: { message: { type: 'string' }, metadata: { type: 'object' } },
      required: ['message'],
      type: 'object',
      additionalProperties: false,
    };
    const observation = { properties: { feedback: { type: 'string' }, attempts: { type: 'integer' } }, type: 'object' };
    return reply(res, 200, {
      action,
      observation,
      state: { properties: { episode_id: {}, step_count: { type: 'integer' } }, type: 'object' },
    });
  }
  if (req.method === 'POST' && req.url === '/reset') return reply(res, 200, env.reset(await readBody(req)));
  if (req.method === 'POST' && req.url === '/step') {
    const body = await readBody(req);
    try {
      return reply(res, 200, await env.step((body.action ?? {}) as Json));
    } catch (e) {
      if (e instanceof ActionValidationError)
        return reply(res, 422, {
          detail: e.errors.map((x) => ({ ...x, loc: ['body', 'action', ...(x.loc as string[])] })),
        });
      return reply(res, 500, { detail: (e as Error).message });
    }
  }
  reply(res, 404, { detail: 'Not Found' });
}

/** One `/ws` session, as `websocket_endpoint` runs it. */
function serveSession(ws: WebSocket, stats: GuessServer['stats'], fixedTarget?: number): void {
  const env = new GuessEnv(fixedTarget);
  const send = (m: Json) => ws.send(JSON.stringify(m));
  let queue = Promise.resolve();
  ws.on('message', (raw) => {
    queue = queue.then(async () => {
      let msg: Json;
      try {
        msg = JSON.parse(String(raw)) as Json;
      } catch (e) {
        return send({
          type: 'error',
          data: { message: `Invalid JSON: ${(e as Error).message}`, code: 'INVALID_JSON' },
        });
      }
      try {
        if (msg.type === 'reset') return send({ type: 'observation', data: env.reset((msg.data ?? {}) as Json) });
        if (msg.type === 'step') return send({ type: 'observation', data: await env.step((msg.data ?? {}) as Json) });
        if (msg.type === 'state') return send({ type: 'state', data: env.state() });
        if (msg.type === 'close') {
          stats.closeMessages++;
          return ws.close();
        }
        send({ type: 'error', data: { message: `Unknown message type: ${String(msg.type)}`, code: 'UNKNOWN_TYPE' } });
      } catch (e) {
        if (e instanceof ActionValidationError)
          return send({
            type: 'error',
            data: { message: 'Invalid message', code: 'VALIDATION_ERROR', errors: e.errors },
          });
        send({ type: 'error', data: { message: (e as Error).message, code: 'EXECUTION_ERROR' } });
      }
    });
  });
}

/**
 * The guess-the-number server on a free local port. `maxSessions` as `max_concurrent_envs`;
 * `ignoreSeed`: a nondeterministic environment whose /ws sessions alternate targets 10 and 90.
 */
export async function startGuessServer(
  options: { maxSessions?: number; ignoreSeed?: boolean } = {},
): Promise<GuessServer> {
  const stats = { sessionsOpened: 0, sessionsActive: 0, closeMessages: 0, httpRequests: [] as string[] };
  const server = createServer((req, res) => void handleHttp(req, res, stats));
  const wss = new WebSocketServer({ server, path: '/ws' });
  wss.on('connection', (ws) => {
    if (stats.sessionsActive >= (options.maxSessions ?? Infinity)) {
      ws.send(
        JSON.stringify({
          type: 'error',
          data: {
            message: `Server at capacity (${stats.sessionsActive}/${options.maxSessions} sessions)`,
            code: 'CAPACITY_REACHED',
            active_sessions: stats.sessionsActive,
            max_sessions: options.maxSessions,
          },
        }),
      );
      return ws.close();
    }
    stats.sessionsOpened++;
    stats.sessionsActive++;
    ws.on('close', () => stats.sessionsActive--);
    serveSession(ws, stats, options.ignoreSeed ? (stats.sessionsOpened % 2 === 1 ? 10 : 90) : undefined);
  });
  return { url: await listen(server), stats, close: stopper(server, wss) };
}

export interface ExchangeFixture {
  client: Json;
  item: { id: string; prompt: string; answer: string };
  seed: number;
  sessions: Array<Array<{ send: string; receive: string | null }>>;
}

export interface ReplayServer extends TestServer {
  /** Client messages that differ from the recording (or come after it ended). */
  mismatches: Array<{ session: number; index: number; got: string; want: string | undefined }>;
  /** How many recorded messages each session has consumed. */
  consumed: number[];
}

/** Answers the i-th `/ws` connection from `fixture.sessions[i]`, byte for byte. */
export async function startReplayServer(fixture: ExchangeFixture): Promise<ReplayServer> {
  const server = createServer((_req, res) => reply(res, 404, { detail: 'Not Found' }));
  const wss = new WebSocketServer({ server, path: '/ws' });
  const mismatches: ReplayServer['mismatches'] = [];
  const consumed: number[] = [];
  wss.on('connection', (ws) => {
    const session = consumed.length;
    consumed.push(0);
    const script = fixture.sessions[session] ?? [];
    ws.on('message', (raw) => {
      const index = consumed[session]++;
      const entry = script[index];
      const got = String(raw);
      if (entry?.send !== got) mismatches.push({ session, index, got, want: entry?.send });
      if (entry === undefined || entry.receive === null) return ws.close();
      ws.send(entry.receive);
    });
  });
  return { url: await listen(server), mismatches, consumed, close: stopper(server, wss) };
}
