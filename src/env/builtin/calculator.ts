/**
 * Built-in `calculator` environment: one stateless tool `calc(expr)` that evaluates + - * / and
 * parentheses over integers exactly (the countdown task's safe evaluator, no eval). A non-integer
 * result reads as a reduced fraction ("7/2"); division by zero and bad syntax are error results.
 */
import { z } from 'zod';
import { evaluateExpression } from '../../core/expression.js';
import { tool, type ArborTool } from '../tools.js';
import { toolEnvironmentFactory } from '../tool-env.js';
import type { EnvironmentFactory } from '../types.js';

/** The value of `expr` as text, or throws with the evaluator's message. */
export function calculate(expr: string): string {
  const r = evaluateExpression(expr.trim());
  if (!r.ok) throw new Error(r.error);
  return r.den === 1n ? String(r.num) : `${r.num}/${r.den}`;
}

export const calcTool: ArborTool<{ expr: string }, string> = tool({
  description: 'Evaluate an integer arithmetic expression with + - * / and parentheses.',
  inputSchema: z.object({ expr: z.string().min(1).max(200).describe('the expression, e.g. (12+3)*4') }),
  execute: async ({ expr }) => calculate(expr),
});

export const calculatorEnvOptions = z
  .object({
    kind: z.literal('calculator'),
    maxObservationChars: z.number().int().min(16).max(100_000).default(200).describe('longest tool output passed back'),
  })
  .strict();

export function calculatorEnvironmentFactory(
  options: Partial<z.infer<typeof calculatorEnvOptions>> = {},
): EnvironmentFactory {
  return toolEnvironmentFactory({
    kind: 'calculator',
    tools: { calc: calcTool },
    maxObservationChars: options.maxObservationChars ?? 200,
  });
}
