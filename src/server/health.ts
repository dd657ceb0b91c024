import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import Koa from 'koa';
import { limitConnections } from './connections.js';
import { encodeStatusAnswer, type StatusAnswer } from './status-answer.js';

/** A handler for an extra path on the health port (such as /metrics). */
export type HealthRoute = (req: IncomingMessage, res: ServerResponse) => void | Promise<void>;

export interface HealthOptions {
  /** Ready once templates and the certificate are loaded, and until shutdown begins. */
  readonly isReady: () => boolean;
  readonly routes?: ReadonlyMap<string, HealthRoute>;
  /** Seconds a client may take to send a whole request (`--request-timeout`, as on the review port). */
  readonly requestTimeout?: number;
}

/**
 * The edge limits of the health port, for its few clients: the kubelet's probes (a new connection
 * and one request each, answered within the probe's 1 s timeout by default) and a Prometheus
 * scraper or two (a request every 15-60 s). No client holds the port with headers that never end
 * (Node's default headers timeout is 60 s) or with idle keep-alive connections, so the probes are
 * answered while every slot is taken (test/server/connections.test.ts, test/server/hostile.test.ts).
 */
export const HealthLimits = {
  /** A probe sends its headers at once. */
  headersSeconds: 2,
  /** Connections at once; one more closes the oldest idle one (connections.ts). */
  maxConnections: 64,
  /** No client here reuses a connection within seconds: a scraper's next request comes 15 s or more later. */
  keepAliveSeconds: 2,
  maxHeaderSize: 8 * 1024,
  maxHeadersCount: 64,
  idleSocketSeconds: 30,
  checkIntervalMs: 1000,
} as const;

/**
 * The plain-HTTP probe server, a small Koa app: /healthz answers while the process serves, /readyz
 * only when it can answer reviews, and the extra routes (/metrics) write their own answers. Kept
 * apart from the TLS port so probes never depend on the certificate.
 */
export function createHealthServer(opts: HealthOptions): Server {
  const requestSeconds = opts.requestTimeout ?? 10;
  const server = createServer(
    {
      requestTimeout: requestSeconds * 1000,
      headersTimeout: Math.min(HealthLimits.headersSeconds, requestSeconds) * 1000,
      keepAliveTimeout: HealthLimits.keepAliveSeconds * 1000,
      connectionsCheckingInterval: HealthLimits.checkIntervalMs,
      maxHeaderSize: HealthLimits.maxHeaderSize,
      insecureHTTPParser: false,
    },
    healthApp(opts),
  );
  server.maxHeadersCount = HealthLimits.maxHeadersCount;
  limitConnections(server, HealthLimits.maxConnections);
  server.setTimeout(HealthLimits.idleSocketSeconds * 1000);
  return server;
}

function healthApp(opts: HealthOptions): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  const app = new Koa();
  // Past the error edge: a connection gone under its request, nothing to answer.
  app.on('error', () => {});
  app.use(async (ctx, next) => {
    try {
      await next();
    } catch (err) {
      // A route that failed after it began its answer can only drop the connection.
      if (ctx.headerSent) return void ctx.res.destroy();
      ctx.respond = true;
      sendError(ctx, { status: 500, code: 'INTERNAL', message: err instanceof Error ? err.message : String(err) });
    }
  });
  app.use(async (ctx) => {
    if (ctx.method !== 'GET' && ctx.method !== 'HEAD') {
      ctx.set('Allow', 'GET, HEAD');
      return sendError(ctx, { status: 405, code: 'METHOD_NOT_ALLOWED', message: 'use GET' });
    }
    if (ctx.path === '/healthz' || ctx.path === '/livez') return send(ctx, 200, JSON.stringify({ status: 'ok' }));
    if (ctx.path === '/readyz')
      return opts.isReady() ? send(ctx, 200, JSON.stringify({ status: 'ready' })) : send(ctx, 503, JSON.stringify({ status: 'not ready' }));
    const handler = opts.routes?.get(ctx.path);
    if (handler === undefined)
      return sendError(ctx, { status: 404, code: 'NOT_FOUND', message: 'no such path; the health port serves /healthz, /readyz and /metrics' });
    // The route writes its own answer (prom-client's text).
    ctx.respond = false;
    await handler(ctx.req, ctx.res);
  });
  return app.callback();
}

/** An error answer, in the review port's shape (a metav1.Status with our code as its cause). */
function sendError(ctx: Koa.Context, answer: StatusAnswer): void {
  send(ctx, answer.status, encodeStatusAnswer(answer));
}

function send(ctx: Koa.Context, status: number, text: string): void {
  ctx.status = status;
  ctx.set('Content-Type', 'application/json');
  ctx.body = text;
}
