/**
 * The driver of the user's own agent (run/gateway-runtime.ts) and its faults, on a tiny random Qwen3
 * with the real Qwen3 tokenizer and the embedded sampler. An agent that throws, returns a number, never
 * calls, or runs past `env.timeoutSeconds` (ignoring its signal, or honouring it) gives a record whose
 * `error` names the cause, never a throw; a timed-out episode's key gets 401 and its calls in flight are
 * recorded `abort`; `concurrency` bounds the agents running at once; `close()` frees the port and waits
 * for hung agents only so long. Through the `agent` generator a failed episode makes an error tree;
 * bad configs are ConfigErrors naming the key; and `train()` runs an agent that calls the gateway with
 * plain `fetch` for two steps, logging the gateway's counters and trees, going on past a failed episode,
 * and leaving no port open. The agents are testkit/gateway/agents/faults.ts and fetch-chat.ts.
 */
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { ConfigError } from '../../src/core/errors.js';
import { Rng } from '../../src/core/rng.js';
import { hasError, leaves, type RolloutTree } from '../../src/core/tree.js';
import type { TaskItem } from '../../src/core/types.js';
import { loadHfModel } from '../../src/engine/hf/model.js';
import { NanoSampler } from '../../src/engine/embedded/sampler.js';
import { CharTokenizer } from '../../src/engine/tokenizer/char.js';
import { HFTokenizer } from '../../src/engine/tokenizer/hf.js';
import type { Sampler } from '../../src/engine/types.js';
import { agentGenerator, type AgentOptions } from '../../src/generate/agent.js';
import type { GatewayTreeStats } from '../../src/generate/gateway.js';
import { parseConfig } from '../../src/run/config.js';
import { openGatewayAgent, type GatewayAgent } from '../../src/run/gateway-runtime.js';
import { train } from '../../src/run/loop.js';
import { probe } from '../../testkit/gateway/agents/faults.js';
import { probe as fetchProbe } from '../../testkit/gateway/agents/fetch-chat.js';
import { SlowSampler } from '../../testkit/gateway/slow-sampler.js';
import { tinyQwen3 } from '../../testkit/serve/hf-fixture.js';

const root = mkdtempSync(join(tmpdir(), 'arbor-gateway-agent-'));
process.on('exit', () => rmSync(root, { recursive: true, force: true }));
const FAULTS = resolve('testkit/gateway/agents/faults.ts');

let dir: string;
let sampler: NanoSampler;
let tokenizer: HFTokenizer;

before(async () => {
  dir = tinyQwen3(root);
  sampler = new NanoSampler((await loadHfModel(dir)).model);
  tokenizer = HFTokenizer.fromDirectory(dir);
});

/** A config running `module` as the agent (env and generate sections overridable). */
function agentConfig(env: Record<string, unknown> = {}, generate: Record<string, unknown> = {}) {
  return parseConfig({
    model: { hf: dir, contextLength: 256 },
    env: { kind: 'agent', module: FAULTS, concurrency: 8, timeoutSeconds: 30, ...env },
    generate: { kind: 'agent', groupSize: 2, ...generate },
  });
}

/** The driver over `over` (default the embedded sampler), its failure lines kept in `lines`. */
async function open(env: Record<string, unknown> = {}, over: Sampler = sampler) {
  const lines: string[] = [];
  const agent = (await openGatewayAgent(agentConfig(env), over, tokenizer, { log: (l) => lines.push(l) }))!;
  return { agent, lines };
}

const item = (id: string): TaskItem => ({ id, prompt: `say ${id}`, answer: '' });
const spec = (episodeId: string, maxTokens = 4) => ({
  episodeId,
  seed: 7,
  temperature: 1,
  topP: 1,
  topK: 0,
  maxTokens,
});

/** True when nothing listens on the port of `baseURL` any more (the connection is refused). */
function portClosed(baseURL: string): Promise<boolean> {
  return new Promise((done) => {
    const socket = connect(Number(new URL(baseURL).port), '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      done(false);
    });
    socket.once('error', (error: NodeJS.ErrnoException) => done(error.code === 'ECONNREFUSED'));
  });
}

async function status(agent: GatewayAgent, apiKey: string, path = '/models'): Promise<number> {
  const res = await fetch(`${agent.gateway.baseURL}${path}`, { headers: { authorization: `Bearer ${apiKey}` } });
  await res.text();
  return res.status;
}

