/**
 * Reading the docs as data, for test/docs/*: the Markdown files (README.md and docs/**), the commands
 * of their shell code blocks (```sh, bash, shell, console; `\` continuations joined, `# comments` and a
 * leading `$ ` dropped), their relative links and their headings' GitHub anchors. Asserts nothing.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** A command line of a shell code block: `file` relative to the repository, `line` 1-based. */
export interface DocCommand {
  file: string;
  line: number;
  command: string;
}

/** A relative link `[text](target#anchor)` or `![alt](target)`. */
export interface DocLink {
  file: string;
  line: number;
  target: string;
  anchor?: string;
}

/** README.md and every Markdown file under docs/, relative to `root`, sorted. */
export function docFiles(root: string): string[] {
  const out = ['README.md'];
  const walk = (dir: string): void => {
    for (const name of readdirSync(join(root, dir)).sort()) {
      const path = join(dir, name);
      if (statSync(join(root, path)).isDirectory()) walk(path);
      else if (name.endsWith('.md')) out.push(path);
    }
  };
  walk('docs');
  return out;
}

/** Drop a trailing `# comment` that is outside quotes. */
function stripComment(line: string): string {
  let quote = '';
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quote) {
      if (c === quote) quote = '';
    } else if (c === "'" || c === '"') quote = c;
    else if (c === '#' && (i === 0 || /\s/.test(line[i - 1]))) return line.slice(0, i).trimEnd();
  }
  return line;
}

/** Every command of the file's shell code blocks, whitespace collapsed. */
export function shellCommands(file: string, text: string): DocCommand[] {
  const out: DocCommand[] = [];
  const lines = text.split('\n');
  let inShell = false;
  let inFence = false;
  let pending = '';
  let pendingLine = 0;
  lines.forEach((raw, index) => {
    const fence = /^\s*```+\s*([\w-]*)/.exec(raw);
    if (fence) {
      inShell = !inFence && ['sh', 'bash', 'shell', 'console'].includes(fence[1]);
      inFence = !inFence;
      pending = '';
      return;
    }
    if (!inShell) return;
    let line = raw.trim().replace(/^\$ /, '');
    if (!pending) pendingLine = index + 1;
    if (line.endsWith('\\')) {
      pending += line.slice(0, -1) + ' ';
      return;
    }
    line = stripComment(pending + line)
      .replace(/\s+/g, ' ')
      .trim();
    pending = '';
    if (line) out.push({ file, line: pendingLine, command: line });
  });
  return out;
}

/** A command without its `npx ` prefix: the registry's key. */
export function normaliseCommand(command: string): string {
  return command.replace(/^npx /, '').trim();
}

/** argv of a command line: whitespace-separated, single and double quotes grouped (no escapes). */
export function splitCommand(command: string): string[] {
  const out: string[] = [];
  let current = '';
  let quote = '';
  let started = false;
  for (const c of command) {
    if (quote) {
      if (c === quote) quote = '';
      else current += c;
    } else if (c === "'" || c === '"') {
      quote = c;
      started = true;
    } else if (/\s/.test(c)) {
      if (started) out.push(current);
      current = '';
      started = false;
    } else {
      current += c;
      started = true;
    }
  }
  if (quote) throw new Error(`unbalanced quote in: ${command}`);
  if (started) out.push(current);
  return out;
}

/** Relative links of a Markdown file, outside code blocks and inline code; URLs and mail left out. */
export function relativeLinks(file: string, text: string): DocLink[] {
  const out: DocLink[] = [];
  let inFence = false;
  text.split('\n').forEach((raw, index) => {
    if (/^\s*```/.test(raw)) inFence = !inFence;
    if (inFence) return;
    const line = raw.replace(/`[^`]*`/g, '');
    for (const m of line.matchAll(/!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      const href = m[1];
      if (/^[a-z][a-z0-9+.-]*:/i.test(href)) continue;
      const [target, anchor] = href.split('#', 2);
      out.push({ file, line: index + 1, target, anchor: anchor || undefined });
    }
  });
  return out;
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens. */
export function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** The anchors of a file's headings (outside code blocks); repeats get -1, -2 as on GitHub. */
export function anchors(text: string): Set<string> {
  const out = new Set<string>();
  const counts = new Map<string, number>();
  let inFence = false;
  for (const line of text.split('\n')) {
    if (/^\s*```/.test(line)) inFence = !inFence;
    const m = !inFence && /^#{1,6}\s+(.*)$/.exec(line);
    if (!m) continue;
    const base = slug(m[1]);
    const n = counts.get(base) ?? 0;
    counts.set(base, n + 1);
    out.add(n ? `${base}-${n}` : base);
  }
  return out;
}

/** The text of a repository file. */
export const readDoc = (root: string, file: string): string => readFileSync(join(root, file), 'utf8');
