/**
 * Issue 26: MCP environments against servers no one here wrote, the pinned reference servers
 * @modelcontextprotocol/server-everything and server-memory: listing their tools, calling hyphenated
 * tools by JSON arguments, the allow-list checked at start, server stderr in a log file, a server
 * killed mid-run (restarted and logged, the cut episodes' trees error trees, a fatal error past the
 * restart bound) in shared and stateful mode, and no server process left after any of it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, EnvironmentError } from '../../src/core/errors.js';
import { Rng } from '../../src/core/rng.js';
import { hasError, leaves, pathTo, type RolloutTree } from '../../src/core/tree.js';
import type { TaskItem } from '../../src/core/types.js';
import { listMcpTools, mcpEnvironmentFactory } from '../../src/env/mcp.js';
import type { Environment, EnvironmentFactory, ToolCall } from '../../src/env/types.js';
import { agentGenerator, type AgentOptions } from '../../src/generate/agent.js';
import { growSafely } from '../../src/generate/safe.js';
import { CharTokenizer } from '../../src/engine/tokenizer/char.js';
import { openAgentEnv } from '../../src/run/agent-runtime.js';
import { parseConfig } from '../../src/run/config.js';
import { Producer } from '../../src/run/producer.js';
import {
  EOS,
  decodeTokens,
  eventually,
  everythingOptions,
  isAlive,
  lineRuntime,
  memoryOptions,
  newMarker,
  processesWith,
  reapLeft,
  ScriptedSampler,
  type McpInput,
} from '../../testkit/env/third-party.js';

const EVERYTHING_TOOLS = [
  'echo',
  'get-annotated-message',
  'get-env',
  'get-resource-links',
  'get-resource-reference',
  'get-structured-content',
  'get-sum',
  'get-tiny-image',
  'gzip-file-as-resource',
  'toggle-simulated-logging',
  'toggle-subscriber-updates',
  'trigger-long-running-operation',
  'simulate-research-query',
];
const item: TaskItem = { id: 'q', prompt: 'p', answer: 'a' };
const opts = { timeoutMs: 10_000 };
const call = (name: string, args: Record<string, unknown> = {}): ToolCall => ({ name, arguments: args, raw: name });
const pidOf = (env: Environment) => (env as unknown as { pid: number | null }).pid;
const idsOf = (f: EnvironmentFactory) => (f as unknown as { processIds(): number[] }).processIds();

/** A factory whose restart lines are collected in `lines` (stderr dropped unless `extra` says otherwise). */
function make(marker: string, extra: Partial<McpInput> = {}, logDir?: string) {
  const lines: string[] = [];
  const options = everythingOptions(marker, { stderr: 'ignore', ...extra });
  const factory = mcpEnvironmentFactory(options, { logDir, log: (line) => lines.push(line) });
  return { factory, lines };
}

test(
  'server-everything: its 13 tools are listed; hyphenated tools are called with JSON arguments',
  { timeout: 60_000 },
  async () => {
    const marker = newMarker();
    const { factory } = make(marker);
    try {
      const env = await factory.create();
      assert.deepEqual(
        env.tools.map((t) => t.name),
        EVERYTHING_TOOLS,
      );
      assert.deepEqual(env.tools.find((t) => t.name === 'get-sum')!.inputSchema.required, ['a', 'b']);
      await env.reset(item, { seed: 1, timeoutMs: 5000 });
      const r = await env.step(
        { text: 't', calls: [call('get-sum', { a: 34, b: 40 }), call('echo', { message: 'hi' })] },
        opts,
      );
      assert.deepEqual(
        r.results.map((x) => [x.name, x.isError]),
        [
          ['get-sum', false],
          ['echo', false],
        ],
      );
      assert.match(r.results[0].content, /\b74\b/);
      assert.equal(r.results[1].content, 'Echo: hi');
      assert.deepEqual(r.metrics, { toolCalls: 2, toolErrors: 0, toolTimeouts: 0 });
    } finally {
      await factory.close();
    }
    assert.deepEqual(reapLeft(marker), []);
  },
);

