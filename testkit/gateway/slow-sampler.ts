/**
 * A sampler that takes its time, for gateway timeout tests: every `sample()` call waits `delayMs` before
 * the wrapped sampler runs, so a call is still in flight when an episode's time runs out. An abort
 * ends the wait at once and the wrapped sampler then sees the aborted signal (the embedded engine ends
 * every continuation `abort`). Changes timing only, never tokens.
 */
import { setTimeout as delay } from 'node:timers/promises';
import type { SampleOptions, SampleRequest, SampleResult, Sampler } from '../../src/engine/types.js';

export class SlowSampler implements Sampler {
  readonly specificationVersion = 'arbor.sampler.v1' as const;
  constructor(
    readonly inner: Sampler,
    readonly delayMs: number,
  ) {}

  get capabilities() {
    return this.inner.capabilities;
  }

  weightVersion(): number {
    return this.inner.weightVersion();
  }

  release(handles: string[]): void {
    this.inner.release(handles);
  }

  async sample(requests: SampleRequest[], options: SampleOptions = {}): Promise<SampleResult[]> {
    await delay(this.delayMs, undefined, { signal: options.signal }).catch(() => undefined);
    return this.inner.sample(requests, options);
  }
}
