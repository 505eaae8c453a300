/** The `arbor ui` server over real run directories: run list and status, bounded paths, incremental metrics, trees, live events, `arbor report`. */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { request } from 'node:http';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { reportCommand } from '../../src/cli/report.js';
import { uiTarget } from '../../src/cli/ui.js';
import { startUiServer, type UiServer } from '../../src/ui/server/server.js';
import type { MetricsChunk, RunInfo, TreeStep } from '../../src/ui/types.js';
import { appendMetrics, tempRuns, tok, writeBigRun, writeLiveRun } from '../../testkit/ui/helpers.js';

let ui: UiServer;
let runs: { root: string; cleanup: () => void };
let live: string;

before(async () => {
  runs = tempRuns();
  live = writeLiveRun(runs.root);
  mkdirSync(join(runs.root, 'outside'));
  writeFileSync(join(runs.root, 'outside/secret.txt'), 'CONTENT-42');
  ui = await startUiServer({ runsDir: runs.root, pollMs: 100 });
});
after(async () => {
  await ui?.close();
  runs?.cleanup();
});

/** GET with the path sent exactly as written (no client-side normalisation of `..`). */
function get(
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string; type: string }> {
  const { port } = new URL(ui.url);
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, method: 'GET', headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, type: String(res.headers['content-type']) }));
    });
    req.on('error', reject);
    req.end();
  });
}
const getJson = async <T>(path: string): Promise<T> => {
  const r = await get(path);
  assert.equal(r.status, 200, `${path}: ${r.body}`);
  return JSON.parse(r.body) as T;
};

test('listens on 127.0.0.1 and serves the app shell and its bundled assets', async () => {
  assert.match(ui.url, /^http:\/\/127\.0\.0\.1:\d+\/$/);
  assert.match((await get('/')).body, /<script src="\/app\.js">/);
  const js = await get('/app.js');
  assert.equal(js.status, 200);
  assert.match(js.type, /javascript/);
  assert.ok(js.body.length > 20_000, 'app.js bundles uPlot');
  assert.doesNotMatch(js.body, /https?:\/\/(cdn|unpkg|fonts)\./);
});

test('run list: status, task, generator, headline numbers', async () => {
  const list = await getJson<RunInfo[]>('/api/runs');
  assert.deepEqual(
    list.map((r) => r.name),
    ['live-run', 'tiny-iid', 'tiny-treepo'],
  );
  const [l, iid, treepo] = list;
  assert.equal(iid.status, 'finished');
  assert.equal(treepo.generator, 'treepo');
  assert.equal(iid.generator, 'iid');
  assert.equal(treepo.task, 'arith');
  assert.equal(treepo.lastStep, 30);
  assert.deepEqual(treepo.treeSteps, [1, 10, 20, 30]);
  const summary = JSON.parse(readFileSync(join(runs.root, 'tiny-treepo/summary.json'), 'utf8'));
  assert.equal(treepo.headline.heldoutEnd, summary.heldout_acc_end);
  assert.equal(treepo.headline.tokens, summary.tokens_decoded);
  assert.equal(l.status, 'running');
  const old = (Date.now() - 3_600_000) / 1000;
  for (const f of ['config.resolved.yaml', 'metrics.jsonl', 'trees']) utimesSync(join(live, f), old, old);
  assert.equal((await getJson<RunInfo>('/api/runs/live-run')).status, 'failed');
  appendMetrics(live, 2);
  assert.equal((await getJson<RunInfo>('/api/runs/live-run')).status, 'running');
});

test('only runs inside the runs dir can be read', async () => {
  const elsewhere = mkdtempSync(join(tmpdir(), 'arbor-ui-outside-'));
  writeFileSync(join(elsewhere, 'config.resolved.yaml'), 'leak: CONTENT-42\n');
  symlinkSync(elsewhere, join(runs.root, 'linked'));
  for (const path of [
    '/api/runs/..%2Foutside/config',
    '/api/runs/%2e%2e/config',
    '/api/runs/../outside/config',
    '/api/runs/linked/config',
    '/api/runs/outside%2Fsecret.txt',
    '/api/runs/tiny-treepo/trees/..%2F..%2Fsummary',
    '/api/runs/tiny-treepo/trees/-1',
    '/etc/passwd',
    '/api/runs/nope',
  ]) {
    const r = await get(path);
    assert.equal(r.status, 404, `${path} → ${r.status} ${r.body}`);
    assert.doesNotMatch(r.body, /CONTENT-42/);
  }
  assert.equal((await get('/api/runs/tiny-treepo/config')).status, 200);
  assert.equal((await get('/api/runs/tiny-treepo/config', { host: 'evil.example:8700' })).status, 403);
  assert.equal((await get('/api/runs', { host: `localhost:${new URL(ui.url).port}` })).status, 200);
  assert.equal(
    (await getJson<RunInfo[]>('/api/runs')).some((r) => r.name === 'linked' || r.name === 'outside'),
    false,
  );
  rmSync(elsewhere, { recursive: true, force: true });
});

test('metrics: numeric fields, read incrementally from a byte offset', async () => {
  const all = await getJson<MetricsChunk>('/api/runs/tiny-treepo/metrics');
  assert.equal(all.rows.length, 31);
  assert.equal(typeof all.rows[5].reward_mean, 'number');
  assert.equal('staleness_hist' in all.rows[5], false);
  const before = await getJson<MetricsChunk>('/api/runs/live-run/metrics');
  writeFileSync(join(live, 'metrics.jsonl'), '{"step": 3, "reward_mean": 0.9}\n{"step": 4, "rew', { flag: 'a' });
  const next = await getJson<MetricsChunk>(`/api/runs/live-run/metrics?offset=${before.offset}`);
  assert.deepEqual(next.rows, [{ step: 3, reward_mean: 0.9 }]);
  const none = await getJson<MetricsChunk>(`/api/runs/live-run/metrics?offset=${next.offset}`);
  assert.deepEqual(none.rows, []);
});