test(
  'env.tools: a name the server does not offer is a ConfigError naming env.tools.<i> and listing the offer',
  { timeout: 60_000 },
  async () => {
    const marker = newMarker();
    const { factory } = make(marker, { tools: ['echo', 'get-summ'] });
    try {
      await assert.rejects(factory.create(), (e: unknown) => {
        assert.ok(e instanceof ConfigError);
        assert.equal(e.path, 'env.tools.1');
        assert.match(
          e.message,
          /^env\.tools\.1: the MCP server `.*server-everything\/dist\/index\.js stdio .*` offers no tool "get-summ"/,
        );
        assert.match(e.message, new RegExp(`it offers: ${EVERYTHING_TOOLS.join(', ')}$`));
        return true;
      });
      assert.deepEqual(processesWith(marker), [], 'the server that failed the check was stopped');
    } finally {
      await factory.close();
    }
    // the allow-list keeps the server's order and offers only its names
    const ok = make(marker, { tools: ['get-sum', 'echo'] }).factory;
    try {
      assert.deepEqual(
        (await ok.create()).tools.map((t) => t.name),
        ['echo', 'get-sum'],
      );
    } finally {
      await ok.close();
    }
    assert.deepEqual(reapLeft(marker), []);
  },
);

test(
  'server-memory: tools listed, the allow-list checked, an entity written and read back',
  { timeout: 60_000 },
  async () => {
    const marker = newMarker();
    const file = join(mkdtempSync(join(tmpdir(), 'arbor-memory-')), 'memory.jsonl');
    const typo = mcpEnvironmentFactory(memoryOptions(marker, file, { stderr: 'ignore', tools: ['read-graph'] }));
    try {
      await assert.rejects(
        typo.create(),
        (e: unknown) =>
          e instanceof ConfigError &&
          e.path === 'env.tools.0' &&
          /offers no tool "read-graph"; it offers: create_entities, .*read_graph/.test(e.message),
      );
    } finally {
      await typo.close();
    }
    const factory = mcpEnvironmentFactory(memoryOptions(marker, file, { stderr: 'ignore' }));
    try {
      const env = await factory.create();
      assert.deepEqual(
        env.tools.map((t) => t.name),
        [
          'create_entities',
          'create_relations',
          'add_observations',
          'delete_entities',
          'delete_observations',
          'delete_relations',
          'read_graph',
          'search_nodes',
          'open_nodes',
        ],
      );
      await env.reset(item, { seed: 1, timeoutMs: 5000 });
      const entity = { name: 'arbor', entityType: 'project', observations: ['trains agents'] };
      const r = await env.step(
        { text: 't', calls: [call('create_entities', { entities: [entity] }), call('read_graph')] },
        opts,
      );
      assert.deepEqual(
        r.results.map((x) => x.isError),
        [false, false],
      );
      assert.match(r.results[1].content, /"name": ?"arbor".*"trains agents"/s);
    } finally {
      await factory.close();
    }
    assert.deepEqual(reapLeft(marker), []);
  },
);

test(
  'stderr goes to <logDir>/mcp.stderr.log with the command line on top and pid-prefixed lines',
  { timeout: 60_000 },
  async () => {
    const marker = newMarker();
    const logDir = join(mkdtempSync(join(tmpdir(), 'arbor-mcp-log-')), 'logs');
    const { factory } = make(marker, { stderr: 'log' }, logDir);
    let pid: number | null;
    try {
      pid = pidOf(await factory.create());
    } finally {
      await factory.close();
    }
    const text = readFileSync(join(logDir, 'mcp.stderr.log'), 'utf8');
    const [head, ...rest] = text.trimEnd().split('\n');
    assert.match(
      head,
      new RegExp(
        `^# \\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z pid ${pid} started: ` +
          `${process.execPath} .*server-everything/dist/index\\.js stdio ${marker}$`,
      ),
    );
    assert.ok(rest.includes(`[${pid}] Starting default (STDIO) server...`), text);
    assert.equal((factory as unknown as { stderrLogFile: string }).stderrLogFile, join(logDir, 'mcp.stderr.log'));
  },
);

