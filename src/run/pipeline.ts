/**
 * The rollout pipeline between producers and the learner, around the rollout store. Batch t is
 * produced with weight version base + max(0, t − 1 − k) (k = run.maxStaleness): production runs at
 * most k steps ahead of the learner and pauses when the next batch would need weights not yet
 * published (AReaL's staleness bound at batch granularity, with one batch in flight, as in verl's
 * one-step-off pipeline for k = 1). Pinning the version makes every batch an exact function of the
 * run's config, so async runs are deterministic and resume exactly. k = 0 is the synchronous loop.
 * Produced batches wait in the store (status ready, batchStep t); partial trees are carried in it.
 */
import { ArborError } from '../core/errors.js';
import type { CarriedTree, ControlState } from '../control/types.js';
import type { DataOrderState } from '../replay/data-order.js';
import { RolloutStore, type StoreEntry } from '../replay/store.js';
import type { ProduceRequest, ProduceResult } from './producer.js';

/** Runs Producer.produce somewhere: in-process, or in a worker thread with its own weights. */
export interface ProducerHost {
  /** `weights(v)` returns the published weights of version v (worker hosts send them when needed). */
  produce(request: ProduceRequest, weights: (version: number) => Float32Array): Promise<ProduceResult>;
  close(): Promise<void>;
}

/** What the learner needs of a produced batch besides its trees (kept until the step is logged). */
export type ProducedMeta = Omit<ProduceResult, 'batch' | 'carry' | 'data' | 'control'> & { waitMs?: number };

/** The producer's position: the next batch to produce and the Select stage's state before it. */
export interface PipelineState {
  nextStep: number;
  data: DataOrderState;
  /** What control strategies learned (prompt statistics...); absent in runs of older versions. */
  control?: ControlState;
  /** Metadata of batches produced but not yet trained on (exact resume needs them). */
  produced: ProducedMeta[];
}

export interface PipelineOptions {
  maxStaleness: number;
  steps: number;
  /** Weight version when the run (not this process) started. */
  baseVersion: number;
  /** Pin each batch's weight version (embedded engines); remote samplers serve what they hold. */
  pinVersions: boolean;
  /** A copy of the weights just published (pinned worker hosts only). */
  snapshot?: () => Float32Array;
}

export class RolloutPipeline {
  private readonly snapshots = new Map<number, Float32Array>();
  private readonly produced = new Map<number, ProducedMeta>();
  private inFlight: Promise<void> | undefined;
  private failure: Error | undefined;
  private draining = false;
  private waiters: Array<() => void> = [];

  constructor(
    private readonly host: ProducerHost,
    readonly store: RolloutStore,
    private readonly options: PipelineOptions,
    public state: Omit<PipelineState, 'produced'>,
    produced: ProducedMeta[],
    private version: number,
  ) {
    for (const m of produced) this.produced.set(m.step, m);
    if (options.snapshot) this.snapshots.set(version, options.snapshot());
  }

  /** Weight version batch `step` is generated with. */
  versionFor(step: number): number {
    return this.options.baseVersion + Math.max(0, step - 1 - this.options.maxStaleness);
  }

  /** The learner published `version`: keep its weights if a future batch needs them, then produce. */
  published(version: number): void {
    this.version = version;
    if (this.options.snapshot) {
      this.snapshots.set(version, this.options.snapshot());
      const oldest = this.versionFor(this.state.nextStep);
      for (const v of this.snapshots.keys()) if (v < oldest) this.snapshots.delete(v);
    }
    this.pump();
  }

  /** Start the next production if the staleness bound allows it and none is in flight. */
  pump(): void {
    if (this.inFlight || this.failure || this.draining) return;
    const step = this.state.nextStep;
    if (step > this.options.steps || this.versionFor(step) > this.version) return;
    const carried: CarriedTree[] = this.store
      .take({ batchStep: null })
      .map((e) => ({ tree: e.tree, item: e.item, status: e.status }));
    const request: ProduceRequest = {
      step,
      version: this.options.pinVersions ? this.versionFor(step) : undefined,
      carried,
      data: this.state.data,
      control: this.state.control,
    };
    this.inFlight = this.host
      .produce(request, (v) => this.weightsOf(v))
      .then((result) => this.accept(result))
      .catch((error) => {
        this.failure = error instanceof Error ? error : new Error(String(error));
      })
      .finally(() => {
        this.inFlight = undefined;
        for (const w of this.waiters.splice(0)) w();
        this.pump();
      });
  }

  private weightsOf(version: number): Float32Array {
    const w = this.snapshots.get(version);
    if (!w)
      throw new ArborError(
        `pipeline: no weights of version ${version} kept (have ${[...this.snapshots.keys()].join(', ')})`,
      );
    return w;
  }

  private accept(result: ProduceResult): void {
    const entries: StoreEntry[] = [
      ...result.batch.map((b) => ({ tree: b.tree, item: b.item, status: 'ready' as const, batchStep: result.step })),
      ...result.carry.map((c) => ({ tree: c.tree, item: c.item, status: c.status, batchStep: null })),
    ];
    this.store.put(entries);
    const { batch: _b, carry: _c, data, control, ...meta } = result;
    this.produced.set(result.step, meta);
    this.state = { nextStep: result.step + 1, data, control };
  }

  /** Wait for batch `step`; returns its trees (taken from the store) and metadata. */
  async batch(step: number): Promise<{ entries: StoreEntry[]; meta: ProducedMeta }> {
    const waitStart = Date.now();
    for (;;) {
      if (this.failure) throw this.failure;
      if (this.produced.has(step)) break;
      this.pump();
      if (!this.inFlight)
        throw new ArborError(
          `pipeline: batch ${step} cannot be produced (next ${this.state.nextStep}, version ${this.version}, needs ${this.versionFor(this.state.nextStep)})`,
        );
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
    const meta = this.produced.get(step)!;
    this.produced.delete(step);
    return { entries: this.store.take({ batchStep: step }), meta: { ...meta, waitMs: Date.now() - waitStart } };
  }

  /** Finish the production in flight and start no other (before a checkpoint); `resume()` undoes it. */
  async drain(): Promise<void> {
    this.draining = true;
    while (this.inFlight) await this.inFlight;
    if (this.failure) throw this.failure;
  }

  resume(): void {
    this.draining = false;
    this.pump();
  }

  /** Everything a checkpoint needs besides the store (call after drain()). */
  snapshotState(): PipelineState {
    return { ...this.state, produced: [...this.produced.values()].sort((a, b) => a.step - b.step) };
  }

  async close(): Promise<void> {
    this.draining = true;
    while (this.inFlight) await this.inFlight.catch(() => {});
    await this.host.close();
  }
}
