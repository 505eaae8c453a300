/**
 * Progress display on stderr: one rewritten line on a TTY, plain lines otherwise (CI, pipes), where a
 * status update is printed only when its caller marks it a milestone. `counter(label, total)` reports a
 * count toward a total with its ETA, a milestone every tenth and every 10 s (core/progress-count.ts); the
 * warm-start SFT, evaluations, hf-init, export and the benches use it. Shows stage, step/total, reward,
 * accuracy, tokens decoded, prefix tokens reused, stage times, ETA.
 */
import {
  formatSeconds,
  progressCounter,
  type ProgressCounterOptions,
  type ProgressTick,
} from '../core/progress-count.js';

export { formatSeconds };

export class Progress {
  private readonly tty: boolean;
  private lastLen = 0;
  private readonly started = Date.now();

  constructor(
    readonly quiet = false,
    stream: NodeJS.WriteStream = process.stderr,
  ) {
    this.stream = stream;
    this.tty = !!stream.isTTY && !process.env.CI;
  }

  private readonly stream: NodeJS.WriteStream;

  /**
   * A transient status line: overwritten on a TTY; elsewhere nothing, unless `milestone` (then a plain
   * line, so a long stage is not silent in CI or a pipe).
   */
  update(text: string, milestone = false): void {
    if (this.quiet) return;
    if (this.tty) {
      const pad = Math.max(0, this.lastLen - text.length);
      this.stream.write(`\r${text}${' '.repeat(pad)}`);
      this.lastLen = text.length;
    } else if (milestone) {
      this.stream.write(text + '\n');
    }
  }

  /** `tick(done, detail)`: "<label> <done>/<total> <detail> eta <time>", a line off a terminal every tenth. */
  counter(label: string, total: number, options?: ProgressCounterOptions): ProgressTick {
    return progressCounter((text, milestone) => this.update(text, milestone), label, total, options);
  }

  /** A permanent line. */
  line(text: string): void {
    if (this.quiet) return;
    this.clear();
    this.stream.write(text + '\n');
  }

  /** Erase the status line on a TTY (before other output, e.g. on stdout). */
  clear(): void {
    if (this.tty && this.lastLen) {
      this.stream.write(`\r${' '.repeat(this.lastLen)}\r`);
      this.lastLen = 0;
    }
  }

  /** Seconds since start. */
  elapsed(): number {
    return (Date.now() - this.started) / 1000;
  }

  /** "step 3/40 [####....]" with an ETA from the mean step time. */
  stepPrefix(step: number, total: number, secondsPerStep: number): string {
    const width = 20;
    const done = Math.round((step / Math.max(1, total)) * width);
    const eta = secondsPerStep * (total - step);
    return `step ${step}/${total} [${'#'.repeat(done)}${'.'.repeat(width - done)}] eta ${formatSeconds(eta)}`;
  }
}
