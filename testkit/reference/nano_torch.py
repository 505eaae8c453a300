#!/usr/bin/python3
"""
A PyTorch reference for Arbor's embedded "nano" transformer, written independently of the
TypeScript code from the architecture described in src/engine/model/config.ts:

  x = tok_emb[tokens]
  per layer:  h = rmsnorm(x) * attn_norm;  q,k,v = h Wq^T, h Wk^T, h Wv^T;  rotary (NeoX half-split) on q,k;
              x += causal_softmax(q k^T / sqrt(hs)) v Wo^T
              h = rmsnorm(x) * mlp_norm;   x += (silu(h Wgate^T) * h Wup^T) Wdown^T
  logits = rmsnorm(x) * final_norm  head^T   (head = tok_emb when tied, else lm_head)

Weights come from an Arbor checkpoint directory (config.json + model.safetensors; the safetensors
header is parsed here, no extra packages). Losses are written as plain differentiable PyTorch
expressions (autograd gives the gradients; nothing is derived by hand), AdamW is torch.optim.AdamW
with Arbor's decay rule (no decay on 1-D tensors) and Arbor's clipping rule (scale by clip/norm only
when norm > clip).

Usage (JSON in on stdin, JSON out on stdout):
  /usr/bin/python3 testkit/reference/nano_torch.py parity < job.json
  /usr/bin/python3 testkit/reference/nano_torch.py bench  < job.json

parity job: {"threads": 1, "cases": [{"checkpoint": DIR, "dtype": "float32"|"float64",
   "data": [Datum...], "losses": [{"loss": LossSpec, "extras": {klCoef, entropyCoef}}...],
   "adam": {"params": AdamParams, "grads": [{name: [...]} per step]} | null,
   "samples": [{"tokens": [...context + completion], "start": k, "temperature": T}...]}]}
parity result per case: {"logprobs": [[...]], "losses": [{"loss": L, "grads": {name: [...]}}],
   "adam": {"grad_norms": [...], "params": [{name: [...]}, ...per step]},
   "samples": [{"logprobs": [...], "entropies": [...], "mass_above": [...], "rank": [...]}]}

bench job: {"threads": 1, "repeats": 3, "models": {label: NanoConfig}, "sample": {"batch", "promptLength",
   "maxTokens"}, "train": {"batch", "seqLength"}} -> per model the median sample and train tokens/s
"""
import json
import math
import os
import struct
import sys
import time

import torch
import torch.nn.functional as F


# ---------------------------------------------------------------- checkpoint loading

def read_safetensors(path, dtype):
    with open(path, 'rb') as f:
        buf = f.read()
    (n,) = struct.unpack('<Q', buf[:8])
    header = json.loads(buf[8:8 + n].decode('utf-8'))
    start = 8 + n
    out = {}
    for name, e in header.items():
        if name == '__metadata__':
            continue
        if e['dtype'] != 'F32':
            raise ValueError(f'{path}: tensor {name} has dtype {e["dtype"]}')
        b, end = e['data_offsets']
        raw = bytearray(buf[start + b:start + end])
        t = torch.frombuffer(raw, dtype=torch.float32).clone() if end > b else torch.zeros(0)
        out[name] = t.reshape(e['shape']).to(dtype)
    return out


def load_checkpoint(directory, dtype):
    with open(os.path.join(directory, 'config.json')) as f:
        config = json.load(f)
    tensors = read_safetensors(os.path.join(directory, 'model.safetensors'), dtype)
    return config, tensors


def param_names(c):
    names = ['tok_emb']
    for l in range(c['nLayers']):
        p = f'layers.{l}.'
        names += [p + n for n in ('attn_norm', 'wq', 'wk', 'wv', 'wo', 'mlp_norm', 'w_gate', 'w_up', 'w_down')]
    names.append('final_norm')
    if not c['tieEmbeddings']:
        names.append('lm_head')
    return names


def random_params(c, seed, dtype):
    g = torch.Generator().manual_seed(seed)
    V, C, L, Fd = c['vocabSize'], c['dModel'], c['nLayers'], c['dFF']
    shapes = {'tok_emb': [V, C], 'final_norm': [C], 'lm_head': [V, C]}
    for l in range(L):
        p = f'layers.{l}.'
        shapes.update({p + 'attn_norm': [C], p + 'wq': [C, C], p + 'wk': [C, C], p + 'wv': [C, C], p + 'wo': [C, C],
                       p + 'mlp_norm': [C], p + 'w_gate': [Fd, C], p + 'w_up': [Fd, C], p + 'w_down': [C, Fd]})
    out = {}
    for n in param_names(c):
        s = shapes[n]
        out[n] = torch.ones(s, dtype=dtype) if len(s) == 1 else torch.randn(s, generator=g, dtype=dtype) * 0.02
    return out


