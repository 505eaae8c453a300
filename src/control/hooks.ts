/**
 * Control methods as hooks of the producer. Each method is a module with its config section (under
 * `control:` in the run config), its state (a field of ControlState, read at the start of a step and
 * written back after it) and the hooks it needs:
 * - `selectPrompts`: before prompts are chosen, wraps the step's selection (GRESO skipping; the Select
 *   strategies of replay/select-hook.ts);
 * - `encodePrompt`: how a fresh prompt becomes tokens (contrastive prompting);
 * - `generate`: watches trees while they grow (the quality head: value-guided branching, pruning);
 * - `scored`: after the step's groups are scored (learn, update state, count).
 * `controlHooks` lists this folder's methods in the order their `scored` hooks run (the quality head
 * learns before the prompt statistics move: its features read them as of the step's start).
 */
import { ConfigError } from '../core/errors.js';
import type { Rng } from '../core/rng.js';
import { hasError, isComplete, leaves, responseTokens, type RolloutTree } from '../core/tree.js';
import type { TaskItem } from '../core/types.js';
import { correctness } from '../filter/constants.js';
import { encodeContrastive, exemplarDB, type ContrastiveOptions } from './contrastive.js';
import type { PromptStats } from './prompt-stats.js';
import type { PruneOptions } from './prune.js';
import type { QualityHeadOptions } from './quality-head.js';
import { QualityStep } from './quality-step.js';
import { adaptSkip, selectSkipping, type SkipOptions } from './skip.js';
import type { ControlState } from './types.js';
import type { QualityHook } from '../generate/types.js';

/** One step as the hooks see it. */
export interface ControlStep {
  readonly step: number;
  /** The step's generator: each hook forks its own stream by name. */
  readonly rng: Rng;
  /** This step's copy of what Control learned: hooks read their part and write it back in `scored`. */
  readonly state: ControlState;
  /** Counters logged with the step. */
  readonly info: Record<string, number>;
  /** Per-prompt success statistics as of the start of the step. */
  readonly stats: PromptStats;
}

/** A learner's batch entry: a complete, scored tree and its item. */
export type BatchEntry = { tree: RolloutTree; item: TaskItem };

/** What a method does during one step (every hook optional). */
export interface StepHooks {
  selectPrompts?(next: (count: number) => TaskItem[]): (count: number) => TaskItem[];
  encodePrompt?(next: (item: TaskItem) => number[]): (item: TaskItem) => number[];
  generate?: QualityHook;
  scored?(drawn: RolloutTree[], batch: readonly BatchEntry[]): void;
}

export interface ControlHook {
  readonly name: string;
  begin(step: ControlStep): StepHooks;
}

/** The Control sections of the run config (`control:`) the hooks read. */
export interface ControlHookOptions {
  skip: SkipOptions;
  contrastive: ContrastiveOptions;
  prune: PruneOptions;
  qualityHead: QualityHeadOptions;
}

/** What the hooks need from the run besides their options. */
export interface ControlHookContext {
  /** The generator grows trees by the quality head's values (value-guided TreePO, trace branching). */
  valueAllocation: boolean;
  /** The generator is TreePO (online pruning prunes its paths). */
  treepo: boolean;
  maxResponseTokens: number;
  /** Tokens a prompt and its response may take (contrastive exemplars must fit). */
  contextLength: number;
  samplerHiddenSize: number;
  samplerEntropy: boolean;
  decode(tokens: number[]): string;
}

/** A complete, error-free, hint-free tree: what the statistics learn from. */
export const observable = (tree: RolloutTree): boolean => isComplete(tree) && !hasError(tree) && !tree.meta?.hint;

