/**
 * Loading a Hugging Face model directory into the embedded engine: config.json → the model's
 * description (config.ts), weights → its arena (weights.ts). The tokenizer of the directory is loaded
 * separately (engine/tokenizer) and checked against the model's vocabulary there.
 */
import type { Kernels } from '../kernels/types.js';
import { loadKernels } from '../kernels/index.js';
import { NanoModel } from '../model/model.js';
import { readHfConfig, type HfModelInfo } from '../formats/hf-config.js';
import { loadHfWeights } from '../formats/hf-weights.js';

export interface HfLoadOptions {
  kernels?: Kernels;
  /** Cap the context (rotary tables, KV cache, training sequences) below the checkpoint's max_position_embeddings. */
  contextLength?: number;
}

export async function loadHfModel(
  dir: string,
  options: HfLoadOptions = {},
): Promise<{ model: NanoModel; info: HfModelInfo }> {
  const info = readHfConfig(dir, { contextLength: options.contextLength });
  const kernels = options.kernels ?? (await loadKernels());
  const model = NanoModel.createEmpty(info.config, kernels);
  loadHfWeights(model.params, dir, { tiedHead: info.config.tieEmbeddings ? 'lm_head.weight' : undefined });
  return { model, info };
}
