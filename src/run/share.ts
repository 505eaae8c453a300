/**
 * SAPO rollout sharing (Gensyn, arXiv 2509.08721) through a shared directory. After each step's batch
 * is produced, a learner publishes its finished groups AS TEXT (task item + response texts) in one file
 * `<learner>.step-<N>.json`, written atomically (temporary file + rename), and trains on I of its own
 * groups and J groups drawn uniformly from peers' files, re-encoded with its own tokenizer and prompt
 * template, re-scored by its own reward, with behaviour log-probs recomputed under its own policy
 * (so, as in SAPO's code, external rollouts get no importance correction: w = 1 at the first update).
 * Bounded in file size, files, groups, responses, text length and age; a corrupt, partial or oversized
 * file is skipped and counted, never a crash; a learner never reads its own files. Deterministic given
 * run.seed and the files present. Not done: HTTP transport, agent (multi-turn) runs, and remembering
 * across `--resume` which external groups were already trained on.
 */
import { mkdirSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { z } from 'zod';
import { ConfigError } from '../core/errors.js';
import { writeFileAtomic } from '../core/files.js';
import { Rng } from '../core/rng.js';
import {
  addNode,
  createTree,
  hasError,
  leaves,
  responseTokens,
  ROOT_ID,
  treeHint,
  type FinishReason,
  type RolloutTree,
} from '../core/tree.js';
import type { TaskItem } from '../core/types.js';
import type { Datum, TextTokenizer } from '../engine/types.js';
import { scoreTrees } from '../filter/score-trees.js';
import type { RewardFunction } from '../filter/types.js';
import { loadReward } from '../filter/registry.js';
import type { Engine } from '../engine/build.js';
import type { Task } from '../tasks/types.js';
import type { ArborConfig } from './config.js';

const LEARNER_ID = /^[A-Za-z0-9_-]{1,64}$/;
const FILE_NAME = /^([A-Za-z0-9_-]{1,64})\.step-(\d{1,9})\.json$/;
const FORMAT = 'arbor.share.v1';

export const shareOptionsSchema = z
  .object({
    dir: z
      .string()
      .min(1)
      .optional()
      .describe('shared directory the learners exchange groups through; absent = sharing off (plain RL)'),
    learner: z
      .string()
      .regex(LEARNER_ID)
      .optional()
      .describe("this learner's id, unique among the learners sharing `dir` (required with dir; [A-Za-z0-9_-]{1,64})"),
    local: z.number().int().min(0).max(4096).default(4).describe('I: own groups trained on per step (SAPO best: 4)'),
    external: z.number().int().min(0).max(4096).default(4).describe('J: peer groups trained on per step (SAPO: 4)'),
    maxAge: z
      .number()
      .int()
      .min(0)
      .max(1_000_000)
      .default(2)
      .describe('peer groups published at peer step s are eligible at step t when t − maxAge ≤ s ≤ t'),
    dropZeroVariance: z
      .boolean()
      .default(true)
      .describe('drop peer groups whose re-scored rewards are all equal (the paper; the rl-swarm code keeps them)'),
    publishMax: z.number().int().min(0).max(4096).default(64).describe('own groups published per step, at most'),
    keepSteps: z
      .number()
      .int()
      .min(1)
      .max(1_000_000)
      .default(16)
      .describe('own files older than this many steps are deleted (bounds the directory)'),
    maxFileBytes: z
      .number()
      .int()
      .min(1024)
      .max(1 << 30)
      .default(4 << 20)
      .describe('larger peer files are skipped (bytes)'),
    maxFiles: z.number().int().min(1).max(100_000).default(1024).describe('peer files read per step, at most'),
    maxResponses: z.number().int().min(1).max(4096).default(64).describe('responses per group, at most'),
    maxChars: z.number().int().min(1).max(1_000_000).default(16_384).describe('characters per prompt or response'),
    waitMs: z
      .number()
      .int()
      .min(0)
      .max(600_000)
      .default(0)
      .describe('wait up to this long (ms) for J eligible peer groups before training with fewer'),
    pollMs: z
      .number()
      .int()
      .min(1)
      .max(60_000)
      .default(50)
      .describe('how often (ms) the directory is re-read while waiting'),
  })
  .strict()
  .superRefine((o, ctx) => {
    if (o.dir !== undefined && o.learner === undefined)
      ctx.addIssue({ code: 'custom', path: ['learner'], message: 'share.dir needs share.learner (a unique id)' });
  });

export type ShareOptions = z.infer<typeof shareOptionsSchema>;

/** One group as it travels: the task item (prompt, gold answer, verifier data) and its response texts. */
export interface SharedGroup {
  item: TaskItem;
  responses: Array<{ text: string; finishReason: FinishReason }>;
}

const itemSchema = z
  .object({
    id: z.string().min(1).max(1024),
    prompt: z.string(),
    answer: z.string(),
    demonstration: z.string().optional(),
    difficulty: z.number().optional(),
    meta: z.record(z.unknown()).optional(),
  })
  .strict();

const fileSchema = (o: ShareOptions) =>
  z.object({
    format: z.literal(FORMAT),
    learner: z.string().regex(LEARNER_ID),
    step: z.number().int().min(0),
    groups: z.array(
      z.object({
        item: itemSchema.refine((i) => i.prompt.length <= o.maxChars, 'prompt longer than share.maxChars'),
        responses: z
          .array(z.object({ text: z.string().max(o.maxChars), finishReason: z.enum(['stop', 'length']) }))
          .min(1)
          .max(o.maxResponses),
      }),
    ),
  });

/** A peer group as read: where it came from (`<learner>/<step>/<index>`, its identity) and its content. */
export interface PeerGroup extends SharedGroup {
  key: string;
  learner: string;
  step: number;
}

/** What a read found: eligible peer groups (sorted by file name, then index) and the files skipped. */
export interface PeerRead {
  groups: PeerGroup[];
  skippedFiles: number;
}

export function shareFileName(learner: string, step: number): string {
  return `${learner}.step-${String(step).padStart(9, '0')}.json`;
}

/** The file transport: atomic publish, bounded and fault-tolerant read. No tokens, no policy. */
export class ShareDir {
  readonly dir: string;

  constructor(private readonly options: ShareOptions) {
    if (!options.dir || !options.learner) throw new ConfigError('share: dir and learner are required', 'share.dir');
    this.dir = resolve(options.dir);
    mkdirSync(this.dir, { recursive: true });
  }

  /** Write this learner's groups of `step` (temp + rename: readers see all of it or nothing); prune old files. */
  publish(step: number, groups: SharedGroup[]): string {
    const { learner, keepSteps } = this.options;
    const file = join(this.dir, shareFileName(learner!, step));
    writeFileAtomic(file, JSON.stringify({ format: FORMAT, learner, step, groups }));
    for (const name of readdirSync(this.dir)) {
      const m = FILE_NAME.exec(name);
      if (m && m[1] === learner && Number(m[2]) < step - keepSteps) rmSync(join(this.dir, name), { force: true });
    }
    return file;
  }

  /** Peers' groups published at steps [step − maxAge, step]; this learner's own files are never read. */
  read(step: number): PeerRead {
    const { learner, maxAge, maxFiles, maxFileBytes } = this.options;
    const schema = fileSchema(this.options);
    const names = readdirSync(this.dir)
      .map((name) => ({ name, m: FILE_NAME.exec(name) }))
      .filter(({ m }) => m && m[1] !== learner && Number(m[2]) <= step && Number(m[2]) >= step - maxAge)
      .map(({ name }) => name)
      .sort()
      .slice(0, maxFiles);
    const groups: PeerGroup[] = [];
    let skippedFiles = 0;
    for (const name of names) {
      const file = join(this.dir, name);
      const [, peer, s] = FILE_NAME.exec(name)!;
      try {
        if (statSync(file).size > maxFileBytes) throw new Error('too large');
        const parsed = schema.safeParse(JSON.parse(readFileSync(file, 'utf8')));
        if (!parsed.success || parsed.data.learner !== peer || parsed.data.step !== Number(s)) throw new Error('bad');
        parsed.data.groups.forEach((g, i) =>
          groups.push({ ...g, key: `${peer}/${Number(s)}/${i}`, learner: peer, step: Number(s) }),
        );
      } catch {
        // a file deleted under us, cut short, corrupt or oversized: skipped and counted, never a crash
        skippedFiles++;
      }
    }
    return { groups, skippedFiles };
  }
}

/** What the learner's side needs: its tokenizer and prompt template, its policy's log-probs, its reward. */
export interface ShareDeps {
  tokenizer: Pick<TextTokenizer, 'encode' | 'decode' | 'eos'>;
  encodePrompt: (item: TaskItem) => number[];
  logprobs: (data: Datum[]) => Promise<number[][]>;
  reward: RewardFunction;
  seed: number;
  maxResponseTokens: number;
  /** Prompt + response tokens must fit (embedded engines); undefined = no limit. */
  contextLength?: number;
  rewardOptions: { concurrency: number; timeoutMs: number; failureReward: number };
}

export interface ShareMix {
  /** I own trees then J peer trees: the step's training batch. */
  trees: RolloutTree[];
  /** share_* counters for the step log. */
  metrics: Record<string, number>;
}

/** The learner's side of SAPO: publish, read, re-encode, re-score, compose I own + J peer groups. */
export class Share {
  private readonly transport: ShareDir;
  /** Peer groups trained on already (by key): each is used at most once. */
  private readonly used = new Set<string>();

  constructor(
    readonly options: ShareOptions,
    private readonly deps: ShareDeps,
  ) {
    this.transport = new ShareDir(options);
  }

  /** The group of a finished own tree as text, or undefined (hinted trees, multi-turn episodes, errors). */
  toShared(tree: RolloutTree, item: TaskItem): SharedGroup | undefined {
    if (hasError(tree) || treeHint(tree)) return undefined;
    const done = leaves(tree).filter((l) => l.finishReason === 'stop' || l.finishReason === 'length');
    if (!done.length || done.some((l) => l.episode)) return undefined;
    const responses = done.slice(0, this.options.maxResponses).map((l) => ({
      text: this.deps.tokenizer.decode(responseTokens(tree, l.id)).slice(0, this.options.maxChars),
      finishReason: l.finishReason as 'stop' | 'length',
    }));
    if (item.prompt.length > this.options.maxChars) return undefined;
    return { item, responses };
  }

  /**
   * Step `step` at learner weight version `version`: publish `own` (usable trees with their items),
   * wait (up to waitMs) for J eligible peer groups, and return I own + J peer trees.
   */
  async mix(step: number, own: Array<{ tree: RolloutTree; item: TaskItem }>, version: number): Promise<ShareMix> {
    const o = this.options;
    const started = Date.now();
    const shared = own.flatMap((e) => this.toShared(e.tree, e.item) ?? []).slice(0, o.publishMax);
    this.transport.publish(step, shared);
    const rng = new Rng(this.deps.seed).fork(`share/${step}`);
    const localTrees = pick(
      own.map((e) => e.tree),
      o.local,
      rng.fork('local'),
    );
    const deadline = Date.now() + o.waitMs;
    let read = this.transport.read(step);
    let candidates = read.groups.filter((g) => !this.used.has(g.key));
    while (o.external > 0 && candidates.length < o.external && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, o.pollMs));
      read = this.transport.read(step);
      candidates = read.groups.filter((g) => !this.used.has(g.key));
    }
    // drawn uniformly; zero-variance draws are replaced by further draws while candidates last
    const order = shuffled(candidates, rng.fork('external'));
    const external: RolloutTree[] = [];
    let skippedGroups = 0;
    let zeroVariance = 0;
    for (let at = 0; at < order.length && external.length < o.external;) {
      const batch = order.slice(at, at + (o.external - external.length));
      at += batch.length;
      const built = await this.rebuild(batch, version);
      skippedGroups += built.skipped;
      for (const { group, tree } of built.trees) {
        this.used.add(group.key);
        const rewards = leaves(tree).map((l) => l.reward ?? 0);
        if (o.dropZeroVariance && rewards.every((r) => r === rewards[0])) zeroVariance++;
        else external.push(tree);
      }
    }
    return {
      trees: [...localTrees, ...external],
      metrics: {
        share_published: shared.length,
        share_local_trained: localTrees.length,
        share_external_trained: external.length,
        share_external_available: candidates.length,
        share_skipped_files: read.skippedFiles,
        share_skipped_groups: skippedGroups,
        share_zero_variance_dropped: zeroVariance,
        ms_share: Date.now() - started,
        // which peers this step's J groups came from (at most J keys)
        ...countBy(external.map((t) => `share_external_from_${String(t.meta?.peer)}`)),
      },
    };
  }

  /** Re-encode peer groups under this learner's tokenizer, recompute behaviour log-probs, re-score. */
  async rebuild(
    groups: PeerGroup[],
    version: number,
  ): Promise<{ trees: Array<{ group: PeerGroup; tree: RolloutTree }>; skipped: number }> {
    const { tokenizer, maxResponseTokens, contextLength } = this.deps;
    const built: Array<{
      group: PeerGroup;
      tree: RolloutTree;
      responses: Array<{ tokens: number[]; finish: FinishReason }>;
    }> = [];
    let skipped = 0;
    for (const group of groups) {
      try {
        const prompt = this.deps.encodePrompt(group.item);
        const responses = group.responses.map((r) => {
          let tokens = tokenizer.encode(r.text);
          let finish: FinishReason = r.finishReason;
          if (finish === 'stop') tokens = [...tokens, tokenizer.eos];
          if (tokens.length > maxResponseTokens) [tokens, finish] = [tokens.slice(0, maxResponseTokens), 'length'];
          return { tokens, finish };
        });
        const longest = Math.max(...responses.map((r) => r.tokens.length));
        if (contextLength !== undefined && prompt.length + longest > contextLength) throw new Error('too long');
        if (!prompt.length || responses.some((r) => r.tokens.length === 0)) throw new Error('empty');
        const tree = createTree(`share/${group.key}`, group.item.id, prompt, { external: true, peer: group.learner });
        built.push({ group, tree, responses });
      } catch {
        // text this learner's tokenizer cannot encode, or a group that does not fit its context
        this.used.add(group.key);
        skipped++;
      }
    }
    // behaviour log-probs = this learner's current policy (one forward over every response)
    const datums: Datum[] = built.flatMap(({ tree, responses }) =>
      responses.map((r) => {
        const sequence = [...tree.nodes[ROOT_ID].tokens, ...r.tokens];
        return {
          inputTokens: sequence.slice(0, -1),
          targetTokens: sequence.slice(1),
          weights: new Array(sequence.length - 1).fill(0),
        };
      }),
    );
    const logprobs = datums.length ? await this.deps.logprobs(datums) : [];
    let d = 0;
    for (const { tree, responses } of built) {
      const P = tree.nodes[ROOT_ID].tokens.length;
      for (const r of responses) {
        const lp = logprobs[d++].slice(P - 1, P - 1 + r.tokens.length);
        addNode(tree, ROOT_ID, { tokens: r.tokens, logprobs: lp, finishReason: r.finish, weightVersion: version });
      }
    }
    const trees = built.map((b) => b.tree);
    const items = new Map(built.map((b) => [b.group.item.id, b.group.item]));
    await scoreTrees(trees, items, this.deps.reward, {
      decode: (tokens) => tokenizer.decode(tokens),
      ...this.deps.rewardOptions,
    });
    const ok = built.filter((b) => !hasError(b.tree));
    for (const b of built) if (hasError(b.tree)) this.used.add(b.group.key);
    return { trees: ok.map(({ group, tree }) => ({ group, tree })), skipped: skipped + built.length - ok.length };
  }
}