/** The quality head (value-guided branching and ARRoL pruning): its generate hook, then it learns. */
export function qualityHook(o: ControlHookOptions, c: ControlHookContext): ControlHook | undefined {
  if (o.prune.kind !== 'none' && !c.treepo)
    throw new ConfigError(
      `control.prune.kind "${o.prune.kind}" prunes TreePO paths: it needs generate.kind "treepo"`,
      'control.prune.kind',
    );
  if (!c.valueAllocation && o.prune.kind === 'none') return undefined;
  return {
    name: 'qualityHead',
    begin: (s) => {
      const quality = new QualityStep(
        s.state.head,
        {
          head: o.qualityHead,
          prune: o.prune,
          valueAllocation: c.valueAllocation,
          maxResponseTokens: c.maxResponseTokens,
          samplerHiddenSize: c.samplerHiddenSize,
          samplerEntropy: c.samplerEntropy,
        },
        (id) => s.stats.posterior(id, s.step).mean,
        s.rng.fork('quality'),
      );
      if (o.prune.kind === 'arrol') Object.assign(s.info, { pruned_paths: 0, pruned_tokens: 0 });
      return {
        generate: quality.hook,
        scored: (drawn) => {
          Object.assign(s.info, quality.learn(drawn));
          if (quality.state) s.state.head = quality.state;
        },
      };
    },
  };
}

/** Per-prompt statistics: every complete group of the step updates them. */
export const promptStatsHook: ControlHook = {
  name: 'promptStats',
  begin: (s) => ({
    scored: (drawn) => {
      for (const tree of drawn)
        if (observable(tree)) s.stats.observe(tree.itemId, leaves(tree).map(correctness), s.step);
      s.state.prompts = s.stats.state;
    },
  }),
};

/** Contrastive prompting (CUDA-L1): a fresh prompt carries earlier scored candidates; the step's add to them. */
export function contrastiveHook(o: ControlHookOptions, c: ControlHookContext): ControlHook | undefined {
  exemplarDB(o.contrastive); // checks best + worst ≤ capacity before the run starts
  if (o.contrastive.kind === 'none') return undefined;
  return {
    name: 'contrastive',
    begin: (s) => {
      const exemplars = exemplarDB(o.contrastive, s.state.exemplars)!;
      Object.assign(s.info, { contrastive_prompts: 0, contrastive_exemplars: 0 });
      return {
        encodePrompt: (encode) => (item) => {
          const room = c.contextLength - c.maxResponseTokens;
          const { tokens, shown } = encodeContrastive(item, exemplars.select(item.id), encode, room);
          s.info.contrastive_prompts += shown > 0 ? 1 : 0;
          s.info.contrastive_exemplars += shown;
          return tokens;
        },
        scored: (drawn) => {
          for (const tree of drawn) {
            if (!observable(tree)) continue;
            const candidates = leaves(tree).map((l) => ({
              text: c.decode(responseTokens(tree, l.id)),
              score: l.reward ?? 0,
            }));
            exemplars.observe(tree.itemId, candidates, s.step);
          }
          s.state.exemplars = exemplars.state;
        },
      };
    },
  };
}

/** GRESO: skip prompts whose recent groups had zero reward variance; adapt the skip rates to the batch. */
export function skipHook(o: ControlHookOptions): ControlHook | undefined {
  const skip = o.skip;
  if (skip.kind !== 'greso') return undefined;
  return {
    name: 'skip',
    begin: (s) => {
      const state = s.state.skip ?? { pEasy: skip.start, pHard: skip.start };
      const rng = s.rng.fork('skip');
      return {
        selectPrompts: (take) => (count) => {
          const out = selectSkipping(take, count, skip, state, (id) => s.stats.record(id), rng);
          s.info.prompts_skipped += out.skipped;
          return out.items;
        },
        scored: (_drawn, batch) => {
          const means = batch
            .filter((b) => !hasError(b.tree))
            .map((b) => {
              const ls = leaves(b.tree);
              return ls.reduce((a, l) => a + correctness(l), 0) / Math.max(1, ls.length);
            });
          s.state.skip = adaptSkip(state, means, skip);
          s.info.skip_p_easy = s.state.skip.pEasy;
          s.info.skip_p_hard = s.state.skip.pHard;
        },
      };
    },
  };
}

/** This folder's Control hooks for the run's options, in the order their `scored` hooks run. */
export function controlHooks(o: ControlHookOptions, c: ControlHookContext): ControlHook[] {
  return [qualityHook(o, c), promptStatsHook, contrastiveHook(o, c), skipHook(o)].filter(
    (h): h is ControlHook => h !== undefined,
  );
}