const agentOptions: AgentOptions = {
  kind: 'agent',
  groupSize: 2,
  format: 'arbor',
  branching: 'iid',
  rootCopies: 0,
  branchFactor: 2,
  maxTurns: 4,
  maxTurnTokens: 0,
  toolTimeoutMs: 10_000,
  episodeTimeoutMs: 60_000,
};
// prompt "quick" answers at once; prompt "tools" calls get-sum, then echo, then answers
const script = (prompt: string, turn: number) =>
  prompt.includes('quick')
    ? 'done'
    : (['call get-sum {"a":2,"b":3}', 'call echo {"message":"after"}', 'done'][turn] ?? 'done');
const inputs = [
  { item: { id: 'quick', prompt: 'quick', answer: '' }, promptTokens: [] },
  { item: { id: 'tools', prompt: 'tools', answer: '' }, promptTokens: [] },
];

async function grow(factory: EnvironmentFactory, sampler: ScriptedSampler, step: number) {
  const agent = lineRuntime(factory, await probeTools(factory));
  const ctx = {
    sampler,
    rng: new Rng(step),
    step,
    stopTokens: [EOS],
    maxResponseTokens: 4000,
    temperature: 1,
    topP: 1,
    topK: 0,
    treeIdPrefix: `s${step}-`,
    agent,
  };
  return growSafely(agentGenerator(agentOptions), inputs, ctx);
}

async function probeTools(factory: EnvironmentFactory) {
  const env = await factory.create();
  await env.close();
  return env.tools;
}

/** Each leaf's episode text after the prompt (turns and observations). */
const texts = (tree: RolloutTree) =>
  leaves(tree).map((l) =>
    decodeTokens(
      pathTo(tree, l.id)
        .slice(1)
        .flatMap((n) => n.tokens),
    ),
  );

for (const stateful of [false, true]) {
  const mode = stateful ? 'stateful' : 'shared';
  test(
    `${mode} mode: a server killed mid-run is logged and replaced; only the trees it cut are error trees`,
    { timeout: 120_000 },
    async () => {
      const marker = newMarker();
      const { factory, lines } = make(marker, { stateful, spareProcesses: 0 });
      try {
        let killed = 0;
        // before the second policy turn only the "tools" episodes are open: their (shared or own) server is killed
        const sampler = new ScriptedSampler(script, async (k) => {
          if (k !== 1) return;
          assert.equal(idsOf(factory).length, stateful ? 2 : 1, 'stateful: the two "tools" episodes, one process each');
          [killed] = idsOf(factory);
          process.kill(killed, 'SIGKILL');
          assert.ok(await eventually(() => !idsOf(factory).includes(killed)), 'the exit was noticed');
        });
        const first = await grow(factory, sampler, 1);
        const [quick, tools] = first.trees;
        assert.equal(hasError(quick), false);
        assert.deepEqual(
          leaves(quick).map((l) => l.episode?.end),
          ['answer', 'answer'],
        );
        assert.equal(hasError(tools), true, 'the cut tree is an error tree');
        const errors = leaves(tools).filter((l) => l.finishReason === 'error');
        assert.equal(errors.length, 2, 'both open episodes of the cut tree end in an error leaf');
        assert.equal(leaves(tools).length, 2);
        const server = `the MCP server \`.*${marker}\` \\(pid ${killed}\\) exited \\(signal SIGKILL\\)`;
        for (const e of errors)
          assert.match(e.error!, new RegExp(`^infrastructure failure: echo: ${server}; the episode is cut`));
        assert.equal(lines.length, 1, lines.join('\n'));
        const role = stateful
          ? "an episode's process; its episode is cut, new episodes start new processes"
          : 'the shared process; restarting it';
        assert.match(lines[0], new RegExp(`^arbor: ${server}, ${role} \\(restart 1 of at most 3 within 600 s\\)`));
        // the next step runs on a live server, whole
        const second = await grow(factory, new ScriptedSampler(script), 2);
        assert.deepEqual(second.trees.map(hasError), [false, false]);
        const episodes = texts(second.trees[1]);
        assert.ok(
          episodes.every((t) => /The sum of 2 and 3 is 5[\s\S]*Echo: after/.test(t)),
          episodes.join('\n---\n'),
        );
        assert.equal(processesWith(marker).length, stateful ? 0 : 1, 'stateful: every episode closed its process');
        assert.equal(idsOf(factory).includes(killed), false);
      } finally {
        await factory.close();
      }
      assert.deepEqual(reapLeft(marker), []);
    },
  );
}

