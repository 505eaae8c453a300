/**
 * AdamW over the parameter arena with global grad-norm clipping and no weight decay on 1-D tensors
 * (norm gains). The learning rate comes per step from the caller (schedules live in optimize/).
 * Moments live in arenas of the same layout so they checkpoint with the model.
 */
import type { AdamParams } from '../types.js';
import type { Kernels } from '../kernels/types.js';
import type { ParamArena } from '../model/params.js';

export class AdamW {
  readonly m: Float32Array;
  readonly v: Float32Array;
  step = 0;
  /** The arena cut into runs [start, end, decays] in order: 1-D tensors (norm gains) do not decay. */
  private readonly segments: Array<[number, number, boolean]> = [];

  constructor(
    readonly params: ParamArena,
    private readonly kernels: Kernels,
  ) {
    this.m = kernels.alloc(params.size);
    this.v = kernels.alloc(params.size);
    const noDecay: Array<[number, number]> = [];
    for (const spec of params.specs) {
      if (spec.shape.length === 1) {
        const o = params.offsets.get(spec.name)!;
        noDecay.push([o, o + spec.shape[0]]);
      }
    }
    noDecay.sort((a, b) => a[0] - b[0]);
    let at = 0;
    for (const [a, b] of noDecay) {
      if (a > at) this.segments.push([at, a, true]);
      this.segments.push([a, b, false]);
      at = b;
    }
    if (at < params.size) this.segments.push([at, params.size, true]);
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
    const step = {
      lr: p.learningRate,
      beta1,
      beta2,
      eps,
      weightDecay: 0,
      bc1: 1 - Math.pow(beta1, this.step),
      bc2: 1 - Math.pow(beta2, this.step),
      gradScale: scale,
    };
    const x = this.params.data;
    for (const [a, b, decays] of this.segments) {
      this.kernels.adamw(x.subarray(a, b), grads.subarray(a, b), this.m.subarray(a, b), this.v.subarray(a, b), b - a, {
        ...step,
        weightDecay: decays ? wd : 0,
      });
    }
    return norm;
  }
}
