# The one-off check on a machine with torch + transformers + peft (the lent GPU machine; runs on CPU
# too): do Arbor's Hugging Face exports load in the real libraries, and do transformers' numbers agree
# with Arbor's on rope scalings and an architecture the shared fixtures do not cover? Reads the
# directory written by testkit/device/prepare-hf.ts; writes OUT/check.json and, per numeric model,
# OUT/<name>.transformers.safetensors (transformers' float64 logits and rope frequencies), which the
# repository keeps as CI fixtures (test/hf/transformers-device.test.ts).
import json, os, sys, struct, traceback
import torch

SRC = sys.argv[1] if len(sys.argv) > 1 else '.device'
OUT = sys.argv[2] if len(sys.argv) > 2 else os.environ.get('OUT', 'device-out')
os.makedirs(OUT, exist_ok=True)
report = {'ok': [], 'failed': [], 'results': {}}
import transformers
report['versions'] = {'torch': torch.__version__, 'transformers': transformers.__version__}
try:
    import peft
    report['versions']['peft'] = peft.__version__
except Exception as e:
    peft = None
    report['versions']['peft'] = 'missing: %s' % e
from transformers import AutoModelForCausalLM, AutoTokenizer
from safetensors.torch import load_file, save_file


def load_model(d, dtype):
    # transformers 5 names the argument dtype; 4.x torch_dtype
    try:
        return AutoModelForCausalLM.from_pretrained(d, attn_implementation='eager', dtype=dtype)
    except TypeError:
        return AutoModelForCausalLM.from_pretrained(d, attn_implementation='eager', torch_dtype=dtype)


def step(name, fn):
    try:
        report['results'][name] = fn()
        report['ok'].append(name)
        print('OK', name, json.dumps(report['results'][name])[:400], flush=True)
    except Exception:
        report['failed'].append({'name': name, 'error': traceback.format_exc()[-3000:]})
        print('FAILED', name, traceback.format_exc()[-3000:], flush=True)


manifest = json.load(open(os.path.join(SRC, 'manifest.json')))


def numeric(entry):
    name = entry['name']
    d = os.path.join(SRC, name)
    model = load_model(d, torch.float64)
    model.eval()
    assert next(model.parameters()).dtype == torch.float64
    arbor = load_file(os.path.join(d, 'arbor-logits.safetensors'))
    out, worst = {}, 0.0
    for i, seq in enumerate(entry['sequences']):
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([seq])).logits[0]
        out['logits.%d' % i] = logits.float().contiguous()
        a = arbor['logits.%d' % i].double()
        scale = logits.abs().max().item()
        worst = max(worst, ((logits - a).abs().max().item()) / scale)
    rot = model.model.rotary_emb
    out['inv_freq'] = rot.inv_freq.float().contiguous()
    out['attention_scaling'] = torch.tensor([float(rot.attention_scaling)], dtype=torch.float32)
    save_file(out, os.path.join(OUT, name + '.transformers.safetensors'))
    return {'max_abs_diff_over_max': worst, 'dtype_param': str(next(model.parameters()).dtype)}


for entry in manifest['numeric']:
    step('numeric ' + entry['name'], lambda entry=entry: numeric(entry))


def export_base():
    d = os.path.join(SRC, 'qwen3-export')
    model = load_model(d, torch.float32)
    arbor = load_file(os.path.join(d, 'arbor-logits.safetensors'))
    seq = manifest['exports']['sequence']
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([seq])).logits[0].double()
    cols = arbor['base.logits'].shape[1]
    lp = torch.log_softmax(logits[:-1], -1).gather(1, torch.tensor(seq[1:])[:, None])[:, 0]
    tok = AutoTokenizer.from_pretrained(d)
    ids = tok.apply_chat_template(manifest['exports']['chat']['messages'], add_generation_prompt=True, tokenize=True)
    if isinstance(ids, dict) or hasattr(ids, 'keys'):
        ids = ids['input_ids']
    return {
        'logits_max_abs_diff': (logits[:, :cols] - arbor['base.logits'].double()).abs().max().item(),
        'logits_max_abs': logits[:, :cols].abs().max().item(),
        'logprobs_max_abs_diff': (lp - arbor['base.logprobs'].double()).abs().max().item(),
        'chat_ids_equal': list(ids) == manifest['exports']['chat']['ids'],
        'config_keys': sorted(json.load(open(os.path.join(d, 'config.json'))).keys()),
    }


def export_adapter():
    from peft import PeftModel
    d = os.path.join(SRC, 'qwen3-export')
    base = load_model(d, torch.float32)
    model = PeftModel.from_pretrained(base, os.path.join(SRC, 'qwen3-adapter'))
    arbor = load_file(os.path.join(d, 'arbor-logits.safetensors'))
    seq = manifest['exports']['sequence']
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([seq])).logits[0].double()
    cols = arbor['adapter.logits'].shape[1]
    lp = torch.log_softmax(logits[:-1], -1).gather(1, torch.tensor(seq[1:])[:, None])[:, 0]
    merged = model.merge_and_unload()
    with torch.no_grad():
        mlogits = merged(input_ids=torch.tensor([seq])).logits[0].double()
    return {
        'logits_max_abs_diff': (logits[:, :cols] - arbor['adapter.logits'].double()).abs().max().item(),
        'logprobs_max_abs_diff': (lp - arbor['adapter.logprobs'].double()).abs().max().item(),
        'merged_vs_unmerged_max_abs_diff': (mlogits - logits).abs().max().item(),
        'adapter_changes_logits': (logits[:, :cols] - arbor['base.logits'].double()).abs().max().item(),
    }


step('export: Arbor model directory in transformers (logits, log-probs, chat template ids)', export_base)
if peft is not None:
    step('export: Arbor PEFT adapter in peft (logits, log-probs, merge)', export_adapter)

extra = os.path.join(SRC, 'extra')
if os.path.isdir(extra):
    from peft import PeftModel
    for name in sorted(os.listdir(extra)):
        def load_extra(name=name):
            sub = os.path.join(extra, name)
            cfg = json.load(open(os.path.join(sub, 'adapter_config.json')))
            base = load_model(os.path.join(SRC, 'qwen3-export'), torch.float32)
            m = PeftModel.from_pretrained(base, sub)
            return {'loaded': True, 'r': cfg.get('r'), 'targets': cfg.get('target_modules')}
        step('extra adapter ' + name, load_extra)

json.dump(report, open(os.path.join(OUT, 'check.json'), 'w'), indent=1)
print('failed:', len(report['failed']))
