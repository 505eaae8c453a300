/**
 * A counting semaphore: at most `limit` holders at once, the others wait in arrival order. Used to bound
 * requests in flight to a server (engine/remote/http.ts) and agent episodes running at once
 * (run/gateway-runtime.ts).
 */
export class Semaphore {
  private active = 0;
  private readonly waiting: Array<() => void> = [];
  constructor(readonly limit: number) {}

  async acquire(): Promise<void> {
    if (this.active < this.limit) {
      this.active++;
      return;
    }
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.active--;
  }

  /** Holders right now. */
  get inUse(): number {
    return this.active;
  }
}
