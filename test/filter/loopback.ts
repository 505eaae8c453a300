/** A TCP listener on 127.0.0.1 that counts connections: the target of "no network" tests. */
import { createServer, type AddressInfo } from 'node:net';

export interface LoopbackListener {
  port: number;
  connections(): number;
  close(): void;
}

export async function loopbackListener(): Promise<LoopbackListener> {
  let connections = 0;
  const server = createServer((s) => {
    connections++;
    s.destroy();
  });
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', res));
  return { port: (server.address() as AddressInfo).port, connections: () => connections, close: () => void server.close() };
}
