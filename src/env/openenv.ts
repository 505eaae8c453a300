/**
 * OpenEnv-compatible environments: a client for the OpenEnv reset/step/state protocol, so
 * environments written for TRL / SkyRL / verifiers users (served by OpenEnv's `create_app`) train in
 * Arbor.
 *
 * Wire format, from meta-pytorch/OpenEnv@685de41 (0.2.3):
 * - `src/openenv/core/env_server/http_server.py` (`websocket_endpoint`): one WebSocket on `/ws` is one
 *   session with its own environment instance. The client sends `{"type":"reset","data":{seed?,
 *   episode_id?,...}}`, `{"type":"step","data":{<action fields>}}`, `{"type":"state"}`,
 *   `{"type":"close"}`; the server answers each with one message: `{"type":"observation","data":
 *   {"observation":{...},"reward":num|null,"done":bool}}`, `{"type":"state","data":{...}}` or
 *   `{"type":"error","data":{"message","code",...}}` (codes: `types.py` `WSErrorCode`; on
 *   CAPACITY_REACHED / FACTORY_ERROR / SESSION_ERROR it closes the socket).
 * - `serialization.py` `serialize_observation`: observation = the Observation model's fields minus
 *   `reward` and `done` (lifted beside it) and `metadata` (dropped).
 * - HTTP `POST /reset` `{seed?,episode_id?}` and `POST /step` `{action,timeout_s?}` answer
 *   `{observation,reward,done}` but build a fresh environment per request (`reset_handler`,
 *   `step_handler`): stateless, so `transport: http` is only right for single-step environments.
 * - MCP environments (`mcp_types.py`): the action `{"type":"list_tools"}` answers `{"tools":[{name,
 *   description,input_schema}]}`; `{"type":"call_tool","tool_name","arguments"}` answers `{"tool_name",
 *   "result","error":{error_type,message}|null}` (`mcp_environment.py` `_async_handle_call_tool`).
 * - `env_client.py`: the URL's http(s) scheme becomes ws(s) and `/ws` is appended.
 *
 * OpenEnv has no snapshot/restore, so `fork()` opens a new session, resets it with the same data (same
 * seed) and replays the episode's actions in order; with `verifyReplay` every replayed answer must equal
 * the recorded one, or fork fails with a DataError (the environment is not deterministic under its
 * seed). Server errors, timeouts and closed sockets become error results (in `step`) or a DataError
 * naming the URL (in `create`, `reset`, `fork`), never a hang.
 */
import WebSocket from 'ws';
import { z } from 'zod';
import { configErrorFromIssue, DataError } from '../core/errors.js';
import type { TaskItem } from '../core/types.js';
import { checkCall, contentToText } from './mcp-connection.js';
import type {
  Environment,
  EnvironmentFactory,
  StepMetrics,
  StepOptions,
  StepResult,
  ToolCall,
  ToolResult,
  ToolSpec,
} from './types.js';

const actionSchema = z
  .discriminatedUnion('mode', [
    z
      .object({
        mode: z.literal('text'),
        field: z.string().min(1).default('message').describe('the action field that receives the turn text'),
      })
      .strict(),
    z.object({ mode: z.literal('mcp') }).strict(),
  ])
  .default({ mode: 'text', field: 'message' })
  .describe(
    'how a policy turn becomes an OpenEnv action: {mode: text, field} puts the turn text in that field; ' +
      '{mode: mcp} sends each tool call as {type: call_tool, tool_name, arguments} (tools from list_tools)',
  );

