/**
 * `npm run bench -- layout [--src src] [--layout docs/layout.md] [--timing test-artifacts/test-timing.json]`:
 * the shape of the source tree, read from the files (no TypeScript compiler). Writes bench/out/layout.json
 * with headline:
 * - serve_engine_internal_imports: (importing file, imported file) pairs from src/serve/** and src/cli/**
 *   into src/engine/** other than open.ts, types.ts and build.ts (goal 0);
 * - import_cycles: cycles between the top-level folders of src/ (the floors): strongly connected
 *   components of more than one folder in the folder import graph (goal 0);
 * - arrows_back_up: folder pairs (a, b) where a imports b and b sits on a higher floor than a, in the floor
 *   order of docs/layout.md's "Floors" list, and the same between engine/'s sub-floors ("Engine floors":
 *   types.ts, config.ts, its folders, `assembly` for its other files) (goal 0); import_cycles counts engine/'s too;
 * - longest_function_lines: the longest function in src/, in lines from its declaration to its closing
 *   brace (goal <= 120);
 * - npm_test_seconds: the wall time of the last full `npm test`, its build, typecheck, format check and
 *   lint included (scripts/run-tests.mjs writes test-artifacts/test-timing.json); null when that file is
 *   absent, was written at another commit, or the runner was not started by `npm test`.
 *
 * The scanner: comments, string, template and regex literal contents are blanked first (a small lexer),
 * so braces and keywords inside them do not count. Imports are `import ... from '<spec>'`,
 * `import '<spec>'`, `export ... from '<spec>'` and `import('<spec>')` with a literal; type-only imports
 * count (they are dependencies of the source too); only relative specifiers are resolved (`./x.js` is
 * `./x.ts`, a folder is its index.ts). Functions are `function` declarations and expressions, methods
 * and accessors (class and object literal members), and arrow functions with a block body assigned to
 * a `const`/`let`/`var` or a class field; the body is the brace after the parameters (and the return
 * type), matched to its closing brace. A function nested in another counts on its own and inside its
 * parent's lines. Arrow functions with an expression body and arrows passed as arguments are not counted.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join, posix, relative, sep } from 'node:path';
import { printTable, repoDir, writeBenchJson } from './util.js';

/** One import of one source file: the file it names (relative to the tree's root, posix separators). */
export interface ImportEdge {
  from: string;
  to: string;
  line: number;
  typeOnly: boolean;
}

/** One function of a source file and its length in lines. */
export interface FunctionSpan {
  file: string;
  name: string;
  line: number;
  lines: number;
}

const REGEX_AFTER_WORD = new Set([
  'return',
  'typeof',
  'case',
  'do',
  'else',
  'in',
  'of',
  'new',
  'delete',
  'void',
  'throw',
  'yield',
  'await',
]);

/**
 * `text` with comments blanked (`code`), and with comments and the contents of string, template and
 * regex literals blanked too (`skeleton`); newlines are kept, so offsets and line numbers match `text`.
 */
