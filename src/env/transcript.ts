/**
 * Demonstrations as OpenAI chat transcripts (`messages` with `tool_calls` and `tool` messages, optional
 * `tools`), checked hard and rendered as the policy would write them in a tool-call format: the prompt
 * through `renderPrompt`, each assistant turn as its text plus calls (the stop token is the caller's),
 * each group of tool messages through `renderObservation`. `episodeMessages` goes the other way (a
 * rollout's decoded turns back to messages) for `arbor export`. Text only: tokens are the caller's job
 * (run/transcripts.ts), and whether a rendering equals a rollout is checked there, in token ids.
 */
import { isDeepStrictEqual } from 'node:util';
import { DataError } from '../core/errors.js';
import { arborFormat, resolvePositionalArguments } from './format/arbor.js';
import { pythonJson } from './format/qwen3.js';
import type { JsonSchema, TextPiece, ToolCallFormat, ToolResult, ToolSpec } from './types.js';

/** A tool call in an assistant message (OpenAI). `arguments` is a JSON string of an object (or the object). */
export interface TranscriptToolCall {
  id: string;
  type?: 'function';
  function: { name: string; arguments: string | Record<string, unknown> };
}

/** One message of a transcript (OpenAI chat format; `is_error` is Arbor's: a failed call's result). */
export type TranscriptMessage =
  | { role: 'user'; content: string }
  | { role: 'assistant'; content: string | null; tool_calls?: TranscriptToolCall[] }
  | { role: 'tool'; tool_call_id: string; content: string; is_error?: boolean };

/** A tool offered in a transcript's `tools` (OpenAI function spec). */
export interface TranscriptTool {
  type: 'function';
  function: { name: string; description?: string; parameters?: JsonSchema };
}

/** A transcript checked: the prompt, then the turns, each with its calls' results (empty for the last turn). */
export interface CheckedTranscript {
  prompt: string;
  turns: Array<{ content: string; calls: CheckedCall[]; results: ToolResult[] }>;
  /** The transcript's own `tools` (undefined when it has none). */
  tools?: ToolSpec[];
}

export interface CheckedCall {
  name: string;
  arguments: Record<string, unknown>;
  /** The `arguments` JSON text as given (undefined when given as an object). */
  argumentsText?: string;
}

/** Where a transcript came from, for errors (`file:line` and the field at fault). */
export interface TranscriptSource {
  file?: string;
  line?: number;
  /** Shown instead of file:line when there is no file (e.g. "task calc, item 12"). */
  label?: string;
}

/** One rendered piece of a demonstration: a policy turn (trained, the stop token follows) or observation text. */
export interface TranscriptSegment {
  text: string;
  role: 'policy' | 'env';
  /** env only: tool output, encoded without special-token parsing (as `encodePieces` does). */
  plain?: boolean;
}

function fail(source: TranscriptSource, field: string, why: string): never {
  const where = source.file
    ? `${source.file}${source.line !== undefined ? `:${source.line}` : ''}`
    : (source.label ?? 'transcript');
  throw new DataError(`${where}: ${field}: ${why}`, source.file, source.line, field);
}

const names = (tools: ToolSpec[]) => tools.map((t) => t.name).join(', ') || 'none';

const isObject = (v: unknown): v is Record<string, unknown> => !!v && typeof v === 'object' && !Array.isArray(v);

/** Text content: a string, or OpenAI's array of {type: 'text', text} parts. */
function textContent(value: unknown, source: TranscriptSource, field: string, nullable: boolean): string | null {
  if (typeof value === 'string') return value;
  if ((value === null || value === undefined) && nullable) return null;
  if (Array.isArray(value) && value.every((p) => isObject(p) && p.type === 'text' && typeof p.text === 'string')) {
    return value.map((p) => (p as { text: string }).text).join('');
  }
  return fail(
    source,
    field,
    `must be a string${nullable ? ' or null' : ''} (or an array of {"type": "text", "text"} parts)`,
  );
}

