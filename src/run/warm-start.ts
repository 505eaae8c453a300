/**
 * The embedded engine's warm-start for a run: SFT on the task's demonstrations, cached under
 * runs/_sft/<hash of task, model, SFT options and seed> so repeated runs and benchmarks reuse it (an
 * explicit sft.checkpoint wins). `buildEngine` trains it when the directory is empty.
 */
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import type { WarmStart } from '../engine/build.js';
import type { TaskItem } from '../core/types.js';
import type { Task } from '../tasks/types.js';
import type { AgentEnv } from './agent-runtime.js';
import type { ArborConfig } from './config.js';
import { promptEncoder } from './prompts.js';

export function sftCacheDir(config: ArborConfig, runsRoot = 'runs'): string {
  // agent runs: the environment and the tool format shape the demonstrations' prompts
  const agent = config.generate.kind === 'agent' ? { env: config.env, format: config.generate.format } : undefined;
  // Hugging Face models: the prompt encoding (chat template and its variables) shapes the demonstrations too
  const prompts = config.model.hf ? { chatTemplate: config.engine.chatTemplate, kwargs: config.engine.chatTemplateKwargs } : undefined;
  const key = JSON.stringify({ task: config.task, model: config.model, sft: { ...config.sft, checkpoint: undefined }, seed: config.run.seed, v: 1, ...(agent ? { agent } : {}), ...(prompts ? { prompts } : {}) });
  return join(runsRoot, '_sft', createHash('sha256').update(key).digest('hex').slice(0, 16));
}

/**
 * The warm start's examples: each item's prompt and demonstration; in agent runs the prompt is rendered
 * with the tools offered (as the agent generator renders it) and a task with multi-turn demonstrations
 * gives them as segments, so observations are context, not targets.
 */
export function warmStartFor(config: ArborConfig, task: Task, agent?: AgentEnv): WarmStart {
  const turns = (task as Partial<{ demonstrationTurns(item: TaskItem): Array<{ text: string; role: 'policy' | 'env' }> }>).demonstrationTurns?.bind(task);
  return {
    dir: config.sft.checkpoint ?? sftCacheDir(config),
    seed: config.run.seed,
    // SFT prompts are encoded exactly as RL's (the chat template when engine.chatTemplate); agent prompts are rendered text
    encodePrompt: (tokenizer) => {
      const encode = promptEncoder(tokenizer, config.engine.chatTemplate && !agent, config.engine.chatTemplateKwargs);
      return (prompt) => encode({ id: 'sft', prompt } as TaskItem);
    },
    examples: () =>
      task.makeItems('train', config.sft.examples, config.run.seed + 1).map((i) => ({
        prompt: agent ? agent.format.renderPrompt(i.prompt, agent.tools) : i.prompt,
        completion: task.demonstration(i),
        ...(agent && turns ? { segments: turns(i) } : {}),
        source: `${task.name} demonstration for item ${i.id}`,
      })),
  };
}
