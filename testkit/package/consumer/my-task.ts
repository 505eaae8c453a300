/**
 * The packaged-install check's user task (scripts/pack-check.mjs copies this folder into an empty
 * project that has only the `arbor` tarball installed): echo a digit. Written only against the
 * public API (`import ... from 'arbor'`), as a user would; it asserts nothing itself.
 */
import { defineReward, defineTask, type TaskItem } from 'arbor';

function items(split: 'train' | 'test', count: number, seed: number): TaskItem[] {
  const offset = split === 'train' ? 0 : 5;
  return Array.from({ length: count }, (_, i) => {
    const digit = String(((seed + i) % 5) + offset);
    return { id: `${split}-${seed}-${i}`, prompt: `echo ${digit} =`, answer: digit };
  });
}

export default defineTask({
  name: 'echo-digit',
  description: 'repeat the digit after "echo"',
  makeItems: items,
  reward: defineReward('echo', ({ response, item }) => (response.trim() === item.answer ? 1 : 0)),
  demonstration: (item) => ` ${item.answer}`,
});
