import type { Server as HttpServer } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import type { Socket } from 'node:net';

/** An open connection: its TCP socket and the requests in progress on it. */
interface Open {
  readonly socket: Socket;
  requests: number;
}

/**
 * Bounds the open connections of a server at `max`, making room for a new one by closing the
 * oldest idle connection: no request in progress, a TCP connection that never completed TLS
 * included. Only when every connection is busy is the new one closed. Unlike a refusing cap
 * (`server.maxConnections`), idle connections never keep the apiserver or a kubelet probe out: a
 * client that comes later always gets in (test/server/connections.test.ts).
 *
 * A request is seen on its TLS socket, the connection on its TCP socket: both report the same
 * peer, which is unique among a listener's open connections, so the peer is the key.
 */
export function limitConnections(server: HttpServer | HttpsServer, max: number): void {
  // Insertion order: the oldest first.
  const open = new Map<string, Open>();
  const closeOldestIdle = (): boolean => {
    for (const [key, connection] of open) {
      if (connection.requests > 0) continue;
      open.delete(key);
      connection.socket.destroy();
      return true;
    }
    return false;
  };
  server.on('connection', (socket: Socket) => {
    const key = peerOf(socket);
    // A peer gone before it was seen (reset at once) has no address: nothing to keep.
    if (key === undefined) return void socket.destroy();
    if (open.size >= max && !closeOldestIdle()) return void socket.destroy();
    const connection: Open = { socket, requests: 0 };
    open.set(key, connection);
    socket.once('close', () => open.get(key) === connection && open.delete(key));
  });
  server.on('request', (req, res) => {
    const key = peerOf(req.socket);
    const connection = key === undefined ? undefined : open.get(key);
    if (connection === undefined) return;
    connection.requests++;
    res.once('close', () => connection.requests--);
  });
}

function peerOf(socket: Socket): string | undefined {
  return socket.remoteAddress === undefined ? undefined : `${socket.remoteAddress}|${socket.remotePort}`;
}
