/**
 * `calculator`: products "a*b=" of 3-4 digit by 1-4 digit numbers (by default), for an embedded model
 * that can call the `calc` tool (src/env/builtin/calculator.ts) in the arbor format. Some products are
 * easy enough to answer directly, most are not: the model must learn when to call the tool.
 * Demonstrations call the tool for a `demoToolRate` share of items (chosen by a hash of the prompt, so
 * items never change) and answer directly otherwise. The verifier reads the final answer (the last
 * policy turn with calls removed) and compares it with the product; `toolCost` is subtracted per call.
 */
import { ConfigError } from '../core/errors.js';
import { Rng, hashString } from '../core/rng.js';
import { drawSplit } from './split.js';
import type { RewardResult, TaskItem } from '../core/types.js';
import type { RewardFunction } from '../filter/types.js';
import { arborFormat, arborObservationText, arborPolicyTurns } from '../env/format/arbor.js';
import { demoText, type DemoSegment } from '../env/tool-env.js';
import type { Split, Task } from './types.js';

export interface CalculatorTaskOptions {
  minDigitsA?: number;
  maxDigitsA?: number;
  minDigitsB?: number;
  maxDigitsB?: number;
  /** Share of demonstrations that call the tool (the rest answer directly). */
  demoToolRate?: number;
  /** Reward subtracted per tool call. */
  toolCost?: number;
}

/** A task with multi-turn demonstrations (policy turns and observations, for SFT masking). */
export interface MultiTurnTask extends Task {
  demonstrationTurns(item: TaskItem): DemoSegment[];
}

const format = arborFormat();

/** The final answer of an arbor transcript (or of a single turn): the last policy turn, calls removed. */
export function extractFinalAnswer(response: string): string {
  const turns = arborPolicyTurns(response);
  return format.finalAnswer(turns[turns.length - 1] ?? '');
}

/** Tool calls written in a transcript's policy turns. */
export function countCalls(response: string): number {
  return arborPolicyTurns(response).reduce((n, t) => n + format.parseCalls(t).calls.length, 0);
}

function operand(rng: Rng, digits: number): number {
  return digits <= 1 ? rng.intRange(2, 9) : rng.intRange(10 ** (digits - 1), 10 ** digits - 1);
}

export function calculatorTask(options: CalculatorTaskOptions = {}): MultiTurnTask {
  const [minA, maxA] = [options.minDigitsA ?? 3, options.maxDigitsA ?? 4];
  const [minB, maxB] = [options.minDigitsB ?? 1, options.maxDigitsB ?? 4];
  const demoToolRate = options.demoToolRate ?? 0.5;
  const toolCost = options.toolCost ?? 0;
  if (minA > maxA)
    throw new ConfigError(`task.options.minDigitsA: ${minA} is above maxDigitsA ${maxA}`, 'task.options.minDigitsA');
  if (minB > maxB)
    throw new ConfigError(`task.options.minDigitsB: ${minB} is above maxDigitsB ${maxB}`, 'task.options.minDigitsB');
  const reward: RewardFunction = {
    name: 'correct',
    async score({ response, item, episode }): Promise<RewardResult> {
      const answer = extractFinalAnswer(response);
      const correct = /^-?\d+$/.test(answer) && String(Number(answer)) === item.answer ? 1 : 0;
      const calls = episode?.toolCalls ?? countCalls(response);
      const cost = toolCost * calls;
      return {
        reward: correct - cost,
        components: { correct, toolCost: -cost },
        info: { extracted: answer, toolCalls: calls },
      };
    },
  };
  const demonstrationTurns = (item: TaskItem): DemoSegment[] => {
    const { a, b, useTool } = item.meta as { a: number; b: number; useTool: boolean };
    if (!useTool) return [{ text: item.answer, role: 'policy' }];
    return [
      { text: `@calc(${a}*${b})`, role: 'policy' },
      { text: arborObservationText([{ name: 'calc', content: item.answer, isError: false }]), role: 'env' },
      { text: item.answer, role: 'policy' },
    ];
  };
  const makeItem = (rng: Rng): TaskItem => {
    const da = rng.intRange(minA, maxA);
    const db = rng.intRange(minB, maxB);
    const a = operand(rng, da);
    const b = operand(rng, db);
    const prompt = `${a}*${b}=`;
    const useTool = hashString(`calc-demo/${prompt}`) / 4294967296 < demoToolRate;
    return { id: prompt, prompt, answer: String(a * b), difficulty: da + db, meta: { a, b, useTool } };
  };
  return {
    name: 'calculator',
    description: `products of ${minA}-${maxA} digit by ${minB}-${maxB} digit numbers, with a calc tool`,
    reward,
    extractAnswer: (response) => extractFinalAnswer(response) || null,
    demonstrationTurns,
    demonstration: (item) => demoText(demonstrationTurns(item)),
    makeItems(split: Split, count: number, seed: number): TaskItem[] {
      // test items: hash bucket 0 of 5; train: the others (as arith). Same seed → same items.
      return drawSplit('calculator', split, count, seed, (rng) => makeItem(rng));
    },
  };
}
