/**
 * Rewards from configuration: `reward.parts` is a list of `{kind, weight, ...options}` combined by a
 * weighted sum (each part logged as a component), optionally wrapped in a noisy-verifier correction.
 * Kinds: task (the task's own verifier), env (an agent environment's reward), exact, numeric, math, format, length_penalty, judge, code,
 * program, fapo (the task's verifier minus a flawed-positive penalty), module (a user module: `loadReward`
 * imports it first). Every option is validated (unknown keys are errors naming `reward.parts.N.key`).
 */
import type { z } from 'zod';
import { ConfigError } from '../core/errors.js';
import { applyOptions, checkShape, importUserModule, moduleExport } from '../core/modules.js';
import { envReward, exactReward, formatReward, lengthPenaltyReward, numericReward } from './basic.js';
import { codeReward } from './code.js';
import { fapoReward, type StepJudge } from './fapo.js';
import type { noisyCorrectionSchema, RewardPartSpec } from './config.js';
import { judgeReward } from './judge.js';
import { extractAnswer, mathReward } from './math/index.js';
import { noisyCorrectionReward } from './noisy-correction.js';
import { majorityVoteReward } from './majority.js';
import { programReward } from './program.js';
import { composeRewards, type SafeScoreOptions } from './reward.js';
import type { RewardFunction } from './types.js';

function part(
  spec: RewardPartSpec,
  taskReward: RewardFunction | undefined,
  index: number,
  taskExtract?: (response: string) => string | null,
  modules: Record<number, RewardFunction> = {},
  taskStepJudge?: StepJudge,
): RewardFunction {
  const answerOf = (r: string) => extractAnswer(r) ?? r;
  switch (spec.kind) {
    case 'module':
      if (!modules[index])
        throw new ConfigError(
          `reward.parts.${index}: a reward module loads asynchronously: build the reward with loadReward`,
          `reward.parts.${index}.module`,
        );
      return modules[index];
    case 'task':
      if (!taskReward)
        throw new ConfigError(`reward.parts.${index}: kind "task" needs a task`, `reward.parts.${index}.kind`);
      return taskReward;
    case 'env':
      return envReward(spec.missing);
    case 'majority_vote':
      if (!taskReward)
        throw new ConfigError(
          `reward.parts.${index}: kind "majority_vote" needs a task (its verifier decides which answers agree)`,
          `reward.parts.${index}.kind`,
        );
      return majorityVoteReward(taskReward, taskExtract ?? ((r) => extractAnswer(r)));
    case 'exact':
      return exactReward({ caseSensitive: spec.caseSensitive, extract: spec.extract ? answerOf : undefined });
    case 'numeric':
      return numericReward({ absTol: spec.absTol, relTol: spec.relTol, extract: spec.extract ? answerOf : undefined });
    case 'math':
      return mathReward({ tolerance: spec.tolerance, name: 'math' });
    case 'format':
      try {
        return formatReward({ pattern: spec.pattern, flags: spec.flags });
      } catch (cause) {
        throw new ConfigError(
          `reward.parts.${index}.pattern: invalid regular expression (${(cause as Error).message})`,
          `reward.parts.${index}.pattern`,
          undefined,
          { cause },
        );
      }
    case 'length_penalty':
      if (spec.cacheLength > spec.maxLength)
        throw new ConfigError(
          `reward.parts.${index}.cacheLength: must be ≤ maxLength`,
          `reward.parts.${index}.cacheLength`,
        );
      return lengthPenaltyReward({ maxLength: spec.maxLength, cacheLength: spec.cacheLength });
    case 'judge': {
      const apiKey = spec.apiKeyEnv ? process.env[spec.apiKeyEnv] : undefined;
      if (spec.apiKeyEnv && !apiKey)
        throw new ConfigError(
          `reward.parts.${index}.apiKeyEnv: environment variable ${spec.apiKeyEnv} is not set`,
          `reward.parts.${index}.apiKeyEnv`,
        );
      return judgeReward({
        baseUrl: spec.baseUrl,
        model: spec.model,
        rubric: spec.rubric,
        apiKey,
        maxScore: spec.maxScore,
        maxAttempts: spec.maxAttempts,
        timeoutMs: spec.timeoutMs,
      });
    }
    case 'fapo':
      if (!taskReward || !taskStepJudge)
        throw new ConfigError(
          `reward.parts.${index}.judge: kind "fapo" with judge "program" needs a task with a step judge ` +
            '(firstWrongStep, e.g. task scratchpad)',
          `reward.parts.${index}.judge`,
        );
      return fapoReward(taskReward, taskStepJudge, {
        lambda: spec.lambda,
        unparseableIsFlawed: spec.unparseableIsFlawed,
      });
    case 'code':
      return codeReward({ language: spec.language, limits: spec.limits });
    case 'program':
      return programReward({ path: spec.path, limits: spec.limits });
  }
}

export interface RewardContext {
  taskReward?: RewardFunction;
  taskExtract?: (response: string) => string | null;
  /** The task's step judge (`Task.firstWrongStep`), for `kind: fapo`. */
  taskStepJudge?: StepJudge;
  safety?: SafeScoreOptions;
  /** The rewards of `kind: module` parts by part index (loadReward imports them). */
  modules?: Record<number, RewardFunction>;
}

/** Build the run's reward from `reward.parts` (and `reward.noisyCorrection`). */
export function rewardFromConfig(
  spec: { parts: RewardPartSpec[]; noisyCorrection?: z.infer<typeof noisyCorrectionSchema> },
  context: RewardContext = {},
): RewardFunction {
  if (!spec.parts.length) throw new ConfigError('reward.parts: give at least one reward', 'reward.parts');
  const fns = spec.parts.map((p, i) => ({
    fn: part(p, context.taskReward, i, context.taskExtract, context.modules, context.taskStepJudge),
    weight: p.weight,
  }));
  let reward = fns.length === 1 && fns[0].weight === 1 ? fns[0].fn : composeRewards(fns, context.safety);
  if (spec.noisyCorrection) {
    const { falsePositiveRate, falseNegativeRate } = spec.noisyCorrection;
    if (falsePositiveRate + falseNegativeRate >= 1)
      throw new ConfigError(
        'reward.noisyCorrection: falsePositiveRate + falseNegativeRate must be < 1',
        'reward.noisyCorrection',
      );
    reward = noisyCorrectionReward(reward, spec.noisyCorrection);
  }
  return reward;
}

/** `rewardFromConfig` after importing the parts of kind `module` (a user module's default export or `reward`). */
export async function loadReward(
  spec: Parameters<typeof rewardFromConfig>[0],
  context: RewardContext = {},
): Promise<RewardFunction> {
  const modules: Record<number, RewardFunction> = {};
  for (const [i, p] of spec.parts.entries()) {
    if (p.kind !== 'module') continue;
    const key = `reward.parts.${i}.module`;
    const mod = await importUserModule(p.module, key);
    const reward = applyOptions(
      moduleExport(mod, 'reward', p.module, key),
      p.options,
      p.module,
      `reward.parts.${i}.options`,
    );
    checkShape(reward, 'reward (defineReward)', p.module, key, [
      ['name', (r) => typeof r.name === 'string' && r.name.length > 0],
      ['score', (r) => typeof r.score === 'function'],
      ['prepareGroup', (r) => r.prepareGroup === undefined || typeof r.prepareGroup === 'function'],
    ]);
    modules[i] = reward as RewardFunction;
  }
  return rewardFromConfig(spec, { ...context, modules });
}
