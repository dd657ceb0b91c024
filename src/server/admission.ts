import { createServer as createHttpsServer, type Server as HttpsServer, type ServerOptions } from 'node:https';
import Koa from 'koa';
import { mutate, validate, type ReviewResult } from '../admission/handlers.js';
import { decodeReview, encodeReview, type AdmissionRequest } from '../admission/review.js';
import { InjectorError } from '../errors.js';
import type { Pod } from '../kube/types.js';
import type { Logger } from '../log.js';
import type { TemplateSet } from '../templates/load.js';
import { checkContentType, readJsonBody } from './body.js';

type Handler = (req: AdmissionRequest, set: TemplateSet) => ReviewResult;

/** The two review endpoints. */
export const Endpoints: Readonly<Record<string, Handler>> = Object.freeze({ '/mutate': mutate, '/validate': validate });

export interface AdmissionAppDeps {
  readonly logger: Logger;
  /** The template set in force; read once per review so a review sees one consistent set. */
  readonly templates: () => TemplateSet;
  /** Called with every finished review (metrics hook). */
  readonly onReview?: (endpoint: string, request: AdmissionRequest, result: ReviewResult, seconds: number) => void;
  /** Called with every review answered by an HTTP error instead (metrics hook). */
  readonly onError?: (endpoint: string, code: string) => void;
}

/** The Koa application: transport -> review codec -> handler -> response. */
export function createAdmissionApp(deps: AdmissionAppDeps): Koa {
  const app = new Koa();
  app.silent = true; // errors are answered and logged by the edge middleware below
  app.use(edgeErrors(deps.logger, deps.onError));
  app.use(async (ctx) => {
    const handler = Endpoints[ctx.path];
    if (handler === undefined) throw new InjectorError('NOT_FOUND', [ctx.path]);
    if (ctx.method !== 'POST') {
      ctx.set('Allow', 'POST');
      throw new InjectorError('METHOD_NOT_ALLOWED', [ctx.method, ctx.path, 'POST']);
    }
    const started = process.hrtime.bigint();
    checkContentType(ctx.get('Content-Type') || undefined);
    const review = decodeReview(await readJsonBody(ctx.req));
    const result = runHandler(handler, review.request, deps, ctx.path);
    ctx.type = 'application/json';
    ctx.body = encodeReview(review.apiVersion, result.response);
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    deps.onReview?.(ctx.path, review.request, result, seconds);
    deps.logger.info(reviewLog(ctx.path, review.request, result, seconds), 'review');
  });
  return app;
}

function runHandler(handler: Handler, request: AdmissionRequest, deps: AdmissionAppDeps, endpoint: string): ReviewResult {
  try {
    return handler(request, deps.templates());
  } catch (err) {
    if (err instanceof InjectorError) throw err;
    // An internal fault answers HTTP 500 so the webhook's failurePolicy decides, never a half-made patch.
    deps.logger.error({ err, uid: request.uid, endpoint }, 'review failed');
    throw new InjectorError('INTERNAL', [(err as Error).message], { cause: err });
  }
}

/** The one place that turns errors into HTTP answers: a JSON body with a stable code. */
function edgeErrors(logger: Logger, onError?: AdmissionAppDeps['onError']): Koa.Middleware {
  return async (ctx, next) => {
    try {
      await next();
    } catch (err) {
      const known = err instanceof InjectorError;
      const status = known ? err.status : 500;
      const code = known ? err.code : 'INTERNAL';
      const message = known ? err.message : 'internal error';
      if (!known) logger.error({ err, path: ctx.path }, 'unhandled error');
      else logger.warn({ path: ctx.path, method: ctx.method, status, code, detail: message }, 'bad request');
      onError?.(ctx.path, code);
      if (status === 413 || code === 'BODY_ABORTED') ctx.set('Connection', 'close');
      ctx.status = status;
      ctx.type = 'application/json';
      ctx.body = JSON.stringify({ error: code, message, status });
    }
  };
}

function reviewLog(endpoint: string, req: AdmissionRequest, r: ReviewResult, seconds: number): Record<string, unknown> {
  const meta = (req.object as Pod | undefined)?.metadata;
  return {
    endpoint,
    uid: req.uid,
    operation: req.operation,
    namespace: req.namespace ?? meta?.namespace,
    pod: meta?.name || meta?.generateName || req.name,
    decision: r.decision,
    reason: r.reason,
    templates: r.templates,
    patchOps: r.patchOps,
    durationMs: Math.round(seconds * 1e6) / 1e3,
  };
}

/** TLS settings: TLS 1.2 at least, forward-secret AEAD suites only (Mozilla "intermediate"). */
export const TLS_OPTIONS: ServerOptions = {
  minVersion: 'TLSv1.2',
  ciphers: [
    'TLS_AES_128_GCM_SHA256',
    'TLS_AES_256_GCM_SHA384',
    'TLS_CHACHA20_POLY1305_SHA256',
    'ECDHE-ECDSA-AES128-GCM-SHA256',
    'ECDHE-RSA-AES128-GCM-SHA256',
    'ECDHE-ECDSA-AES256-GCM-SHA384',
    'ECDHE-RSA-AES256-GCM-SHA384',
    'ECDHE-ECDSA-CHACHA20-POLY1305',
    'ECDHE-RSA-CHACHA20-POLY1305',
  ].join(':'),
  honorCipherOrder: true,
};

/** The HTTPS server for the Koa app, with timeouts chosen for an apiserver client. */
export function createAdmissionServer(app: Koa, tls: { readonly certPem: string; readonly keyPem: string }): HttpsServer {
  const server = createHttpsServer({ ...TLS_OPTIONS, cert: tls.certPem, key: tls.keyPem }, app.callback());
  // The apiserver keeps idle connections for 90 s (Go's IdleConnTimeout) and does not retry a POST
  // on a connection the server closed, so the server must outlast it.
  server.keepAliveTimeout = 120_000;
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;
  return server;
}