test('an agent that throws, returns a number or never calls: a record whose error names the cause', async () => {
  const { agent, lines } = await open();
  try {
    const ids = ['answer', 'throw', 'number', 'silent'];
    const records = await Promise.all(ids.map((id) => agent.runEpisode(item(id), spec(id))));
    const [answer, thrown, number, silent] = records;
    // the control: one call, its reply's content is the answer, max tokens capped by the episode's policy
    assert.equal(answer.error, undefined);
    assert.equal(answer.calls.length, 1);
    const choice = answer.calls[0].choices[0];
    assert.equal(choice.tokens.length, 4);
    assert.equal(choice.finishReason, 'length');
    assert.equal(answer.response, choice.message!.content);
    assert.equal(thrown.error, 'the agent threw: the tool server is down');
    assert.deepEqual(thrown.calls, []);
    assert.equal(number.error, 'the agent returned number, not its answer (a string or { response, info })');
    assert.equal(number.calls.length, 1, 'the calls it made are kept');
    assert.equal(number.response, undefined);
    assert.match(
      silent.error!,
      /^the agent never called the gateway \(point its client at ctx\.baseURL with ctx\.apiKey\)$/,
    );
    assert.deepEqual(
      lines.map((l) => l.split(':')[0]).sort(),
      ['agent episode number', 'agent episode silent', 'agent episode throw'],
      'one log line per failed episode',
    );
  } finally {
    await agent.close();
  }
});

test(
  'past env.timeoutSeconds: the signal aborts, the key gets 401, calls in flight are recorded abort; close() waits ' +
    'for a hung agent only so long and frees the port',
  async () => {
    // every engine call takes 2 s: the agents' calls are in flight when their 0.5 s run out
    const slow = new SlowSampler(sampler, 2000);
    const { agent } = await open({ timeoutSeconds: 0.5 }, slow);
    let closed = false;
    try {
      const started = Date.now();
      const [hang, abortable] = await Promise.all([
        agent.runEpisode(item('hang'), spec('hang', 8)),
        agent.runEpisode(item('hang-abortable'), spec('hang-abortable', 8)),
      ]);
      assert.ok(Date.now() - started < 1800, `the episodes ended at the timeout (${Date.now() - started} ms)`);
      for (const record of [hang, abortable]) {
        assert.equal(
          record.error,
          'the agent ran past env.timeoutSeconds (0.5 s); its key was revoked and its calls cancelled',
        );
        assert.equal(record.response, undefined);
        assert.equal(record.calls.length, 1, `${record.episodeId}: the call in flight is recorded`);
        const choice = record.calls[0].choices[0];
        assert.equal(choice.finishReason, 'abort', `${record.episodeId}: streamed and not, the call ends abort`);
        assert.equal(choice.logprobs.length, choice.tokens.length);
        assert.ok(probe.contexts.get(record.episodeId)!.signal.aborted, 'the agent was told');
      }
      // the key of a live episode is answered; the timed-out episodes' keys are not
      const live = agent.gateway.open('live', { temperature: 1, topP: 1, topK: 0, maxTokens: 1, seed: 1 });
      assert.equal(await status(agent, live.apiKey), 200);
      await live.close();
      assert.equal(await status(agent, live.apiKey), 401);
      for (const id of ['hang', 'hang-abortable']) {
        assert.equal(await status(agent, probe.contexts.get(id)!.apiKey), 401);
        assert.equal(await status(agent, probe.contexts.get(id)!.apiKey, '/chat/completions'), 401);
      }
      // the agent that honoured its signal has settled; the one that ignores it never will
      assert.equal(probe.aborted.get('hang-abortable'), 'the episode ran past env.timeoutSeconds');
      assert.ok(probe.settled.has('hang-abortable'));
      assert.ok(!probe.settled.has('hang'));
      const closing = Date.now();
      closed = true;
      await agent.close();
      assert.ok(Date.now() - closing < 3500, `close() gave up waiting (${Date.now() - closing} ms)`);
      assert.equal(agent.unsettled, 1, 'the agent that ignores its signal is counted, not waited for');
      assert.ok(await portClosed(probe.contexts.get('hang')!.baseURL), 'nothing listens on the port');
    } finally {
      if (!closed) await agent.close();
    }
  },
);

test('a run that has stopped: an episode that starts after it gets an aborted signal and ends at once', async () => {
  const { agent } = await open({ timeoutSeconds: 3 });
  try {
    const stopped = AbortSignal.abort(new Error('the run stopped'));
    const started = Date.now();
    const record = await agent.runEpisode(item('hang-abortable'), { ...spec('stopped'), signal: stopped });
    assert.ok(probe.contexts.get('stopped')!.signal.aborted);
    assert.equal(record.error, 'the agent threw: the run stopped');
    assert.ok(Date.now() - started < 1500, `it did not wait for its timeout (${Date.now() - started} ms)`);
  } finally {
    await agent.close();
  }
});

