/**
 * The hand-written PyTorch reference (testkit/reference/hf_torch.py) against transformers' fixtures
 * (../shared/data/hf-reference): for each fixture case (HF_CASES: Llama GQA untied, Qwen3 tied with q/k
 * norm, the Llama PEFT LoRA) in torch float64 and float32, every logit, log-prob, the loss and every
 * gradient (the adapter's for the LoRA), with HF_TOLERANCES, and a check that the sets of gradients
 * match. This is what makes the reference trustworthy before bench/hf.ts times it; one Python process.
 */
import { join } from 'node:path';
import { compare, readReference, type Comparison, type Tolerance } from './fixtures.js';
import { HF_CASES, HF_TOLERANCES } from './parity.js';
import { runHfTorch } from './torch.js';

/** What hf_torch.py answers per case in `reference` mode. */
interface TorchCase {
  logits: number[][];
  logprobs: number[][];
  loss: number;
  /** HF names for a model, PEFT file names (no ".default") for an adapter. */
  grads: Record<string, number[]>;
}

export interface TorchReferenceRun {
  available: boolean;
  /** Why it did not run (no torch). */
  reason?: string;
  python?: string;
  torch?: string;
  comparisons: Comparison[];
  /** Raw arrays of the first comparison of each kind and precision, for tests that perturb them. */
  samples: Array<{ kind: string; name: string; got: number[]; ref: Float32Array; tol: Tolerance }>;
  seconds: number;
}

const PRECISIONS = ['float64', 'float32'] as const;

/** The fixture's gradient key of a reference gradient (PEFT keeps the adapter name "default" in the model). */
function fixtureGradKey(name: string, adapter: boolean): string {
  return adapter ? `grad.${name.replace(/\.lora_([AB])\.weight$/, '.lora_$1.default.weight')}` : `grad.${name}`;
}

/** Run every case at both precisions through PyTorch and compare with the fixtures under `root`. */
export function torchReferenceParity(root: string): TorchReferenceRun {
  const t0 = performance.now();
  const jobs = HF_CASES.flatMap((c) => PRECISIONS.map((precision) => ({ c, precision })));
  const refs = jobs.map(({ c }) => readReference('adapter' in c ? join(root, c.dir, c.adapter) : join(root, c.dir)));
  const job = {
    threads: 1,
    cases: jobs.map(({ c, precision }, i) => ({
      model: join(root, c.dir),
      adapter: 'adapter' in c ? join(root, c.dir, c.adapter) : undefined,
      dtype: precision,
      sequences: refs[i].sequences,
      prompt_lengths: refs[i].promptLengths,
    })),
  };
  const r = runHfTorch<{ cases: TorchCase[] }>('reference', job);
  const run: TorchReferenceRun = { available: r.ok, comparisons: [], samples: [], seconds: 0 };
  if (!r.ok) {
    run.reason = r.reason;
    return run;
  }
  run.python = r.python;
  run.torch = r.out.torch;
  jobs.forEach(({ c, precision }, i) => {
    const ref = refs[i];
    const out = r.out.cases[i];
    const tol = HF_TOLERANCES[precision];
    const withAdapter = 'adapter' in c;
    const add = (what: string, got: number[], expected: Float32Array | undefined) => {
      const name = `torch ${c.label} ${precision} ${what}`;
      if (!expected) {
        const detail = 'no fixture tensor';
        run.comparisons.push({ name, pass: false, maxAbs: Infinity, worstRatio: Infinity, detail });
        return;
      }
      run.comparisons.push(compare(name, got, expected, tol));
      const kind = `${precision} ${what.split(/[. ]/)[0]}`;
      if (!run.samples.some((s) => s.kind === kind)) run.samples.push({ kind, name, got, ref: expected, tol });
    };
    out.logits.forEach((l, s) => add(`logits.${s}`, l, ref.tensors[`logits.${s}`]));
    out.logprobs.forEach((l, s) => add(`logprobs.${s}`, l, ref.tensors[`logprobs.${s}`]));
    add('loss', [out.loss], new Float32Array([ref.loss]));
    const names = Object.keys(out.grads).sort();
    for (const n of names) add(`grad ${n}`, out.grads[n], ref.tensors[fixtureGradKey(n, withAdapter)]);
    const expected = Object.keys(ref.tensors)
      .filter((k) => k.startsWith('grad.'))
      .sort();
    const got = names.map((n) => fixtureGradKey(n, withAdapter)).sort();
    const same = expected.length === got.length && expected.every((k, j) => k === got[j]);
    const counts = `${names.length} gradients from PyTorch, ${expected.length} in the fixture`;
    run.comparisons.push({
      name: `torch ${c.label} ${precision} gradient set`,
      pass: same,
      maxAbs: same ? 0 : Infinity,
      worstRatio: same ? 0 : Infinity,
      detail: same ? undefined : `${counts}; missing ${expected.filter((k) => !got.includes(k)).join(', ') || 'none'}`,
    });
  });
  run.seconds = (performance.now() - t0) / 1000;
  return run;
}
