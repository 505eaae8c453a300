/**
 * Chat transcripts as SFT examples and back. `transcriptExample` checks a transcript against the tools
 * offered and renders it in the run's tool format (env/transcript.ts) as the segments that SFT encodes
 * (`sftSequence`: the same ids and mask as the episode's rollout). `episodeExporter` turns a logged
 * episode into a transcript and keeps it only when rendering it back gives the tree's token ids, one
 * for one; otherwise it says why (`arbor export` counts those).
 */
import { readFileSync } from 'node:fs';
import { DataError } from '../core/errors.js';
import { pathTo, trajectory, type RolloutTree } from '../core/tree.js';
import type { TaskItem } from '../core/types.js';
import { readSftJsonl, sftSequence, type SftExample } from '../engine/build.js';
import type { TextTokenizer } from '../engine/types.js';
import {
  checkTranscript,
  episodeMessages,
  renderTranscript,
  type TranscriptMessage,
  type TranscriptSource,
  type TranscriptTool,
} from '../env/transcript.js';
import type { ToolCallFormat, ToolSpec } from '../env/types.js';

/** A tool spec as an OpenAI function entry (a transcript's `tools`). */
export function transcriptTool(spec: ToolSpec): TranscriptTool {
  return {
    type: 'function',
    function: { name: spec.name, description: spec.description, parameters: spec.inputSchema },
  };
}

function where(source: TranscriptSource): string {
  return source.file
    ? `${source.file}${source.line !== undefined ? `:${source.line}` : ''}`
    : (source.label ?? 'transcript');
}

/**
 * One transcript as an SFT example. `agent`: the run's format and the tools its environment offers
 * (calls are checked against them and the prompt offers them); without it (a single-turn run) the
 * transcript must be one user prompt and one assistant answer without calls.
 */
export function transcriptExample(
  row: unknown,
  source: TranscriptSource,
  agent?: { format: ToolCallFormat; tools?: ToolSpec[] },
): SftExample {
  const checked = checkTranscript(row, source, agent ? agent.tools : []);
  if (!agent) {
    if (checked.turns.length !== 1) {
      const field = 'messages';
      throw new DataError(
        `${where(source)}: ${field}: a single-turn run (generate.kind is not agent) ` +
          'takes one user and one assistant message',
        source.file,
        source.line,
        field,
      );
    }
    return { prompt: checked.prompt, completion: checked.turns[0].content, source: where(source) };
  }
  const tools = agent.tools ?? checked.tools ?? [];
  const { prompt, segments } = renderTranscript(checked, agent.format, tools, source);
  return { prompt, completion: segments.map((s) => s.text).join(''), segments, source: where(source) };
}

/** `readSftJsonl`'s row reader for `arbor sft`: a row with `messages` is a transcript (tools from its own `tools`). */
export function transcriptRowReader(
  format: ToolCallFormat,
): (row: Record<string, unknown>, file: string, line: number) => SftExample | undefined {
  return (row, file, line) => ('messages' in row ? transcriptExample(row, { file, line }, { format }) : undefined);
}

/** Every line of `file` as a transcript (`sft.transcripts`); a line without `messages` is an error. */
export function readTranscripts(file: string, agent?: { format: ToolCallFormat; tools: ToolSpec[] }): SftExample[] {
  return readSftJsonl(file, (row, f, line) => {
    if (!('messages' in row))
      throw new DataError(
        `${f}:${line}: messages: missing (sft.transcripts rows are chat transcripts {"messages": [...]})`,
        f,
        line,
        'messages',
      );
    return transcriptExample(row, { file: f, line }, agent);
  });
}

/** Hash input for a transcripts file (the warm-start cache key changes when the file does). */
export function transcriptsKey(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (cause) {
    throw new DataError(
      `${file}: cannot read sft.transcripts (${(cause as Error).message})`,
      file,
      undefined,
      undefined,
      { cause },
    );
  }
}

/**
 * A task's own transcripts (`Task.transcript`) for `items`: each must open with the item's prompt (and
 * the environment's initial observation after a "\n", if any), as the rollout's prompt does.
 */