test('env.concurrency bounds the agents running at once', async () => {
  for (const concurrency of [2, 5]) {
    const { agent } = await open({ concurrency });
    probe.maxRunning = 0;
    try {
      const ids = Array.from({ length: 8 }, (_, k) => `slow-${concurrency}-${k}`);
      const records = await Promise.all(ids.map((id) => agent.runEpisode(item('slow'), spec(id))));
      assert.ok(records.every((r) => r.error === undefined && r.calls.length === 1));
      assert.equal(probe.maxRunning, concurrency, `at most ${concurrency} at once, and that many`);
    } finally {
      await agent.close();
    }
  }
});

test('through the agent generator, a failed episode makes an error tree; the other trees are whole', async () => {
  const { agent } = await open();
  try {
    const generator = agentGenerator(agentConfig().generate as AgentOptions);
    const ctx = {
      ...{ sampler, rng: new Rng(1), step: 1, stopTokens: [...tokenizer.eosIds], maxResponseTokens: 4 },
      ...{ temperature: 1, topP: 1, topK: 0, treeIdPrefix: 't', gateway: agent },
    };
    const inputs = ['answer', 'throw', 'silent'].map((id) => ({ item: item(id), promptTokens: [] }));
    const { trees } = await generator.grow(inputs, ctx);
    const stats = (tree: RolloutTree) => tree.meta!.gateway as GatewayTreeStats;
    assert.deepEqual(trees.map(hasError), [false, true, true]);
    assert.deepEqual(
      trees.map((t) => [stats(t).episodes, stats(t).calls, stats(t).errors]),
      [
        [2, 2, 0],
        [2, 0, 2],
        [2, 0, 2],
      ],
    );
    assert.deepEqual(
      leaves(trees[0]).map((l) => [l.finishReason, l.episode!.episodeId]),
      [
        ['length', 't0/e0'],
        ['length', 't0/e1'],
      ],
    );
    const errors = (tree: RolloutTree) => leaves(tree).map((l) => [l.finishReason, l.error]);
    assert.deepEqual(errors(trees[1]), [
      ['error', 'agent: the agent threw: the tool server is down'],
      ['error', 'agent: the agent threw: the tool server is down'],
    ]);
    assert.match(String(errors(trees[2])[0][1]), /^agent: the agent never called the gateway/);
  } finally {
    await agent.close();
  }
});