/** The transcript's `tools` as tool specs. */
function checkTools(value: unknown, source: TranscriptSource): ToolSpec[] {
  if (!Array.isArray(value))
    return fail(source, 'tools', 'must be an array of {"type": "function", "function": {...}}');
  return value.map((entry, k) => {
    const fn = isObject(entry) ? entry.function : undefined;
    if (!isObject(entry) || entry.type !== 'function' || !isObject(fn))
      fail(source, `tools[${k}]`, 'must be {"type": "function", "function": {...}}');
    if (typeof fn.name !== 'string' || !fn.name)
      fail(source, `tools[${k}].function.name`, 'must be a non-empty string');
    if (fn.parameters !== undefined && !isObject(fn.parameters))
      fail(source, `tools[${k}].function.parameters`, 'must be a JSON schema object');
    const description = typeof fn.description === 'string' ? fn.description : '';
    return {
      name: fn.name,
      description,
      inputSchema: (fn.parameters as JsonSchema | undefined) ?? { type: 'object', properties: {} },
    };
  });
}

function checkCall(
  value: unknown,
  source: TranscriptSource,
  field: string,
  offered: ToolSpec[] | undefined,
): CheckedCall & { id: string } {
  const fn = isObject(value) ? value.function : undefined;
  if (!isObject(value) || !isObject(fn))
    return fail(source, field, 'must be {"id", "type": "function", "function": {"name", "arguments"}}');
  if (typeof value.id !== 'string' || !value.id) fail(source, `${field}.id`, 'must be a non-empty string');
  if (value.type !== undefined && value.type !== 'function')
    fail(source, `${field}.type`, `must be "function" (got ${JSON.stringify(value.type)})`);
  if (typeof fn.name !== 'string' || !fn.name) fail(source, `${field}.function.name`, 'must be a non-empty string');
  if (offered && !offered.some((t) => t.name === fn.name)) {
    const names = offered.map((t) => t.name).join(', ') || 'none';
    fail(
      source,
      `${field}.function.name`,
      `calls "${fn.name}", which the environment does not offer (tools: ${names})`,
    );
  }
  let args: unknown = fn.arguments ?? {};
  const argumentsText = typeof args === 'string' ? args : undefined;
  if (argumentsText !== undefined) {
    try {
      args = JSON.parse(argumentsText);
    } catch (e) {
      fail(
        source,
        `${field}.function.arguments`,
        `is not JSON (${(e as Error).message}): ${JSON.stringify(argumentsText.slice(0, 60))}`,
      );
    }
  }
  if (!isObject(args)) fail(source, `${field}.function.arguments`, 'must be a JSON object (or its JSON text)');
  return { id: value.id as string, name: fn.name, arguments: args, argumentsText };
}

/**
 * Check one transcript (a JSONL row's object, or a task's messages) against the tools an environment
 * offers (`offered`; undefined: the transcript's own `tools`, when it has them). Errors name the field.
 */