export const openenvOptionsSchema = z
  .object({
    kind: z.literal('openenv').describe('an OpenEnv environment server (meta-pytorch/OpenEnv create_app)'),
    url: z
      .string()
      .regex(/^https?:\/\/[^/\s]+/, 'must be an http:// or https:// URL')
      .default('http://localhost:8000')
      .describe("the server's base URL (the WebSocket session lives at <url>/ws)"),
    transport: z
      .enum(['ws', 'http'])
      .default('ws')
      .describe(
        'ws: one WebSocket session per episode (multi-step); http: POST /reset and /step, which the server runs ' +
          'on a fresh environment per request (stateless), so only valid for single-step environments',
      ),
    action: actionSchema,
    observationField: z
      .string()
      .default('')
      .describe(
        "the observation field shown to the policy ('' = the whole observation as compact JSON, or its only field when that is a string)",
      ),
    requestTimeoutMs: z
      .number()
      .int()
      .min(100)
      .max(3_600_000)
      .default(30_000)
      .describe(
        "time limit for connecting, listing tools and replaying a fork (reset and step use the caller's timeoutMs)",
      ),
    resetData: z
      .record(z.unknown())
      .default({})
      .describe('extra fields sent with every reset (environment-specific reset options)'),
    sendEpisodeId: z.boolean().default(true).describe("send the task item's id as the reset's episode_id"),
    episodeSeconds: z
      .number()
      .min(0)
      .max(86_400)
      .default(0)
      .describe('wall-clock limit per episode in seconds: past it the episode ends with an error result (0 = none)'),
    maxResultChars: z
      .number()
      .int()
      .min(16)
      .max(10_000_000)
      .default(20_000)
      .describe('an observation longer than this is cut (the policy is told how much was cut)'),
    verifyReplay: z
      .boolean()
      .default(true)
      .describe(
        'fork by replay checks that every replayed answer equals the recorded one (fails on a nondeterministic environment)',
      ),
  })
  .strict();

export type OpenEnvOptions = z.infer<typeof openenvOptionsSchema>;

/** A failed request: `code` is the server's error code, or 'timeout' / 'closed' / 'http' / 'protocol'. */
export class OpenEnvError extends DataError {
  override name = 'OpenEnvError';
  constructor(
    message: string,
    readonly url: string,
    readonly code: string,
    /** The session can still be used (the server answered with an error message). */
    readonly recoverable: boolean,
  ) {
    super(`${url}: ${message}`, url);
  }
}

type Json = Record<string, unknown>;

/** One `/ws` session: strictly one request in flight, one answer per request. */
export class WsSession {
  private pending: { resolve: (m: Json) => void; reject: (e: OpenEnvError) => void } | undefined;
  private broken: OpenEnvError | undefined;
  private chain: Promise<unknown> = Promise.resolve();

  private constructor(
    private readonly socket: WebSocket,
    readonly url: string,
  ) {
    socket.on('message', (data) => this.onMessage(String(data)));
    socket.on('close', (code) =>
      this.fail(new OpenEnvError(`the session socket closed (code ${code})`, url, 'closed', false)),
    );
    socket.on('error', (e) => this.fail(new OpenEnvError(`socket error: ${e.message}`, url, 'closed', false)));
  }

  static open(url: string, timeoutMs: number): Promise<WsSession> {
    const wsUrl = `${url.replace(/\/+$/, '').replace(/^http/, 'ws')}/ws`;
    return new Promise((resolve, reject) => {
      const socket = new WebSocket(wsUrl, { handshakeTimeout: timeoutMs, maxPayload: 256 * 1024 * 1024 });
      socket.once('open', () => resolve(new WsSession(socket, url)));
      socket.once('error', (e) =>
        reject(new OpenEnvError(`cannot open an OpenEnv session at ${wsUrl}: ${e.message}`, url, 'closed', false)),
      );
    });
  }

  private onMessage(text: string): void {
    let msg: Json;
    try {
      msg = JSON.parse(text) as Json;
    } catch {
      return this.fail(
        new OpenEnvError(
          `the server sent a message that is not JSON: ${text.slice(0, 200)}`,
          this.url,
          'protocol',
          false,
        ),
      );
    }
    const p = this.pending;
    if (p === undefined) {
      // an unsolicited message (CAPACITY_REACHED right after connecting, or a late answer): the
      // request/answer pairing can no longer be trusted
      const d = (msg.data ?? {}) as Json;
      const what =
        msg.type === 'error'
          ? `server error (${String(d.code ?? 'UNKNOWN')})`
          : `unexpected ${String(msg.type)} message`;
      return this.fail(
        new OpenEnvError(
          `${what} outside a request: ${String(d.message ?? JSON.stringify(d)).slice(0, 300)}`,
          this.url,
          String(d.code ?? 'protocol'),
          false,
        ),
      );
    }
    this.pending = undefined;
    if (msg.type === 'error') {
      const d = (msg.data ?? {}) as Json;
      const code = String(d.code ?? 'UNKNOWN');
      p.reject(
        new OpenEnvError(
          `server error (${code}): ${String(d.message ?? '')}`,
          this.url,
          code,
          !['CAPACITY_REACHED', 'FACTORY_ERROR', 'SESSION_ERROR'].includes(code),
        ),
      );
    } else p.resolve(msg);
  }

