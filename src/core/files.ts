/** Crash-safe file writes: a reader sees the old file or the new one, never a half-written one. */
import { renameSync, writeFileSync } from 'node:fs';

/** Write `text` to `file.tmp`, then rename it over `file` (atomic on one filesystem). */
export function writeFileAtomic(file: string, text: string): void {
  writeFileSync(`${file}.tmp`, text);
  renameSync(`${file}.tmp`, file);
}