export function checkTranscript(row: unknown, source: TranscriptSource, offered?: ToolSpec[]): CheckedTranscript {
  if (!isObject(row)) return fail(source, 'messages', 'expected an object {"messages": [...], "tools"?: [...]}');
  const own = row.tools === undefined ? undefined : checkTools(row.tools, source);
  if (own && offered) {
    own.forEach(
      (t, k) =>
        offered.some((o) => o.name === t.name) ||
        fail(
          source,
          `tools[${k}].function.name`,
          `"${t.name}" is not offered by the environment (it offers: ${names(offered)})`,
        ),
    );
  }
  const tools = offered ?? own;
  const messages = row.messages;
  if (!Array.isArray(messages) || !messages.length) return fail(source, 'messages', 'must be a non-empty array');
  messages.forEach((m, k) => isObject(m) || fail(source, `messages[${k}]`, 'must be an object with a "role"'));
  const first = messages[0] as Record<string, unknown>;
  if (first.role === 'system')
    fail(
      source,
      'messages[0].role',
      "system messages are not rendered by Arbor's tool formats (the tools section is the system part): remove it",
    );
  if (first.role !== 'user')
    fail(source, 'messages[0].role', `the first message must be the user's prompt (got ${JSON.stringify(first.role)})`);
  const prompt = textContent(first.content, source, 'messages[0].content', false) as string;
  const turns: CheckedTranscript['turns'] = [];
  for (let k = 1; k < messages.length;) {
    const m = messages[k] as Record<string, unknown>;
    const field = `messages[${k}]`;
    if (m.role !== 'assistant')
      fail(
        source,
        `${field}.role`,
        `expected an assistant turn (got ${JSON.stringify(m.role)}): ` +
          'user turns after the prompt and tool messages without a call are not episodes',
      );
    if (turns.length && !turns[turns.length - 1].calls.length)
      fail(source, `${field}.role`, 'follows an assistant turn without tool calls, which ends the episode');
    const content = textContent(m.content, source, `${field}.content`, true) ?? '';
    if (m.tool_calls !== undefined && !Array.isArray(m.tool_calls))
      fail(source, `${field}.tool_calls`, 'must be an array');
    const calls = ((m.tool_calls as unknown[] | undefined) ?? []).map((c, j) =>
      checkCall(c, source, `${field}.tool_calls[${j}]`, tools),
    );
    if (calls.length && !tools)
      fail(
        source,
        `${field}.tool_calls`,
        'calls tools but the transcript has no "tools" and no environment offers any',
      );
    if (new Set(calls.map((c) => c.id)).size !== calls.length) {
      fail(source, `${field}.tool_calls`, 'call ids must be distinct');
    }
    k++;
    // the tool messages answering this turn's calls: one per call, any order, rendered in call order
    const results = new Map<string, ToolResult>();
    for (; k < messages.length && (messages[k] as Record<string, unknown>).role === 'tool'; k++) {
      const t = messages[k] as Record<string, unknown>;
      const call = calls.find((c) => c.id === t.tool_call_id);
      if (!call)
        fail(
          source,
          `messages[${k}].tool_call_id`,
          `${JSON.stringify(t.tool_call_id)} answers no call of the assistant turn at ${field} ` +
            `(its calls: ${calls.map((c) => c.id).join(', ') || 'none'})`,
        );
      if (results.has(call.id))
        fail(source, `messages[${k}].tool_call_id`, `a second result for call ${JSON.stringify(call.id)}`);
      if (t.is_error !== undefined && typeof t.is_error !== 'boolean')
        fail(source, `messages[${k}].is_error`, 'must be a boolean');
      const text = textContent(t.content, source, `messages[${k}].content`, false) as string;
      results.set(call.id, { name: call.name, content: text, isError: t.is_error === true });
    }
    const missing = calls.find((c) => !results.has(c.id));
    if (missing)
      fail(
        source,
        `${field}.tool_calls`,
        `call ${JSON.stringify(missing.id)} (${missing.name}) has no tool message after it`,
      );
    turns.push({
      content,
      calls: calls.map(({ id: _id, ...c }) => c),
      results: calls.map((c) => results.get(c.id) as ToolResult),
    });
  }
  if (!turns.length) fail(source, 'messages', 'has no assistant turn');
  return { prompt, turns, ...(own ? { tools: own } : {}) };
}

/** An arbor call for `call`: positional when it reads back as the same arguments, else JSON. */
function arborCall(call: CheckedCall, spec: ToolSpec | undefined): string {
  const properties = Object.keys(
    ((spec?.inputSchema ?? {}) as { properties?: Record<string, unknown> }).properties ?? {},
  );
  const given = Object.keys(call.arguments);
  if (spec && given.length <= properties.length && given.every((name, k) => name === properties[k])) {
    const values = given.map((name) =>
      typeof call.arguments[name] === 'string'
        ? (call.arguments[name] as string)
        : JSON.stringify(call.arguments[name]),
    );
    const text = `@${call.name}(${values.join(',')})`;
    if (readsBack(text, call, spec)) return text;
  }
  return `@${call.name}${JSON.stringify(call.arguments)}`;
}

/** An arbor call text parses as exactly `call` (one call, no error, the same arguments after positional resolution). */
function readsBack(text: string, call: CheckedCall, spec: ToolSpec): boolean {
  const { calls, errors } = arborFormat().parseCalls(text);
  if (errors.length || calls.length !== 1 || calls[0].name !== call.name || calls[0].raw !== text) return false;
  const resolved = resolvePositionalArguments(calls[0].arguments, spec.inputSchema);
  return 'args' in resolved && isDeepStrictEqual(resolved.args, call.arguments);
}