/** `count` elements drawn uniformly without replacement, returned in their original order. */
function pick<T>(xs: T[], count: number, rng: Rng): T[] {
  if (count >= xs.length) return xs.slice();
  const index = xs.map((_, i) => i);
  for (let i = 0; i < count; i++) {
    const j = i + rng.int(index.length - i);
    [index[i], index[j]] = [index[j], index[i]];
  }
  return index
    .slice(0, count)
    .sort((a, b) => a - b)
    .map((i) => xs[i]);
}

/** Occurrences of each key. */
function countBy(keys: string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const k of keys) out[k] = (out[k] ?? 0) + 1;
  return out;
}

/** `xs` in a uniformly random order. */
function shuffled<T>(xs: T[], rng: Rng): T[] {
  const out = xs.slice();
  for (let i = out.length - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

/**
 * The run's Share when `config.share.dir` is set: the learner's tokenizer, prompt template, policy
 * log-probs and reward (loaded as the producer loads it). Agent runs are refused (episodes are not text).
 */
export async function openShare(
  config: ArborConfig,
  task: Task,
  engine: Pick<Engine, 'tokenizer' | 'trainer'>,
  encodePrompt: (item: TaskItem) => number[],
): Promise<Share | undefined> {
  if (!config.share.dir) return undefined;
  if (config.generate.kind === 'agent')
    throw new ConfigError('share: multi-turn agent episodes cannot be shared as text; unset share.dir', 'share.dir');
  const reward = await loadReward(config.reward, {
    taskReward: task.reward,
    taskExtract: task.extractAnswer?.bind(task),
    taskStepJudge: task.firstWrongStep?.bind(task),
    safety: { timeoutMs: config.reward.timeoutMs, failureReward: config.reward.failureReward },
  });
  return new Share(config.share, {
    tokenizer: engine.tokenizer,
    encodePrompt,
    logprobs: (data) => engine.trainer.logprobs(data),
    reward,
    seed: config.run.seed,
    maxResponseTokens: config.sampling.maxResponseTokens,
    contextLength: config.engine.kind === 'embedded' ? config.model.contextLength : undefined,
    rewardOptions: {
      concurrency: config.reward.concurrency,
      timeoutMs: config.reward.timeoutMs,
      failureReward: config.reward.failureReward,
    },
  });
}