# ---------------------------------------------------------------- the model

class Nano:
    def __init__(self, config, params):
        self.c = config
        self.p = params  # name -> leaf tensor
        C, NH = config['dModel'], config['nHeads']
        self.hs = C // NH
        half = self.hs // 2
        dtype = params['tok_emb'].dtype
        inv = torch.tensor([config['ropeTheta'] ** (-2.0 * i / self.hs) for i in range(half)], dtype=torch.float64)
        ang = torch.arange(config['contextLength'], dtype=torch.float64)[:, None] * inv[None, :]
        # Arbor stores the tables in float32
        self.cos = ang.cos().to(torch.float32).to(dtype)
        self.sin = ang.sin().to(torch.float32).to(dtype)

    @property
    def head(self):
        return self.p['tok_emb'] if self.c['tieEmbeddings'] else self.p['lm_head']

    def rmsnorm(self, x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.c['normEps']) * w

    def rope(self, x, pos):
        # x [B, NH, T, hs]; pos [T] or [B, T]
        half = self.hs // 2
        cos, sin = self.cos[pos], self.sin[pos]
        if cos.dim() == 2:
            cos, sin = cos[None, None], sin[None, None]
        else:
            cos, sin = cos[:, None], sin[:, None]
        a, b = x[..., :half], x[..., half:]
        return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)

    def heads(self, x):
        B, T, C = x.shape
        return x.view(B, T, self.c['nHeads'], self.hs).transpose(1, 2)

    def forward(self, tokens, cache=None, pos0=0):
        """tokens [B, T] (equal lengths). With cache (a list of [k, v] per layer) appends to it."""
        c, p = self.c, self.p
        B, T = tokens.shape
        x = p['tok_emb'][tokens]
        pos = torch.arange(pos0, pos0 + T)
        scale = 1.0 / math.sqrt(self.hs)
        for l in range(c['nLayers']):
            q_ = f'layers.{l}.'
            h = self.rmsnorm(x, p[q_ + 'attn_norm'])
            q = self.rope(self.heads(h @ p[q_ + 'wq'].t()), pos)
            k = self.rope(self.heads(h @ p[q_ + 'wk'].t()), pos)
            v = self.heads(h @ p[q_ + 'wv'].t())
            if cache is not None:
                if cache[l] is not None:
                    k = torch.cat([cache[l][0], k], dim=2)
                    v = torch.cat([cache[l][1], v], dim=2)
                cache[l] = (k, v)
            S = k.shape[2]
            att = (q @ k.transpose(-1, -2)) * scale
            if T > 1:
                mask = torch.ones(T, S, dtype=torch.bool).tril(S - T)
                att = att.masked_fill(~mask, float('-inf'))
            att = att.softmax(-1)
            y = (att @ v).transpose(1, 2).reshape(B, T, -1)
            x = x + y @ p[q_ + 'wo'].t()
            h = self.rmsnorm(x, p[q_ + 'mlp_norm'])
            x = x + (F.silu(h @ p[q_ + 'w_gate'].t()) * (h @ p[q_ + 'w_up'].t())) @ p[q_ + 'w_down'].t()
        return self.rmsnorm(x, p['final_norm']) @ self.head.t()


# ---------------------------------------------------------------- losses (plain autograd expressions)

def policy_loss(spec, lp, b, A, w):
    """Summed weighted loss of one datum for a token-level or sequence-level policy loss."""
    kind = spec['kind']
    if kind == 'cross_entropy':
        return -(w * lp).sum()
    ratio = torch.exp(lp - b)
    if kind == 'gspo':
        wsum = w.sum()
        if float(wsum) == 0.0:
            return lp.sum() * 0
        wn = w / wsum
        s = torch.exp((wn * (lp - b)).sum())
        Ah = (wn * A).sum()
        return -wsum * torch.minimum(s * Ah, s.clamp(1 - spec['clipLow'], 1 + spec['clipHigh']) * Ah)
    trunc = 1.0
    if spec.get('truncateAt') is not None:
        r = ratio.detach()
        trunc = torch.clamp(r, max=spec['truncateAt']) / r
    if kind == 'importance_sampling':
        per = -ratio * A * trunc
        if spec.get('maskAbove') is not None:
            per = torch.where(ratio.detach() > spec['maskAbove'], torch.zeros_like(per), per)
        return (w * per).sum()
    if kind == 'ppo':
        obj = torch.minimum(ratio * A, ratio.clamp(1 - spec['clipLow'], 1 + spec['clipHigh']) * A)
        if spec.get('dualClip') is not None:
            obj = torch.where(A < 0, torch.maximum(obj, spec['dualClip'] * A), obj)
        return (w * (-obj * trunc)).sum()
    raise ValueError(f'unknown loss {kind}')


