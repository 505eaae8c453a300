// Writes tokenizer/: the example model's character-level tokenizer (tokenizer.json: a BPE model with no
// merges, so every printable ASCII character is one token; ChatML and tool-call tags are added tokens) and
// its chat template (tokenizer_config.json), in the files transformers reads. Run: node make-tokenizer.mjs
import { mkdirSync, writeFileSync } from 'node:fs';

const specials = ['<|endoftext|>', '<|im_start|>', '<|im_end|>'];
// tool-call tags are added tokens that are not special (as in Qwen's vocabulary): they survive decoding
const tags = ['<tool_call>', '</tool_call>'];
const chars = ['\n', ...Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i))];
const vocab = {};
for (const t of [...specials, ...tags, ...chars]) vocab[t] = Object.keys(vocab).length;
const added = [...specials, ...tags].map((content) => ({
  id: vocab[content],
  content,
  single_word: false,
  lstrip: false,
  rstrip: false,
  normalized: false,
  special: specials.includes(content),
}));
const tokenizer = {
  version: '1.0',
  truncation: null,
  padding: null,
  added_tokens: added,
  normalizer: null,
  pre_tokenizer: null,
  post_processor: null,
  decoder: { type: 'Fuse' },
  model: {
    type: 'BPE',
    dropout: null,
    unk_token: null,
    continuing_subword_prefix: null,
    end_of_word_suffix: null,
    fuse_unk: false,
    byte_fallback: false,
    vocab,
    merges: [],
  },
};
const template = [
  '{% if tools %}<|im_start|>system\ntools:{% for t in tools %} {{ t.function.name }}{% endfor %}<|im_end|>\n{% endif %}',
  '{% for m in messages %}',
  "{% if m.role == 'assistant' %}<|im_start|>assistant\n{% if m.content %}{{ m.content }}{% endif %}",
  '{% for c in m.tool_calls or [] %}<tool_call>\n{"name": "{{ c.function.name }}", "arguments": ',
  '{% if c.function.arguments is string %}{{ c.function.arguments }}{% else %}{{ c.function.arguments | tojson }}{% endif %}',
  '}\n</tool_call>{% endfor %}<|im_end|>\n',
  "{% elif m.role == 'tool' %}<|im_start|>tool\n{{ m.content }}<|im_end|>\n",
  '{% else %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endif %}',
  '{% endfor %}',
  '{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}',
].join('');
const config = {
  tokenizer_class: 'PreTrainedTokenizerFast',
  eos_token: '<|im_end|>',
  pad_token: '<|endoftext|>',
  model_max_length: 256,
  clean_up_tokenization_spaces: false,
  chat_template: template,
};
mkdirSync('tokenizer', { recursive: true });
writeFileSync('tokenizer/tokenizer.json', JSON.stringify(tokenizer, null, 2) + '\n');
writeFileSync('tokenizer/tokenizer_config.json', JSON.stringify(config, null, 2) + '\n');
