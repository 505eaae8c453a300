/**
 * Chat templates as transformers renders them (`apply_chat_template`): a model
 * directory's templates (`chat_template.jinja`, else tokenizer_config.json's `chat_template` string or
 * `[{name, template}]` list, plus `additional_chat_templates/*.jinja`), chosen by name, else `tool_use`
 * when tools are given, else `default`; rendered with @huggingface/jinja and transformers' variables.
 * A template that fails to parse (at load) or to render is a DataError naming its file and the field
 * `chat_template`. Not reproduced: Python's reprs in `{{ }}` (True, None, 2.0, dicts); `tojson` matches.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { Environment, Interpreter, Template } from '@huggingface/jinja';
import { DataError } from '../../core/errors.js';
import type { ChatMessage, ChatTemplateOptions } from '../types.js';

/** One parsed template and where it came from (for error messages). */
export interface ChatTemplateEntry {
  name: string;
  source: string;
  /** The file it was read from (`chat_template.jinja`, `tokenizer_config.json`, ...). */
  file: string;
  compiled: Template;
}

/** transformers' file and directory names (v5 `save_pretrained`). */
export const CHAT_TEMPLATE_FILE = 'chat_template.jinja';
export const CHAT_TEMPLATE_DIR = 'additional_chat_templates';

function compile(name: string, source: string, file: string): ChatTemplateEntry {
  try {
    return { name, source, file, compiled: new Template(source) };
  } catch (cause) {
    const what = name === 'default' ? 'chat_template' : `chat_template "${name}"`;
    const message = `${file}: ${what} does not parse: ${(cause as Error).message}`;
    throw new DataError(message, file, undefined, 'chat_template', { cause });
  }
}

/** The templates of one tokenizer directory, by name (`default` for a single string template). */
export class ChatTemplates {
  private readonly literals = new Map<string, ChatTemplateEntry>();

  private constructor(
    private readonly entries: ReadonlyMap<string, ChatTemplateEntry>,
    private readonly configFile: string,
  ) {}

  /** Read and parse every template of `dir`; `config` is tokenizer_config.json's content. */
  static load(dir: string, config: Record<string, unknown>, configFile: string): ChatTemplates {
    const entries = new Map<string, ChatTemplateEntry>();
    const jinjaFile = join(dir, CHAT_TEMPLATE_FILE);
    const inConfig = config.chat_template;
    if (existsSync(jinjaFile)) {
      entries.set('default', compile('default', readFileSync(jinjaFile, 'utf8'), jinjaFile));
    } else if (typeof inConfig === 'string') {
      entries.set('default', compile('default', inConfig, configFile));
    } else if (Array.isArray(inConfig)) {
      inConfig.forEach((item, i) => {
        const { name, template } = (item ?? {}) as { name?: unknown; template?: unknown };
        if (typeof name !== 'string' || typeof template !== 'string') {
          const why = `chat_template[${i}] must be {"name": string, "template": string}`;
          throw new DataError(`${configFile}: ${why}`, configFile, undefined, 'chat_template');
        }
        entries.set(name, compile(name, template, configFile));
      });
    } else if (inConfig !== undefined && inConfig !== null) {
      const why = 'chat_template must be a string or a list of {name, template}';
      throw new DataError(`${configFile}: ${why}`, configFile, undefined, 'chat_template');
    }
    const extraDir = join(dir, CHAT_TEMPLATE_DIR);
    if (existsSync(extraDir)) {
      for (const file of readdirSync(extraDir)
        .filter((f) => f.endsWith('.jinja'))
        .sort()) {
        const name = basename(file, '.jinja');
        entries.set(name, compile(name, readFileSync(join(extraDir, file), 'utf8'), join(extraDir, file)));
      }
    }
    return new ChatTemplates(entries, configFile);
  }

  get names(): string[] {
    return [...this.entries.keys()];
  }

  get isEmpty(): boolean {
    return this.entries.size === 0;
  }

