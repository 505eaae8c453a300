/**
 * `arbor config --print-defaults | --check <file> [--servers]`. `--check` validates a config as `train`
 * would, offline: the env's servers are not started unless `--servers` is given; then each is started,
 * its tools are listed and checked against the allow-list (`env.tools`), and it is stopped again. The
 * servers' stderr goes to `<os tmpdir>/arbor-logs/mcp.stderr.log` (there is no run directory).
 */
import { ArborError, ConfigError } from '../core/errors.js';
import type { ArborConfig } from '../run/config.js';
import { parseCommand, printHelp, type CommandSpec } from './args.js';

export const CONFIG: CommandSpec = {
  name: 'config',
  positionals: '',
  maxPositionals: 0,
  summary:
    'Print every option with its default and doc, or validate a config file as `train` would (task section included).',
  flags: {
    'print-defaults': { type: 'boolean', doc: 'every option, its default and its doc, as YAML' },
    check: { type: 'string', value: 'FILE', doc: 'validate FILE' },
    servers: {
      type: 'boolean',
      doc: "with --check: start the env's servers, list their tools, check env.tools against them, stop them",
    },
  },
};

export async function configCommand(argv: string[]): Promise<number> {
  const f = parseCommand(argv, CONFIG);
  if (f.help) return printHelp(CONFIG);
  // the config schema and what --check opens load after the arguments parse: `--help` and a bad flag answer at once
  const { defaultsYaml, loadConfig } = await import('../run/config.js');
  if (f.bool('print-defaults')) {
    process.stdout.write(defaultsYaml());
    return 0;
  }
  const file = f.string('check');
  if (file) {
    const config = loadConfig(file);
    // the task section is validated by its task (names and option keys), as `train` would; user
    // modules (task, reward parts, env kinds tools and module) are loaded and their exports checked
    try {
      const [{ taskFromConfig }, { loadReward }, { envFactoryFromConfig }] = await Promise.all([
        import('../tasks/index.js'),
        import('../filter/registry.js'),
        import('../env/index.js'),
      ]);
      const task = await taskFromConfig(config.task, { prepare: false });
      await loadReward(config.reward, {
        taskReward: task.reward,
        taskExtract: task.extractAnswer?.bind(task),
        taskStepJudge: task.firstWrongStep?.bind(task),
      });
      if (config.env?.kind === 'tools' || config.env?.kind === 'module') {
        await (await envFactoryFromConfig(config.env, { baseDir: process.cwd() })).close();
      }
      if (f.bool('servers')) for (const line of await checkServers(config)) console.log(`${file}: ${line}`);
    } catch (error) {
      if (error instanceof ConfigError)
        throw new ConfigError(`${file}: ${error.message}`, error.path, file, { cause: error });
      throw error;
    }
    const served = config.env?.kind === 'mcp' || config.env?.kind === 'openenv';
    const offline = served && !f.bool('servers') ? OFFLINE_NOTE : '';
    console.log(`${file}: ok${offline}`);
    return 0;
  }
  throw new ArborError('usage: arbor config --print-defaults | arbor config --check <config.yaml> [--servers]');
}

/** What `--check` adds when the config's env is a server it did not start. */
const OFFLINE_NOTE = " (offline: the env's server was not started; --servers starts it)";

/**
 * `--servers`: start the env's server, list its tools, check the allow-list, stop it (closed on every
 * path). An MCP server is started alone; any other env kind is opened as an agent run opens it.
 */
async function checkServers(config: ArborConfig): Promise<string[]> {
  const env = config.env;
  if (!env) return ['env: none (nothing to start)'];
  const { openAgentEnv, scratchLogDir } = await import('../run/agent-runtime.js');
  const { listMcpTools } = await import('../env/mcp.js');
  const logDir = scratchLogDir();
  if (env.kind === 'mcp') {
    const listing = await listMcpTools(env as Parameters<typeof listMcpTools>[0], { logDir });
    const names = (tools: Array<{ name: string }>) => tools.map((t) => t.name).join(', ') || '(none)';
    const offered = listing.offered.length === listing.listed.length ? 'all of them' : names(listing.offered);
    return [
      `env: MCP server \`${listing.command}\` started (pid ${listing.pid}) ` +
        `and listed ${listing.listed.length} tools: ${names(listing.listed)}`,
      `env: offered to the policy (env.tools): ${offered}; the server was stopped` +
        (listing.stderrLogFile ? `; its stderr is in ${listing.stderrLogFile}` : ''),
    ];
  }
  const opened = await openAgentEnv(config, { logDir });
  if (!opened) return [`env: ${String(env.kind)}: not used (generate.kind is not agent)`];
  await opened.factory.close();
  const names = opened.tools.map((t) => t.name).join(', ') || '(none)';
  return [`env: ${String(env.kind)} offers ${opened.tools.length} tools: ${names}`];
}
