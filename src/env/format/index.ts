/**
 * Tool-call formats by name, the helper that tokenises an observation's pieces, and the MCP tool-name
 * rule every format reads (names.ts). A format renders the tool offer, parses a turn's calls (errors
 * are results, never exceptions) and renders observations; it knows nothing of tokenizers or engines.
 */
import { ConfigError } from '../../core/errors.js';
import type { TextPiece, ToolCallFormat } from '../types.js';
import { arborFormat } from './arbor.js';
import { qwen3Format, type Qwen3FormatOptions } from './qwen3.js';

export {
  arborFormat,
  arborObservationText,
  resolvePositionalArguments,
  matchBracket,
  POSITIONAL_ARGS,
} from './arbor.js';
export { qwen3Format, qwen3ToolEntry, pythonJson, type Qwen3FormatOptions } from './qwen3.js';
export { MAX_TOOL_NAME, TOOL_NAME, TOOL_NAME_CHAR, toolNameProblem } from './names.js';

export type FormatName = 'arbor' | 'qwen3';
export const FORMAT_NAMES: FormatName[] = ['arbor', 'qwen3'];

export function formatFromName(name: string, options: Qwen3FormatOptions = {}): ToolCallFormat {
  if (name === 'arbor') return arborFormat();
  if (name === 'qwen3') return qwen3Format(options);
  throw new ConfigError(
    `env.format: unknown tool-call format "${name}" (known: ${FORMAT_NAMES.join(', ')})`,
    'env.format',
  );
}

/**
 * Token ids of an observation: separators (`special`) encoded with special-token parsing on, tool
 * output with it off, so a tool that prints "<|im_end|>" cannot forge a template token.
 */
export function encodePieces(pieces: TextPiece[], encode: (text: string, special: boolean) => number[]): number[] {
  const ids: number[] = [];
  for (const p of pieces) if (p.text) ids.push(...encode(p.text, p.special));
  return ids;
}