  /**
   * transformers' `get_chat_template`: a known name wins, else any other `template` is a template's
   * source; without one, `tool_use` when tools are given and present, else `default`.
   */
  select(template: string | undefined, hasTools: boolean): ChatTemplateEntry {
    if (template !== undefined) {
      const byName = this.entries.get(template);
      if (byName) return byName;
      if (!/\{[{%#]/.test(template)) {
        const why = `no chat template named "${template}" (known: ${this.names.join(', ') || 'none'})`;
        throw new DataError(`${this.configFile}: ${why}`, this.configFile, undefined, 'chat_template');
      }
      let literal = this.literals.get(template);
      if (!literal) {
        literal = compile('default', template, 'the chat template passed in options.template');
        this.literals.set(template, literal);
      }
      return literal;
    }
    if (hasTools && this.entries.has('tool_use')) return this.entries.get('tool_use')!;
    const fallback = this.entries.get('default');
    if (fallback) return fallback;
    if (this.isEmpty) {
      const why = `no chat template (neither ${CHAT_TEMPLATE_FILE} nor a chat_template in tokenizer_config.json)`;
      throw new DataError(`${this.configFile}: ${why}`, this.configFile, undefined, 'chat_template');
    }
    const why = `several chat templates (${this.names.join(', ')}) and none named default: choose one with template`;
    throw new DataError(`${this.configFile}: ${why}`, this.configFile, undefined, 'chat_template');
  }

  /**
   * Render `messages` exactly as transformers' `render_jinja_template`: variables `messages`, `tools`
   * (None when absent), `documents` (None), `add_generation_prompt`, then `variables` (the special-token
   * strings) overridden by `options.kwargs`; globals `raise_exception` and `strftime_now`.
   */
  render(messages: ChatMessage[], options: ChatTemplateOptions, variables: Record<string, unknown>): string {
    if (options.continueFinalMessage && options.addGenerationPrompt) {
      const why =
        'continueFinalMessage and addGenerationPrompt are not compatible ' +
        '(continue the last message, or start a new one)';
      throw new DataError(why, undefined, undefined, 'continue_final_message');
    }
    const entry = this.select(options.template, options.tools !== undefined && options.tools !== null);
    let text: string;
    try {
      text = renderWithGlobals(entry.compiled, {
        documents: null,
        ...variables,
        ...options.kwargs,
        messages,
        tools: options.tools ?? null,
        add_generation_prompt: options.addGenerationPrompt ?? false,
      });
    } catch (cause) {
      const what = entry.name === 'default' ? 'chat_template' : `chat_template "${entry.name}"`;
      const message = `${entry.file}: ${what} failed to render: ${(cause as Error).message}`;
      throw new DataError(message, entry.file, undefined, 'chat_template', { cause });
    }
    return options.continueFinalMessage ? cutAfterFinalMessage(text, messages, entry.file) : text;
  }
}

/** Python's `range(stop)` / `range(start, stop[, step])`. */
function range(start: number, stop?: number, step = 1): number[] {
  if (stop === undefined) [start, stop] = [0, start];
  if (step === 0) throw new Error('range() arg 3 must not be zero');
  const out: number[] = [];
  for (let i = start; step > 0 ? i < stop : i > stop; i += step) out.push(i);
  return out;
}

/**
 * `Template.render` with the globals in a parent scope, so that render variables shadow them as in
 * jinja2 (@huggingface/jinja declares them in the same scope and refuses a second `strftime_now`):
 * transformers' `raise_exception` and `strftime_now` (Python's, C locale) and jinja's literals.
 */
function renderWithGlobals(template: Template, variables: Record<string, unknown>): string {
  const globals = new Environment();
  const values: Record<string, unknown> = {
    true: true,
    false: false,
    none: null,
    True: true,
    False: false,
    None: null,
    range,
    raise_exception: (message: unknown) => {
      throw new Error(String(message));
    },
    strftime_now: (format: unknown) => strftimeNow(String(format)),
  };
  for (const [name, value] of Object.entries(values)) globals.set(name, value);
  const scope = new Environment(globals);
  for (const [name, value] of Object.entries(variables)) scope.set(name, value);
  return new Interpreter(scope).run(template.parsed).value as string;
}

/**
 * transformers' `continue_final_message`: cut after the last occurrence of the final message's
 * content, keeping its leading/trailing spacing only where the template kept it.
 */
function cutAfterFinalMessage(text: string, messages: ChatMessage[], file: string): string {
  const final = messages.at(-1)?.content;
  if (typeof final !== 'string') {
    const why = 'continueFinalMessage needs a final message with text content';
    throw new DataError(why, undefined, undefined, 'messages');
  }
  const stripped = final.trim();
  const at = text.lastIndexOf(stripped);
  if (at < 0) {
    const why =
      'continueFinalMessage: the final message does not appear in the rendered chat ' + '(the template changes it)';
    throw new DataError(`${file}: ${why}`, file, undefined, 'chat_template');
  }
  const left = final.trimStart();
  // the template kept the message's trailing spacing: keep it too; else cut at the stripped text
  const kept = text.slice(at, at + left.length) === final;
  return text.slice(0, at + (kept ? left.length : stripped.length));
}

const DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];
const MONTHS = [
  'January',
  'February',
  'March',
  'April',
  'May',
  'June',
  'July',
  'August',
  'September',
  'October',
  'November',
  'December',
];

/** Python's `datetime.now().strftime(format)` in the C locale (English names), local time. */
export function strftimeNow(format: string, now: Date = new Date()): string {
  const pad = (n: number, width = 2) => String(n).padStart(width, '0');
  const hour12 = now.getHours() % 12 === 0 ? 12 : now.getHours() % 12;
  const dayOfYear =
    Math.floor(
      (Date.UTC(now.getFullYear(), now.getMonth(), now.getDate()) - Date.UTC(now.getFullYear(), 0, 1)) / 86_400_000,
    ) + 1;
  const codes: Record<string, () => string> = {
    a: () => DAYS[now.getDay()].slice(0, 3),
    A: () => DAYS[now.getDay()],
    b: () => MONTHS[now.getMonth()].slice(0, 3),
    B: () => MONTHS[now.getMonth()],
    d: () => pad(now.getDate()),
    '-d': () => String(now.getDate()),
    e: () => String(now.getDate()).padStart(2, ' '),
    H: () => pad(now.getHours()),
    I: () => pad(hour12),
    j: () => pad(dayOfYear, 3),
    m: () => pad(now.getMonth() + 1),
    '-m': () => String(now.getMonth() + 1),
    M: () => pad(now.getMinutes()),
    p: () => (now.getHours() < 12 ? 'AM' : 'PM'),
    S: () => pad(now.getSeconds()),
    y: () => pad(now.getFullYear() % 100),
    Y: () => String(now.getFullYear()),
    '%': () => '%',
  };
  return format.replace(/%(-?[a-zA-Z%])/g, (whole, code: string) => codes[code]?.() ?? whole);
}
