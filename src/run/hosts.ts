/**
 * Where the producer runs. `InProcessHost`: in this thread, on the run's own sampler (sync mode, and
 * remote engines, whose sampling is I/O that overlaps training anyway). `WorkerHost`: in a worker
 * thread with its own embedded sampler and weight copy, so on a 2-core machine sampling and training
 * really run at the same time; it sends a version's weights only when the worker lacks them.
 */
import { Worker } from 'node:worker_threads';
import { ArborError } from '../core/errors.js';
import type { WorkerEngineSpec } from '../engine/build.js';
import type { ArborConfig } from './config.js';
import type { ProducerHost } from './pipeline.js';
import type { ProduceRequest, ProduceResult, Producer } from './producer.js';
import type { WorkerInit, WorkerRequest } from './rollout-worker.js';

export class InProcessHost implements ProducerHost {
  constructor(private readonly producer: Producer) {}

  produce(request: ProduceRequest): Promise<ProduceResult> {
    return this.producer.produce(request);
  }

  async close(): Promise<void> {
    await this.producer.close();
  }
}

type Reply =
  { type: 'ready' } | { type: 'result'; result: ProduceResult } | { type: 'error'; message: string; stack?: string };

export class WorkerHost implements ProducerHost {
  private heldVersion: number | undefined;
  private pending: { resolve: (r: ProduceResult) => void; reject: (e: Error) => void } | undefined;
  private exitError: Error | undefined;

  private constructor(private readonly worker: Worker) {
    worker.on('message', (reply: Reply) => {
      const p = this.pending;
      this.pending = undefined;
      if (!p) return;
      if (reply.type === 'result') p.resolve(reply.result);
      else if (reply.type === 'error') p.reject(new ArborError(`rollout worker: ${reply.message}`));
    });
    const fail = (error: Error) => {
      this.exitError = error;
      this.pending?.reject(error);
      this.pending = undefined;
    };
    worker.on('error', (e) => fail(new ArborError(`rollout worker crashed: ${e.message}`, { cause: e })));
    worker.on('exit', (code) => fail(new ArborError(`rollout worker exited (code ${code})`)));
  }

  static async start(config: ArborConfig, engine: WorkerEngineSpec): Promise<WorkerHost> {
    const init: WorkerInit = { config, engine };
    const worker = new Worker(new URL('./rollout-worker.mjs', import.meta.url), { workerData: init });
    await new Promise<void>((resolve, reject) => {
      const onMessage = (reply: Reply) =>
        reply.type === 'ready'
          ? resolve()
          : reply.type === 'error'
            ? reject(new ArborError(`rollout worker: ${reply.message}`))
            : undefined;
      worker.once('message', onMessage);
      worker.once('error', (e) => reject(new ArborError(`rollout worker failed to start: ${e.message}`, { cause: e })));
    }).catch(async (error: unknown) => {
      // a worker that failed to start holds nothing the run needs: it must not keep the process alive
      await worker.terminate();
      throw error;
    });
    return new WorkerHost(worker);
  }

  produce(request: ProduceRequest, weights: (version: number) => Float32Array): Promise<ProduceResult> {
    if (this.exitError) return Promise.reject(this.exitError);
    if (this.pending) return Promise.reject(new ArborError('rollout worker: one request at a time'));
    const version = request.version!;
    const message: WorkerRequest = {
      type: 'produce',
      request,
      version,
      weights: this.heldVersion === version ? undefined : weights(version),
    };
    this.heldVersion = version;
    return new Promise((resolve, reject) => {
      this.pending = { resolve, reject };
      this.worker.postMessage(message);
    });
  }

  async close(): Promise<void> {
    this.worker.removeAllListeners('exit');
    // the worker's producer releases its environment (MCP server processes) before it is terminated
    if (!this.exitError && !this.pending) {
      const closed = new Promise<void>((resolve) => {
        const done = (m: { type?: string }) => m?.type === 'closed' && resolve();
        this.worker.on('message', done);
        setTimeout(resolve, 5000).unref();
      });
      this.worker.postMessage({ type: 'close' } satisfies WorkerRequest);
      await closed;
    }
    await this.worker.terminate();
  }
}
