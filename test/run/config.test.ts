import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import YAML from 'yaml';
import { defaultsYaml, loadConfig, parseConfig } from '../../src/run/config.js';
import { ConfigError } from '../../src/core/errors.js';
import { buildReport, lineChart } from '../../src/ui/report.js';
import { addNode, createTree } from '../../src/core/tree.js';
import { CharTokenizer } from '../../src/engine/tokenizer/char.js';

test('config: defaults for everything; unknown keys and bad values name the file and key', () => {
  const c = parseConfig({});
  assert.equal(c.generate.kind, 'treepo');
  assert.equal(c.optimize.loss.clipHigh, 0.28);
  const dir = mkdtempSync(join(tmpdir(), 'arbor-cfg-'));
  const file = join(dir, 'x.yaml');
  writeFileSync(file, 'run:\n  stepz: 3\n');
  assert.throws(
    () => loadConfig(file),
    (e: unknown) => e instanceof ConfigError && e.message.includes('x.yaml: run: unknown key(s) "stepz"'),
  );
  writeFileSync(file, 'generate: { kind: treepo, segmentLength: abc }\n');
  assert.throws(
    () => loadConfig(file),
    (e: unknown) => e instanceof ConfigError && /generate.segmentLength: expected number, got string/.test(e.message),
  );
  writeFileSync(file, 'run: [1, 2\n');
  assert.throws(
    () => loadConfig(file),
    (e: unknown) => e instanceof ConfigError && /not valid YAML/.test(e.message),
  );
  writeFileSync(file, 'optimize: { loss: { kind: ppo_clip, clipLow: -1 } }\n');
  assert.throws(
    () => loadConfig(file),
    (e: unknown) => e instanceof ConfigError && /optimize.loss.clipLow/.test(e.message),
  );
  assert.throws(() => loadConfig(join(dir, 'missing.yaml')), /cannot read/);
});

test('config: --print-defaults output is valid YAML that round-trips to the defaults, with doc comments', () => {
  const text = defaultsYaml();
  assert.match(text, /# rollout temperature/);
  const parsed = parseConfig(YAML.parse(text));
  assert.deepEqual(parsed, parseConfig({}));
  // every variant of every registry is documented, the non-default ones as comments
  assert.match(text, /control:\n  # kind: none \| dynamic_sampling \| april\n/);
  assert.match(text, /  #   overProvision: 1\.5\n/);
  assert.match(text, /  #   maxRounds: 3\n/);
  assert.match(text, /correction:\n      # kind: none \| decoupled \| tis\n/);
  assert.match(text, /      #   maxWeight: 5\n/);
  assert.match(text, /      #   cap: 2\n/);
  assert.match(text, /  # kind: iid \| treepo \| latr \| agent\n/);
  // the optional env section: not set, every kind with its options commented out
  assert.match(text, /\n# env: \(not set; one of the kinds below\)\n#   # kind: calculator \| kv \| code \| tools \|/);
  assert.match(text, /\n#   # mcp: an MCP server started as a local process[^\n]*\n#   #   kind: mcp\n/);
  assert.match(text, /\n#   #   # tool allow-list: [^\n]*\n#   #   tools: \[\]\n/);
  assert.match(text, /\n#   #   # module exporting tools [^\n]*\n#   #   # module: \(unset\)\n/);
});

test('config: run.mode, maxStaleness, control and correction validate with the key named', () => {
  const c = parseConfig({
    run: { mode: 'async', maxStaleness: 2 },
    control: { kind: 'april' },
    optimize: { loss: { correction: { kind: 'tis' } } },
  });
  assert.equal(c.control.kind === 'april' && c.control.overProvision, 1.5);
  assert.deepEqual(c.optimize.loss.correction, { kind: 'tis', cap: 2 });
  assert.throws(
    () => parseConfig({ control: { kind: 'aprill' } }),
    (e: unknown) => e instanceof ConfigError && /control\.kind/.test(e.message),
  );
  assert.throws(
    () => parseConfig({ run: { maxStaleness: -1 } }),
    (e: unknown) => e instanceof ConfigError && /run\.maxStaleness/.test(e.message),
  );
  assert.throws(
    () => parseConfig({ control: { kind: 'april', overProvision: 0.5 } }),
    (e: unknown) => e instanceof ConfigError && /control\.overProvision/.test(e.message),
  );
});

test("report: self-contained HTML with the dashboard's charts and tree explorer inlined, data embedded", () => {
  const tok = new CharTokenizer();
  const t = createTree('s1p0', 'item', [1, ...tok.encode('2+2=')]);
  const leaf = addNode(t, '0', { tokens: tok.encode('2+2+0=04;4'), finishReason: 'stop' });
  leaf.reward = 1;
  const html = buildReport(
    [
      { step: 0, eval_greedy_acc: 0.1, tokens_decoded_total: 0 },
      {
        step: 1,
        reward_mean: 0.2,
        tokens_decoded: 50,
        tokens_decoded_total: 50,
        prefix_reuse_ratio: 0.5,
        eval_greedy_acc: 0.3,
      },
    ],
    [t],
    tok,
    { heldout_acc_start: 0.1 },
    'test',
  );
  const data = JSON.parse(/<script type="application\/json" id="arbor-data">(.*?)<\/script>/s.exec(html)![1]);
  assert.equal(data.metrics.length, 2);
  assert.equal(data.trees.trees[0].nodes[1].text, '2+2+0=04;4');
  assert.equal(data.trees.trees[0].nodes[1].reward, 1);
  assert.match(html, /uPlot/); // the chart library is inlined, not fetched
  assert.doesNotMatch(html, /<script[^>]+src=|<link[^>]+href=/);
  assert.match(lineChart('empty', 'x', []), /no data/);
  const svg = lineChart('narrow', 'x', [
    {
      name: 'a',
      color: '#000',
      points: [
        [0, 0.951],
        [1, 0.952],
        [2, 0.954],
      ],
    },
  ]);
  const labels = [...svg.matchAll(/text-anchor="end" font-size="10">([^<]+)</g)].map((m) => m[1]);
  assert.equal(new Set(labels).size, labels.length, `repeated tick labels: ${labels.join(', ')}`);
});
