/**
 * TypeScript tools: plain async functions with zod input schemas, in the shape of the Vercel AI
 * SDK's `tool({ description, inputSchema, execute })` (vercel/ai `packages/provider-utils/src/types/
 * tool.ts`, v5: `execute(input, { toolCallId, messages, abortSignal, experimental_context })`), so an
 * agent's existing tool code trains unchanged. The v4 name `parameters` is accepted for
 * `inputSchema`. A `Toolset` turns the schemas into JSON schema (`ToolSpec.inputSchema`, which the
 * format renders into the chat template), validates arguments before `execute` (bad arguments are an
 * error result naming the field), enforces a per-call timeout (AbortSignal + timer) and turns a
 * throwing tool into an error result with its message.
 *
 * Per-episode state (tool environments with `state`) reaches `execute` as `options.state` and as the
 * SDK's `options.experimental_context`.
 */
import { z } from 'zod';
import { toJSONSchema } from 'zod/v4';
import { isAbortError } from '../core/errors.js';
import { resolvePositionalArguments } from './format/arbor.js';
import type { JsonSchema, ToolCall, ToolResult, ToolSpec } from './types.js';

export interface ToolExecutionOptions<S = unknown> {
  toolCallId: string;
  /** Aborted when the call times out or the episode is cancelled. */
  abortSignal: AbortSignal;
  /** The AI SDK passes the conversation here; tool environments pass none. */
  messages: unknown[];
  /** The episode's state (undefined for stateless environments). */
  state: S;
  experimental_context: S;
}

/** A zod schema of either generation (zod 3 `ZodTypeAny`, or a zod/v4 schema). */
export type AnySchema =
  | z.ZodTypeAny
  | {
      _zod: unknown;
      safeParse(v: unknown): {
        success: boolean;
        data?: unknown;
        error?: { issues: Array<{ path: PropertyKey[]; message: string }> };
      };
    };

export interface ArborTool<I = any, O = unknown, S = any> {
  description?: string;
  inputSchema: AnySchema;
  execute(input: I, options: ToolExecutionOptions<S>): O | Promise<O>;
}

/** Define a tool (identity at runtime, typed input from the schema), as the AI SDK's `tool()`. */
export function tool<Schema extends z.ZodTypeAny, O, S = any>(definition: {
  description?: string;
  inputSchema: Schema;
  execute: (input: z.infer<Schema>, options: ToolExecutionOptions<S>) => O | Promise<O>;
}): ArborTool<z.infer<Schema>, O, S> {
  return definition;
}

/** An AI SDK v4 tool (`parameters`) or v5 tool (`inputSchema`), or anything else. */
export function asArborTool(value: unknown): ArborTool | undefined {
  const v = value as { inputSchema?: unknown; parameters?: unknown; execute?: unknown; description?: unknown } | null;
  if (!v || typeof v !== 'object' || typeof v.execute !== 'function') return undefined;
  const schema = (v.inputSchema ?? v.parameters) as { safeParse?: unknown } | undefined;
  if (!schema || typeof schema.safeParse !== 'function') return undefined;
  return {
    description: typeof v.description === 'string' ? v.description : undefined,
    inputSchema: schema as AnySchema,
    execute: v.execute as ArborTool['execute'],
  };
}

function numberChecks(
  def: { checks?: Array<{ kind: string; value?: number; inclusive?: boolean }> },
  out: JsonSchema,
): void {
  for (const c of def.checks ?? []) {
    if (c.kind === 'int') out.type = 'integer';
    else if (c.kind === 'min') out[c.inclusive === false ? 'exclusiveMinimum' : 'minimum'] = c.value;
    else if (c.kind === 'max') out[c.inclusive === false ? 'exclusiveMaximum' : 'maximum'] = c.value;
  }
}

function objectSchema(shape: Record<string, z.ZodTypeAny>): JsonSchema {
  const properties: Record<string, JsonSchema> = {};
  const required: string[] = [];
  for (const [key, value] of Object.entries(shape)) {
    properties[key] = zod3ToJsonSchema(value);
    if (!value.isOptional()) required.push(key);
  }
  return required.length ? { type: 'object', properties, required } : { type: 'object', properties };
}

/** JSON schema of a zod 3 schema, for the types tools use. Unknown types map to `{}` (anything). */
export function zod3ToJsonSchema(schema: z.ZodTypeAny): JsonSchema {
  const def = schema._def as Record<string, any>;
  let out: JsonSchema;
  switch (def.typeName as string) {
    case 'ZodObject':
      out = objectSchema((schema as z.AnyZodObject).shape);
      break;
    case 'ZodString': {
      out = { type: 'string' };
      for (const c of (def.checks ?? []) as Array<{ kind: string; value?: number }>) {
        if (c.kind === 'min') out.minLength = c.value;
        if (c.kind === 'max') out.maxLength = c.value;
      }
      break;
    }
    case 'ZodNumber':
      out = { type: 'number' };
      numberChecks(def, out);
      break;
    case 'ZodBoolean':
      out = { type: 'boolean' };
      break;
    case 'ZodEnum':
      out = { type: 'string', enum: [...def.values] };
      break;
    case 'ZodLiteral':
      out = { const: def.value };
      break;
    case 'ZodArray':
      out = { type: 'array', items: zod3ToJsonSchema(def.type) };
      break;
    case 'ZodUnion':
      out = { anyOf: (def.options as z.ZodTypeAny[]).map(zod3ToJsonSchema) };
      break;
    case 'ZodRecord':
      out = { type: 'object', additionalProperties: zod3ToJsonSchema(def.valueType) };
      break;
    case 'ZodOptional':
      out = zod3ToJsonSchema(def.innerType);
      break;
    case 'ZodNullable':
      out = { anyOf: [zod3ToJsonSchema(def.innerType), { type: 'null' }] };
      break;
    case 'ZodDefault':
      out = { ...zod3ToJsonSchema(def.innerType), default: def.defaultValue() };
      break;
    case 'ZodEffects':
      out = zod3ToJsonSchema(def.schema);
      break;
    default:
      out = {};
  }
  if (schema.description !== undefined) out = { ...out, description: schema.description };
  return out;
}