export function maskSource(text: string): { code: string; skeleton: string } {
  const code = text.split('');
  const skeleton = text.split('');
  const blank = (from: number, to: number, both: boolean) => {
    for (let j = from; j < to; j++) {
      if (text[j] === '\n') continue;
      skeleton[j] = ' ';
      if (both) code[j] = ' ';
    }
  };
  // braces open in code inside each template's ${...}, innermost last
  const templates: number[] = [];
  let i = 0;
  let last = '';
  let lastWord = '';
  const n = text.length;
  const readTemplate = () => {
    // from just after ` or the } closing a ${...}: to the closing ` or the next ${
    const from = i;
    while (i < n && text[i] !== '`') {
      if (text[i] === '\\') i += 2;
      else if (text[i] === '$' && text[i + 1] === '{') {
        blank(from, i, false);
        i += 2;
        templates.push(0);
        last = '{';
        return;
      } else i++;
    }
    blank(from, i, false);
    i++;
    last = '`';
  };
  while (i < n) {
    const c = text[i];
    if (c === '/' && text[i + 1] === '/') {
      const end = text.indexOf('\n', i);
      const to = end < 0 ? n : end;
      blank(i, to, true);
      i = to;
    } else if (c === '/' && text[i + 1] === '*') {
      const end = text.indexOf('*/', i + 2);
      const to = end < 0 ? n : end + 2;
      blank(i, to, true);
      i = to;
    } else if (c === "'" || c === '"') {
      const from = ++i;
      while (i < n && text[i] !== c && text[i] !== '\n') i += text[i] === '\\' ? 2 : 1;
      blank(from, i, false);
      i++;
      last = c;
    } else if (c === '`') {
      i++;
      readTemplate();
    } else if (c === '/' && (/[(,=:[!&|?{};+\-*%<>~^]/.test(last) || last === '' || REGEX_AFTER_WORD.has(lastWord))) {
      const from = ++i;
      let inClass = false;
      while (i < n && text[i] !== '\n' && (inClass || text[i] !== '/')) {
        if (text[i] === '\\') i++;
        else if (text[i] === '[') inClass = true;
        else if (text[i] === ']') inClass = false;
        i++;
      }
      blank(from, i, false);
      i++;
      while (i < n && /[a-z]/i.test(text[i])) i++;
      last = '/';
      lastWord = '';
    } else if (c === '}' && templates.length && templates[templates.length - 1] === 0) {
      templates.pop();
      i++;
      readTemplate();
    } else {
      if (c === '{' && templates.length) templates[templates.length - 1]++;
      if (c === '}' && templates.length) templates[templates.length - 1]--;
      if (/[\w$]/.test(c)) {
        let j = i;
        while (j < n && /[\w$]/.test(text[j])) j++;
        lastWord = text.slice(i, j);
        last = 'a';
        i = j;
        continue;
      }
      if (!/\s/.test(c)) {
        last = c;
        lastWord = '';
      }
      i++;
    }
  }
  return { code: code.join(''), skeleton: skeleton.join('') };
}

/** Line number (1-based) of each offset, by a table of line starts. */
function lineIndex(text: string): (offset: number) => number {
  const starts = [0];
  for (let i = 0; i < text.length; i++) if (text[i] === '\n') starts.push(i + 1);
  return (offset) => {
    let lo = 0;
    let hi = starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (starts[mid] <= offset) lo = mid;
      else hi = mid - 1;
    }
    return lo + 1;
  };
}

/** The module specifiers a source file imports or re-exports from, with their lines. */
export function scanImports(text: string): Array<{ spec: string; line: number; typeOnly: boolean }> {
  const { code } = maskSource(text);
  const lineOf = lineIndex(code);
  const found: Array<{ spec: string; line: number; typeOnly: boolean; at: number }> = [];
  const statement = /(^|[;}\n])[ \t]*(import|export)\s+(type\s+)?(?:[^'";]*?\sfrom\s*)?(['"])([^'"\n]+)\4/g;
  for (const m of code.matchAll(statement)) {
    const at = m.index + m[1].length;
    found.push({ spec: m[5], line: lineOf(at), typeOnly: !!m[3], at });
  }
  for (const m of code.matchAll(/\bimport\s*\(\s*(['"])([^'"\n]+)\1\s*\)/g)) {
    found.push({ spec: m[2], line: lineOf(m.index), typeOnly: false, at: m.index });
  }
  return found.sort((a, b) => a.at - b.at).map(({ spec, line, typeOnly }) => ({ spec, line, typeOnly }));
}

/** Every .ts file under `dir`, relative to `root` with posix separators, sorted. */
export function sourceFiles(root: string, dir = root): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...sourceFiles(root, path));
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) out.push(relative(root, path).split(sep).join('/'));
  }
  return out;
}

/** The file a relative specifier names from `from` (all posix, relative to the root): `.js` → `.ts`, a folder → index.ts. */
export function resolveImport(from: string, spec: string, known: ReadonlySet<string>): string {
  const base = posix.normalize(posix.join(posix.dirname(from), spec));
  const candidates = [
    base.replace(/\.js$/, '.ts'),
    base.replace(/\.mjs$/, '.mts'),
    base,
    `${base}.ts`,
    `${base}/index.ts`,
  ];
  return candidates.find((c) => known.has(c)) ?? base;
}

/** The relative imports of every .ts file under `root` (paths relative to `root`). */
export function importEdges(root: string): ImportEdge[] {
  const files = sourceFiles(root);
  const known = new Set(files);
  const edges: ImportEdge[] = [];
  for (const from of files) {
    for (const { spec, line, typeOnly } of scanImports(readFileSync(join(root, from), 'utf8'))) {
      if (!spec.startsWith('.')) continue;
      edges.push({ from, to: resolveImport(from, spec, known), line, typeOnly });
    }
  }
  return edges;
}

/** The top-level folder of a path relative to src/ ('' for a file directly in it, or a path outside it). */
export function folderOf(path: string): string {
  const parts = path.split('/');
  return parts.length > 1 && parts[0] !== '..' ? parts[0] : '';
}

