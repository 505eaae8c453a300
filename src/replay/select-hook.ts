/**
 * The Select strategies as Control hooks (control/hooks.ts): `dots` and `vade` keep a step's prompts
 * by difficulty from each prompt's success posterior; `ucb` (DUMP) draws them from the components of
 * a task mixture by UCB and learns from the step's complete groups. `sequential` needs no hook.
 */
import { ConfigError } from '../core/errors.js';
import type { TaskItem } from '../core/types.js';
import { observable, type ControlHook } from '../control/hooks.js';
import { leaves } from '../core/tree.js';
import { componentOfId } from '../tasks/mix.js';
import { selectByDifficulty, type SelectOptions } from './select.js';
import { UcbCurriculum, type UcbState } from './ucb.js';

export interface SelectHookContext {
  seed: number;
  /** The train pool split by task.mix component (select.kind ucb); undefined without task.mix. */
  components?: Map<string, TaskItem[]>;
  /** GRESO skipping is on (it chooses the step's prompts too). */
  skipping: boolean;
}

/** The hook of `control.select`, or undefined for sequential selection. */
export function selectHook(o: SelectOptions, c: SelectHookContext): ControlHook | undefined {
  if (o.kind !== 'sequential' && c.skipping)
    throw new ConfigError(
      `control.select.kind "${o.kind}" and control.skip.kind "greso" both choose the step's prompts: use one of them`,
      'control.select.kind',
    );
  if (o.kind === 'sequential') return undefined;
  if (o.kind === 'ucb') {
    const components = c.components;
    if (!components)
      throw new ConfigError(
        'control.select.kind "ucb" (DUMP) chooses among the components of a task mixture: give task.mix',
        'control.select.kind',
      );
    return {
      name: 'select',
      begin: (s) => {
        const state = s.state as { ucb?: UcbState };
        const ucb = new UcbCurriculum(o, components, c.seed, state.ucb);
        const rng = s.rng.fork('select');
        return {
          selectPrompts: () => (count) => ucb.take(count, rng),
          scored: (drawn) => {
            for (const tree of drawn)
              if (observable(tree))
                ucb.observe(
                  componentOfId(tree.itemId),
                  leaves(tree).map((l) => l.reward ?? 0),
                );
            state.ucb = ucb.state;
            Object.assign(s.info, ucb.info());
          },
        };
      },
    };
  }
  return {
    name: 'select',
    begin: (s) => {
      const rng = s.rng.fork('select');
      s.info.prompts_passed_over = 0;
      return {
        selectPrompts: (take) => (count) => {
          const out = selectByDifficulty(take, count, o, (id) => s.stats.posterior(id, s.step), rng);
          s.info.prompts_passed_over += out.passed;
          return out.items;
        },
      };
    },
  };
}