test(
  'shared mode: past the restart bound the run fails with a fatal error naming the server; nothing is left',
  { timeout: 120_000 },
  async () => {
    const marker = newMarker();
    const { factory, lines } = make(marker, { restart: { maxRestarts: 0 } });
    const sampler = new ScriptedSampler(script, async (k) => {
      if (k !== 1) return;
      const [pid] = idsOf(factory);
      process.kill(pid, 'SIGKILL');
      await eventually(() => !idsOf(factory).includes(pid));
    });
    try {
      await assert.rejects(grow(factory, sampler, 1), (e: unknown) => {
        assert.ok(e instanceof EnvironmentError, String(e));
        assert.equal(e.recoverable, false);
        const server = `${process.execPath} .*server-everything/dist/index\\.js stdio ${marker}`;
        const bound = 'past the restart bound \\(env\\.restart\\.maxRestarts=0 within windowSeconds=600\\)';
        const exit = '\\(pid \\d+\\) exited \\(signal SIGKILL\\): exit 1';
        const expected = `^MCP server \`${server}\` ${exit}, ${bound}; the run cannot go on$`;
        assert.match(e.message, new RegExp(expected));
        assert.equal(e.details.server, `${process.execPath} ${everythingOptions(marker).args.join(' ')}`);
        return true;
      });
      assert.equal(lines.length, 1);
      assert.match(lines[0], /^arbor: MCP server .* the run cannot go on$/);
      assert.deepEqual(processesWith(marker), [], 'no restart past the bound');
      await assert.rejects(factory.create(), (e: unknown) => e instanceof EnvironmentError && !e.recoverable);
    } finally {
      await factory.close();
    }
    assert.deepEqual(reapLeft(marker), []);
  },
);