/** The qwen3 template's call block: `arguments` text as given (as transformers passes a string), else `tojson`. */
function qwen3Call(call: CheckedCall): string {
  const args = call.argumentsText ?? pythonJson(call.arguments);
  return `<tool_call>\n{"name": "${call.name}", "arguments": ${args}}\n</tool_call>`;
}

/** An assistant turn as the policy writes it in `format` (without the stop token). */
export function renderTurn(format: ToolCallFormat, content: string, calls: CheckedCall[], tools: ToolSpec[]): string {
  if (format.name === 'arbor')
    return (
      content +
      calls
        .map((c) =>
          arborCall(
            c,
            tools.find((t) => t.name === c.name),
          ),
        )
        .join('')
    );
  if (format.name === 'qwen3') return content + (content && calls.length ? '\n' : '') + calls.map(qwen3Call).join('\n');
  throw new DataError(`transcripts: no call rendering for tool-call format "${format.name}" (arbor, qwen3)`);
}

/**
 * The demonstration of a checked transcript in `format` with `tools` offered: the prompt text (as
 * `renderPrompt` writes it) and the segments after it. Each turn is read back with `parseCalls`, so a
 * turn the policy's own parser would read differently (a final answer containing a call, a tool name
 * the format cannot write) is a DataError here, not a silently different demonstration.
 */
export function renderTranscript(
  t: CheckedTranscript,
  format: ToolCallFormat,
  tools: ToolSpec[],
  source: TranscriptSource,
): { prompt: string; segments: TranscriptSegment[] } {
  const segments: TranscriptSegment[] = [];
  t.turns.forEach((turn, k) => {
    const text = renderTurn(format, turn.content, turn.calls, tools);
    const parsed = format.parseCalls(text);
    const same =
      parsed.errors.length === 0 &&
      parsed.calls.length === turn.calls.length &&
      parsed.calls.every((c, j) => {
        const spec = tools.find((s) => s.name === c.name);
        const args = spec ? resolvePositionalArguments(c.arguments, spec.inputSchema) : { args: c.arguments };
        return c.name === turn.calls[j].name && 'args' in args && isDeepStrictEqual(args.args, turn.calls[j].arguments);
      });
    if (!same) {
      const why = turn.calls.length
        ? `its calls do not read back as written in the ${format.name} format`
        : `the final answer reads as a tool call in the ${format.name} format`;
      fail(
        source,
        `turn ${k + 1}`,
        `${why} (${JSON.stringify(text.slice(0, 80))}: ` +
          `${parsed.errors[0]?.content ?? `${parsed.calls.length} call(s) parsed`})`,
      );
    }
    segments.push({ text, role: 'policy' });
    for (const piece of format.renderObservation(turn.results)) segments.push(pieceSegment(piece));
  });
  return { prompt: format.renderPrompt(t.prompt, tools), segments };
}

function pieceSegment(piece: TextPiece): TranscriptSegment {
  return piece.special ? { text: piece.text, role: 'env' } : { text: piece.text, role: 'env', plain: true };
}

/** A rollout's episode as decoded text: the prompt, and each policy turn (stop token removed) with its observation. */
export interface DecodedEpisode {
  prompt: string;
  turns: Array<{ text: string; observation: string }>;
}

/**
 * The messages of a decoded episode in `format` (`arbor export`), or why it has none: a prompt the
 * format did not render, a malformed or unknown call, an observation that is not one result per call.
 * The caller checks that rendering the messages gives back the episode's token ids.
 */
