/**
 * server-everything (the pinned third-party MCP reference server, stdio transport) that exits on its
 * own with code 7 ARBOR_EXIT_AFTER_MS milliseconds (default 800) after it was asked for its tool list:
 * a server that keeps dying once started, for the tests of the restart bound (counting from the list
 * request, not from the process start, so a slow start on a loaded machine still completes).
 * Extra arguments are ignored (tests pass a marker to find it by).
 */
const ms = Number(process.env.ARBOR_EXIT_AFTER_MS ?? 800);
const armExit = (chunk) => {
  if (!String(chunk).includes('"tools/list"')) return;
  process.stdin.off('data', armExit);
  setTimeout(() => process.exit(7), ms);
};
await import('@modelcontextprotocol/server-everything/dist/transports/stdio.js');
// after the server's transport: a listener attached first would start the stream before the transport reads it
process.stdin.on('data', armExit);
