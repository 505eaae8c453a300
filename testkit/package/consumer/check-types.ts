/**
 * Type-checked in the packaged-install check (`tsc -p tsconfig.json` against the tarball's
 * dist/types): the public API's values and types as a user reaches them from 'arbor'.
 */
import { defineReward, defineTask, type Task, type TaskItem } from 'arbor';
import task from './my-task.js';

const typed: Task = task;
const item: TaskItem = typed.makeItems('test', 1, 0)[0]!;
const reward = defineReward('length', ({ response }) => response.length);
const other: Task = defineTask({ name: 'other', makeItems: () => [item], reward });
export const names: string[] = [typed.name, other.name, reward.name];