  private fail(error: OpenEnvError): void {
    this.broken ??= error;
    const p = this.pending;
    this.pending = undefined;
    p?.reject(this.broken);
    if (this.socket.readyState === WebSocket.OPEN || this.socket.readyState === WebSocket.CONNECTING)
      this.socket.terminate();
  }

  get alive(): boolean {
    return this.broken === undefined;
  }

  /** Send one message and wait for its answer (requests queue behind each other). */
  request(message: Json, timeoutMs: number): Promise<Json> {
    const run = () =>
      new Promise<Json>((resolve, reject) => {
        if (this.broken !== undefined) return reject(this.broken);
        const timer = setTimeout(
          () =>
            this.fail(
              new OpenEnvError(
                `no answer to ${String(message.type)} within ${timeoutMs} ms`,
                this.url,
                'timeout',
                false,
              ),
            ),
          timeoutMs,
        );
        this.pending = {
          resolve: (m) => (clearTimeout(timer), resolve(m)),
          reject: (e) => (clearTimeout(timer), reject(e)),
        };
        this.socket.send(
          JSON.stringify(message),
          (e) => e && this.fail(new OpenEnvError(`cannot send: ${e.message}`, this.url, 'closed', false)),
        );
      });
    const result = this.chain.then(run, run);
    this.chain = result.catch(() => undefined);
    return result;
  }

  /** Send `{"type":"close"}` (the server ends the session) and close the socket. */
  async close(): Promise<void> {
    if (this.broken === undefined && this.socket.readyState === WebSocket.OPEN) {
      await new Promise<void>((resolve) => this.socket.send(JSON.stringify({ type: 'close' }), () => resolve()));
    }
    this.broken ??= new OpenEnvError('the session is closed', this.url, 'closed', false);
    if (this.socket.readyState === WebSocket.CLOSED) return;
    await new Promise<void>((resolve) => {
      const t = setTimeout(() => (this.socket.terminate(), resolve()), 1000);
      this.socket.once('close', () => (clearTimeout(t), resolve()));
      this.socket.close();
    });
  }
}

