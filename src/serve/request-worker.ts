/**
 * Request work moved off the event loop, so `/health` and other requests are answered while a large
 * request is read: parsing a body over PARSE_INLINE_BYTES (JSON.parse of megabytes of token ids runs
 * at ~30 ms/MiB), encoding a text over CODEC_INLINE (characters; the Hugging Face tokenizer encodes
 * about 0.5 MB/s in JavaScript) and decoding as many ids. All run in one worker thread, started on first
 * use, which builds the served tokenizer again from its `source` (the same files, so the same ids);
 * smaller inputs, and every input of a tokenizer without a `source`, are handled inline, after a turn
 * of the event loop. A worker that fails answers its calls with a 500. What the worker would hand back
 * only to be refused stays there: a body with an array longer than `maxItems` is a 400 naming the
 * array (materialising millions of numbers on the event loop takes as long as parsing them), and an
 * encoding longer than the caller's token limit comes back as its count only. A long text is still
 * encoded whole before it is refused (BPE counts have no cheap exact bound); calls run in order.
 */
import { Worker } from 'node:worker_threads';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { parseJson } from './http.js';
import type { ServeTokenizer } from './text.js';
import { BadRequest } from './validate.js';

/** Bodies up to this many bytes are parsed inline (at most ~40 ms of numbers on a loaded 2-core machine). */
export const PARSE_INLINE_BYTES = 1 << 20;
/** Texts up to this many characters are encoded, and lists of up to this many ids decoded, inline (~40 ms). */
export const CODEC_INLINE = 16_384;

/** A text's token ids, or only their count when it is over the caller's limit. */
export type Encoded = { ids: number[] } | { count: number };

/** A call to the worker thread (serve/request-worker-main.ts answers it). */
export type WorkerCall =
  | { op: 'parse'; body: Uint8Array; maxItems: number }
  | { op: 'encode'; text: string; addSpecial: boolean; limit: number }
  | { op: 'decode'; ids: number[]; skipSpecial: boolean };

/** The worker thread's answer: the value, or an error (`badRequest`: the request's fault, a 400). */
export interface WorkerReply {
  id: number;
  value?: unknown;
  error?: string;
  badRequest?: boolean;
}

export class RequestWorker {
  private worker: Worker | undefined;
  private nextId = 0;
  private readonly pending = new Map<number, { resolve(value: unknown): void; reject(error: Error): void }>();
  /** Calls answered in the worker thread (parses and encodings), for tests. */
  offThread = 0;

  /** `tokenizer`: the served one (absent: --skip-tokenizer-init, parsing only). */
  constructor(private readonly tokenizer?: ServeTokenizer) {}

  /**
   * The body as JSON (`{}` when empty; 400 when it is not JSON), parsed off the event loop when large;
   * then a 400 for an array longer than `maxItems`, which no route accepts.
   */
  async parseJson(body: Buffer, maxItems: number): Promise<unknown> {
    if (body.length <= PARSE_INLINE_BYTES) return parseJson(body);
    // the bytes move to the worker (transferred, not copied); a pooled slice is copied out first
    const own = body.byteOffset === 0 && body.byteLength === body.buffer.byteLength ? body : Buffer.from(body);
    return this.call({ op: 'parse', body: own, maxItems }, [own.buffer as ArrayBuffer]);
  }

  /** `text`'s ids (`addSpecial`: what the tokenizer adds to a raw prompt), or their count when over `limit`. */
  async encode(text: string, addSpecial: boolean, limit: number): Promise<Encoded> {
    const tokenizer = this.tokenizer;
    if (!tokenizer) throw new Error('RequestWorker.encode: this server has no tokenizer');
    if (text.length > CODEC_INLINE && tokenizer.source) {
      return (await this.call({ op: 'encode', text, addSpecial, limit })) as Encoded;
    }
    // one turn of the event loop per inline encoding: other requests go between a request's prompts
    await nextTurn();
    const ids = tokenizer.encode(text, addSpecial);
    return ids.length > limit ? { count: ids.length } : { ids };
  }

  /** The text of `ids` (`skipSpecial`: vLLM's skip_special_tokens), decoded off the event loop when long. */
  async decode(ids: number[], skipSpecial: boolean): Promise<string> {
    const tokenizer = this.tokenizer;
    if (!tokenizer) throw new Error('RequestWorker.decode: this server has no tokenizer');
    if (ids.length > CODEC_INLINE && tokenizer.source) {
      return (await this.call({ op: 'decode', ids, skipSpecial })) as string;
    }
    return tokenizer.decode(ids, skipSpecial);
  }

  /** Stop the worker thread (calls in flight are rejected); a later call starts a new one. */
  async close(): Promise<void> {
    const worker = this.worker;
    this.worker = undefined;
    this.failAll(new Error('the request worker was closed'));
    await worker?.terminate();
  }

  private call(message: WorkerCall, transfer: ArrayBuffer[] = []): Promise<unknown> {
    const id = this.nextId++;
    const worker = this.started();
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      worker.postMessage({ id, ...message }, transfer);
    });
  }

  private started(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(new URL('./request-worker.mjs', import.meta.url), {
      workerData: { source: this.tokenizer?.source },
    });
    // an idle worker does not keep the process alive (the server's socket does while a request runs)
    worker.unref();
    worker.on('message', (reply: WorkerReply) => {
      const waiting = this.pending.get(reply.id);
      if (!waiting) return;
      this.pending.delete(reply.id);
      this.offThread++;
      if (reply.error === undefined) waiting.resolve(reply.value);
      else waiting.reject(reply.badRequest ? new BadRequest(reply.error) : new Error(reply.error));
    });
    const lost = (error: Error) => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      this.failAll(error);
    };
    worker.on('error', (error) => lost(new Error(`the request worker failed: ${error.message}`, { cause: error })));
    worker.on('exit', (code) => lost(new Error(`the request worker exited (code ${code})`)));
    this.worker = worker;
    return worker;
  }

  private failAll(error: Error): void {
    for (const { reject } of this.pending.values()) reject(error);
    this.pending.clear();
  }
}