def total_loss(model, data, spec, extras, dtype):
    klc = (extras or {}).get('klCoef', 0) or 0
    entc = (extras or {}).get('entropyCoef', 0) or 0
    total = 0
    lps = []
    for d in data:
        inp = torch.tensor([d['inputTokens']])
        logp = model.forward(inp)[0].log_softmax(-1)  # [T, V]
        tgt = torch.tensor(d['targetTokens'])
        lp = logp.gather(1, tgt[:, None])[:, 0]
        lps.append(lp)
        w = torch.tensor(d['weights'], dtype=dtype)
        if spec['kind'] == 'cross_entropy':
            total = total + policy_loss(spec, lp, None, None, w)
        else:
            b = torch.tensor(d['samplingLogprobs'], dtype=dtype)
            A = torch.tensor(d['advantages'], dtype=dtype)
            total = total + policy_loss(spec, lp, b, A, w)
        if klc:
            r = torch.tensor(d['referenceLogprobs'], dtype=dtype) - lp
            total = total + klc * (w * (torch.exp(r) - r - 1)).sum()
        if entc:
            H = -(logp.exp() * logp).sum(-1)
            total = total - entc * (w * H).sum()
    return total, lps


def leaf_params(tensors, names):
    return {n: tensors[n].clone().requires_grad_(True) for n in names}


def flat(t):
    return t.detach().to(torch.float64).reshape(-1).tolist()


def run_case(case):
    dtype = torch.float64 if case.get('dtype') == 'float64' else torch.float32
    config, tensors = load_checkpoint(case['checkpoint'], dtype)
    names = param_names(config)
    out = {}
    data = case.get('data') or []
    # log-probs and each loss with every parameter's gradient
    losses = []
    for i, item in enumerate(case.get('losses') or []):
        params = leaf_params(tensors, names)
        model = Nano(config, params)
        loss, lps = total_loss(model, data, item['loss'], item.get('extras'), dtype)
        loss.backward()
        if i == 0:
            out['logprobs'] = [flat(lp) for lp in lps]
        losses.append({'loss': float(loss), 'grads': {n: flat(params[n].grad) if params[n].grad is not None else [0.0] * params[n].numel() for n in names}})
    out['losses'] = losses
    # AdamW steps with torch.optim.AdamW: weight decay on matrices only, Arbor's clipping rule. The
    # gradients of each step are Arbor's own (given in the job) so the optimiser is checked in isolation
    # (the gradients themselves are compared above); step 2 sees Arbor's gradients at its step-1 weights.
    adam = case.get('adam')
    if adam:
        ap = adam['params']
        params = leaf_params(tensors, names)
        decay = [params[n] for n in names if params[n].dim() >= 2]
        nodecay = [params[n] for n in names if params[n].dim() < 2]
        opt = torch.optim.AdamW([
            {'params': decay, 'weight_decay': ap.get('weightDecay', 0.0)},
            {'params': nodecay, 'weight_decay': 0.0},
        ], lr=ap['learningRate'], betas=(ap.get('beta1', 0.9), ap.get('beta2', 0.95)), eps=ap.get('eps', 1e-8))
        norms, snapshots = [], []
        for grads in adam['grads']:
            with torch.no_grad():
                for n in names:
                    params[n].grad = torch.tensor(grads[n], dtype=dtype).reshape(params[n].shape)
                norm = math.sqrt(sum(float((params[n].grad.to(torch.float64) ** 2).sum()) for n in names))
                clip = ap.get('gradClipNorm') or 0
                if clip > 0 and norm > clip:
                    for n in names:
                        params[n].grad.mul_(clip / norm)
            opt.step()
            norms.append(norm)
            snapshots.append({n: flat(params[n]) for n in names})
        out['adam'] = {'grad_norms': norms, 'params': snapshots}
    # sampler checks: temperature-scaled log-probs of given completions
    samples = []
    with torch.no_grad():
        model = Nano(config, tensors)
        for s in case.get('samples') or []:
            toks = s['tokens']
            logits = model.forward(torch.tensor([toks[:-1]]))[0].to(torch.float64)
            T = s.get('temperature', 1.0)
            logp = (logits / (T if T > 0 else 1.0)).log_softmax(-1)
            res = {'logprobs': [], 'entropies': [], 'mass_above': [], 'rank': []}
            for j in range(s['start'], len(toks)):
                row = logp[j - 1]
                tok = toks[j]
                lpt = float(row[tok])
                res['logprobs'].append(lpt)
                res['entropies'].append(float(-(row.exp() * row).sum()))
                above = row > row[tok]
                res['mass_above'].append(float(row[above].exp().sum()))
                res['rank'].append(int(above.sum()))
            samples.append(res)
    out['samples'] = samples
    return out


