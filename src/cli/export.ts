/**
 * `arbor export <run-dir> --to sft.jsonl`: verified trajectories of a run as SFT rows (replay/export.ts);
 * an agent run's episodes as OpenAI chat transcripts (its environment is opened once to list the tools,
 * then closed), each checked to render back to the tree's token ids (run/transcripts.ts). Reports the
 * tree files read, with an ETA, on stderr (--quiet: not).
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ArborError } from '../core/errors.js';
import { writeFileAtomic } from '../core/files.js';
import type { TextTokenizer } from '../engine/types.js';
import { exportRun, type ExportOptions } from '../replay/export.js';
import { openAgentEnv } from '../run/agent-runtime.js';
import { isGatewayAgent } from '../env/index.js';
import { loadConfig } from '../run/config.js';
import { Progress } from '../run/progress.js';
import { stopTokens } from '../run/prompts.js';
import { episodeExporter } from '../run/transcripts.js';
import { runTokenizer } from '../ui/server/tokenizer.js';
import { parseCommand, printHelp, type CommandSpec } from './args.js';

export const EXPORT: CommandSpec = {
  name: 'export',
  positionals: '<run-dir>',
  minPositionals: 1,
  maxPositionals: 1,
  summary:
    "Write the verified trajectories of a run's logged trees as JSONL rows {prompt, completion, reward, step, item} " +
    '(agent runs: chat transcripts {messages, tools, reward, step, item}), deduplicated; ' +
    '`arbor sft --data` reads them back.',
  flags: {
    to: { type: 'string', value: 'FILE', doc: 'the JSONL file to write (required)' },
    'min-reward': { type: 'string', value: 'R', doc: 'keep leaves with reward ≥ R (default: the correct ones)' },
    force: { type: 'boolean', doc: 'replace an existing file' },
    quiet: { type: 'boolean', doc: 'no progress on stderr (tree files read, ETA)' },
  },
};

export async function exportCommand(argv: string[]): Promise<number> {
  const f = parseCommand(argv, EXPORT);
  if (f.help) return printHelp(EXPORT);
  const to = f.string('to');
  if (!to) throw new ArborError('export: --to FILE is required (arbor export --help)');
  if (existsSync(to) && !f.bool('force')) throw new ArborError(`export: ${to} exists; pass --force to replace it`);
  const minReward = f.number('min-reward', undefined, { min: -1e6, max: 1e6 });
  const runDir = f.positionals[0];
  const tokenizer = runTokenizer(runDir);
  const transcript = await agentTranscripts(runDir, tokenizer.decoder as unknown as TextTokenizer);
  const progress = new Progress(f.bool('quiet'));
  const startedAt = Date.now();
  let tick: ((done: number, detail: string) => void) | undefined;
  const { rows, transcripts, counts, unrenderable } = exportRun(runDir, {
    minReward,
    decode: (t) => tokenizer.decoder.decode(t),
    transcript,
    onFile: (done, total) => (tick ??= progress.counter('export:', total, { startedAt }))(done, 'tree files'),
  });
  progress.clear();
  writeFileAtomic(to, [...rows, ...transcripts].map((r) => JSON.stringify(r) + '\n').join(''));
  const skipped = transcript ? `, ${unrenderable.count} episodes that do not render back to their tokens` : '';
  console.log(
    `${to}: ${counts.kept} ${transcript ? 'transcripts' : 'rows'} from ${counts.leaves} leaves ` +
      `in ${counts.files} tree files (${counts.duplicates} duplicates, ${counts.filtered} below the filter, ` +
      `${counts.excluded} hinted/unfinished/error left out${skipped}); decoded with ${tokenizer.source}`,
  );
  for (const r of unrenderable.reasons) console.log(`  left out ${r.count}: ${r.reason}`);
  return 0;
}

/** An agent run's episode exporter (undefined for a single-turn run): the run's format, its environment's tools. */
async function agentTranscripts(runDir: string, tokenizer: TextTokenizer): Promise<ExportOptions['transcript']> {
  const file = join(runDir, 'config.resolved.yaml');
  if (!existsSync(file)) return undefined;
  const config = loadConfig(file);
  if (config.generate.kind !== 'agent') return undefined;
  if (isGatewayAgent(config.env))
    throw new ArborError(
      `export: ${runDir} trained your own agent (env.kind agent); its episodes are not exported as transcripts ` +
        "yet: the conversations the gateway saw are in trees/step-N.jsonl (each leaf's episode.messages)",
    );
  const env = await openAgentEnv(config);
  if (!env) return undefined;
  await env.factory.close();
  return episodeExporter(env.format, env.tools, tokenizer, stopTokens(tokenizer));
}
