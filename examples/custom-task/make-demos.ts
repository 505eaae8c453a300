/**
 * Writes demos.jsonl, the example's warm-start demonstrations, from the task's own transcript(item):
 * one OpenAI chat transcript per line ({"messages": [...]}), as `sft.transcripts` reads them.
 *   node --import tsx examples/custom-task/make-demos.ts [count] > examples/custom-task/demos.jsonl
 */
import task from './task.js';

const count = Number(process.argv[2] ?? 500);
const secretCode = task({ demoToolRate: 0.3 });
for (const item of secretCode.makeItems('train', count, 1)) {
  process.stdout.write(JSON.stringify({ messages: secretCode.transcript!(item) }) + '\n');
}
