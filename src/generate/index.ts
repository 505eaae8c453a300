/**
 * Generator registry: `generatorFromConfig({kind, ...})` validates options with zod (unknown kinds or
 * keys are ConfigErrors naming the key) and builds the generator. `generateOptionsSchema` is reused
 * by the run config so every option has a default and a description.
 */
import { z } from 'zod';
import { configErrorFromIssue } from '../core/errors.js';
import { agentGenerator, agentOptionsSchema } from './agent.js';
import { iidGenerator } from './iid.js';
import { latrGenerator } from './latr.js';
import { treepoGenerator } from './treepo.js';
import type { Generator } from './types.js';

export * from './types.js';
export { iidGenerator } from './iid.js';
export { treepoGenerator, allocate, type TreepoPending } from './treepo.js';
export { latrGenerator, branchPoint, editDistance } from './latr.js';
export { siblingStats } from './siblings.js';
export { agentGenerator, agentOptionsSchema, type AgentOptions, type AgentTreeStats } from './agent.js';

const groupSize = z.number().int().min(1).max(4096).default(8).describe('G: trajectories (leaves) per prompt');

export const iidOptionsSchema = z
  .object({
    kind: z.literal('iid').describe('independent samples per prompt (GRPO baseline)'),
    groupSize,
  })
  .strict();

export const treepoOptionsSchema = z
  .object({
    kind: z.literal('treepo').describe('TreePO segment trees with shared prefixes'),
    groupSize,
    segmentLength: z.number().int().min(1).max(65536).default(8).describe('L: tokens per segment'),
    branchingFactor: z.number().int().min(1).max(256).default(2).describe('b: children per continuing path'),
    initialDivergence: z
      .union([
        z.number().int().min(1).max(4096),
        z.object({ min: z.number().int().min(1).max(4096), max: z.number().int().min(1).max(4096) }).strict(),
      ])
      .default(2)
      .describe('first-step copies: a number, or {min, max} drawn per prompt'),
    maxDepth: z
      .number()
      .int()
      .min(0)
      .max(65536)
      .default(0)
      .describe('maximum segments per trajectory (0 = ceil(maxResponseTokens / L))'),
    allocation: z
      .enum(['fixed_avg', 'low_prob', 'high_prob', 'high_entropy', 'value'])
      .default('fixed_avg')
      .describe(
        'how the branch budget is split among continuing paths (value: predicted success near 0.5, from the quality head)',
      ),
    allocationTemperature: z
      .number()
      .positive()
      .max(1000)
      .default(2)
      .describe('τ of the probability/entropy-driven allocations'),
    distinct: z
      .boolean()
      .default(false)
      .describe(
        'siblings start with different tokens (the copies of a path are sampled without replacement at their first token)',
      ),
    repetitionNgram: z
      .number()
      .int()
      .min(0)
      .max(1024)
      .default(0)
      .describe('repetition stop: n-gram length in tokens (0 = off)'),
    repetitionCount: z
      .number()
      .int()
      .min(2)
      .max(1_000_000)
      .default(8)
      .describe('repetition stop: occurrences that end a path'),
  })
  .strict();

export const latrOptionsSchema = z
  .object({
    kind: z
      .literal('latr')
      .describe('LATR lookahead branching: fork where the model hesitates, keep branches that diverge'),
    groupSize,
    segmentLength: z
      .number()
      .int()
      .min(1)
      .max(4096)
      .default(8)
      .describe('tokens per decoding segment (branch points are looked for in each new segment)'),
    tauAbs: z
      .number()
      .min(0)
      .max(1)
      .default(0.15)
      .describe("branch when the runner-up token has probability above this (authors' math default)"),
    tauRel: z.number().min(0).max(1).default(0.25).describe("... and is within this of the top token's probability"),
    lookahead: z
      .number()
      .int()
      .min(1)
      .max(4096)
      .default(8)
      .describe('tokens a branch is decoded before the prune test'),
    pruneDistance: z
      .number()
      .min(0)
      .max(1)
      .default(0.4)
      .describe(
        "prune a branch whose lookahead has normalised edit distance below this to its path's own continuation",
      ),
  })
  .strict();

export const generateOptionsSchema = z.discriminatedUnion('kind', [
  iidOptionsSchema,
  treepoOptionsSchema,
  latrOptionsSchema,
  agentOptionsSchema,
]);
export type GenerateOptions = z.infer<typeof generateOptionsSchema>;

export function generatorFromConfig(spec: unknown): Generator {
  const parsed = generateOptionsSchema.safeParse(spec);
  if (!parsed.success) {
    throw configErrorFromIssue('generate', parsed.error.issues[0]);
  }
  const o = parsed.data;
  return o.kind === 'iid'
    ? iidGenerator(o)
    : o.kind === 'latr'
      ? latrGenerator(o)
      : o.kind === 'agent'
        ? agentGenerator(o)
        : treepoGenerator(o);
}
