/**
 * LoRA as a parameter set of its own (PEFT tuners/lora/layer.py, huggingface/peft@5d602fd): for each
 * targeted linear layer W [out, in], A [r, in] and B [out, r] with y = x·Wᵀ + s·(x·Aᵀ)·Bᵀ, s = α/r
 * (α/√r with rsLoRA). The adapter's tensors live in their own arena under PEFT's names
 * (`base_model.model.<module>.lora_A.weight`), with a gradient arena of the same layout: only they
 * train, the base stays frozen and shared. Initialisation follows PEFT: A ~ U(±1/√in) (kaiming-uniform
 * with a = √5), B = 0, so a new adapter leaves the model unchanged. Saving/loading the PEFT files is
 * peft.ts; the forward/backward math is in forward.ts and decode.ts.
 */
import { ConfigError } from '../../core/errors.js';
import { Rng } from '../../core/rng.js';
import type { Kernels } from '../kernels/types.js';
import type { LayerRole, ParamSpec } from './config.js';
import type { NanoModel } from './model.js';
import { ParamArena } from './params.js';

/** Module leaf names a LoRA may target, and the weight role of each. */
export const LORA_MODULES = {
  q_proj: 'wq',
  k_proj: 'wk',
  v_proj: 'wv',
  o_proj: 'wo',
  gate_proj: 'wGate',
  up_proj: 'wUp',
  down_proj: 'wDown',
} as const satisfies Record<string, LayerRole>;

export type LoraModule = keyof typeof LORA_MODULES;
export const ALL_LORA_MODULES = Object.keys(LORA_MODULES) as LoraModule[];

export interface LoraSettings {
  /** r: adapter rank. */
  rank: number;
  /** α: the update is scaled by α/r (α/√r with rsLoRA). */
  alpha: number;
  /** Targeted module leaf names (q_proj, ..., down_proj). */
  targets: LoraModule[];
  /** rsLoRA scaling α/√r. */
  useRslora?: boolean;
}

/** One adapted linear layer: views into the adapter arenas. */
export interface LoraTarget {
  /** [r, in] */
  A: Float32Array;
  /** [out, r] */
  B: Float32Array;
  nameA: string;
  nameB: string;
  in: number;
  out: number;
}

/** The PEFT module path of a weight ("model.layers.0.self_attn.q_proj.weight" → "model.layers.0.self_attn.q_proj"). */
export function modulePath(weightName: string): string {
  return weightName.replace(/\.weight$/, '');
}

export function peftNames(weightName: string): { A: string; B: string } {
  const m = `base_model.model.${modulePath(weightName)}`;
  return { A: `${m}.lora_A.weight`, B: `${m}.lora_B.weight` };
}

export class LoraAdapter {
  readonly params: ParamArena;
  private gradArena: ParamArena | undefined;
  /** s = α/r (or α/√r). */
  readonly scale: number;
  /** Per layer, the adapted roles. */
  readonly layers: Array<Partial<Record<LayerRole, LoraTarget>>>;

  constructor(
    readonly model: NanoModel,
    readonly settings: LoraSettings,
    private readonly kernels: Kernels = model.kernels,
  ) {
    const { rank: r, alpha, targets } = settings;
    if (!(Number.isInteger(r) && r >= 1))
      throw new ConfigError(`model.lora.rank must be a positive integer, got ${r}`, 'model.lora.rank');
    if (!(alpha > 0)) throw new ConfigError(`model.lora.alpha must be positive, got ${alpha}`, 'model.lora.alpha');
    if (!targets.length)
      throw new ConfigError('model.lora.targets must name at least one module', 'model.lora.targets');
    for (const t of targets) {
      if (!(t in LORA_MODULES))
        throw new ConfigError(
          `model.lora.targets: unknown module ${JSON.stringify(t)} (known: ${ALL_LORA_MODULES.join(', ')})`,
          'model.lora.targets',
        );
    }
    this.scale = settings.useRslora ? alpha / Math.sqrt(r) : alpha / r;
    const specs: ParamSpec[] = [];
    const shapes: Array<Array<[LayerRole, string, number, number]>> = [];
    model.names.layers.forEach((names, l) => {
      shapes.push([]);
      for (const module of ALL_LORA_MODULES) {
        if (!targets.includes(module)) continue;
        const role = LORA_MODULES[module];
        const [out, inDim] = model.params.specs.find((s) => s.name === names[role])!.shape;
        const { A, B } = peftNames(names[role]);
        specs.push({ name: A, shape: [r, inDim], init: 'normal' }, { name: B, shape: [out, r], init: 'zeros' });
        shapes[l].push([role, names[role], inDim, out]);
      }
    });
    this.params = new ParamArena(specs, kernels);
    this.layers = shapes.map((list) =>
      Object.fromEntries(
        list.map(([role, weight, inDim, out]) => {
          const { A, B } = peftNames(weight);
          return [role, { A: this.params.get(A), B: this.params.get(B), nameA: A, nameB: B, in: inDim, out }];
        }),
      ),
    );
  }

  /** PEFT's default init: A ~ U(−1/√in, 1/√in), B = 0 (seeded). */
  initialise(seed: number): void {
    const rng = new Rng(seed);
    for (const layer of this.layers) {
      for (const t of Object.values(layer)) {
        const bound = 1 / Math.sqrt(t.in);
        for (let i = 0; i < t.A.length; i++) t.A[i] = (2 * rng.next() - 1) * bound;
        t.B.fill(0);
      }
    }
  }

  /** Gradients (same layout as params), accumulated by backward. */
  get grads(): ParamArena {
    if (!this.gradArena) this.gradArena = new ParamArena(this.params.specs, this.kernels);
    return this.gradArena;
  }

  target(l: number, role: LayerRole): LoraTarget | undefined {
    return this.layers[l][role];
  }

  get rank(): number {
    return this.settings.rank;
  }

  get parameterCount(): number {
    return this.params.size;
  }
}