export function episodeMessages(
  episode: DecodedEpisode,
  format: ToolCallFormat,
  tools: ToolSpec[],
): { messages: TranscriptMessage[] } | { skip: string } {
  const [head, tail] = format.renderPrompt('\u0000', tools).split('\u0000');
  const p = episode.prompt;
  if (!p.startsWith(head) || !p.endsWith(tail) || p.length < head.length + tail.length)
    return { skip: `the prompt is not rendered by the ${format.name} format with the run's tools` };
  const messages: TranscriptMessage[] = [{ role: 'user', content: p.slice(head.length, p.length - tail.length) }];
  let callId = 0;
  for (const [k, turn] of episode.turns.entries()) {
    const { calls, errors } = format.parseCalls(turn.text);
    if (errors.length) return { skip: `turn ${k + 1}: ${errors[0].content}` };
    const last = k === episode.turns.length - 1;
    if (!calls.length) {
      if (!last || turn.observation) return { skip: `turn ${k + 1} has no calls but the episode goes on` };
      messages.push({ role: 'assistant', content: turn.text });
      break;
    }
    const split = splitTurn(format, turn.text);
    const toolCalls: TranscriptToolCall[] = [];
    for (const c of calls) {
      const spec = tools.find((t) => t.name === c.name);
      if (!spec) return { skip: `turn ${k + 1} calls "${c.name}", which the environment does not offer` };
      const resolved = resolvePositionalArguments(c.arguments, spec.inputSchema);
      if ('error' in resolved) return { skip: `turn ${k + 1}: ${c.name}: ${resolved.error}` };
      const argumentsText = format.name === 'qwen3' ? qwen3ArgumentsText(c.raw) : undefined;
      toolCalls.push({
        id: `call_${++callId}`,
        type: 'function',
        function: { name: c.name, arguments: argumentsText ?? JSON.stringify(resolved.args) },
      });
    }
    messages.push({ role: 'assistant', content: split.content || null, tool_calls: toolCalls });
    if (!turn.observation) {
      if (!last) return { skip: `turn ${k + 1} has calls but no observation` };
      break;
    }
    const results = observationResults(format, turn.observation, calls.length);
    if (!results)
      return { skip: `turn ${k + 1}: the observation is not one result per call in the ${format.name} format` };
    results.forEach((r, j) =>
      messages.push({
        role: 'tool',
        tool_call_id: toolCalls[j].id,
        content: r.content,
        ...(r.isError ? { is_error: true } : {}),
      }),
    );
  }
  return { messages };
}

/** A turn's text before its calls (the template's "\n" between content and the first qwen3 block removed). */
function splitTurn(format: ToolCallFormat, text: string): { content: string } {
  if (format.name === 'qwen3') {
    const at = text.indexOf('<tool_call>');
    return { content: text.slice(0, at).replace(/\n$/, '') };
  }
  const at = text.indexOf('@');
  return { content: at < 0 ? text : text.slice(0, at) };
}

/** The `arguments` JSON text inside a qwen3 block written as the template writes it, else undefined. */
function qwen3ArgumentsText(raw: string): string | undefined {
  const m = /^<tool_call>\n\{"name": "(?:[^"\\]|\\.)*", "arguments": ([\s\S]*)\}\n<\/tool_call>$/.exec(raw);
  if (!m) return undefined;
  try {
    return isObject(JSON.parse(m[1])) ? m[1] : undefined;
  } catch {
    return undefined;
  }
}

/** The results an observation text shows, when it is exactly `count` results in `format`. */
function observationResults(format: ToolCallFormat, text: string, count: number): ToolResult[] | undefined {
  let outputs: Array<{ content: string; isError: boolean }>;
  if (format.name === 'qwen3') {
    const head = '\n<|im_start|>user\n<tool_response>';
    const tail = format.renderObservation([{ name: '', content: '', isError: false }]).at(-1)?.text ?? '';
    if (!text.startsWith(head) || !text.endsWith(tail) || text.length < head.length + tail.length) return undefined;
    const chunks = text.slice(head.length, text.length - tail.length).split('</tool_response>\n<tool_response>');
    if (chunks.some((c) => !c.startsWith('\n') || !c.endsWith('\n'))) return undefined;
    outputs = chunks
      .map((c) => c.slice(1, -1))
      .map((o) => (o.startsWith('Error: ') ? { content: o.slice(7), isError: true } : { content: o, isError: false }));
  } else {
    if (!text.startsWith('\n') || !text.endsWith('\n')) return undefined;
    const entries = text.slice(1, -1).split(/\n(?=[=!] )/);
    if (entries.some((e) => !/^[=!] /.test(e))) return undefined;
    outputs = entries.map((e) => ({ content: e.slice(2), isError: e[0] === '!' }));
  }
  return outputs.length === count ? outputs.map((o) => ({ name: '', ...o })) : undefined;
}
