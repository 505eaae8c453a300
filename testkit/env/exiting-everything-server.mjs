/**
 * server-everything (the pinned third-party MCP reference server, stdio transport) that exits on its
 * own with code 7 after ARBOR_EXIT_AFTER_MS milliseconds (default 800): a server that keeps dying, for
 * the tests of the restart bound. Extra arguments are ignored (tests pass a marker to find it by).
 */
import { setTimeout as delay } from 'node:timers/promises';

const ms = Number(process.env.ARBOR_EXIT_AFTER_MS ?? 800);
void delay(ms).then(() => process.exit(7));
await import('@modelcontextprotocol/server-everything/dist/transports/stdio.js');
