/**
 * Progress toward a known total, as status lines with an ETA: `progressCounter(update, label, total)`
 * returns `tick(done, detail)`, which sends `"<label> <done>/<total> <detail> eta <time>"` to `update`
 * and marks it a milestone (worth a line of its own where lines are not rewritten: CI, pipes) at every
 * tenth of the total, at the end, and when `everySeconds` passed since the last one. It writes nothing
 * itself: the sink decides (run/progress.ts's `Progress.update` rewrites one line on a terminal).
 */

/** A status line's sink: `milestone` marks a line worth printing where lines are not rewritten. */
export type ProgressUpdate = (text: string, milestone: boolean) => void;

export interface ProgressCounterOptions {
  /** A milestone at least this often, in seconds, between tenths (default 10). */
  everySeconds?: number;
  /** How a count is printed (default: as is), e.g. in millions. */
  unit?: (n: number) => string;
  /** When the work began, in ms of `now` (default: the counter's creation). */
  startedAt?: number;
  /** The clock in ms (tests). */
  now?: () => number;
}

/** Report `done` of the total, with `detail` after the count (e.g. "loss 1.234"). */
export type ProgressTick = (done: number, detail?: string) => void;

/**
 * The ETA is the mean time per unit since the first tick, times the units left; the first tick's own
 * rate counts from `startedAt` (default: the counter's creation).
 */
export function progressCounter(
  update: ProgressUpdate,
  label: string,
  total: number,
  options: ProgressCounterOptions = {},
): ProgressTick {
  const now = options.now ?? Date.now;
  const everyMs = (options.everySeconds ?? 10) * 1000;
  const unit = options.unit ?? String;
  const created = options.startedAt ?? now();
  let first: { at: number; done: number } | undefined;
  let lastTenth = 0;
  let lastMilestone = created;
  return (done, detail) => {
    const at = now();
    const perUnit = first && done > first.done ? (at - first.at) / (done - first.done) : (at - created) / done;
    first ??= { at, done };
    const eta = (perUnit * Math.max(0, total - done)) / 1000;
    const tenth = Math.floor((done * 10) / Math.max(1, total));
    const milestone = done >= total || tenth > lastTenth || at - lastMilestone >= everyMs;
    if (milestone) {
      lastTenth = Math.max(lastTenth, tenth);
      lastMilestone = at;
    }
    update(`${label} ${unit(done)}/${unit(total)}${detail ? ` ${detail}` : ''} eta ${formatSeconds(eta)}`, milestone);
  };
}

/** "42s", "3m07s"; "?" when not finite. */
export function formatSeconds(s: number): string {
  if (!Number.isFinite(s)) return '?';
  const whole = Math.max(0, Math.round(s));
  const m = Math.floor(whole / 60);
  return m ? `${m}m${String(whole % 60).padStart(2, '0')}s` : `${whole}s`;
}
