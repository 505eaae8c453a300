#!/usr/bin/env python3
"""
Hugging Face LlamaForCausalLM / Qwen2ForCausalLM / Qwen3ForCausalLM written by hand for PyTorch 1.13 on
CPU (no transformers, no scaled_dot_product_attention): RMSNorm, grouped-query attention, explicit
head_dim, q/k/v bias (Qwen2), per-head q/k RMSNorm (Qwen3), rotary tables in float32 as transformers
builds them (default, linear, llama3), tied or untied head, and an optional PEFT LoRA adapter. Weights
come from safetensors read with struct + numpy (F32/F16/BF16, single file or sharded index).

Modes (a JSON job on stdin, one JSON object on stdout): `reference` (logits, log-probs, loss and
gradients of the fixtures' loss: test/hf/torch-reference.test.ts), `sample` (batched sampling with a
KV cache, tokens/s), `train` (LoRA over a frozen base, AdamW over the adapter, tokens/s), `gemm`
(GFLOP/s of matmuls at given shapes). The last three serve bench/hf.ts; they do not check anything.
"""
import json
import math
import os
import resource
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

# ---------------------------------------------------------------- safetensors

SAFETENSORS_DTYPES = {'F32': np.float32, 'F64': np.float64, 'F16': np.float16}


def read_safetensors(path, dtype):
    """name -> torch tensor of `dtype`, from one .safetensors file (F32, F64, F16, BF16)."""
    with open(path, 'rb') as f:
        (n,) = struct.unpack('<Q', f.read(8))
        header = json.loads(f.read(n))
    raw = np.memmap(path, dtype=np.uint8, mode='r', offset=8 + n)
    out = {}
    for name, entry in header.items():
        if name == '__metadata__':
            continue
        begin, end = entry['data_offsets']
        data = raw[begin:end]
        kind = entry['dtype']
        if kind == 'BF16':
            # bfloat16 is the top half of a float32
            array = (data.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        elif kind in SAFETENSORS_DTYPES:
            array = data.view(SAFETENSORS_DTYPES[kind])
        else:
            raise ValueError(f'{path}: tensor {name}: dtype {kind} is not supported')
        out[name] = torch.from_numpy(np.array(array, dtype=np.float64 if dtype == torch.float64 else np.float32)
                                     ).reshape(entry['shape']).to(dtype)
    return out


def read_model_weights(directory, dtype):
    index = os.path.join(directory, 'model.safetensors.index.json')
    if not os.path.exists(index):
        return read_safetensors(os.path.join(directory, 'model.safetensors'), dtype)
    with open(index) as f:
        files = sorted(set(json.load(f)['weight_map'].values()))
    out = {}
    for name in files:
        out.update(read_safetensors(os.path.join(directory, name), dtype))
    return out


# ---------------------------------------------------------------- config.json

def model_config(directory):
    """The fields the forward pass needs, with transformers' defaults (specs/hf-models.md §1)."""
    with open(os.path.join(directory, 'config.json')) as f:
        raw = json.load(f)
    arch = raw['architectures'][0]
    if arch not in ('LlamaForCausalLM', 'Qwen2ForCausalLM', 'Qwen3ForCausalLM'):
        raise ValueError(f'{directory}/config.json: architectures: {arch} is not supported')
    hidden, heads = raw['hidden_size'], raw['num_attention_heads']
    head_dim = raw.get('head_dim') or (128 if arch == 'Qwen3ForCausalLM' else hidden // heads)
    rope = dict(raw.get('rope_scaling') or raw.get('rope_parameters') or {})
    rope.setdefault('rope_theta', raw.get('rope_theta', 10000.0))
    rope['rope_type'] = rope.get('rope_type', rope.get('type', 'default'))
    if rope['rope_type'] == 'llama3':
        rope.setdefault('original_max_position_embeddings',
                        raw.get('original_max_position_embeddings', raw.get('max_position_embeddings')))
    attention_bias = bool(raw.get('attention_bias', False))
    return {
        'architecture': arch,
        'vocab': raw['vocab_size'], 'hidden': hidden, 'layers': raw['num_hidden_layers'],
        'heads': heads, 'kv_heads': raw.get('num_key_value_heads') or heads, 'head_dim': head_dim,
        'eps': raw.get('rms_norm_eps', 1e-6), 'tied': bool(raw.get('tie_word_embeddings', False)),
        'max_positions': raw.get('max_position_embeddings', 2048), 'rope': rope,
        # Qwen2: q/k/v bias hard-coded, o without; Llama/Qwen3: attention_bias on all four
        'qkv_bias': True if arch == 'Qwen2ForCausalLM' else attention_bias,
        'o_bias': False if arch == 'Qwen2ForCausalLM' else attention_bias,
        'mlp_bias': bool(raw.get('mlp_bias', False)) if arch == 'LlamaForCausalLM' else False,
        'qk_norm': arch == 'Qwen3ForCausalLM',
    }


def inverse_frequencies(rope, head_dim):
    """transformers' inv_freq, computed in float32 (modeling_rope_utils: default, linear, llama3)."""
    inv = 1.0 / (rope['rope_theta'] ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    kind = rope['rope_type']
    if kind == 'default':
        return inv
    if kind == 'linear':
        return inv / rope['factor']
    if kind == 'llama3':
        factor, low, high = rope['factor'], rope['low_freq_factor'], rope['high_freq_factor']
        old = rope['original_max_position_embeddings']
        low_wavelen, high_wavelen = old / low, old / high
        wavelen = 2 * math.pi / inv
        scaled = torch.where(wavelen > low_wavelen, inv / factor, inv)
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
        return torch.where(medium, smoothed, scaled)
    raise ValueError(f'rope type {kind} is not supported here')


# ---------------------------------------------------------------- the model

class HfModel:
    """Forward of one architecture over `params` (HF names), with an optional adapter
    {'scale': s, 'modules': {module path: (A [r, in], B [out, r])}}."""

    def __init__(self, config, params, adapter=None, context=None):
        self.c = config
        self.p = params
        self.adapter = adapter
        dtype = params['model.embed_tokens.weight'].dtype
        T = context or config['max_positions']
        # angles, cos and sin in float32, then cast (transformers' rotary embedding)
        inv = inverse_frequencies(config['rope'], config['head_dim'])
        freqs = torch.arange(T, dtype=torch.float32)[:, None] * inv[None]
        emb = torch.cat([freqs, freqs], dim=-1)
        self.cos = emb.cos().to(dtype)  # [T, hd]
        self.sin = emb.sin().to(dtype)

    def head(self):
        return self.p['model.embed_tokens.weight' if self.c['tied'] else 'lm_head.weight']

    def rmsnorm(self, x, weight):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.c['eps']) * weight

    def linear(self, x, module, bias=False):
        y = F.linear(x, self.p[module + '.weight'], self.p[module + '.bias'] if bias else None)
        if self.adapter is not None and module in self.adapter['modules']:
            A, B = self.adapter['modules'][module]
            y = y + F.linear(F.linear(x, A), B) * self.adapter['scale']
        return y

    def rope(self, x, positions):
        """x [B, H, T, hd]; NeoX half-split rotation: x·cos + rotate_half(x)·sin."""
        half = x.shape[-1] // 2
        cos, sin = self.cos[positions], self.sin[positions]
        rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos + rotated * sin

    def forward(self, tokens, cache=None, start=0, last_only=False):
        """tokens [B, T] (equal lengths, positions start..start+T-1) -> logits [B, T, V] (or [B, V]).
        `cache`: per layer (k, v) buffers [B, NKV, S_max, hd] written at start..start+T-1."""
        c, p = self.c, self.p
        B, T = tokens.shape
        NH, NKV, hd = c['heads'], c['kv_heads'], c['head_dim']
        rep = NH // NKV
        positions = torch.arange(start, start + T)
        S = start + T
        mask = None
        if T > 1:
            # query row t (grouped as rep blocks of T rows) sees keys 0..start+t
            mask = (torch.arange(S)[None, :] <= positions[:, None]).repeat(rep, 1)
        x = p['model.embed_tokens.weight'][tokens]
        for l in range(c['layers']):
            pre = f'model.layers.{l}.'
            h = self.rmsnorm(x, p[pre + 'input_layernorm.weight'])
            q = self.linear(h, pre + 'self_attn.q_proj', c['qkv_bias']).view(B, T, NH, hd)
            k = self.linear(h, pre + 'self_attn.k_proj', c['qkv_bias']).view(B, T, NKV, hd)
            v = self.linear(h, pre + 'self_attn.v_proj', c['qkv_bias']).view(B, T, NKV, hd)
            if c['qk_norm']:
                q = self.rmsnorm(q, p[pre + 'self_attn.q_norm.weight'])
                k = self.rmsnorm(k, p[pre + 'self_attn.k_norm.weight'])
            q = self.rope(q.transpose(1, 2), positions)
            k = self.rope(k.transpose(1, 2), positions)
            v = v.transpose(1, 2)
            if cache is not None:
                kc, vc = cache[l]
                kc[:, :, start:S] = k
                vc[:, :, start:S] = v
                k, v = kc[:, :, :S], vc[:, :, :S]
            # grouped-query attention without repeat_kv: query head h = g·rep + r reads kv head g
            qg = q.reshape(B, NKV, rep * T, hd)
            att = (qg @ k.transpose(-1, -2)) * (hd ** -0.5)
            if mask is not None:
                att = att.masked_fill(~mask, float('-inf'))
            y = att.softmax(-1) @ v  # [B, NKV, rep·T, hd]
            y = y.reshape(B, NH, T, hd).transpose(1, 2).reshape(B, T, NH * hd)
            x = x + self.linear(y, pre + 'self_attn.o_proj', c['o_bias'])
            h = self.rmsnorm(x, p[pre + 'post_attention_layernorm.weight'])
            gate = self.linear(h, pre + 'mlp.gate_proj', c['mlp_bias'])
            up = self.linear(h, pre + 'mlp.up_proj', c['mlp_bias'])
            x = x + self.linear(F.silu(gate) * up, pre + 'mlp.down_proj', c['mlp_bias'])
        if last_only:
            x = x[:, -1]
        return F.linear(self.rmsnorm(x, p['model.norm.weight']), self.head())

    def new_cache(self, batch, length, dtype):
        shape = (batch, self.c['kv_heads'], length, self.c['head_dim'])
        return [(torch.zeros(shape, dtype=dtype), torch.zeros(shape, dtype=dtype)) for _ in range(self.c['layers'])]


# ---------------------------------------------------------------- LoRA

LINEAR_MODULES = {'q_proj': 'self_attn', 'k_proj': 'self_attn', 'v_proj': 'self_attn', 'o_proj': 'self_attn',
                  'gate_proj': 'mlp', 'up_proj': 'mlp', 'down_proj': 'mlp'}


def read_adapter(directory, dtype):
    """A PEFT adapter directory -> (adapter, {PEFT tensor name: leaf tensor})."""
    with open(os.path.join(directory, 'adapter_config.json')) as f:
        cfg = json.load(f)
    if cfg.get('rank_pattern') or cfg.get('alpha_pattern') or cfg.get('use_dora'):
        raise ValueError(f'{directory}/adapter_config.json: rank_pattern/alpha_pattern/use_dora are not supported here')
    r, alpha = cfg['r'], cfg['lora_alpha']
    scale = alpha / math.sqrt(r) if cfg.get('use_rslora') else alpha / r
    tensors = read_safetensors(os.path.join(directory, 'adapter_model.safetensors'), dtype)
    modules = {}
    for name in tensors:
        if name.endswith('.lora_A.weight'):
            module = name[len('base_model.model.'):-len('.lora_A.weight')]
            modules[module] = (tensors[name], tensors[name.replace('.lora_A.', '.lora_B.')])
    return {'scale': scale, 'modules': modules}, tensors


def lora_for(params, config, rank, alpha, dtype, seed):
    """Adapter of `rank` on all seven linear layers of every block, PEFT's default init (B = 0)."""
    g = torch.Generator().manual_seed(seed)
    modules = {}
    for l in range(config['layers']):
        for leaf, block in LINEAR_MODULES.items():
            module = f'model.layers.{l}.{block}.{leaf}'
            out, inp = params[module + '.weight'].shape
            bound = 1 / math.sqrt(inp)
            A = ((torch.rand((rank, inp), generator=g, dtype=torch.float64) * 2 - 1) * bound).to(dtype)
            modules[module] = (A.requires_grad_(True), torch.zeros((out, rank), dtype=dtype, requires_grad=True))
    return {'scale': alpha / rank, 'modules': modules}


# ---------------------------------------------------------------- reference mode

def flat(t):
    return t.detach().to(torch.float64).reshape(-1).tolist()


def reference_case(case):
    """The fixtures' quantities: per sequence logits and log p(token t+1 | ≤ t); the loss (mean −log p over
    tokens at positions ≥ prompt_length, pooled); the gradient of every parameter (the adapter's only)."""
    dtype = torch.float64 if case.get('dtype') == 'float64' else torch.float32
    config = model_config(case['model'])
    params = read_model_weights(case['model'], dtype)
    adapter, adapter_tensors = read_adapter(case['adapter'], dtype) if case.get('adapter') else (None, None)
    trained = adapter_tensors if adapter is not None else params
    for t in trained.values():
        t.requires_grad_(True)
    if config['tied']:
        params.pop('lm_head.weight', None)
    model = HfModel(config, params, adapter)
    out = {'logits': [], 'logprobs': []}
    total, count = 0, 0
    for seq, prompt in zip(case['sequences'], case['prompt_lengths']):
        tokens = torch.tensor([seq])
        logits = model.forward(tokens)[0]
        logp = logits[:-1].log_softmax(-1).gather(1, tokens[0, 1:, None])[:, 0]
        out['logits'].append(flat(logits))
        out['logprobs'].append(flat(logp))
        total = total - logp[prompt - 1:].sum()
        count += len(seq) - prompt
    loss = total / count
    loss.backward()
    out['loss'] = float(loss)
    out['grads'] = {name: flat(t.grad) for name, t in trained.items() if t.grad is not None}
    return out


# ---------------------------------------------------------------- speed

def bench_tokens(batch, length, vocab, salt):
    """Token rows shared with bench/hf.ts: row b, position i -> 5 + (31·b + 7·i + salt) mod (V − 5)."""
    return [[5 + (31 * b + 7 * i + salt) % (vocab - 5) for i in range(length)] for b in range(batch)]


def bench_sample(job):
    """`batch` prompts of `promptLength` tokens, prefilled together, then `maxTokens` tokens each sampled at
    temperature 1 with a preallocated KV cache; tokens/s counts the new tokens (prefill time included)."""
    config = model_config(job['model'])
    params = read_model_weights(job['model'], torch.float32)
    B, P, N = job['batch'], job['promptLength'], job['maxTokens']
    model = HfModel(config, params, context=P + N)
    prompts = torch.tensor(bench_tokens(B, P, config['vocab'], 0))
    g = torch.Generator().manual_seed(1)
    runs = []
    with torch.inference_mode():
        for _ in range(job.get('repeats', 1)):
            t0 = time.perf_counter()
            cache = model.new_cache(B, P + N, torch.float32)
            logits = model.forward(prompts, cache, 0, last_only=True)
            for step in range(N):
                logp = logits.log_softmax(-1)
                token = torch.multinomial(logp.exp(), 1, generator=g)
                _ = logp.gather(1, token)  # the sampled token's log-prob, as Arbor records it
                if step + 1 == N:
                    break
                logits = model.forward(token, cache, P + step, last_only=True)
            runs.append(B * N / (time.perf_counter() - t0))
    return {'tokens_per_s': runs}


def bench_train(job):
    """LoRA of `rank` on all linear layers over the frozen base: forward + backward + AdamW (adapter only) on
    `batch` sequences of `seqLength` tokens with the PPO loss, `microBatch` sequences per forward/backward pass
    (gradients accumulate; default all); one warm-up step, then `repeats` timed."""
    config = model_config(job['model'])
    params = read_model_weights(job['model'], torch.float32)
    model = HfModel(config, params, lora_for(params, config, job['rank'], job['alpha'], torch.float32, 1),
                    context=job['seqLength'])
    B, T = job['batch'], job['seqLength']
    seqs = torch.tensor(bench_tokens(B, T + 1, config['vocab'], 3))
    inputs, targets = seqs[:, :-1], seqs[:, 1:]
    w = torch.full((B, T), 1.0 / (B * T))
    behaviour = torch.full((B, T), -11.0)
    advantages = torch.tensor([[1.0 if i % 2 else -1.0 for i in range(T)]] * B)
    trained = [t for pair in model.adapter['modules'].values() for t in pair]
    opt = torch.optim.AdamW(trained, lr=1e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0)

    micro = job.get('microBatch') or B

    def step():
        opt.zero_grad(set_to_none=True)
        for s in range(0, B, micro):
            rows = slice(s, s + micro)
            logits = model.forward(inputs[rows])
            # log p(target) = logit − logsumexp: never materialises a [b, T, V] log-softmax
            lp = logits.gather(2, targets[rows, :, None])[..., 0] - logits.logsumexp(-1)
            ratio = torch.exp(lp - behaviour[rows])
            objective = torch.minimum(ratio * advantages[rows], ratio.clamp(0.8, 1.28) * advantages[rows])
            (-(w[rows] * objective).sum()).backward()
        opt.step()

    step()
    runs = []
    for _ in range(job.get('repeats', 1)):
        t0 = time.perf_counter()
        step()
        runs.append(B * T / (time.perf_counter() - t0))
    return {'tokens_per_s': runs, 'adapter_parameters': sum(t.numel() for t in trained)}


def bench_gemm(job):
    """Best GFLOP/s over `rounds` of each {op, M, K, N}: matmulBT a[M,K]·b[N,K]ᵀ, matmulAT a[K,M]ᵀ·b[K,N],
    matmul a[M,K]·b[K,N] (the engine's three kernels)."""
    out = []
    g = torch.Generator().manual_seed(0)
    for s in job['shapes']:
        M, K, N = s['M'], s['K'], s['N']
        if s['op'] == 'matmulBT':
            a, b = torch.randn(M, K, generator=g), torch.randn(N, K, generator=g)
            f = lambda: a @ b.t()  # noqa: E731
        elif s['op'] == 'matmulAT':
            a, b = torch.randn(K, M, generator=g), torch.randn(K, N, generator=g)
            f = lambda: a.t() @ b  # noqa: E731
        else:
            a, b = torch.randn(M, K, generator=g), torch.randn(K, N, generator=g)
            f = lambda: a @ b  # noqa: E731
        f()
        reps = max(1, int(2e8 // (M * K * N)))
        best = 0.0
        for _ in range(job.get('rounds', 5)):
            t0 = time.perf_counter()
            for _ in range(reps):
                f()
            best = max(best, 2.0 * M * K * N * reps / (time.perf_counter() - t0) / 1e9)
        out.append({**s, 'gflops': best})
    return {'shapes': out}


def blas_library():
    """The BLAS this process actually mapped (Debian's torch links whatever libblas.so.3 resolves to)."""
    try:
        with open('/proc/self/maps') as f:
            libs = sorted({line.split()[-1] for line in f if 'blas' in line.lower() and '/' in line})
        return libs[0] if libs else 'none mapped'
    except OSError:
        return 'unknown'


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else 'reference'
    job = json.load(sys.stdin)
    torch.set_num_threads(job.get('threads', 1))
    if mode == 'reference':
        out = {'cases': [reference_case(c) for c in job['cases']]}
    elif mode == 'sample':
        out = bench_sample(job)
    elif mode == 'train':
        out = bench_train(job)
    elif mode == 'gemm':
        out = bench_gemm(job)
    else:
        raise SystemExit(f'unknown mode {mode} (reference, sample, train, gemm)')
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out.update({'torch': torch.__version__, 'threads': torch.get_num_threads(), 'blas': blas_library(),
                'max_rss_mb': rss_mb})
    sys.stdout.write(json.dumps(out))


if __name__ == '__main__':
    main()