test("trees: one step on demand, decoded with the run's tokenizer", async () => {
  const step = await getJson<TreeStep>('/api/runs/tiny-treepo/trees/30');
  assert.equal(step.step, 30);
  assert.match(step.tokenizer, /step-30\/engine\/tokenizer\.json$/);
  const raw = JSON.parse(readFileSync(join(runs.root, 'tiny-treepo/trees/step-30.jsonl'), 'utf8').split('\n')[0]);
  const first = step.trees[0];
  assert.equal(first.itemId, raw.itemId);
  assert.equal(first.nodes.find((n) => n.id === '0')!.text, tok.decode(raw.nodes['0'].tokens, true));
  assert.equal(first.leaves, 6);
  assert.equal((await get('/api/runs/tiny-treepo/trees/7')).status, 404);
  writeFileSync(join(live, 'trees/step-9.jsonl'), '{"id": "x", "itemId": "y", "nodes": {}}\n{not json\n');
  const bad = await get('/api/runs/live-run/trees/9');
  assert.equal(bad.status, 422);
  assert.match(JSON.parse(bad.body).error, /trees\/step-9\.jsonl:1/);
});

test("live: a change to a run's files is pushed as a server-sent event naming the run", async () => {
  const { port } = new URL(ui.url);
  const got = await new Promise<string>((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/api/events' }, (res) => {
      let buf = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        buf += c;
        if (buf.includes('retry:') && !buf.includes('event: runs')) setTimeout(() => appendMetrics(live, 5), 150);
        const m = /event: runs\ndata: (.*)\n/.exec(buf);
        if (m) {
          req.destroy();
          resolve(m[1]);
        }
      });
    });
    req.on('error', reject);
    req.setTimeout(5000, () => reject(new Error('no event within 5 s')));
    req.end();
  });
  assert.deepEqual(JSON.parse(got), ['live-run']);
});

test('arbor ui: a run directory given directly serves its parent and opens the run', () => {
  assert.deepEqual(uiTarget(join(runs.root, 'tiny-iid')), { runsDir: runs.root, page: '#/run/tiny-iid' });
  assert.deepEqual(uiTarget(runs.root), { runsDir: runs.root, page: '' });
});

test("arbor report decodes with the run's tokenizer, not a hard-coded one", async () => {
  const run = join(runs.root, 'tiny-iid');
  const ck = join(run, 'checkpoints/step-30/engine');
  const charset = [...'0123456789+=;-x*'].reverse().join('') + ' \nabc';
  writeFileSync(
    join(ck, 'tokenizer.json'),
    JSON.stringify({ kind: 'char', specials: ['<pad>', '<bos>', '<eos>', '<sep>', '<unk>'], charset }),
  );
  const log = console.log;
  console.log = () => {};
  try {
    assert.equal(await reportCommand([run]), 0);
  } finally {
    console.log = log;
  }
  const html = readFileSync(join(run, 'report.html'), 'utf8');
  const data = JSON.parse(/<script type="application\/json" id="arbor-data">(.*?)<\/script>/s.exec(html)![1]);
  const raw = JSON.parse(readFileSync(join(run, 'trees/step-30.jsonl'), 'utf8').split('\n')[0]);
  const custom = (ids: number[]) =>
    ids.map((i) => (i < 5 ? ['<pad>', '<bos>', '<eos>', '<sep>', '<unk>'][i] : charset[i - 5])).join('');
  assert.equal(data.trees.trees[0].nodes[0].text, custom(raw.nodes['0'].tokens));
  assert.notEqual(data.trees.trees[0].nodes[0].text, tok.decode(raw.nodes['0'].tokens, true));
  assert.match(data.trees.tokenizer, /step-30\/engine\/tokenizer\.json$/);
});

test('large runs: 5,000 steps and a 512-leaf tree are served quickly, trees one step at a time', async () => {
  writeBigRun(runs.root, 5000, 9);
  let t = performance.now();
  const info = await getJson<RunInfo>('/api/runs/big-run');
  const listMs = performance.now() - t;
  assert.equal(info.lastStep, 5000);
  t = performance.now();
  const chunk = await getJson<MetricsChunk>('/api/runs/big-run/metrics');
  const metricsMs = performance.now() - t;
  assert.equal(chunk.rows.length, 5001);
  t = performance.now();
  const trees = await getJson<TreeStep>('/api/runs/big-run/trees/5000');
  const treeMs = performance.now() - t;
  assert.equal(trees.trees[0].leaves, 512);
  t = performance.now();
  await getJson<RunInfo[]>('/api/runs');
  const cachedMs = performance.now() - t;
  console.log(
    `# big run: info ${listMs.toFixed(0)} ms, metrics ${metricsMs.toFixed(0)} ms, ` +
      `512-leaf tree ${treeMs.toFixed(0)} ms, run list (cached) ${cachedMs.toFixed(0)} ms`,
  );
  assert.ok(listMs < 3000 && metricsMs < 3000 && treeMs < 3000, 'each request under 3 s on a shared 2-core machine');
});
