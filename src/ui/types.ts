/**
 * The data the `arbor ui` server sends and the browser (and report.html) renders: plain JSON,
 * shared by src/ui/server (which builds it from a run directory) and src/ui/client (which draws it).
 */

export type RunStatus = 'running' | 'finished' | 'failed';

/** Numbers shown in the run list. Absent when the run has not logged them (yet). */
export interface Headline {
  reward?: number;
  accuracy?: number;
  heldoutStart?: number;
  heldoutEnd?: number;
  passAtK?: number;
  tokens?: number;
  wallS?: number;
}

export interface RunInfo {
  /** Directory name under the runs dir (the run's id in URLs). */
  name: string;
  status: RunStatus;
  task: string;
  generator: string;
  mode: string;
  /** Configured number of RL steps. */
  steps: number;
  /** Last step logged in metrics.jsonl (0 before the first RL step). */
  lastStep: number;
  /** Milliseconds since the epoch of the latest write to the run's files. */
  updatedAt: number;
  headline: Headline;
  /** Steps with a trees/step-N.jsonl, ascending. */
  treeSteps: number[];
}

/** One metrics.jsonl line with only its numeric fields. */
export type MetricsRow = Record<string, number>;

export interface MetricsChunk {
  /** Byte offset to ask from next time (only complete lines are consumed). */
  offset: number;
  rows: MetricsRow[];
}

export interface NodeView {
  id: string;
  parent: string | null;
  depth: number;
  children: string[];
  /** The segment decoded with the run's tokenizer (specials kept, e.g. `<eos>`). */
  text: string;
  tokens: number;
  /** Tokens inserted by the environment (mask 0): tool observations in agent turns. */
  envTokens: number;
  finishReason: string | null;
  weightVersion: number;
  reward?: number;
  value?: number;
  /** Mean reward of the leaves below (always computed, for colouring internal nodes). */
  subtreeReward?: number;
  components?: Record<string, number>;
  info?: Record<string, unknown>;
  error?: string;
  /** Advantage of the segment: one number, or one per token, when the trees carry it. */
  advantage?: number | number[];
  meanLogprob?: number;
  /** Entropy of the first sampled token of the segment, when the engine reported entropies. */
  firstEntropy?: number;
  /** Why this node branched, when the generator recorded it (e.g. entropy, allocation, forced token). */
  decision?: string;
}

export interface TreeView {
  id: string;
  itemId: string;
  generator?: string;
  /** Paths removed by online pruning (their nodes are gone from the tree). */
  pruned?: { paths: number; tokens: number };
  carries?: number;
  /** True when the tree was logged unfinished (a partial rollout). */
  partial: boolean;
  leaves: number;
  nodes: NodeView[];
}

export interface TreeStep {
  step: number;
  /** Which tokenizer decoded the text (a tokenizer.json path, or "default char tokenizer"). */
  tokenizer: string;
  trees: TreeView[];
}

/** What report.html embeds for its charts and trees. */
export interface ReportData {
  title: string;
  metrics: MetricsRow[];
  summary?: Record<string, unknown>;
  trees: TreeStep | null;
}