for (const stateful of [false, true]) {
  const mode = stateful ? 'stateful' : 'shared';
  test(
    `${mode} mode: a call in flight when the server dies is an infrastructure failure; the bound holds`,
    { timeout: 120_000 },
    async () => {
      const marker = newMarker();
      const { factory, lines } = make(marker, {
        stateful,
        spareProcesses: 0,
        restart: { maxRestarts: 1, windowSeconds: 60 },
      });
      const killDuringCall = async () => {
        const env = await factory.create();
        await env.reset(item, { seed: 1, timeoutMs: 5000 });
        const pid = pidOf(env)!;
        setTimeout(() => process.kill(pid, 'SIGKILL'), 500);
        const started = Date.now();
        const step = env.step(
          { text: 't', calls: [call('trigger-long-running-operation', { duration: 5, steps: 5 })] },
          opts,
        );
        const outcome = await step.then(
          () => undefined,
          (e: unknown) => e,
        );
        assert.ok(Date.now() - started < 4000, 'the call failed when the server died, not at its end');
        await env.close();
        assert.equal(isAlive(pid), false);
        return { outcome, pid };
      };
      try {
        const { outcome, pid } = await killDuringCall();
        assert.ok(outcome instanceof EnvironmentError && outcome.recoverable, String(outcome));
        assert.match(
          outcome.message,
          new RegExp(
            `^trigger-long-running-operation: the MCP server \`.*${marker}\` \\(pid ${pid}\\) ` +
              'exited \\(signal SIGKILL\\); the episode is cut',
          ),
        );
        assert.equal(lines.length, 1);
        assert.match(
          lines[0],
          stateful
            ? /an episode's process; its episode is cut, new episodes start new processes \(restart 1 of at most 1/
            : /the shared process; restarting it \(restart 1 of at most 1 within 60 s\)/,
        );
        // a new episode gets a live server
        const env = await factory.create();
        await env.reset(item, { seed: 1, timeoutMs: 5000 });
        assert.equal(
          (await env.step({ text: 't', calls: [call('echo', { message: 'x' })] }, opts)).results[0].content,
          'Echo: x',
        );
        await env.close();
        // the second exit within the window is past the bound: fatal, and every later use says so
        const second = await killDuringCall();
        assert.ok(second.outcome instanceof EnvironmentError && !second.outcome.recoverable, String(second.outcome));
        assert.match(
          second.outcome.message,
          /exit 2, past the restart bound \(env\.restart\.maxRestarts=1 within windowSeconds=60\); the run cannot/,
        );
        const fatal = second.outcome;
        await assert.rejects(factory.create(), (e: unknown) => e === fatal);
      } finally {
        await factory.close();
      }
      assert.deepEqual(reapLeft(marker), []);
    },
  );
}

test(
  'listMcpTools (config --check --servers) starts, lists, checks and stops the server',
  { timeout: 60_000 },
  async () => {
    const marker = newMarker();
    const logDir = mkdtempSync(join(tmpdir(), 'arbor-list-'));
    const listing = await listMcpTools(everythingOptions(marker, { tools: ['get-sum'] }) as McpInput, { logDir });
    assert.deepEqual(
      listing.listed.map((t) => t.name),
      EVERYTHING_TOOLS,
    );
    assert.deepEqual(
      listing.offered.map((t) => t.name),
      ['get-sum'],
    );
    assert.equal(isAlive(listing.pid!), false);
    assert.ok(existsSync(join(logDir, 'mcp.stderr.log')));
    await assert.rejects(
      listMcpTools(everythingOptions(marker, { tools: ['nope'] }) as McpInput, { logDir }),
      (e: unknown) => e instanceof ConfigError && e.path === 'env.tools.0',
    );
    assert.deepEqual(reapLeft(marker), []);
  },
);

test(
  'openAgentEnv and Producer.create close the server on an error after it started; logs go to <run dir>/logs',
  { timeout: 120_000 },
  async () => {
    const marker = newMarker();
    const outDir = join(mkdtempSync(join(tmpdir(), 'arbor-run-')), 'run');
    const config = (env: McpInput, extra: Record<string, unknown> = {}) =>
      parseConfig({
        run: { name: 'x', outDir },
        task: { name: 'calculator' },
        env,
        generate: { kind: 'agent' },
        model: { contextLength: 512 },
        ...extra,
      });
    await assert.rejects(
      openAgentEnv(config(everythingOptions(marker, { tools: ['get_sum'] }))),
      (e: unknown) => e instanceof ConfigError && e.path === 'env.tools.0',
    );
    assert.deepEqual(reapLeft(marker), []);
    // control.select.kind ucb without task.mix is found after the environment opened
    const late = config(everythingOptions(marker, { tools: ['echo'] }), { control: { select: { kind: 'ucb' } } });
    await assert.rejects(
      Producer.create(late, new ScriptedSampler(() => ''), new CharTokenizer()),
      (e: unknown) => e instanceof ConfigError && e.path === 'control.select.kind',
    );
    assert.deepEqual(reapLeft(marker), []);
    const log = readFileSync(join(outDir, 'logs', 'mcp.stderr.log'), 'utf8');
    assert.equal(log.match(new RegExp(` started: .*${marker}\n`, 'g'))?.length, 2, log);
  },
);