test('configs the gateway cannot run are ConfigErrors naming the key', async () => {
  const rejects = (promise: Promise<unknown>, path: string, message: RegExp) =>
    assert.rejects(promise, (e: unknown) => {
      assert.ok(e instanceof ConfigError, String(e));
      assert.equal(e.path, path);
      assert.match(e.message, message);
      return true;
    });
  const iid = parseConfig({
    run: { outDir: join(root, 'iid'), steps: 1, evalCount: 1 },
    task: { name: 'arith' },
    model: { hf: dir, contextLength: 64 },
    env: { kind: 'agent', module: FAULTS },
    sft: { enabled: false },
    generate: { kind: 'iid' },
  });
  await rejects(openGatewayAgent(iid, sampler, tokenizer), 'generate.kind', /generate: \{ kind: agent.*"iid"/);
  // what `arbor train` reports for it
  await rejects(train(iid, { quiet: true }), 'generate.kind', /generate: \{ kind: agent.*"iid"/);
  const uniform = agentConfig({}, { branching: 'uniform' });
  await rejects(openGatewayAgent(uniform, sampler, tokenizer), 'generate.branching', /generate\.branching.*"uniform"/);
  // a nano model: its character tokenizer has no chat template to serve the policy through
  const nano = parseConfig({ env: { kind: 'agent', module: FAULTS }, generate: { kind: 'agent' } });
  await rejects(openGatewayAgent(nano, sampler, new CharTokenizer()), 'model.hf', /chat template/);
  const modules = join(root, 'modules');
  const none = join(modules, 'no-default.mjs');
  const notAgent = join(modules, 'not-agent.mjs');
  mkdirSync(modules, { recursive: true });
  writeFileSync(none, 'export const helper = 1;\n');
  writeFileSync(notAgent, "export default { name: 'not an agent' };\n");
  await rejects(
    openGatewayAgent(agentConfig({ module: none }), sampler, tokenizer),
    'env.module',
    /no-default\.mjs has no default export/,
  );
  await rejects(
    openGatewayAgent(agentConfig({ module: notAgent }), sampler, tokenizer),
    'env.module',
    /not-agent\.mjs's default export is not an agent/,
  );
});

/** The train() run of the last test: metrics lines by step and the logged trees by step. */
interface RunLog {
  metrics: Array<Record<string, number>>;
  trees: RolloutTree[][];
}

let run: RunLog | undefined;

test(
  'train(): two steps of an agent that calls the gateway with fetch; its counters and trees are logged, a failed ' +
    'episode is counted and the run goes on, and no gateway port is left open',
  { timeout: 120_000 },
  async () => {
    const outDir = join(root, 'train');
    const config = parseConfig({
      run: {
        ...{ name: 'gateway', outDir, seed: 0, steps: 2, promptsPerStep: 2 },
        ...{ evalEvery: 0, evalCount: 2, evalPassK: 0, checkpointEvery: 0, logTreesEvery: 1 },
      },
      task: { name: 'arith', options: { digits: 1, minDigits: 1, ops: ['+'] } },
      env: {
        kind: 'agent',
        module: resolve('testkit/gateway/agents/fetch-chat.ts'),
        concurrency: 8,
        timeoutSeconds: 60,
      },
      model: { hf: dir, contextLength: 64 },
      engine: { threads: 1 },
      sft: { enabled: false },
      sampling: { temperature: 1, maxResponseTokens: 6 },
      generate: { kind: 'agent', groupSize: 2 },
      optimize: { advantage: { kind: 'grpo' }, loss: { kind: 'ppo_clip', entropyCoef: 0.01 } },
    });
    // the second episode of step 1's second prompt fails (tree ids are s<step>r<round>p<prompt>)
    fetchProbe.failing.add('s1r0p1/e1');
    const summary = await train(config, { quiet: true });
    assert.equal(summary.steps, 2, 'the run went on past the failed episode');
    const metrics = readFileSync(join(outDir, 'metrics.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, number>);
    const trees = [1, 2].map((step) =>
      readFileSync(join(outDir, 'trees', `step-${step}.jsonl`), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as RolloutTree),
    );
    run = { metrics, trees };
    const [, step1, step2] = metrics;
    const pick = (m: Record<string, number>, keys: string[]) => keys.map((k) => [k, m[k]]);
    const counters = ['agent_episodes', 'gateway_calls', 'episode_forks', 'tool_parse_failures', 'agent_errors'];
    assert.deepEqual(pick(step1, [...counters, 'trees_trained']), [
      ['agent_episodes', 4],
      ['gateway_calls', 3],
      ['episode_forks', 0],
      ['tool_parse_failures', 0],
      ['agent_errors', 1],
      ['trees_trained', 1],
    ]);
    assert.deepEqual(pick(step2, [...counters, 'trees_trained']), [
      ['agent_episodes', 4],
      ['gateway_calls', 4],
      ['episode_forks', 0],
      ['tool_parse_failures', 0],
      ['agent_errors', 0],
      ['trees_trained', 2],
    ]);
    for (const m of [step1, step2]) assert.ok(m.logprob_gap_max < 1e-4, `logprob_gap_max ${m.logprob_gap_max}`);
    // the logged trees: every episode's leaf names its episode and holds the conversation
    for (const [s, step] of trees.entries())
      for (const tree of step)
        for (const leaf of leaves(tree)) {
          const episode = leaf.episode!;
          assert.match(episode.episodeId!, new RegExp(`^${tree.id}/e[01]$`), `step ${s + 1} ${tree.id}`);
          if (leaf.finishReason === 'error') continue;
          assert.deepEqual(
            episode.messages!.map((m) => m.role),
            ['user', 'assistant'],
          );
          assert.equal(episode.messages![1].content, episode.finalAnswer);
        }
    const failed = trees[0].find((t) => t.id === 's1r0p1')!;
    assert.ok(hasError(failed));
    assert.deepEqual(
      leaves(failed).map((l) => l.error ?? null),
      [null, 'agent: the agent threw: scripted failure of s1r0p1/e1'],
    );
    // the producer's and the evaluation's gateways: both served episodes, both are closed
    const urls = [...new Set(fetchProbe.seen.map((c) => c.baseURL))];
    assert.equal(urls.length, 2, urls.join(' '));
    for (const url of urls) assert.ok(await portClosed(url), `${url} is closed`);
  },
);

test("train(): the failed episode's tree is counted in trees_error", () => {
  assert.ok(run, 'the train() test ran');
  assert.equal(run.metrics[1].trees_error, 1);
  assert.equal(run.metrics[2].trees_error, 0);
});
