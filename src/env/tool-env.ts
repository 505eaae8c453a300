/**
 * A generic `Environment` over a set of TypeScript tools, with optional per-episode state.
 *
 * Each policy turn's calls run in order against the episode state; a turn without calls is the final
 * answer and ends the episode (as Tinker's tool envs and SkyRL's `BaseTextEnv` do). `fork` clones the
 * state (snapshot/restore), so branches of a rollout tree never see each other's changes.
 *
 * With a `reward` function (the value of a state, e.g. 1 when a goal holds on it) every step reports
 * the change of that value since the previous step (potential-based, Ng et al. 1999), so the rewards
 * summed along an episode equal value(final state) - value(initial state) whichever step was the last
 * one executed: the generator ends an episode on a turn without calls without stepping the
 * environment, so a reward reported only by a "done" step would be lost.
 */
import type { TaskItem } from '../core/types.js';
import { Rng } from '../core/rng.js';
import { Toolset, type ArborTool } from './tools.js';
import type {
  Environment,
  EnvironmentFactory,
  StepOptions,
  StepResult,
  ToolCall,
  ToolResult,
  ToolSpec,
} from './types.js';

/** Per-episode state: made from the task item at reset, cloned when the tree branches. */
export interface EpisodeState<S> {
  init(item: TaskItem, rng: Rng): S;
  clone(state: S): S;
}

/**
 * The action a tool environment accepts: the contract's `{ text, calls }` plus, optionally, the
 * format's parse errors of the turn, which the caller reports itself (the agent generator puts them
 * in the observation and counts them). Passed, a turn whose calls were all malformed is not taken as
 * the final answer: the episode goes on (the turn counts toward maxTurns).
 */
export interface ToolAction {
  text: string;
  calls: ToolCall[];
  parseErrors?: ToolResult[];
}

export interface ToolEnvironmentOptions<S> {
  tools: Record<string, ArborTool>;
  state?: EpisodeState<S>;
  /** The value of a state (undefined = no environment reward); steps report its changes. */
  reward?: (input: { state: S; item: TaskItem; finalText: string }) => number | undefined;
  /** Policy turns with calls before the environment ends the episode (default: no limit here; runs limit turns with generate.maxTurns). */
  maxTurns?: number;
  /** Longest tool output passed back (default 2000 characters). */
  maxObservationChars?: number;
  /** Kind reported by the factory (default 'tools'). */
  kind?: string;
}

class ToolEnvironment<S> implements Environment {
  private turns = 0;
  private item: TaskItem | undefined;
  private done = false;
  private value: number | undefined;

  constructor(
    private readonly toolset: Toolset,
    private readonly options: ToolEnvironmentOptions<S>,
    private state: S,
  ) {}

  get tools(): ToolSpec[] {
    return this.toolset.specs;
  }

  async reset(item: TaskItem, options: { seed: number }): Promise<{ observation: string }> {
    this.item = item;
    this.turns = 0;
    this.done = false;
    this.state = (
      this.options.state ? this.options.state.init(item, new Rng(options.seed).fork('env/state')) : undefined
    ) as S;
    this.value = this.options.reward?.({ state: this.state, item, finalText: '' });
    return { observation: '' };
  }

  /** The step's result with the change of the state's value as its reward. */
  private result(text: string, results: ToolResult[], done: boolean, metrics: StepResult['metrics']): StepResult {
    this.done = done;
    const value =
      this.options.reward && this.item
        ? this.options.reward({ state: this.state, item: this.item, finalText: text })
        : undefined;
    if (value === undefined) return { results, done, metrics };
    const reward = value - (this.value ?? 0);
    this.value = value;
    return { results, reward, done, metrics };
  }

  async step(action: ToolAction, options: StepOptions): Promise<StepResult> {
    const metrics = { toolCalls: 0, toolErrors: 0, toolTimeouts: 0 };
    const parseErrors = action.parseErrors ?? [];
    if (this.done) return { results: [], done: true, metrics };
    if (!action.calls.length && !parseErrors.length) return this.result(action.text, [], true, metrics);
    const results: ToolResult[] = [];
    for (const [k, call] of action.calls.entries()) {
      const { result, timedOut } = await this.toolset.call(call, {
        state: this.state,
        timeoutMs: options.timeoutMs,
        signal: options.signal,
        callId: `${this.turns}.${k}`,
      });
      results.push(result);
      metrics.toolCalls++;
      if (result.isError) metrics.toolErrors++;
      if (timedOut) metrics.toolTimeouts++;
    }
    this.turns++;
    return this.result(action.text, results, this.turns >= (this.options.maxTurns ?? Infinity), metrics);
  }

  async fork(): Promise<Environment> {
    const state = this.options.state ? this.options.state.clone(this.state) : this.state;
    const copy = new ToolEnvironment<S>(this.toolset, this.options, state);
    copy.turns = this.turns;
    copy.item = this.item;
    copy.done = this.done;
    copy.value = this.value;
    return copy;
  }

  async close(): Promise<void> {}
}

/** An `EnvironmentFactory` over `tools` (one shared Toolset; one state per episode). */
export function toolEnvironmentFactory<S = undefined>(
  options: ToolEnvironmentOptions<S>,
): EnvironmentFactory & { readonly toolset: Toolset } {
  const toolset = new Toolset(options.tools, { maxObservationChars: options.maxObservationChars });
  return {
    kind: options.kind ?? 'tools',
    toolset,
    async create(): Promise<Environment> {
      return new ToolEnvironment<S>(toolset, options, undefined as S);
    },
    async close(): Promise<void> {},
  };
}

/** One segment of a multi-turn demonstration: a policy turn (EOS follows it) or an observation. */
export interface DemoSegment {
  text: string;
  role: 'policy' | 'env';
}

/** A demonstration as one text: the segments concatenated (the EOS after each policy turn is a token, not text). */
export function demoText(segments: DemoSegment[]): string {
  return segments.map((s) => s.text).join('');
}
