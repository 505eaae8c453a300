/**
 * A task mixture (`task: { mix: [{ name, options, weight?, label? }, ...] }`): the union of the
 * component tasks' items. Each item's id is prefixed by its component's label (`arith/12+7=`) and
 * `meta.component` names the component, so per-prompt statistics, curricula (select.kind `ucb`, DUMP)
 * and held-out evaluation can tell the components apart. The verifier and the demonstrations dispatch
 * to the component's own, which see the item with its original id. A split of `count` items gives each
 * component its weight's share (largest remainder), every component drawing its items with the same
 * seed, so a mix is reproducible from (split, count, seed) like any task.
 */
import { z } from 'zod';
import { largestRemainder } from '../core/apportion.js';
import { ConfigError } from '../core/errors.js';
import type { TaskItem } from '../core/types.js';
import type { RewardFunction } from '../filter/types.js';
import type { Split, Task } from './types.js';

export const mixComponentSchema = z
  .object({
    name: z.string().min(1).describe("the component's built-in task (arith, countdown, ...)"),
    options: z.record(z.unknown()).default({}).describe("the component task's options"),
    weight: z
      .number()
      .gt(0)
      .max(1e6)
      .default(1)
      .describe("the component's share of the train and test items (relative to the other components)"),
    label: z
      .string()
      .regex(/^[A-Za-z0-9_.-]+$/)
      .max(64)
      .optional()
      .describe("the component's name in item ids and metrics (default: the task name, with _2, _3... for repeats)"),
  })
  .strict();
export type MixComponentOptions = z.infer<typeof mixComponentSchema>;

export const mixSchema = z
  .array(mixComponentSchema)
  .min(1)
  .max(64)
  .describe("a task mixture: the union of the components' items, ids prefixed by the component");

export interface MixComponent {
  label: string;
  weight: number;
  task: Task;
}

/** The component a mixed item belongs to (undefined for an item of a plain task). */
export function componentOf(item: TaskItem): string | undefined {
  const c = item.meta?.component;
  return typeof c === 'string' ? c : undefined;
}

/** The component of a mixed item id (`label/original-id`; labels hold no '/'). */
export function componentOfId(id: string): string {
  const i = id.indexOf('/');
  return i < 0 ? '' : id.slice(0, i);
}

/** Labels of a mix's components: the given label, else the task name (`_2`, `_3`... for repeats); duplicates are ConfigErrors. */
export function mixLabels(components: Array<{ name: string; label?: string }>): string[] {
  const seen = new Map<string, number>();
  const labels: string[] = [];
  components.forEach((c, i) => {
    let label = c.label;
    if (!label) {
      const n = (seen.get(c.name) ?? 0) + 1;
      seen.set(c.name, n);
      label = n === 1 ? c.name : `${c.name}_${n}`;
    }
    if (labels.includes(label))
      throw new ConfigError(
        `task.mix.${i}.label: "${label}" names two components (give each a distinct label)`,
        `task.mix.${i}.label`,
      );
    labels.push(label);
  });
  return labels;
}

/** The item as its component task made it (original id, no `component` in meta). */
function unwrapItem(item: TaskItem, label: string): TaskItem {
  const { component: _c, ...meta } = item.meta ?? {};
  return { ...item, id: item.id.slice(label.length + 1), meta: Object.keys(meta).length ? meta : undefined };
}

function wrapItem(item: TaskItem, label: string): TaskItem {
  return { ...item, id: `${label}/${item.id}`, meta: { ...item.meta, component: label } };
}

export function mixTask(components: MixComponent[]): Task {
  if (!components.length) throw new ConfigError('task.mix: give at least one component', 'task.mix');
  const byLabel = new Map(components.map((c) => [c.label, c]));
  const owner = (item: TaskItem): MixComponent => {
    const label = componentOf(item);
    const c = label === undefined ? undefined : byLabel.get(label);
    if (!c)
      throw new ConfigError(
        `task.mix: item ${item.id} names no component of the mix (meta.component ${JSON.stringify(label)}; components: ${[...byLabel.keys()].join(', ')})`,
        'task.mix',
      );
    return c;
  };
  const reward: RewardFunction = {
    name: 'mix',
    async score(input, context) {
      const c = owner(input.item);
      return c.task.reward.score({ ...input, item: unwrapItem(input.item, c.label) }, context);
    },
  };
  // majority voting reads answers without an item: only a mix of one task family has one extractor
  const families = new Set(components.map((c) => c.task.name));
  const first = components[0].task;
  const extractAnswer = families.size === 1 && first.extractAnswer ? first.extractAnswer.bind(first) : undefined;
  const total = components.reduce((a, c) => a + c.weight, 0);
  return {
    name: `mix(${components.map((c) => c.label).join(',')})`,
    description: `a mixture of ${components.map((c) => `${c.label} (${c.task.name}, weight ${c.weight})`).join(', ')}`,
    reward,
    extractAnswer,
    demonstration(item) {
      const c = owner(item);
      return c.task.demonstration(unwrapItem(item, c.label));
    },
    async prepare() {
      for (const c of components) await c.task.prepare?.();
    },
    makeItems(split: Split, count: number, seed: number): TaskItem[] {
      const counts = largestRemainder(
        components.map((c) => (count * c.weight) / total),
        count,
      );
      return components.flatMap((c, i) =>
        counts[i] > 0 ? c.task.makeItems(split, counts[i], seed).map((item) => wrapItem(item, c.label)) : [],
      );
    },
  };
}