/** Drop `$schema` and zod 4's ±MAX_SAFE_INTEGER bounds on integers (noise in a prompt). */
function tidyV4(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(tidyV4);
  if (!value || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    if (k === '$schema' || ((k === 'minimum' || k === 'maximum') && Math.abs(v as number) === Number.MAX_SAFE_INTEGER))
      continue;
    if (k === 'additionalProperties' && v === false) continue;
    out[k] = tidyV4(v);
  }
  return out;
}

/** JSON schema of a tool's input schema (zod 3 or zod/v4). */
export function toolJsonSchema(schema: AnySchema): JsonSchema {
  if ('_zod' in schema) return tidyV4(toJSONSchema(schema as never)) as JsonSchema;
  return zod3ToJsonSchema(schema as z.ZodTypeAny);
}

/** What the output of `execute` reads as: strings as they are, `undefined` as "ok", the rest as JSON. */
export function outputText(output: unknown): string {
  if (typeof output === 'string') return output;
  if (output === undefined) return 'ok';
  try {
    return JSON.stringify(output) ?? String(output);
  } catch {
    return String(output);
  }
}

/** `text` cut to `max` characters, saying how much was cut. */
export function truncateObservation(text: string, max: number): string {
  if (text.length <= max) return text;
  return `${text.slice(0, max)}...[truncated ${text.length - max} chars]`;
}

export interface CallOutcome {
  result: ToolResult;
  timedOut: boolean;
}

export interface ToolsetOptions {
  /** Longest tool output passed back (longer is cut and says so). */
  maxObservationChars?: number;
}

export interface CallContext<S> {
  state: S;
  timeoutMs: number;
  signal?: AbortSignal;
  callId?: string;
}

export class Toolset {
  readonly specs: ToolSpec[];
  private readonly maxChars: number;
  private readonly byName = new Map<string, { tool: ArborTool; spec: ToolSpec }>();

  constructor(tools: Record<string, ArborTool>, options: ToolsetOptions = {}) {
    this.maxChars = options.maxObservationChars ?? 2000;
    for (const [name, t] of Object.entries(tools)) {
      const spec: ToolSpec = { name, description: t.description ?? '', inputSchema: toolJsonSchema(t.inputSchema) };
      this.byName.set(name, { tool: t, spec });
    }
    this.specs = [...this.byName.values()].map((e) => e.spec);
  }

  private error(name: string, content: string): ToolResult {
    // error messages are ours and short: cut only past 200 characters, whatever maxObservationChars says
    return { name, content: truncateObservation(content, Math.max(this.maxChars, 200)), isError: true };
  }

  /** Validated arguments, or the error result naming the bad field. */
  private validate(
    call: ToolCall,
    entry: { tool: ArborTool; spec: ToolSpec },
  ): { input: unknown } | { error: ToolResult } {
    const resolved = resolvePositionalArguments(call.arguments, entry.spec.inputSchema);
    if ('error' in resolved) return { error: this.error(call.name, `${call.name}: ${resolved.error}`) };
    const parsed = entry.tool.inputSchema.safeParse(resolved.args);
    if (parsed.success) return { input: parsed.data };
    const issue = parsed.error!.issues[0];
    const field = issue.path.map(String).join('.') || '(arguments)';
    return { error: this.error(call.name, `${call.name}: bad argument "${field}": ${issue.message}`) };
  }

  /** Run one call; never throws (except an abort of `context.signal`, which passes unchanged). */
  async call<S>(call: ToolCall, context: CallContext<S>): Promise<CallOutcome> {
    const entry = this.byName.get(call.name);
    if (!entry)
      return {
        result: this.error(call.name, `unknown tool "${call.name}" (tools: ${[...this.byName.keys()].join(', ')})`),
        timedOut: false,
      };
    const checked = this.validate(call, entry);
    if ('error' in checked) return { result: checked.error, timedOut: false };
    const controller = new AbortController();
    const onAbort = () => controller.abort(context.signal?.reason);
    if (context.signal?.aborted) onAbort();
    else context.signal?.addEventListener('abort', onAbort, { once: true });
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), context.timeoutMs);
    });
    const options: ToolExecutionOptions<S> = {
      toolCallId: context.callId ?? call.name,
      abortSignal: controller.signal,
      messages: [],
      state: context.state,
      experimental_context: context.state,
    };
    try {
      const run = Promise.resolve().then(() => entry.tool.execute(checked.input, options));
      const out = await Promise.race([run, timeout]);
      if (out === 'timeout') {
        controller.abort(new Error('tool call timed out'));
        run.catch(() => undefined);
        return {
          result: this.error(call.name, `${call.name}: timed out after ${context.timeoutMs} ms`),
          timedOut: true,
        };
      }
      return {
        result: { name: call.name, content: truncateObservation(outputText(out), this.maxChars), isError: false },
        timedOut: false,
      };
    } catch (e) {
      if (context.signal?.aborted && isAbortError(e)) throw e;
      return {
        result: this.error(call.name, `${call.name}: ${e instanceof Error ? e.message : String(e)}`),
        timedOut: false,
      };
    } finally {
      clearTimeout(timer);
      context.signal?.removeEventListener('abort', onAbort);
    }
  }
}