/** Folder → the folders it imports from (other folders only), with the imports behind each arrow. */
export function folderGraph(edges: ImportEdge[]): Map<string, Map<string, ImportEdge[]>> {
  const graph = new Map<string, Map<string, ImportEdge[]>>();
  for (const e of edges) {
    const [a, b] = [folderOf(e.from), folderOf(e.to)];
    if (!a || !b || a === b) continue;
    if (!graph.has(a)) graph.set(a, new Map());
    const arrows = graph.get(a)!;
    arrows.set(b, [...(arrows.get(b) ?? []), e]);
  }
  return graph;
}

/** The strongly connected components of more than one folder (Tarjan), each sorted, in name order. */
export function folderCycles(graph: Map<string, Map<string, ImportEdge[]>>): string[][] {
  const nodes = [...new Set([...graph.keys(), ...[...graph.values()].flatMap((m) => [...m.keys()])])].sort();
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  let counter = 0;
  const visit = (v: string) => {
    index.set(v, counter);
    low.set(v, counter++);
    stack.push(v);
    onStack.add(v);
    for (const w of [...(graph.get(v)?.keys() ?? [])].sort()) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1) components.push(component.sort());
    }
  };
  for (const v of nodes) if (!index.has(v)) visit(v);
  return components.sort((a, b) => a[0].localeCompare(b[0]));
}

/** The engine sub-floor of a path relative to src/: `types`, `config`, its folder under engine/, or `assembly` ('' outside). */
export function engineFloorOf(path: string): string {
  const parts = path.split('/');
  if (parts[0] !== 'engine' || parts.length < 2) return '';
  if (parts.length === 2) return parts[1] === 'types.ts' ? 'types' : parts[1] === 'config.ts' ? 'config' : 'assembly';
  return parts[1];
}

/** Like folderGraph, between the engine's sub-floors (imports inside engine/ only). */
export function engineGraph(edges: ImportEdge[]): Map<string, Map<string, ImportEdge[]>> {
  const graph = new Map<string, Map<string, ImportEdge[]>>();
  for (const e of edges) {
    const [a, b] = [engineFloorOf(e.from), engineFloorOf(e.to)];
    if (!a || !b || a === b) continue;
    if (!graph.has(a)) graph.set(a, new Map());
    const arrows = graph.get(a)!;
    arrows.set(b, [...(arrows.get(b) ?? []), e]);
  }
  return graph;
}

/**
 * A floor order of docs/layout.md: the numbered list under the heading `heading` ("Floors": src/'s
 * folders; "Engine floors": engine/'s), bottom floor first.
 */
export function floorOrder(layoutMarkdown: string, heading = 'Floors'): string[] {
  const section = new RegExp(`^#+\\s*${heading}\\s*$([\\s\\S]*?)(?=^#+\\s|(?![\\s\\S]))`, 'm').exec(layoutMarkdown);
  if (!section) return [];
  return [...section[1].matchAll(/^\s*\d+\.\s+`(?:src\/)?([\w-]+)\/?`/gm)].map((m) => m[1]);
}

/** The arrows from a folder to one on a higher floor (folders not in `floors` are left out). */
export function arrowsBackUp(
  graph: Map<string, Map<string, ImportEdge[]>>,
  floors: string[],
): Array<{ from: string; to: string; imports: ImportEdge[] }> {
  const floor = new Map(floors.map((f, i) => [f, i]));
  const out: Array<{ from: string; to: string; imports: ImportEdge[] }> = [];
  for (const [a, arrows] of [...graph].sort(([x], [y]) => x.localeCompare(y))) {
    for (const [b, imports] of [...arrows].sort(([x], [y]) => x.localeCompare(y))) {
      if (floor.has(a) && floor.has(b) && floor.get(b)! > floor.get(a)!) out.push({ from: a, to: b, imports });
    }
  }
  return out;
}

/** Engine files that serve/ and cli/ may import: the one place a model is opened, the interfaces, buildEngine. */
export const ENGINE_SEAM = ['engine/open.ts', 'engine/types.ts', 'engine/build.ts'];

