#!/usr/bin/env bash
# Regenerates the run directories the `arbor ui` tests read (testkit/ui/fixtures/rundirs/): two tiny
# real `arbor train` runs (TreePO and i.i.d., same warm-start), with the weights, optimizer state and
# rollout store dropped (the tests need only config, metrics, trees, summary and tokenizer.json).
set -euo pipefail
cd "$(dirname "$0")/.."
out=testkit/ui/fixtures/rundirs
rm -rf "$out"
for name in treepo iid; do npx arbor train "testkit/ui/fixtures/$name.yaml" --quiet; done
find "$out" \( -name '*.safetensors' -o -name 'state.json' -o -name 'store.jsonl' -o -name 'store-spill.jsonl' -o -name 'trainer.json' -o -name 'report.html' \) -delete
du -sh "$out"
