/**
 * Export of verified trajectories as SFT data (`arbor export`): every leaf of a run's
 * logged trees (`trees/step-N.jsonl`) whose answer is correct (the Filter stage's one correctness
 * rule), or whose reward reaches `minReward` when given, becomes a row
 * `{ prompt, completion, reward, step, item }`, decoded with the run's tokenizer. Rows are
 * deduplicated by (prompt, completion), keeping the first (earliest step); hinted trees (whose prompt
 * or response carries a hint) and error leaves are left out. `arbor sft --data` reads the file back,
 * so rejection-sampling fine-tuning is two commands. Agent runs (`transcript` given) write each episode
 * as an OpenAI chat transcript `{ messages, tools, reward, step, item }` instead, with observations and
 * turn boundaries; an episode that would not render back to its own token ids is left out and counted.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DataError } from '../core/errors.js';
import { hasError, leaves, treeFromJSON, trajectory, type RolloutTree } from '../core/tree.js';
import { correctness, isCorrect } from '../filter/constants.js';

export interface ExportRow {
  prompt: string;
  completion: string;
  reward: number;
  step: number;
  item: string;
}

/** An agent run's row: the episode as a chat transcript, the reward in a side field. */
export interface TranscriptRow {
  messages: unknown[];
  tools: unknown[];
  reward: number;
  step: number;
  item: string;
}

export interface ExportOptions {
  /** Keep leaves with reward ≥ this instead of the correct ones. */
  minReward?: number;
  /** Ids of stop tokens to drop from the end of a completion (tokenizers that decode EOS as text). */
  stopTokens?: number[];
  /** The run's tokenizer, special tokens dropped. */
  decode: (tokens: number[]) => string;
  /** Agent runs: an episode (tree, leaf) as a transcript, or why it cannot be one (run/transcripts.ts). */
  transcript?: (tree: RolloutTree, leafId: string) => { messages: unknown[]; tools: unknown[] } | { skip: string };
  /** Called after each tree file is read: files done, of `total`. */
  onFile?: (done: number, total: number) => void;
}

export interface ExportResult {
  /** Single-turn runs' rows. */
  rows: ExportRow[];
  /** Agent runs' rows (when `transcript` is given; `rows` is then empty). */
  transcripts: TranscriptRow[];
  /** Leaves read, kept, and left out as duplicates, as failing the filter, or as hinted/error/unfinished. */
  counts: { leaves: number; kept: number; duplicates: number; filtered: number; excluded: number; files: number };
  /** Transcripts: episodes left out as not rendering back to their token ids, by reason (numbers as N). */
  unrenderable: { count: number; reasons: Array<{ reason: string; count: number }> };
}

/** The logged tree files of a run directory, by step. */
export function treeFiles(runDir: string): Array<{ step: number; file: string }> {
  const dir = join(runDir, 'trees');
  if (!existsSync(dir))
    throw new DataError(`${runDir}: no trees/ directory (is it a run directory? run.logTreesEvery must be > 0)`, dir);
  return readdirSync(dir)
    .map((f) => ({ m: /^step-(\d+)\.jsonl$/.exec(f), f }))
    .filter((x): x is { m: RegExpExecArray; f: string } => !!x.m)
    .map((x) => ({ step: Number(x.m[1]), file: join(dir, x.f) }))
    .sort((a, b) => a.step - b.step);
}

function readTrees(file: string): RolloutTree[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .flatMap((line, i) => (line.trim() ? [treeFromJSON(line, `${file}:${i + 1}`)] : []));
}

export function exportRun(runDir: string, o: ExportOptions): ExportResult {
  const files = treeFiles(runDir);
  const counts = { leaves: 0, kept: 0, duplicates: 0, filtered: 0, excluded: 0, files: files.length };
  let unrenderable = 0;
  const reasons = new Map<string, number>();
  const seen = new Set<string>();
  const rows: ExportRow[] = [];
  const transcripts: TranscriptRow[] = [];
  const keep = (reward: number, c: number) => (o.minReward !== undefined ? reward >= o.minReward : isCorrect(c));
  for (const [index, { step, file }] of files.entries()) {
    for (const tree of readTrees(file)) {
      const hinted = tree.meta?.hint !== undefined;
      for (const leaf of leaves(tree)) {
        counts.leaves++;
        if (
          hinted ||
          hasError(tree) ||
          leaf.finishReason === null ||
          leaf.finishReason === 'error' ||
          leaf.finishReason === 'abort' ||
          leaf.reward === undefined
        ) {
          counts.excluded++;
          continue;
        }
        if (!keep(leaf.reward, correctness(leaf))) {
          counts.filtered++;
          continue;
        }
        const row = o.transcript ? o.transcript(tree, leaf.id) : pairRow(tree, leaf.id, o);
        if ('skip' in row) {
          unrenderable++;
          // reasons keyed without their numbers (token positions, node ids), so kinds add up
          const kind = row.skip.replace(/\d+/g, 'N');
          reasons.set(kind, (reasons.get(kind) ?? 0) + 1);
          continue;
        }
        const key = JSON.stringify('messages' in row ? row.messages : [row.prompt, row.completion]);
        if (seen.has(key)) {
          counts.duplicates++;
          continue;
        }
        seen.add(key);
        const side = { reward: leaf.reward, step, item: tree.itemId };
        if ('messages' in row) transcripts.push({ ...row, ...side });
        else rows.push({ ...row, ...side });
        counts.kept++;
      }
    }
    o.onFile?.(index + 1, files.length);
  }
  return {
    rows,
    transcripts,
    counts,
    unrenderable: { count: unrenderable, reasons: [...reasons].map(([reason, count]) => ({ reason, count })) },
  };
}

/** A single-turn leaf as {prompt, completion}: the trained tokens, trailing stop tokens dropped. */
function pairRow(tree: RolloutTree, leafId: string, o: ExportOptions): { prompt: string; completion: string } {
  const t = trajectory(tree, leafId);
  let tokens = t.tokens.filter((_, i) => t.mask[i] === 1);
  while (tokens.length && o.stopTokens?.includes(tokens[tokens.length - 1])) tokens = tokens.slice(0, -1);
  return { prompt: o.decode(t.promptTokens), completion: o.decode(tokens) };
}
