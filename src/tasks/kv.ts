/**
 * `kv`: goals over a small key-value store of integers, reached over 2-3 turns with the `kv`
 * environment's tools (src/env/builtin/kv.ts). An item "c=a+b\n" asks to store a+b under c; the values
 * of a and b are only in the store (item.meta.store), so the model must `get` both, then `set` (or
 * `set` and `add`). The environment's last step reports reward 1 when the goal holds on its final
 * state; this task's text verifier reaches the same verdict by replaying the executed calls of the
 * episode's arbor transcript (`episode.transcript`, else the response) on the initial store.
 */
import { Rng } from '../core/rng.js';
import { drawSplit } from './split.js';
import type { RewardResult, TaskItem } from '../core/types.js';
import type { RewardFunction } from '../filter/types.js';
import { arborFormat, arborObservationText, arborPolicyTurns } from '../env/format/arbor.js';
import { demoText, type DemoSegment } from '../env/tool-env.js';
import { Toolset } from '../env/tools.js';
import { kvGoalHolds, kvGoalValue, kvMeta, kvTools, type KvGoal, type KvOp, type KvState } from '../env/builtin/kv.js';
import type { MultiTurnTask } from './calculator.js';
import type { Split } from './types.js';

export interface KvTaskOptions {
  /** Keys in the store (the two operands and distractors). */
  storeSize?: number;
  /** Values are drawn from 0..maxValue. */
  maxValue?: number;
  ops?: KvOp[];
}

const KEYS = 'abcdefghijklmnopqrstuvwxyz';
const format = arborFormat();
const toolset = new Toolset(kvTools);

/**
 * Replay the executed calls of an arbor transcript on the item's initial store; the final store.
 * The last turn's calls never ran (an executed turn is followed by its observation), so they are skipped.
 */
export async function replayKv(
  item: TaskItem,
  transcript: string,
): Promise<{ store: Record<string, number>; calls: number }> {
  const state: KvState = { store: { ...kvMeta(item).store } };
  let calls = 0;
  for (const turn of arborPolicyTurns(transcript).slice(0, -1)) {
    for (const call of format.parseCalls(turn).calls) {
      calls++;
      await toolset.call(call, { state, timeoutMs: 1000 });
    }
  }
  return { store: state.store, calls };
}

function kvDemonstration(item: TaskItem): DemoSegment[] {
  const { store, goal } = kvMeta(item);
  if (!goal) return [];
  const value = kvGoalValue(store, goal);
  const obs = (...contents: string[]) =>
    arborObservationText(contents.map((content) => ({ name: 'get', content, isError: false })));
  return [
    { text: `@get(${goal.left})@get(${goal.right})`, role: 'policy' },
    { text: obs(String(store[goal.left]), String(store[goal.right])), role: 'env' },
    { text: `@set(${goal.target},${value})`, role: 'policy' },
    { text: obs('ok'), role: 'env' },
    { text: String(value), role: 'policy' },
  ];
}

function makeKvItem(rng: Rng, storeSize: number, maxValue: number, ops: KvOp[]): TaskItem {
  const keys = rng.shuffle(KEYS.split('')).slice(0, storeSize + 1);
  const target = keys[storeSize];
  const store: Record<string, number> = {};
  for (const k of keys.slice(0, storeSize).sort()) store[k] = rng.intRange(0, maxValue);
  const [left, right] = keys;
  const goal: KvGoal = { target, left, op: ops[rng.int(ops.length)], right };
  const prompt = `${target}=${left}${goal.op}${right}\n`;
  const id = `${prompt.trim()}|${Object.entries(store)
    .map(([k, v]) => `${k}${v}`)
    .join(',')}`;
  return { id, prompt, answer: String(kvGoalValue(store, goal)), difficulty: storeSize, meta: { store, goal } };
}

export function kvTask(options: KvTaskOptions = {}): MultiTurnTask {
  const storeSize = options.storeSize ?? 4;
  const maxValue = options.maxValue ?? 50;
  const ops = options.ops ?? ['+'];
  const reward: RewardFunction = {
    name: 'goal',
    async score({ response, item, episode }): Promise<RewardResult> {
      const { store, goal } = kvMeta(item);
      const final = await replayKv(item, episode?.transcript ?? response);
      const holds = goal ? kvGoalHolds(store, final.store, goal) : false;
      return {
        reward: holds ? 1 : 0,
        components: { goal: holds ? 1 : 0 },
        info: { toolCalls: final.calls, final: final.store[goal?.target ?? ''] },
      };
    },
  };
  return {
    name: 'kv',
    description: `key-value store goals (${ops.join(' ')}) over ${storeSize} keys, with get/set/add tools`,
    reward,
    demonstrationTurns: kvDemonstration,
    demonstration: (item) => demoText(kvDemonstration(item)),
    makeItems(split: Split, count: number, seed: number): TaskItem[] {
      return drawSplit(
        'kv',
        split,
        count,
        seed,
        (rng) => makeKvItem(rng, storeSize, maxValue, ops),
        (item) => item.id,
      );
    },
  };
}