/** (importing file, imported file) pairs from serve/ and cli/ into engine/ files other than ENGINE_SEAM. */
export function serveEngineInternal(edges: ImportEdge[]): Array<{ from: string; to: string }> {
  const pairs = new Map<string, { from: string; to: string }>();
  for (const e of edges) {
    if (!['serve', 'cli'].includes(folderOf(e.from)) || folderOf(e.to) !== 'engine') continue;
    if (ENGINE_SEAM.includes(e.to)) continue;
    pairs.set(`${e.from}\0${e.to}`, { from: e.from, to: e.to });
  }
  return [...pairs.values()].sort((a, b) => a.from.localeCompare(b.from) || a.to.localeCompare(b.to));
}

const NOT_METHOD = new Set([
  'if',
  'for',
  'while',
  'switch',
  'catch',
  'return',
  'function',
  'with',
  'else',
  'do',
  'try',
  'new',
  'typeof',
  'await',
  'yield',
  'throw',
  'delete',
  'void',
  'super',
  'import',
  'export',
  'case',
  'this',
]);

/** The offset just past the group opened at `i` (`(`, `[`, `{`, or `<` of a type's arguments). */
function skipGroup(s: string, i: number): number {
  const open = s[i];
  const close = ({ '(': ')', '[': ']', '{': '}', '<': '>' } as Record<string, string>)[open];
  let depth = 0;
  for (let j = i; j < s.length; j++) {
    const c = s[j];
    if (open === '<' && c === '>' && s[j - 1] === '=') continue;
    if (c === open) depth++;
    else if (c === close && --depth === 0) return j + 1;
  }
  return s.length;
}

function skipSpace(s: string, i: number): number {
  while (i < s.length && /\s/.test(s[i])) i++;
  return i;
}

/**
 * From `i` (at `:` of a return type, or at the body): the offset of the body's `{`, or -1 when what
 * follows is not a body (`;`, `=`, `,`, `)`: a signature, a call or an expression).
 */
function bodyAfterReturnType(s: string, i: number): number {
  i = skipSpace(s, i);
  if (s[i] !== ':') return s[i] === '{' ? i : -1;
  i++;
  let expectType = true;
  while (i < s.length) {
    i = skipSpace(s, i);
    const c = s[i];
    if (c === '{') {
      if (!expectType) return i;
      i = skipGroup(s, i);
      expectType = false;
    } else if (c === '(' || c === '[' || c === '<') {
      i = skipGroup(s, i);
      expectType = false;
    } else if (c === '=' && s[i + 1] === '>') {
      i += 2;
      expectType = true;
    } else if (c === '|' || c === '&' || c === ',') {
      i++;
      expectType = true;
    } else if (c === ';' || c === '=' || c === ')' || c === '}' || c === undefined) {
      return -1;
    } else if (/[\w$]/.test(c)) {
      while (i < s.length && /[\w$.]/.test(s[i])) i++;
      const word = s.slice(0, i).match(/[\w$]+$/)?.[0] ?? '';
      expectType = ['keyof', 'typeof', 'is', 'asserts', 'readonly', 'infer', 'extends', 'unique'].includes(word);
    } else i++;
  }
  return -1;
}

/** After an arrow function's parameters (at `i`): the offset of its block body's `{`, or -1. */
function arrowBody(s: string, i: number): number {
  let depth = 0;
  for (let j = i; j < s.length; j++) {
    const c = s[j];
    if (c === '(' || c === '[' || c === '{') depth++;
    else if (c === ')' || c === ']' || c === '}') {
      if (--depth < 0) return -1;
    } else if (depth === 0 && c === ';') {
      return -1;
    } else if (depth === 0 && c === '=' && s[j + 1] === '>') {
      const k = skipSpace(s, j + 2);
      return s[k] === '{' ? k : -1;
    }
  }
  return -1;
}

