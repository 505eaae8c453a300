/**
 * The embedded engine's warm-start for a run: SFT on the task's demonstrations (or chat transcripts), cached under
 * runs/_sft/<hash of task, model, SFT options and seed> so repeated runs and benchmarks reuse it (an
 * explicit sft.checkpoint wins). `buildEngine` trains it when the directory is empty.
 */
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { readSftJsonl, type SftExample, type WarmStart } from '../engine/build.js';
import type { TextTokenizer } from '../engine/types.js';
import { ConfigError } from '../core/errors.js';
import { isGatewayAgent } from '../env/index.js';
import { chatTranscriptExample, type AgentTranscript } from './chat-transcripts.js';
import type { TaskItem } from '../core/types.js';
import type { Task } from '../tasks/types.js';
import type { AgentEnv } from './agent-runtime.js';
import type { ArborConfig } from './config.js';
import { moduleDigest } from '../core/modules.js';
import { promptEncoder } from './prompts.js';
import { readTranscripts, taskTranscripts, transcriptsKey } from './transcripts.js';

export function sftCacheDir(config: ArborConfig, runsRoot = 'runs'): string {
  // agent runs: the environment and the tool format shape the demonstrations' prompts
  // (your own agent through the gateway: its module and limits do not shape the demonstrations; the tool-call format may)
  const agent = isGatewayAgent(config.env)
    ? { env: { kind: 'agent', toolCallParser: config.env.toolCallParser } }
    : config.generate.kind === 'agent'
      ? { env: config.env, format: config.generate.format }
      : undefined;
  // Hugging Face models: the prompt encoding (chat template and its variables) shapes the demonstrations too
  const prompts = config.model.hf
    ? { chatTemplate: config.engine.chatTemplate, kwargs: config.engine.chatTemplateKwargs }
    : undefined;
  // a transcripts file keys the cache by its content, not its name
  const transcripts = config.sft.transcripts ? { transcripts: transcriptsKey(config.sft.transcripts) } : {};
  // user modules (task.module, env.module) key it by their content too: an edited task is a new warm start
  const envModule = isGatewayAgent(config.env) ? undefined : (config.env as { module?: string } | undefined)?.module;
  const modules = moduleDigest([config.task.module, envModule]);
  const key = JSON.stringify({
    task: config.task,
    model: config.model,
    sft: { ...config.sft, checkpoint: undefined },
    seed: config.run.seed,
    v: 1,
    ...(agent ? { agent } : {}),
    ...(prompts ? { prompts } : {}),
    ...transcripts,
    ...(modules ? { modules } : {}),
  });
  return join(runsRoot, '_sft', createHash('sha256').update(key).digest('hex').slice(0, 16));
}

/**
 * The warm start's examples, by the first source that applies: `sft.transcripts` (chat transcripts,
 * every line), the task's `transcript(item)` (agent runs), else each item's prompt and demonstration.
 * In agent runs prompts are rendered with the tools offered (as the agent generator renders them) and
 * multi-turn demonstrations are segments, so observations are context, not targets; transcripts are
 * rendered through the run's tool format into the same segments (run/transcripts.ts).
 */
export function warmStartFor(config: ArborConfig, task: Task, agent?: AgentEnv): WarmStart {
  const turns = (
    task as Partial<{ demonstrationTurns(item: TaskItem): Array<{ text: string; role: 'policy' | 'env' }> }>
  ).demonstrationTurns?.bind(task);
  const transcript = task.transcript?.bind(task);
  const items = () => task.makeItems('train', config.sft.examples, config.run.seed + 1);
  const examples = (tokenizer?: TextTokenizer): SftExample[] => {
    // your own agent (env.kind agent): conversations rendered whole through the model's chat template
    if (isGatewayAgent(config.env)) return agentExamples(config, task, items, tokenizer);
    if (config.sft.transcripts) return readTranscripts(config.sft.transcripts, agent);
    if (agent && transcript) return taskTranscripts(task.name, items(), transcript, agent);
    return items().map((i) => ({
      prompt: agent ? agent.format.renderPrompt(i.prompt, agent.tools) : i.prompt,
      completion: task.demonstration(i),
      ...(agent && turns ? { segments: turns(i) } : {}),
      source: `${task.name} demonstration for item ${i.id}`,
    }));
  };
  return {
    dir: config.sft.checkpoint ?? sftCacheDir(config),
    seed: config.run.seed,
    // SFT prompts are encoded exactly as RL's (the chat template when engine.chatTemplate);
    // agent prompts are rendered text
    encodePrompt: (tokenizer) => {
      const encode = promptEncoder(tokenizer, config.engine.chatTemplate && !agent, config.engine.chatTemplateKwargs);
      return (prompt) => encode({ id: 'sft', prompt } as TaskItem);
    },
    examples,
  };
}

/** Warm-start examples of an agent trained through the gateway: `sft.transcripts` rows or the task's `agentTranscript`. */
function agentExamples(
  config: ArborConfig,
  task: Task,
  items: () => TaskItem[],
  tokenizer: TextTokenizer | undefined,
): SftExample[] {
  if (!tokenizer) throw new ConfigError('env.kind "agent": the warm start needs the model\'s tokenizer', 'sft');
  const kwargs = config.engine.chatTemplateKwargs;
  if (config.sft.transcripts)
    return readSftJsonl(config.sft.transcripts, (row, file, line) =>
      chatTranscriptExample(tokenizer, row as unknown as AgentTranscript, `${file}:${line}`, kwargs),
    );
  const conversation = task.agentTranscript?.bind(task);
  if (!conversation)
    throw new ConfigError(
      `env.kind "agent": the warm start needs demonstrations: give task "${task.name}" an agentTranscript(item) ` +
        '(the conversation your agent would have), or sft.transcripts, or set sft.enabled: false',
      'sft',
    );
  return items().map((item) =>
    chatTranscriptExample(
      tokenizer,
      conversation(item),
      `task ${task.name}, agent transcript of item ${item.id}`,
      kwargs,
    ),
  );
}