export function taskTranscripts(
  taskName: string,
  items: TaskItem[],
  transcript: (item: TaskItem) => TranscriptMessage[],
  agent: { format: ToolCallFormat; tools: ToolSpec[] },
): SftExample[] {
  return items.map((item) => {
    const source = { label: `task ${taskName}, transcript of item ${item.id}` };
    const messages = transcript(item);
    const first = Array.isArray(messages) ? (messages[0] as { content?: unknown } | undefined) : undefined;
    const content = typeof first?.content === 'string' ? first.content : undefined;
    if (content !== undefined && content !== item.prompt && !content.startsWith(`${item.prompt}\n`)) {
      const field = 'messages[0].content';
      throw new DataError(
        `${source.label}: ${field}: the user message must be the item's prompt ` +
          JSON.stringify(item.prompt.slice(0, 60)),
        undefined,
        undefined,
        field,
      );
    }
    return transcriptExample({ messages }, source, agent);
  });
}

/** An exported episode, or why it cannot be one. */
export type EpisodeExport = { messages: TranscriptMessage[]; tools: TranscriptTool[] } | { skip: string };

/**
 * `(tree, leafId) → transcript` for `arbor export` of an agent run: the episode decoded turn by turn
 * (the stop token that ended each turn dropped), as messages, kept only if `transcriptExample` renders
 * them back to exactly the trajectory's prompt, token ids and loss mask.
 */
export function episodeExporter(
  format: ToolCallFormat,
  tools: ToolSpec[],
  tokenizer: TextTokenizer,
  stopTokens: number[],
): (tree: RolloutTree, leafId: string) => EpisodeExport {
  // as agentRuntime decodes turns: the char tokenizer's specials would read as names (<eos>) in arbor text
  const keepSpecial = format.name !== 'arbor';
  const decode = (ids: number[]) =>
    (tokenizer.decode as (ids: number[], keepSpecial?: boolean) => string).call(tokenizer, ids, keepSpecial);
  const offered = tools.map(transcriptTool);
  return (tree, leafId) => {
    const t = trajectory(tree, leafId);
    const bos = tokenizer.bos !== undefined ? 1 : 0;
    if (bos && t.promptTokens[0] !== tokenizer.bos) return { skip: 'the prompt does not start with BOS' };
    const turns: Array<{ text: string; observation: string }> = [];
    for (const node of pathTo(tree, leafId).slice(1)) {
      const cut = node.mask.indexOf(0);
      const policy = cut < 0 ? node.tokens : node.tokens.slice(0, cut);
      const observation = cut < 0 ? [] : node.tokens.slice(cut);
      if (node.mask.slice(cut < 0 ? node.mask.length : cut).some((m) => m !== 0))
        return { skip: `node ${node.id}: policy tokens after the observation` };
      if (!policy.length || !stopTokens.includes(policy[policy.length - 1]))
        return { skip: `node ${node.id}: the turn did not end with a stop token` };
      turns.push({ text: decode(policy.slice(0, -1)), observation: decode(observation) });
    }
    const decoded = episodeMessages({ prompt: decode(t.promptTokens.slice(bos)), turns }, format, tools);
    if ('skip' in decoded) return decoded;
    let rendered: ReturnType<typeof sftSequence>;
    try {
      const example = transcriptExample(
        { messages: decoded.messages },
        { label: `tree ${tree.id} leaf ${leafId}` },
        { format, tools },
      );
      rendered = sftSequence(tokenizer, example);
    } catch (error) {
      if (error instanceof DataError) return { skip: error.message };
      throw error;
    }
    const inPrompt = firstDifference(rendered.prompt, t.promptTokens);
    const inResponse = firstDifference(rendered.completion, t.tokens) ?? firstDifference(rendered.mask, t.mask);
    if (inPrompt !== undefined)
      return { skip: `the rendered transcript differs from the tree at prompt token ${inPrompt}` };
    if (inResponse !== undefined)
      return { skip: `the rendered transcript differs from the tree at response token ${inResponse}` };
    return { messages: decoded.messages, tools: offered };
  };
}

function firstDifference(a: number[], b: number[]): number | undefined {
  for (let i = 0; i < Math.max(a.length, b.length); i++) if (a[i] !== b[i]) return i;
  return undefined;
}