/** POST a JSON body; answers the parsed JSON or throws an OpenEnvError (status and body named). */
async function postJson(url: string, path: string, body: Json, timeoutMs: number, signal?: AbortSignal): Promise<Json> {
  const signals = [AbortSignal.timeout(timeoutMs), ...(signal ? [signal] : [])];
  let res: Response;
  try {
    res = await fetch(`${url.replace(/\/+$/, '')}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.any(signals),
    });
  } catch (e) {
    if (signal?.aborted) throw signal.reason ?? e;
    const timedOut = (e as Error).name === 'TimeoutError';
    throw new OpenEnvError(
      timedOut ? `no answer to POST ${path} within ${timeoutMs} ms` : `POST ${path} failed: ${(e as Error).message}`,
      url,
      timedOut ? 'timeout' : 'closed',
      true,
    );
  }
  const text = await res.text();
  if (!res.ok)
    throw new OpenEnvError(`POST ${path} answered HTTP ${res.status}: ${text.slice(0, 500)}`, url, 'http', true);
  try {
    return JSON.parse(text) as Json;
  } catch {
    throw new OpenEnvError(`POST ${path} answered non-JSON: ${text.slice(0, 200)}`, url, 'protocol', true);
  }
}

function truncate(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}…[${text.length - max} more characters cut]`;
}

/** The observation text the policy reads (see `observationField`). */
export function renderObservation(observation: Json, field: string): string {
  if (field !== '' && field in observation) {
    const v = observation[field];
    return typeof v === 'string' ? v : JSON.stringify(v);
  }
  const keys = Object.keys(observation);
  if (keys.length === 0) return '';
  if (keys.length === 1 && typeof observation[keys[0]] === 'string') return observation[keys[0]] as string;
  return JSON.stringify(observation);
}

/** A ToolResult from an MCP environment's CallToolObservation `{tool_name, result, error}`. */
function callToolResult(name: string, observation: Json): ToolResult {
  const error = observation.error as Json | null | undefined;
  if (error)
    return { name, content: `${String(error.error_type ?? 'error')}: ${String(error.message ?? '')}`, isError: true };
  const result = observation.result;
  if (result === null || result === undefined) return { name, content: '', isError: false };
  if (typeof result === 'string') return { name, content: result, isError: false };
  const r = result as Json;
  if (Array.isArray(r.content))
    return { name, content: contentToText(r), isError: r.is_error === true || r.isError === true };
  return { name, content: JSON.stringify(result), isError: false };
}

/** `{observation, reward, done}` of an answer (a ws message's `data`, or an HTTP body). */
interface Answer {
  observation: Json;
  reward?: number;
  done: boolean;
}

function toAnswer(body: Json, url: string): Answer {
  const obs = body.observation;
  if (typeof obs !== 'object' || obs === null)
    throw new OpenEnvError(
      `an answer without an observation object: ${JSON.stringify(body).slice(0, 200)}`,
      url,
      'protocol',
      false,
    );
  const r = body.reward;
  const reward = typeof r === 'number' ? r : typeof r === 'boolean' ? Number(r) : undefined;
  return { observation: obs as Json, ...(reward === undefined ? {} : { reward }), done: body.done === true };
}

/** One logged request: what `fork()` replays, with the raw answer for `verifyReplay`. */
interface LoggedStep {
  action: Json;
  answer: string;
}

interface EpisodeState {
  resetData?: Json;
  resetAnswer?: string;
  log: LoggedStep[];
  deadline: number;
  done: boolean;
}

const freshState = (): EpisodeState => ({ log: [], deadline: Infinity, done: false });
const noMetrics = (): Required<StepMetrics> => ({ toolCalls: 0, toolErrors: 0, toolTimeouts: 0 });

class OpenEnvEnvironment implements Environment {
  constructor(
    private readonly factory: OpenEnvFactory,
    /** The episode's WebSocket session (null in http mode). */
    private session: WsSession | null,
    private state: EpisodeState,
  ) {}

  get tools(): ToolSpec[] {
    return this.factory.tools;
  }

  private get o(): OpenEnvOptions {
    return this.factory.options;
  }

  /** One request on this episode's transport; the answer, its raw text (for replay checks). */
  private async send(
    type: 'reset' | 'step',
    data: Json,
    timeoutMs: number,
    signal?: AbortSignal,
  ): Promise<{ answer: Answer; raw: string }> {
    if (signal?.aborted) throw signal.reason;
    if (this.session === null) {
      const body = type === 'reset' ? data : { action: data, timeout_s: timeoutMs / 1000 };
      const reply = await postJson(this.o.url, `/${type}`, body, timeoutMs, signal);
      return { answer: toAnswer(reply, this.o.url), raw: JSON.stringify(reply) };
    }
    const session = this.session;
    const onAbort = () => void session.close();
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const msg = await session.request({ type, data }, timeoutMs);
      if (msg.type !== 'observation')
        throw new OpenEnvError(
          `expected an observation message, got ${JSON.stringify(msg).slice(0, 200)}`,
          this.o.url,
          'protocol',
          false,
        );
      return { answer: toAnswer((msg.data ?? {}) as Json, this.o.url), raw: JSON.stringify(msg) };
    } catch (e) {
      if (signal?.aborted) throw signal.reason;
      throw e;
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }

  async reset(
    item: TaskItem,
    options: { seed: number; signal?: AbortSignal; timeoutMs: number },
  ): Promise<{ observation: string }> {
    const data: Json = { ...this.o.resetData, seed: Math.abs(Math.trunc(options.seed)) };
    if (this.o.sendEpisodeId) data.episode_id = item.id.slice(0, 255);
    const { answer, raw } = await this.send('reset', data, options.timeoutMs, options.signal);
    const s = this.o.episodeSeconds;
    this.state = {
      resetData: data,
      resetAnswer: raw,
      log: [],
      deadline: s > 0 ? Date.now() + s * 1000 : Infinity,
      done: answer.done,
    };
    return {
      observation: truncate(renderObservation(answer.observation, this.o.observationField), this.o.maxResultChars),
    };
  }

  /** Send one action; server errors come back as `error` (the episode goes on if the session survived). */
  private async act(action: Json, options: StepOptions): Promise<{ answer?: Answer; error?: OpenEnvError }> {
    const left = this.state.deadline - Date.now();
    if (left <= 0) {
      this.state.done = true;
      return {
        error: new OpenEnvError(
          `the episode's time limit (episodeSeconds=${this.o.episodeSeconds}) is spent`,
          this.o.url,
          'timeout',
          false,
        ),
      };
    }
    try {
      const { answer, raw } = await this.send(
        'step',
        action,
        Math.max(1, Math.min(options.timeoutMs, left)),
        options.signal,
      );
      this.state.log.push({ action, answer: raw });
      if (answer.done) this.state.done = true;
      return { answer };
    } catch (e) {
      if (!(e instanceof OpenEnvError)) throw e;
      this.state.log.push({ action, answer: `error ${e.code}: ${e.message}` });
      if (!e.recoverable || (this.session !== null && !this.session.alive)) this.state.done = true;
      return { error: e };
    }
  }

  /** `parseErrors` (optional, as `tool-env.ts`'s ToolAction): in mcp mode a turn whose calls were all malformed does not end the episode. */
  async step(
    action: { text: string; calls: ToolCall[]; parseErrors?: ToolResult[] },
    options: StepOptions,
  ): Promise<StepResult> {
    if (this.state.done) return { results: [], done: true, metrics: noMetrics() };
    if (this.o.action.mode === 'mcp') {
      if (action.calls.length === 0 && (action.parseErrors?.length ?? 0) > 0)
        return { results: [], done: false, metrics: noMetrics() };
      return this.stepTools(action.calls, options);
    }
    const metrics = noMetrics();
    const { answer, error } = await this.act({ [this.o.action.field]: action.text }, options);
    if (error !== undefined) {
      metrics.toolErrors = 1;
      if (error.code === 'timeout') metrics.toolTimeouts = 1;
      return { results: [{ name: '', content: error.message, isError: true }], done: this.state.done, metrics };
    }
    const content = truncate(renderObservation(answer!.observation, this.o.observationField), this.o.maxResultChars);
    return {
      results: [{ name: '', content, isError: false }],
      ...(answer!.reward === undefined ? {} : { reward: answer!.reward }),
      done: this.state.done,
      metrics,
    };
  }

  /** MCP mode: each call is a `call_tool` action; a turn without calls ends the episode. */
  private async stepTools(calls: ToolCall[], options: StepOptions): Promise<StepResult> {
    const metrics = { ...noMetrics(), toolCalls: calls.length };
    if (calls.length === 0) {
      this.state.done = true;
      return { results: [], done: true, metrics };
    }
    const results: ToolResult[] = [];
    let reward: number | undefined;
    for (const call of calls) {
      let result: ToolResult;
      const checked = checkCall(call, this.tools);
      if (this.state.done)
        result = {
          name: call.name,
          content: `tool ${call.name} not called: the environment ended the episode`,
          isError: true,
        };
      else if ('error' in checked) result = checked.error;
      else {
        const { answer, error } = await this.act(
          { type: 'call_tool', tool_name: call.name, arguments: checked.args },
          options,
        );
        if (error?.code === 'timeout') metrics.toolTimeouts++;
        result =
          error !== undefined
            ? { name: call.name, content: error.message, isError: true }
            : callToolResult(call.name, answer!.observation);
        if (answer?.reward !== undefined) reward = (reward ?? 0) + answer.reward;
      }
      result.content = truncate(result.content, this.o.maxResultChars);
      if (result.isError) metrics.toolErrors++;
      results.push(result);
    }
    return { results, ...(reward === undefined ? {} : { reward }), done: this.state.done, metrics };
  }

  async fork(): Promise<Environment> {
    const state: EpisodeState = { ...this.state, log: [...this.state.log] };
    if (this.session === null) return new OpenEnvEnvironment(this.factory, null, state);
    const session = await this.factory.openSession();
    try {
      await this.replay(session, state);
    } catch (e) {
      await this.factory.release(session);
      throw e;
    }
    return new OpenEnvEnvironment(this.factory, session, state);
  }

  /** Reset a fresh session with the recorded data, replay the actions, check the answers. */
  private async replay(session: WsSession, state: EpisodeState): Promise<void> {
    if (state.resetData === undefined) return;
    const timeout = this.o.requestTimeoutMs;
    const answerOf = async (type: string, data: Json): Promise<string> => {
      try {
        return JSON.stringify(await session.request({ type, data }, timeout));
      } catch (e) {
        if (!(e instanceof OpenEnvError) || !e.recoverable)
          throw new DataError(`fork: replay failed: ${(e as Error).message}`, this.o.url);
        return `error ${e.code}: ${e.message}`;
      }
    };
    const check = (i: number, got: string, want: string | undefined) => {
      if (this.o.verifyReplay && got !== want) {
        throw new DataError(
          `${this.o.url}: fork by replay: answer ${i} differs from the recorded one (the environment is not ` +
            'deterministic under its seed; set env.verifyReplay: false to accept): ' +
            `got ${got.slice(0, 200)}, recorded ${String(want).slice(0, 200)}`,
          this.o.url,
          undefined,
          'env.verifyReplay',
        );
      }
    };
    check(0, await answerOf('reset', state.resetData), state.resetAnswer);
    for (const [i, step] of state.log.entries()) check(i + 1, await answerOf('step', step.action), step.answer);
  }

  /** The server's `state` of this episode (`{"type":"state"}`: episode_id, step_count, ...); ws only. */
  async serverState(timeoutMs = this.o.requestTimeoutMs): Promise<Json> {
    if (this.session === null)
      throw new OpenEnvError('state needs a WebSocket session (transport: ws)', this.o.url, 'protocol', true);
    const msg = await this.session.request({ type: 'state' }, timeoutMs);
    if (msg.type !== 'state')
      throw new OpenEnvError(
        `expected a state message, got ${JSON.stringify(msg).slice(0, 200)}`,
        this.o.url,
        'protocol',
        false,
      );
    return (msg.data ?? {}) as Json;
  }

  async close(): Promise<void> {
    if (this.session !== null) await this.factory.release(this.session);
  }
}

/** Holds the tool list (mcp mode) and the live sessions, closed with the factory. */
class OpenEnvFactory implements EnvironmentFactory {
  readonly kind = 'openenv';
  tools: ToolSpec[] = [];
  private listed = false;
  private readonly live = new Set<WsSession>();

  constructor(readonly options: OpenEnvOptions) {}

  async openSession(): Promise<WsSession> {
    const session = await WsSession.open(this.options.url, this.options.requestTimeoutMs);
    this.live.add(session);
    return session;
  }

  async release(session: WsSession): Promise<void> {
    this.live.delete(session);
    await session.close();
  }

  async create(): Promise<Environment> {
    const session = this.options.transport === 'ws' ? await this.openSession() : null;
    try {
      if (this.options.action.mode === 'mcp' && !this.listed) await this.listTools(session);
    } catch (e) {
      if (session !== null) await this.release(session);
      throw e;
    }
    return new OpenEnvEnvironment(this, session, freshState());
  }

  /** `{"type":"list_tools"}` once per run (it needs no reset; `mcp_types.py` ListToolsAction). */
  private async listTools(session: WsSession | null): Promise<void> {
    const { url, requestTimeoutMs } = this.options;
    const action = { type: 'list_tools' };
    const reply =
      session === null
        ? await postJson(url, '/step', { action }, requestTimeoutMs)
        : (((await session.request({ type: 'step', data: action }, requestTimeoutMs)).data ?? {}) as Json);
    const tools = toAnswer(reply, url).observation.tools;
    if (!Array.isArray(tools))
      throw new OpenEnvError(
        `list_tools answered without a tools list: ${JSON.stringify(reply).slice(0, 200)}`,
        url,
        'protocol',
        false,
      );
    this.tools = (tools as Json[]).map((t) => ({
      name: String(t.name),
      description: String(t.description ?? ''),
      inputSchema: (t.input_schema ?? t.inputSchema ?? { type: 'object' }) as Json,
    }));
    this.listed = true;
  }

  async close(): Promise<void> {
    await Promise.all([...this.live].map((s) => this.release(s)));
  }
}

/** The factory for `env: { kind: openenv, ... }` (options are parsed with `openenvOptionsSchema`). */
export function openenvEnvironmentFactory(
  options: z.input<typeof openenvOptionsSchema> | OpenEnvOptions,
): EnvironmentFactory {
  const parsed = openenvOptionsSchema.safeParse(options);
  if (!parsed.success) throw configErrorFromIssue('env', parsed.error.issues[0]);
  return new OpenEnvFactory(parsed.data);
}
