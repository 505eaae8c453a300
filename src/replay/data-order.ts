/**
 * The Select stage's default order (`sequential`). Seeded data order: the prompt pool is visited in epochs, each a permutation drawn from
 * Rng(seed).fork("data/<epoch>"). The state is just (epoch, cursor), so resume restores it exactly.
 */
import { Rng } from '../core/rng.js';

export interface DataOrderState {
  epoch: number;
  cursor: number;
}

export class DataOrder {
  private permutation: number[];

  constructor(
    readonly size: number,
    readonly seed: number,
    public state: DataOrderState = { epoch: 0, cursor: 0 },
  ) {
    this.permutation = this.permute(state.epoch);
  }

  private permute(epoch: number): number[] {
    return new Rng(this.seed).fork(`data/${epoch}`).shuffle(Array.from({ length: this.size }, (_, i) => i));
  }

  /** Next `count` indices (crossing into the next epoch when needed). */
  take(count: number): number[] {
    const out: number[] = [];
    while (out.length < count) {
      if (this.state.cursor >= this.size) {
        this.state = { epoch: this.state.epoch + 1, cursor: 0 };
        this.permutation = this.permute(this.state.epoch);
      }
      out.push(this.permutation[this.state.cursor++]);
    }
    return out;
  }
}