# ---------------------------------------------------------------- speed

def bench_sample(config, batch, prompt_len, new_tokens, seed=1):
    """n continuations of one prompt: prefill once, expand the KV cache to the batch, decode with sampling."""
    params = random_params(config, seed, torch.float32)
    model = Nano(config, params)
    V = config['vocabSize']
    prompt = torch.tensor([[5 + (i % 90) for i in range(prompt_len)]])
    g = torch.Generator().manual_seed(seed)
    with torch.inference_mode():
        t0 = time.perf_counter()
        cache = [None] * config['nLayers']
        logits = model.forward(prompt, cache)[:, -1]
        cache = [(k.expand(batch, -1, -1, -1).contiguous(), v.expand(batch, -1, -1, -1).contiguous()) for k, v in cache]
        logits = logits.expand(batch, V)
        pos = prompt_len
        decoded = 0
        for step in range(new_tokens):
            logp = logits.log_softmax(-1)
            tok = torch.multinomial(logp.exp(), 1, generator=g)
            _ = logp.gather(1, tok)  # the sampled token's log-prob, as Arbor records it
            decoded += batch
            if step + 1 == new_tokens:
                break
            logits = model.forward(tok, cache, pos)[:, -1]
            pos += 1
        s = time.perf_counter() - t0
    return decoded / s


def bench_train(config, batch, seq_len, seed=1):
    """forward + backward + AdamW on batch sequences of seq_len tokens with the PPO loss (Arbor's bench batch)."""
    params = random_params(config, seed, torch.float32)
    names = param_names(config)
    for n in names:
        params[n].requires_grad_(True)
    model = Nano(config, params)
    seqs = torch.tensor([[5 + ((i * 7 + b) % 90) for i in range(seq_len + 1)] for b in range(batch)])
    inp, tgt = seqs[:, :-1], seqs[:, 1:]
    w = torch.full((batch, seq_len), 1.0 / (batch * seq_len))
    b = torch.full((batch, seq_len), -4.6)
    A = torch.tensor([[1.0 if i % 2 else -1.0 for i in range(seq_len)]] * batch)
    opt = torch.optim.AdamW([{'params': [params[n] for n in names if params[n].dim() >= 2], 'weight_decay': 0.0},
                             {'params': [params[n] for n in names if params[n].dim() < 2], 'weight_decay': 0.0}],
                            lr=1e-4, betas=(0.9, 0.95), eps=1e-8)

    def step():
        opt.zero_grad()
        lp = model.forward(inp).log_softmax(-1).gather(2, tgt[..., None])[..., 0]
        ratio = torch.exp(lp - b)
        obj = torch.minimum(ratio * A, ratio.clamp(0.8, 1.28) * A)
        (-(w * obj).sum()).backward()
        opt.step()

    step()  # warm-up
    t0 = time.perf_counter()
    step()
    return batch * seq_len / (time.perf_counter() - t0)


def blas_library():
    """The BLAS PyTorch links through Debian's alternatives (reference BLAS is several times slower than OpenBLAS)."""
    for p in ('/usr/lib/x86_64-linux-gnu/libblas.so.3', '/usr/lib/aarch64-linux-gnu/libblas.so.3'):
        if os.path.exists(p):
            return os.path.realpath(p)
    return 'unknown'


def run_bench(job):
    """Medians of `repeats` runs per model at the current thread count (the caller sets
    OMP_NUM_THREADS/OPENBLAS_NUM_THREADS in the environment as well, since OpenBLAS has its own pool)."""
    results = {}
    repeats = job.get('repeats', 3)
    threads = job.get('threads', 1)
    torch.set_num_threads(threads)
    for label, cfg in job['models'].items():
        config = dict(cfg)
        sa = job['sample']
        tr = job['train']
        samples = sorted(bench_sample(config, sa['batch'], sa['promptLength'], sa['maxTokens']) for _ in range(repeats))
        trains = sorted(bench_train(config, tr['batch'], tr['seqLength']) for _ in range(repeats))
        results[label] = {'sample_tokens_per_s': samples[len(samples) // 2], 'train_tokens_per_s': trains[len(trains) // 2],
                          'sample_all': samples, 'train_all': trains}
    return {'torch': torch.__version__, 'threads': torch.get_num_threads(), 'blas': blas_library(), 'results': results}


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else 'parity'
    job = json.load(sys.stdin)
    if mode == 'bench':
        out = run_bench(job)
    else:
        torch.set_num_threads(job.get('threads', 1))
        out = {'torch': torch.__version__, 'cases': [run_case(c) for c in job['cases']]}
    sys.stdout.write(json.dumps(out))  # one C-encoder call: far faster than streaming json.dump


if __name__ == '__main__':
    main()
