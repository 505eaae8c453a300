/**
 * LoRA adapters over an opened model, for callers outside the engine (`arbor serve`): a sampler of a
 * PEFT adapter directory whose arrays are garbage-collected with it, trainers of fresh adapters (one per
 * adapter shape, reused and reset by a later request of that shape) and of the whole model, and the
 * PEFT files an adapter is saved as. engine/open.ts re-exports what is here.
 */
import { referenceKernels } from './kernels/reference.js';
import type { Kernels } from './kernels/types.js';
import { loadPeftAdapter } from './formats/peft.js';
import { LoraAdapter, type LoraSettings } from './model/lora.js';
import type { NanoModel } from './model/model.js';
import { NanoSampler } from './embedded/sampler.js';
import { NanoTrainer } from './embedded/trainer.js';

export { ADAPTER_CONFIG, ADAPTER_WEIGHTS, isPeftAdapterDir, savePeftAdapter } from './formats/peft.js';

/**
 * The model as an adapter's sampler sees it: the same weights and kernels, except that scratch arrays
 * the sampler allocates (its decode workspace) are ordinary arrays, freed with the sampler. Kernels
 * copy such arrays through their scratch region (kernels/wasm.ts), bit for bit the same results.
 */
export function collectableView(model: NanoModel): NanoModel {
  const kernels: Kernels = Object.create(model.kernels, { alloc: { value: (n: number) => new Float32Array(n) } });
  return Object.create(model, { kernels: { value: kernels } }) as NanoModel;
}

/** A PEFT adapter loaded over `model` with its sampler; the arrays are garbage-collected with it. */
export function adapterSampler(model: NanoModel, dir: string, options: { pageSize?: number } = {}): NanoSampler {
  const adapter = loadPeftAdapter(dir, model, { kernels: referenceKernels });
  return new NanoSampler(collectableView(model), { adapter, pageSize: options.pageSize });
}

/** Trainers of one model: of a fresh LoRA adapter over the frozen base, or of the whole model. */
export interface AdapterTrainers {
  /**
   * A trainer of a new adapter of `settings` (PEFT init from `seed`), the base frozen, with a fresh
   * optimizer: no moments, no gradients. The trainer and adapter of an earlier call with the same
   * settings are reused (trainers live in the kernels' arena, which never frees).
   */
  lora(settings: LoraSettings, seed: number): { trainer: NanoTrainer; adapter: LoraAdapter };
  /** The trainer of the whole model (the base trains again). */
  full(): NanoTrainer;
}

/** The trainers of `model`; `baseModelName` is the base_model_name_or_path written into saved adapters. */
export function adapterTrainers(model: NanoModel, baseModelName: string): AdapterTrainers {
  let full: NanoTrainer | undefined;
  const made = new Map<string, { trainer: NanoTrainer; adapter: LoraAdapter }>();
  return {
    lora(settings, seed) {
      const key = JSON.stringify(settings);
      let t = made.get(key);
      if (!t) {
        const adapter = new LoraAdapter(model, settings);
        t = { trainer: new NanoTrainer(model, { adapter, baseModelName }), adapter };
        made.set(key, t);
      }
      // a new model: PEFT init, no moments, no gradients, the base frozen again
      model.frozen = true;
      t.adapter.initialise(seed);
      t.trainer.reset();
      return t;
    },
    full() {
      // the whole model trains (a LoRA trainer made it frozen before)
      model.frozen = false;
      full ??= new NanoTrainer(model);
      return full;
    },
  };
}
