import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';

/** A handler for an extra path on the health port (such as /metrics). */
export type HealthRoute = (req: IncomingMessage, res: ServerResponse) => void | Promise<void>;

export interface HealthOptions {
  /** Ready once templates and the certificate are loaded, and until shutdown begins. */
  readonly isReady: () => boolean;
  readonly routes?: ReadonlyMap<string, HealthRoute>;
}

/**
 * The plain-HTTP probe server: /healthz answers while the process serves, /readyz only when it can
 * answer reviews. Kept apart from the TLS port so probes never depend on the certificate.
 */
export function createHealthServer(opts: HealthOptions): Server {
  return createServer((req, res) => {
    const path = (req.url ?? '/').split('?', 1)[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') return send(res, 405, { error: 'METHOD_NOT_ALLOWED', message: 'use GET' });
    if (path === '/healthz' || path === '/livez') return send(res, 200, { status: 'ok' });
    if (path === '/readyz') return opts.isReady() ? send(res, 200, { status: 'ready' }) : send(res, 503, { status: 'not ready' });
    const route = path === undefined ? undefined : opts.routes?.get(path);
    if (route) {
      Promise.resolve(route(req, res)).catch((err: unknown) => send(res, 500, { error: 'INTERNAL', message: (err as Error).message }));
      return;
    }
    send(res, 404, { error: 'NOT_FOUND', message: `no such path ${path ?? ''}` });
  });
}

function send(res: ServerResponse, status: number, body: object): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}
