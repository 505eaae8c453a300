/**
 * Contrastive prompting (CUDA-L1, arXiv 2507.14111): a prompt carries
 * earlier scored candidates for the same prompt, so the policy can reason about score differences.
 * `ExemplarDB` keeps, per item id, distinct scored responses (plain, JSON-able state carried between
 * steps); `select` picks the `best` highest and `worst` lowest; `contrastivePrompt` renders them before
 * the prompt. Ours where the paper is silent: deterministic selection (score, then age) instead of a
 * sampler, one line per exemplar, worst first. It does not ask for the paper's analysis sections.
 */
import { z } from 'zod';
import { ConfigError } from '../core/errors.js';
import type { TaskItem } from '../core/types.js';

export const contrastiveOptionsSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('none').describe('plain prompts') }).strict(),
  z
    .object({
      kind: z
        .literal('cuda_l1')
        .describe('prompts carry earlier scored candidates for the same prompt (context only, mask 0)'),
      best: z.number().int().min(0).max(16).default(2).describe('highest-scoring earlier candidates shown'),
      worst: z.number().int().min(0).max(16).default(1).describe('lowest-scoring earlier candidates shown'),
      capacity: z
        .number()
        .int()
        .min(1)
        .max(1024)
        .default(16)
        .describe('distinct candidates kept per prompt (the highest and the lowest survive eviction)'),
      maxChars: z.number().int().min(1).max(4096).default(40).describe('a candidate longer than this is cut'),
    })
    .strict(),
]);
export type ContrastiveOptions = z.infer<typeof contrastiveOptionsSchema>;
type ContrastiveOn = Extract<ContrastiveOptions, { kind: 'cuda_l1' }>;

/** One earlier candidate: its response text (one line, cut to maxChars), its reward, the step it was drawn. */
export interface Exemplar {
  text: string;
  score: number;
  step: number;
}

/** Item id → its candidates, best first (score descending, then older first, then text). */
export type ExemplarState = Record<string, Exemplar[]>;

const order = (a: Exemplar, b: Exemplar) =>
  b.score - a.score || a.step - b.step || (a.text < b.text ? -1 : a.text > b.text ? 1 : 0);

export class ExemplarDB {
  private readonly entries: ExemplarState;

  /** Checks `best + worst ≤ capacity` (a ConfigError on contrastive.capacity); `state` is copied. */
  constructor(
    private readonly options: ContrastiveOn,
    state: ExemplarState = {},
  ) {
    if (options.best + options.worst > options.capacity)
      throw new ConfigError(
        `contrastive.capacity: ${options.capacity} is less than best + worst (${options.best + options.worst})`,
        'contrastive.capacity',
      );
    this.entries = structuredClone(state);
  }

  get state(): ExemplarState {
    return this.entries;
  }

  /** The exemplars shown for `itemId`: the `best` first entries, then the `worst` last ones not already shown. */
  select(itemId: string): Exemplar[] {
    const all = this.entries[itemId] ?? [];
    const top = all.slice(0, this.options.best);
    const rest = all.slice(top.length);
    return this.options.worst ? [...top, ...rest.slice(-this.options.worst)] : top;
  }

  /** Record scored responses for `itemId` drawn at `step`: cut to one line, empty and repeated texts skipped. */
  observe(itemId: string, candidates: Array<{ text: string; score: number }>, step: number): void {
    const list = (this.entries[itemId] ??= []);
    const known = new Set(list.map((e) => e.text));
    for (const c of candidates) {
      const text = c.text.replace(/\s+/g, ' ').trim().slice(0, this.options.maxChars);
      if (!text || known.has(text) || !Number.isFinite(c.score)) continue;
      known.add(text);
      list.push({ text, score: c.score, step });
    }
    list.sort(order);
    // over capacity: the middle goes, so the top and the bottom the prompt shows both stay
    const excess = list.length - this.options.capacity;
    if (excess > 0) list.splice(this.options.capacity - this.options.worst, excess);
  }
}

/** The contrastive context: one "score text" line per exemplar, lowest score first, before the prompt. */
export function contrastiveContext(exemplars: readonly Exemplar[]): string {
  return [...exemplars]
    .sort((a, b) => -order(a, b))
    .map((e) => `${e.score.toFixed(2)} ${e.text}\n`)
    .join('');
}

/** `item` with its exemplars rendered before the prompt (the item itself when there are none). */
export function contrastivePrompt(item: TaskItem, exemplars: readonly Exemplar[]): TaskItem {
  return exemplars.length ? { ...item, prompt: contrastiveContext(exemplars) + item.prompt } : item;
}

/** The run's exemplar database (state carried in the control state), or undefined when contrastive prompting is off. */
export function exemplarDB(options: ContrastiveOptions, state?: ExemplarState): ExemplarDB | undefined {
  return options.kind === 'none' ? undefined : new ExemplarDB(options, state);
}

/**
 * The prompt tokens of `item` with as many of `exemplars` as fit in `maxTokens` (the last ones, the
 * lowest scores, are dropped first; never fewer tokens allowed than the plain prompt) and how many are shown.
 */
export function encodeContrastive(
  item: TaskItem,
  exemplars: readonly Exemplar[],
  encode: (item: TaskItem) => number[],
  maxTokens: number,
): { tokens: number[]; shown: number } {
  const plain = encode(item);
  for (let shown = exemplars.length; shown > 0; shown--) {
    const tokens = encode(contrastivePrompt(item, exemplars.slice(0, shown)));
    if (tokens.length <= Math.max(maxTokens, plain.length)) return { tokens, shown };
  }
  return { tokens: plain, shown: 0 };
}
