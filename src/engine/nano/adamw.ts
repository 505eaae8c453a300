/**
 * AdamW over the parameter arena with global grad-norm clipping and no weight decay on 1-D tensors
 * (norm gains). The learning rate comes per step from the caller (schedules live in optimize/).
 * Moments live in arenas of the same layout so they checkpoint with the model.
 */
import type { AdamParams } from '../types.js';
import type { ParamArena } from './params.js';

export class AdamW {
  readonly m: Float32Array;
  readonly v: Float32Array;
  step = 0;
  /** Float offsets of tensors exempt from weight decay. */
  private readonly noDecay: Array<[number, number]> = [];

  constructor(readonly params: ParamArena) {
    this.m = new Float32Array(params.size);
    this.v = new Float32Array(params.size);
    for (const spec of params.specs) {
      if (spec.shape.length === 1) {
        const o = params.offsets.get(spec.name)!;
        this.noDecay.push([o, o + spec.shape[0]]);
      }
    }
  }

  /** Global L2 norm of `grads`. */
  static gradNorm(grads: Float32Array): number {
    let s = 0;
    for (let i = 0; i < grads.length; i++) s += grads[i] * grads[i];
    return Math.sqrt(s);
  }

  /** One update from `grads`; returns the norm before clipping. Does not zero grads. */
  update(grads: Float32Array, p: AdamParams): number {
    const beta1 = p.beta1 ?? 0.9;
    const beta2 = p.beta2 ?? 0.95;
    const eps = p.eps ?? 1e-8;
    const wd = p.weightDecay ?? 0;
    const norm = AdamW.gradNorm(grads);
    // a NaN or infinite gradient is never applied: the weights and moments stay at the last good state
    if (!Number.isFinite(norm)) return norm;
    const scale = p.gradClipNorm && p.gradClipNorm > 0 && norm > p.gradClipNorm ? p.gradClipNorm / norm : 1;
    this.step++;
    const bc1 = 1 - Math.pow(beta1, this.step);
    const bc2 = 1 - Math.pow(beta2, this.step);
    const lr = p.learningRate;
    const x = this.params.data;
    const decay = new Uint8Array(x.length).fill(1);
    for (const [a, b] of this.noDecay) decay.fill(0, a, b);
    for (let i = 0; i < x.length; i++) {
      const g = grads[i] * scale;
      const m = (this.m[i] = beta1 * this.m[i] + (1 - beta1) * g);
      const v = (this.v[i] = beta2 * this.v[i] + (1 - beta2) * g * g);
      x[i] -= lr * (m / bc1 / (Math.sqrt(v / bc2) + eps) + (decay[i] ? wd * x[i] : 0));
    }
    return norm;
  }
}
