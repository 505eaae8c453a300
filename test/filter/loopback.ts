/** A TCP listener on 127.0.0.1 that counts connections: the target of "no network" tests. */
import assert from 'node:assert/strict';
import { createServer, type AddressInfo } from 'node:net';

export interface LoopbackListener {
  port: number;
  /** Fails the calling test if any connection reached the listener. */
  assertNoConnections(context: string): void;
  close(): void;
}

export async function loopbackListener(): Promise<LoopbackListener> {
  let connections = 0;
  const server = createServer((s) => {
    connections++;
    s.destroy();
  });
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', res));
  return {
    port: (server.address() as AddressInfo).port,
    assertNoConnections: (context) =>
      assert.equal(connections, 0, `${context}: ${connections} connection(s) reached the loopback listener`),
    close: () => void server.close(),
  };
}
