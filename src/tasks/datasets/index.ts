/** Dataset readers (JSONL, Parquet) and dataset-backed tasks (generic `dataset`, `gsm8k`, `math500`). */
export * from './read.js';
export * from './task.js';
