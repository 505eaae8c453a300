/**
 * Issue 26: `arbor config --check FILE --servers` against the pinned server-everything: it starts the
 * server, lists its tools, checks `env.tools`, stops it, and keeps the server's stderr out of Arbor's
 * (it goes to <tmpdir>/arbor-logs/mcp.stderr.log); a typo in the allow-list fails with exit 1 naming
 * env.tools.<i>; without the flag the check stays offline and says so. No server process is left.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import YAML from 'yaml';
import { everythingOptions, isAlive, newMarker, reapLeft, type McpInput } from '../../testkit/env/third-party.js';

/** A config file for a calculator agent whose env is server-everything; `dir` also serves as TMPDIR. */
function configFile(dir: string, env: McpInput): string {
  const file = join(dir, 'config.yaml');
  const config = { run: { name: 'check-servers' }, task: { name: 'calculator' }, env, generate: { kind: 'agent' } };
  writeFileSync(file, YAML.stringify(config));
  return file;
}

const arbor = (args: string[], dir: string) =>
  spawnSync(process.execPath, ['bin/arbor.mjs', ...args], {
    encoding: 'utf8',
    timeout: 120_000,
    env: { ...process.env, TMPDIR: dir },
  });

test(
  'config --check --servers: the server is started, its tools listed and checked, then stopped',
  { timeout: 180_000 },
  () => {
    const marker = newMarker();
    const dir = mkdtempSync(join(tmpdir(), 'arbor-check-'));
    const file = configFile(dir, everythingOptions(marker, { tools: ['echo', 'get-sum'] }));
    const r = arbor(['config', '--check', file, '--servers'], dir);
    assert.equal(r.status, 0, r.stdout + r.stderr);
    const lines = r.stdout.trim().split('\n');
    const started = new RegExp(
      `^${file}: env: MCP server \`.*${marker}\` started \\(pid (\\d+)\\) ` +
        'and listed 13 tools: echo, get-annotated-message, .*, get-sum, .*simulate-research-query$',
    );
    assert.match(lines[0], started);
    const log = join(dir, 'arbor-logs', 'mcp.stderr.log');
    assert.equal(
      lines[1],
      `${file}: env: offered to the policy (env.tools): echo, get-sum; the server was stopped; its stderr is in ${log}`,
    );
    assert.equal(lines[2], `${file}: ok`);
    const pid = Number(started.exec(lines[0])![1]);
    assert.equal(isAlive(pid), false);
    // the server's own stderr went to the log file, not to Arbor's stderr
    assert.doesNotMatch(r.stderr, /Starting default/);
    assert.ok(readFileSync(log, 'utf8').includes(`[${pid}] Starting default (STDIO) server...`));
    assert.deepEqual(reapLeft(marker), []);
  },
);

test(
  'config --check --servers: a typo in env.tools fails naming env.tools.<i> and what the server offers',
  { timeout: 180_000 },
  () => {
    const marker = newMarker();
    const dir = mkdtempSync(join(tmpdir(), 'arbor-check-'));
    const file = configFile(dir, everythingOptions(marker, { tools: ['echo', 'getsum'] }));
    const r = arbor(['config', '--check', file, '--servers'], dir);
    assert.equal(r.status, 1, r.stdout + r.stderr);
    assert.match(
      r.stderr,
      new RegExp(
        `${file}: env\\.tools\\.1: the MCP server \`.*${marker}\` offers no tool "getsum"; ` +
          'it offers: echo, get-annotated-message, .*get-sum, ',
      ),
    );
    assert.equal(r.stdout, '');
    assert.deepEqual(reapLeft(marker), []);
    // offline (no flag) the same file passes, says it did not start the server, and starts nothing
    const offline = arbor(['config', '--check', file], dir);
    assert.equal(offline.status, 0, offline.stderr);
    assert.equal(offline.stdout, `${file}: ok (offline: the env's server was not started; --servers starts it)\n`);
    const log = readFileSync(join(dir, 'arbor-logs', 'mcp.stderr.log'), 'utf8');
    assert.equal(log.match(/ pid \d+ started: /g)?.length, 1, `one server start, by the --servers run:\n${log}`);
  },
);
