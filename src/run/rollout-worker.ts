/**
 * The async producer's worker thread: its own embedded sampler over a copy of the weights, and the
 * same Producer the synchronous loop runs in-process. Protocol (one request at a time):
 *   main → worker  { type: 'produce', request, weights?: Float32Array, version }
 *   worker → main  { type: 'ready' } once, then { type: 'result', result } | { type: 'error', message, stack }
 * `weights` is sent only when the version the request needs differs from the one the worker holds.
 * The worker never touches files: the store and checkpoints stay with the main thread.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { buildWorkerSampler, type WorkerEngineSpec } from '../engine/build.js';
import type { ArborConfig } from './config.js';
import { Producer, type ProduceRequest } from './producer.js';

export interface WorkerInit {
  config: ArborConfig;
  engine: WorkerEngineSpec;
}

export type WorkerRequest =
  { type: 'produce'; request: ProduceRequest; weights?: Float32Array; version: number } | { type: 'close' };

async function start(): Promise<void> {
  const port = parentPort!;
  try {
    const init = workerData as WorkerInit;
    const { sampler, tokenizer, setWeights } = await buildWorkerSampler(init.engine);
    const producer = await Producer.create(init.config, sampler, tokenizer);
    const handle = async (message: WorkerRequest): Promise<void> => {
      if (message.type === 'close') {
        await producer.close().catch(() => {});
        port.postMessage({ type: 'closed' });
        return;
      }
      try {
        if (message.weights) setWeights(message.weights, message.version);
        const result = await producer.produce(message.request);
        port.postMessage({ type: 'result', result });
      } catch (error) {
        port.postMessage({
          type: 'error',
          message: (error as Error)?.message ?? String(error),
          stack: (error as Error)?.stack,
        });
      }
    };
    // handle() answers each request itself; if even that fails (postMessage on a closed port), the worker exits
    // with code 1 and the host reports it, instead of an unhandled rejection.
    port.on('message', (message: WorkerRequest) => {
      handle(message).catch((error: unknown) => {
        process.stderr.write(`rollout worker: ${(error as Error)?.stack ?? String(error)}\n`);
        process.exit(1);
      });
    });
    port.postMessage({ type: 'ready' });
  } catch (error) {
    port.postMessage({
      type: 'error',
      message: `worker start: ${(error as Error)?.message ?? String(error)}`,
      stack: (error as Error)?.stack,
    });
  }
}

await start();
