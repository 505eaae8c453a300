/**
 * The worker thread of serve/request-worker.ts: parses large request bodies, and encodes long texts and
 * decodes long id lists with its own copy of the served tokenizer (built from `workerData.source` on
 * first use). Each call is answered with its value, or with its error's message (`badRequest`: the
 * request's fault, e.g. a body that is not JSON or holds an array over `maxItems`); an encoding over its
 * limit is answered with the count alone.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { parseJson } from './http.js';
import type { WorkerCall, WorkerReply } from './request-worker.js';
import type { ServeTokenizer, TokenizerSource } from './text.js';
import { BadRequest } from './validate.js';

const source = (workerData as { source?: TokenizerSource }).source;
let tokenizer: Promise<ServeTokenizer> | undefined;

async function served(): Promise<ServeTokenizer> {
  if (!source) throw new Error('no tokenizer to encode with (the server has none)');
  tokenizer ??= import('./tokenizers.js').then((m) => m.serveTokenizerOf(source));
  return tokenizer;
}

/** The first array in `value` longer than `maxItems` (depth first): its path (`data[0].tokens`) and length. */
function longArray(value: unknown, maxItems: number): { path: string; length: number } | undefined {
  const stack: Array<[unknown, string]> = [[value, '']];
  while (stack.length) {
    const [v, path] = stack.pop()!;
    if (Array.isArray(v)) {
      if (v.length > maxItems) return { path, length: v.length };
      for (let i = v.length - 1; i >= 0; i--) if (v[i] && typeof v[i] === 'object') stack.push([v[i], `${path}[${i}]`]);
    } else if (v && typeof v === 'object') {
      const entries = Object.entries(v).reverse();
      for (const [k, x] of entries) if (x && typeof x === 'object') stack.push([x, path ? `${path}.${k}` : k]);
    }
  }
  return undefined;
}

async function answer(call: WorkerCall): Promise<unknown> {
  if (call.op === 'parse') {
    const value = parseJson(Buffer.from(call.body.buffer, call.body.byteOffset, call.body.byteLength));
    const long = longArray(value, call.maxItems);
    if (long) {
      const why = `an array of ${long.length} items, over the limit of ${call.maxItems} (the longest prompt, in tokens)`;
      throw new BadRequest(`field "${long.path}": ${why}`);
    }
    return value;
  }
  if (call.op === 'decode') return (await served()).decode(call.ids, call.skipSpecial);
  const ids = (await served()).encode(call.text, call.addSpecial);
  return ids.length > call.limit ? { count: ids.length } : { ids };
}

parentPort!.on('message', (message: WorkerCall & { id: number }) => {
  answer(message).then(
    (value) => parentPort!.postMessage({ id: message.id, value } satisfies WorkerReply),
    (error: Error) =>
      parentPort!.postMessage({
        id: message.id,
        error: error.message,
        badRequest: error instanceof BadRequest,
      } satisfies WorkerReply),
  );
});
