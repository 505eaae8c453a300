/**
 * A throwaway git checkout for the bench-provenance tests: src/a.ts, bench/b.ts and README.md committed
 * once (a fixed author, no user config needed), with helpers to edit, stage and commit. Local only; the
 * caller removes it with `remove()` (tests call it in `after`/`finally`).
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

export interface GitRepo {
  dir: string;
  /** run git in the checkout; throws with its stderr when it fails */
  git(...args: string[]): string;
  /** write `text` to `path` (relative), creating folders */
  write(path: string, text: string): void;
  /** commit everything tracked or new; returns the new HEAD */
  commitAll(message: string): string;
  remove(): void;
}

export function makeRepo(): GitRepo {
  const dir = mkdtempSync(join(tmpdir(), 'arbor-bench-git-'));
  const env = {
    ...process.env,
    GIT_AUTHOR_NAME: 'bench test',
    GIT_AUTHOR_EMAIL: 'bench@test.invalid',
    GIT_COMMITTER_NAME: 'bench test',
    GIT_COMMITTER_EMAIL: 'bench@test.invalid',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
  };
  const repo: GitRepo = {
    dir,
    git(...args) {
      const r = spawnSync('git', args, { cwd: dir, encoding: 'utf8', env });
      if (r.status !== 0) throw new Error(`git ${args.join(' ')} failed in ${dir}: ${r.stderr}`);
      return r.stdout.trim();
    },
    write(path, text) {
      mkdirSync(dirname(join(dir, path)), { recursive: true });
      writeFileSync(join(dir, path), text);
    },
    commitAll(message) {
      repo.git('add', '-A');
      repo.git('commit', '-q', '-m', message);
      return repo.git('rev-parse', 'HEAD');
    },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
  try {
    repo.git('init', '-q');
    repo.write('src/a.ts', 'export const a = 1;\n');
    repo.write('bench/b.ts', 'export const b = 2;\n');
    repo.write('README.md', '# test\n');
    repo.commitAll('first');
  } catch (e) {
    repo.remove();
    throw e;
  }
  return repo;
}