/** Every function of a source file (see the top of this file for what counts) and its lines. */
export function functionSpans(text: string, file = ''): FunctionSpan[] {
  const { skeleton: s } = maskSource(text);
  const lineOf = lineIndex(s);
  const spans = new Map<number, FunctionSpan>();
  const add = (name: string, start: number, body: number) => {
    if (body < 0 || spans.has(body)) return;
    const end = skipGroup(s, body) - 1;
    spans.set(body, { file, name, line: lineOf(start), lines: lineOf(end) - lineOf(start) + 1 });
  };
  const params = (i: number): number => {
    i = skipSpace(s, i);
    if (s[i] === '<') i = skipSpace(s, skipGroup(s, i));
    return s[i] === '(' ? skipGroup(s, i) : -1;
  };
  for (const m of s.matchAll(/\bfunction\b\s*\*?\s*([\w$]*)/g)) {
    const after = params(m.index + m[0].length);
    if (after >= 0) add(m[1] || '(anonymous function)', m.index, bodyAfterReturnType(s, after));
  }
  const member =
    /^[ \t]*(?:(?:public|private|protected|static|async|readonly|override|abstract|get|set|declare)\s+)*\*?\s*(#?[\w$]+)\s*(?=[<(])/gm;
  for (const m of s.matchAll(member)) {
    if (NOT_METHOD.has(m[1])) continue;
    const after = params(m.index + m[0].length);
    if (after >= 0) add(m[1], m.index + m[0].length - m[1].length, bodyAfterReturnType(s, after));
  }
  const assigned =
    /(?:\b(?:const|let|var)\s+|^[ \t]*(?:(?:public|private|protected|static|readonly|override)\s+)*)(#?[\w$]+)\s*(?::[^=\n]*)?=\s*(?:async\s+)?(?=[(<]|[\w$]+\s*=>)/gm;
  for (const m of s.matchAll(assigned)) {
    let i = m.index + m[0].length;
    if (s[i] === '<') i = skipSpace(s, skipGroup(s, i));
    if (s[i] === '(') i = skipGroup(s, i);
    else while (/[\w$]/.test(s[i])) i++;
    add(m[1], m.index + m[0].indexOf(m[1]), arrowBody(s, i));
  }
  return [...spans.values()].sort((a, b) => a.line - b.line);
}

/** The recorded `npm test` timing and whether it stands for the code at `commit`. */
export function testTiming(
  file: string,
  commit: string | null,
): { seconds: number | null; note: string; record: Record<string, unknown> | null } {
  if (!existsSync(file)) {
    return { seconds: null, note: `${file} is absent: run \`npm test\` (all of it) to record it`, record: null };
  }
  let record: Record<string, unknown>;
  try {
    record = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
  } catch (error) {
    return { seconds: null, note: `${file} does not parse: ${(error as Error).message}`, record: null };
  }
  const seconds = typeof record.npm_test_seconds === 'number' ? record.npm_test_seconds : null;
  if (seconds === null) {
    const runner = typeof record.total_seconds === 'number' ? ` (the runner alone took ${record.total_seconds} s)` : '';
    return { seconds, note: `${file} has no npm_test_seconds: run the whole \`npm test\`${runner}`, record };
  }
  if (!commit || record.commit !== commit) {
    const at = typeof record.commit === 'string' ? record.commit : 'no commit';
    return { seconds: null, note: `${file} was written at ${at}, the checkout is at ${commit ?? 'no commit'}`, record };
  }
  const runner = typeof record.total_seconds === 'number' ? `, the test runner ${record.total_seconds} s of it` : '';
  return { seconds, note: `${file}: ${String(record.cores)} cores, ${String(record.date)}${runner}`, record };
}

/** The five figures of a source tree `srcDir` under the floor order `floors`, with what is behind each. */
export function layoutFigures(srcDir: string, floors: string[], engineFloors: string[] = []) {
  const edges = importEdges(srcDir);
  const graph = folderGraph(edges);
  const cycles = folderCycles(graph);
  const inEngine = engineGraph(edges);
  const engineBackUp = arrowsBackUp(inEngine, engineFloors).map((a) => ({
    ...a,
    from: `engine:${a.from}`,
    to: `engine:${a.to}`,
  }));
  // arrows back up between src/'s folders and between engine/'s sub-floors; cycles inside engine/ too
  const backUp = [...arrowsBackUp(graph, floors), ...engineBackUp];
  cycles.push(...folderCycles(inEngine).map((c) => c.map((f) => `engine:${f}`)));
  // src/'s folder arrows and engine/'s (as engine:<floor>), for the listings
  const arrows = new Map(graph);
  for (const [a, m] of inEngine)
    arrows.set(`engine:${a}`, new Map([...m].map(([b, imports]) => [`engine:${b}`, imports])));
  const internal = serveEngineInternal(edges);
  const functions = sourceFiles(srcDir).flatMap((f) => functionSpans(readFileSync(join(srcDir, f), 'utf8'), f));
  const longest = [...functions].sort((a, b) => b.lines - a.lines || a.file.localeCompare(b.file));
  const folders = [...new Set([...graph.keys(), ...sourceFiles(srcDir).map(folderOf)])].filter(Boolean).sort();
  return {
    edges,
    graph: arrows,
    cycles,
    backUp,
    internal,
    functions: longest,
    unplaced: folders.filter((f) => !floors.includes(f)),
    headline: {
      serve_engine_internal_imports: internal.length,
      import_cycles: cycles.length,
      arrows_back_up: backUp.length,
      longest_function_lines: longest[0]?.lines ?? 0,
    },
  };
}

function arg(args: string[], name: string, fallback: string): string {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1] : fallback;
}

const LONG_FUNCTION = 120;

export async function main(args: string[]): Promise<void> {
  const srcDir = join(repoDir, arg(args, 'src', 'src'));
  const layoutFile = join(repoDir, arg(args, 'layout', 'docs/layout.md'));
  const timingFile = join(repoDir, arg(args, 'timing', 'test-artifacts/test-timing.json'));
  const markdown = readFileSync(layoutFile, 'utf8');
  const floors = floorOrder(markdown);
  if (!floors.length) throw new Error(`${layoutFile}: no numbered list under a "Floors" heading`);
  const engineFloors = floorOrder(markdown, 'Engine floors');
  if (!engineFloors.length) throw new Error(`${layoutFile}: no numbered list under an "Engine floors" heading`);
  const figures = layoutFigures(srcDir, floors, engineFloors);
  const head = spawnSync('git', ['rev-parse', '--verify', 'HEAD'], { cwd: repoDir, encoding: 'utf8' });
  const commit = head.status === 0 ? head.stdout.trim() : null;
  const timing = testTiming(timingFile, commit);
  const headline = { ...figures.headline, npm_test_seconds: timing.seconds };
  const goals: Record<string, string> = {
    serve_engine_internal_imports: '0',
    import_cycles: '0',
    arrows_back_up: '0',
    longest_function_lines: `<= ${LONG_FUNCTION}`,
    npm_test_seconds: '<= 480 (2 cores)',
  };
  printTable(Object.entries(headline).map(([name, value]) => ({ name, value, goal: goals[name] })));
  const imports = (list: ImportEdge[]) => list.map((e) => `src/${e.from}:${e.line} -> src/${e.to}`);
  const cycles = figures.cycles.map((folders) => ({
    folders,
    arrows: folders.flatMap((a) =>
      folders
        .filter((b) => figures.graph.get(a)?.has(b))
        .map((b) => ({ from: a, to: b, imports: imports(figures.graph.get(a)!.get(b)!) })),
    ),
  }));
  const backUp = figures.backUp.map((a) => ({ from: a.from, to: a.to, imports: imports(a.imports) }));
  const long = figures.functions
    .filter((f) => f.lines > LONG_FUNCTION)
    .map((f) => ({ function: f.name, at: `src/${f.file}:${f.line}`, lines: f.lines }));
  console.log(`\nfloors, bottom first: ${floors.join(' < ')}`);
  if (figures.unplaced.length) console.log(`folders on no floor (left out of arrows_back_up): ${figures.unplaced}`);
  console.log(`\nserve/ and cli/ into engine/ internals (${figures.internal.length}):`);
  for (const p of figures.internal) console.log(`  src/${p.from} -> src/${p.to}`);
  console.log(`\nfolder cycles (${cycles.length}):`);
  for (const c of cycles) {
    console.log(`  ${c.folders.join(' <-> ')}`);
    for (const a of c.arrows) for (const line of a.imports) console.log(`    ${line}`);
  }
  console.log(`\narrows back up (${backUp.length}):`);
  for (const a of backUp) {
    console.log(`  ${a.from} -> ${a.to}`);
    for (const line of a.imports) console.log(`    ${line}`);
  }
  console.log(`\nfunctions over ${LONG_FUNCTION} lines (${long.length}):`);
  for (const f of long) console.log(`  ${f.lines} lines  ${f.function}  ${f.at}`);
  console.log(`\nnpm test: ${timing.note}`);
  const arrows = [...figures.graph].flatMap(([a, m]) => [...m.keys()].map((b) => `${a} -> ${b}`)).sort();
  writeBenchJson('layout', headline, {
    settings: { src: relative(repoDir, srcDir), layout: relative(repoDir, layoutFile), long_function: LONG_FUNCTION },
    machine_load: { cores: availableParallelism() },
    floors,
    unplaced_folders: figures.unplaced,
    folder_arrows: arrows,
    serve_engine_internal: figures.internal.map((p) => `src/${p.from} -> src/${p.to}`),
    import_cycles: cycles,
    arrows_back_up: backUp,
    functions_over_limit: long,
    longest_functions: figures.functions.slice(0, 10).map((f) => ({ ...f, file: `src/${f.file}` })),
    npm_test: { file: relative(repoDir, timingFile), note: timing.note, record: timing.record },
  });
}
