import type { ServerResponse } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import type { SecureContextOptions } from 'node:tls';
import Koa from 'koa';
import { DefaultReviewLimits, deny, mutate, validate, type ReviewLimits, type ReviewResult } from '../admission/handlers.js';
import { checkBody, decodeReview, encodeReview, parseJson, type AdmissionRequest, type DecodedReview } from '../admission/codec.js';
import { reviewFacts, type ReviewFacts } from '../admission/record.js';
import { InjectorError } from '../errors.js';
import { OptInScope, Reason } from '../inject/policy.js';
import { clip, type Logger } from '../log.js';
import type { TemplateSet } from '../templates/load.js';
import { AnswerCache, answerOf } from './answers.js';
import { checkContentType, readBody, TransitBudget } from './body.js';

type Handler = (req: AdmissionRequest, set: TemplateSet, limits?: ReviewLimits) => ReviewResult;

/** The review endpoints: pods that opted in themselves, and pods of namespaces that opted in (issue 12). */
export const Endpoints: Readonly<Record<string, Handler>> = Object.freeze({
  '/mutate': (req, set, limits) => mutate(req, set, OptInScope.Pod, limits),
  '/validate': (req, set, limits) => validate(req, set, OptInScope.Pod, limits),
  '/mutate/namespace': (req, set, limits) => mutate(req, set, OptInScope.Namespace, limits),
  '/validate/namespace': (req, set, limits) => validate(req, set, OptInScope.Namespace, limits),
});

export interface AdmissionAppDeps {
  readonly logger: Logger;
  /** The template set in force; read once per review so a review sees one consistent set. */
  readonly templates: () => TemplateSet;
  /** Called with every finished review, `cached` when its answer came from the answer cache (metrics hook). */
  readonly onReview?: (endpoint: string, facts: ReviewFacts, result: ReviewResult, seconds: number, cached: boolean) => void;
  /** Called with every review answered by an HTTP error instead (metrics hook). */
  readonly onError?: (endpoint: string, code: string) => void;
  /**
   * Reviews at once from the end of their body until their answer has been flushed to the socket;
   * one more is answered 429 (default 32). With the answer limit of a review, this bounds the
   * memory held for clients that do not read their answers.
   */
  readonly maxInflight?: number;
  /** Seconds from the end of the headers to the end of the body; a slower body is dropped with a 408 (default 2). */
  readonly bodyTimeout?: number;
  /** Bytes of bodies in transit, over every connection; a body that does not fit is refused with a 429 (default 32 MiB). */
  readonly transitBytes?: number;
  /** Seconds an answer may wait for its client to take it; then the connection is closed and its slot freed (default 10). */
  readonly answerTimeout?: number;
  /** Bytes each endpoint may keep of answers to reviews that repeat but for the uid (default 4 MiB; 0 keeps none). */
  readonly answerCacheBytes?: number;
  /** What one review may hold and answer (the --max-* flags); default: their defaults. */
  readonly limits?: ReviewLimits;
}

/** Default of `answerCacheBytes`: about 400 typical Deployment pods per endpoint. */
export const ANSWER_CACHE_BYTES = 4 * 1024 * 1024;

/** Default of `transitBytes`: ten of the apiserver's largest requests (3 MiB) at once. */
export const TRANSIT_BYTES = 32 * 1024 * 1024;

/** The Koa application: transport -> review codec -> handler -> response. */
export function createAdmissionApp(deps: AdmissionAppDeps): Koa {
  const app = new Koa();
  app.silent = true; // errors are answered and logged by the edge middleware below
  app.use(edgeErrors(deps.logger, deps.onError));
  const caches = new Map(Object.keys(Endpoints).map((path) => [path, new AnswerCache(deps.answerCacheBytes ?? ANSWER_CACHE_BYTES)]));
  const transit = new TransitBudget(deps.transitBytes ?? TRANSIT_BYTES);
  const bodyTimeoutMs = (deps.bodyTimeout ?? 2) * 1000;
  const slots = new ReviewSlots(deps.maxInflight ?? 32, (deps.answerTimeout ?? 10) * 1000);
  app.use(async (ctx) => {
    const handler = handlerFor(ctx);
    const started = process.hrtime.bigint();
    checkContentType(ctx.get('Content-Type') || undefined);
    // A slot is taken only once the whole body is here: a slow client holds the bytes it sent of
    // the transit budget, never a slot (32 stalled bodies once kept every review out; issue 11).
    const body = await readBody(ctx.req, { timeoutMs: bodyTimeoutMs, transit });
    slots.hold(ctx.res);
    answerReview(ctx, handler, caches.get(ctx.path)!, body, started);
  });
  return app;

  function answerReview(ctx: Koa.Context, handler: Handler, cache: AnswerCache, body: string, started: bigint): void {
    const { answer, cached } = answerBody(body, ctx.state as ReviewState, ctx.path, handler, cache);
    ctx.set('Content-Type', 'application/json');
    ctx.body = answer.text;
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    deps.onReview?.(ctx.path, answer.facts, answer.result, seconds, cached);
    deps.logger.info(reviewLog(ctx.path, answer.facts, answer.result, seconds, cached), 'review');
  }

  /**
   * The answer to a body: from the answer cache when it holds a confirmed one (nothing parsed),
   * else parsed and computed, and offered to the cache. Leaves the review (or its uid) in `state`
   * so that any error answer carries the uid.
   */
  function answerBody(body: string, state: ReviewState, endpoint: string, handler: Handler, cache: AnswerCache): { answer: Answer; cached: boolean } {
    const { set, get: templates } = templatesOnce(deps.templates);
    const lookup = set === undefined ? undefined : cache.lookup(body, set);
    if (lookup?.entry?.confirmed) {
      state.review = { apiVersion: lookup.slot.version, request: { uid: lookup.slot.uid } };
      return { answer: answerOf(lookup.entry, lookup.slot), cached: true };
    }
    checkBody(body, (deps.limits ?? DefaultReviewLimits).body);
    const review = decodeReview(parseJson(body));
    state.review = review;
    if (lookup?.entry !== undefined && cache.confirm(lookup.entry, lookup.slot, review)) {
      return { answer: answerOf(lookup.entry, lookup.slot), cached: true };
    }
    // One set for the whole review, so the answer kept is the one computed under that set.
    const result = runHandler((req, set) => handler(req, set, deps.limits), review.request, templates, deps.logger, endpoint);
    const answer = { result, facts: reviewFacts(review.request), text: encodeReview(review.apiVersion, result.response) };
    if (lookup !== undefined) cache.put(lookup, review, result, answer.facts, answer.text);
    return { answer, cached: false };
  }
}

/** The handler for the request's path and method, or the 404 / 405 that refuses it. */
function handlerFor(ctx: Koa.Context): Handler {
  const handler = Object.hasOwn(Endpoints, ctx.path) ? Endpoints[ctx.path] : undefined;
  if (handler === undefined) throw new InjectorError('NOT_FOUND', [clip(ctx.path)]);
  if (ctx.method !== 'POST') {
    ctx.set('Allow', 'POST');
    throw new InjectorError('METHOD_NOT_ALLOWED', [ctx.method, ctx.path, 'POST']);
  }
  return handler;
}

/**
 * Review slots. A slot is held from the end of a review's body until its answer has been flushed
 * to the socket or the connection is gone, so clients that never read hold at most `max` answers
 * (each bounded by the patch limit), never an unbounded heap of them. An answer not taken within
 * `answerTimeoutMs` closes its connection, so such clients cannot hold the slots for long either.
 * A review that finds every slot taken is answered 429: client-go retries it after Retry-After,
 * well inside the apiserver's timeout, where a queued review could outlive it.
 */
export class ReviewSlots {
  readonly #max: number;
  readonly #answerTimeoutMs: number;
  #held = 0;

  constructor(max: number, answerTimeoutMs: number) {
    this.#max = max;
    this.#answerTimeoutMs = answerTimeoutMs;
  }

  /** Takes a slot until `res` is flushed or closed; throws OVERLOADED when none is free. */
  hold(res: ServerResponse): void {
    if (this.#held >= this.#max) throw new InjectorError('OVERLOADED');
    this.#held++;
    const timer = setTimeout(() => res.destroy(), this.#answerTimeoutMs);
    timer.unref();
    let released = false;
    const release = (): void => {
      if (released) return;
      released = true;
      clearTimeout(timer);
      this.#held--;
    };
    res.once('finish', release).once('close', release);
  }
}

/** A review's answer with what the log line and the metrics say about it. */
interface Answer {
  readonly result: ReviewResult;
  readonly facts: ReviewFacts;
  readonly text: string;
}

/** What the review middleware leaves for the edge: the decoded review, once there is one. */
interface ReviewState {
  review?: DecodedReview;
}

/**
 * Reads the template set once for the whole review. A failure is raised when the handler asks for
 * the set, once the review is decoded, so its 500 carries the uid.
 */
function templatesOnce(templates: () => TemplateSet): { readonly set?: TemplateSet; readonly get: () => TemplateSet } {
  try {
    const set = templates();
    return { set, get: () => set };
  } catch (err) {
    return {
      get: () => {
        throw err;
      },
    };
  }
}

function runHandler(handler: Handler, request: AdmissionRequest, templates: () => TemplateSet, logger: Logger, endpoint: string): ReviewResult {
  try {
    return handler(request, templates());
  } catch (err) {
    // A review the handler cannot act on (no pod, a pod of the wrong shape) is refused, not failed.
    if (err instanceof InjectorError && err.status < 500) return deny(request, err, Reason.InvalidReview);
    if (err instanceof InjectorError) throw err;
    // An internal fault answers HTTP 500 so the webhook's failurePolicy decides, never a half-made patch.
    logger.error({ err, uid: clip(request.uid), endpoint }, 'review failed');
    throw new InjectorError('INTERNAL', [(err as Error).message], { cause: err });
  }
}

/**
 * The one place that turns errors into HTTP answers: a JSON body with a stable code, or, once the
 * review is decoded, an AdmissionReview that echoes its uid (the apiserver applies failurePolicy
 * to any non-2xx answer; the uid lets a reader match the answer to the review).
 */
function edgeErrors(logger: Logger, onError?: AdmissionAppDeps['onError']): Koa.Middleware {
  return async (ctx, next) => {
    try {
      await next();
    } catch (err) {
      const known = err instanceof InjectorError;
      const status = known ? err.status : 500;
      const code = known ? err.code : 'INTERNAL';
      const message = known ? err.message : 'internal error';
      if (!known) logger.error({ err, path: clip(ctx.path) }, 'unhandled error');
      else logger.warn({ path: clip(ctx.path), method: clip(ctx.method), status, code, detail: clip(message) }, 'bad request');
      onError?.(ctx.path, code);
      // A body left half-read (the client gone, too slow, over the transit budget) goes with its
      // connection. A body over the size limit is discarded by the reader instead: closing at once
      // would reset the connection while the client still writes, losing the 413 (soak).
      if (code === 'BODY_ABORTED' || code === 'BODY_TIMEOUT' || (code === 'OVERLOADED' && !ctx.req.complete)) ctx.set('Connection', 'close');
      if (code === 'OVERLOADED') ctx.set('Retry-After', String(RETRY_AFTER_SECONDS));
      ctx.status = status;
      ctx.type = 'application/json';
      const review = (ctx.state as ReviewState).review;
      ctx.body = review
        ? encodeReview(review.apiVersion, { uid: review.request.uid, allowed: false, status: { code: status, message, reason: code === 'INTERNAL' ? 'InternalError' : code } })
        : JSON.stringify({ error: code, message, status });
    }
  };
}

/** The review's log line; the values taken from the request are clipped, so no client makes it long. */
function reviewLog(endpoint: string, facts: ReviewFacts, r: ReviewResult, seconds: number, cached: boolean): Record<string, unknown> {
  return {
    endpoint,
    uid: clip(facts.uid),
    operation: clip(facts.operation),
    namespace: clip(facts.namespace),
    pod: clip(facts.pod),
    decision: r.decision,
    reason: r.reason,
    templates: r.templates,
    patchOps: r.patchOps,
    cached,
    durationMs: Math.round(seconds * 1e6) / 1e3,
  };
}

/** Seconds a client is told to wait after a 429; client-go honours it (rest/with_retry.go). */
export const RETRY_AFTER_SECONDS = 1;

/**
 * The HTTP edge, chosen for one client, the kube-apiserver: it sends small headers, a body of at
 * most ~3 MiB at once, gives up after timeoutSeconds (10 s by default), and keeps idle connections
 * for 90 s (Go's IdleConnTimeout).
 */
export const EdgeLimits = {
  /** The TLS handshake and the request headers; the apiserver sends both in milliseconds. */
  handshakeSeconds: 5,
  headersSeconds: 5,
  /** Longer than the apiserver's 90 s idle timeout, so the client, not the server, closes an idle
   * connection: client-go does not retry a POST on a connection the server closed. */
  keepAliveSeconds: 120,
  /** Bounded so that long-lived apiserver connections rebalance across replicas after a scale-out. */
  maxRequestsPerSocket: 1000,
  /** The apiserver sends a few hundred bytes of headers (a bearer token fits well). */
  maxHeaderSize: 8 * 1024,
  maxHeadersCount: 64,
  /** A socket with no traffic for this long while a request is open (a reader that never reads). */
  idleSocketSeconds: 30,
  /** How often Node checks the header and request timeouts (its default, 30 s, makes them late). */
  checkIntervalMs: 1000,
} as const;

export interface AdmissionServerOptions {
  /** Seconds a client may take to send a whole request (`--request-timeout`). */
  readonly requestTimeout?: number;
  /** Open connections (`--max-connections`); one more is closed at once. */
  readonly maxConnections?: number;
}

/** The serving certificate and, for mutual TLS, the CA that client certificates must chain to. */
export interface AdmissionTls {
  readonly certPem: string;
  readonly keyPem: string;
  readonly clientCaPem?: string;
}

/** TLS settings: TLS 1.2 at least, forward-secret AEAD suites only (Mozilla "intermediate"). */
export const TLS_OPTIONS: SecureContextOptions = {
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

/**
 * Everything that goes into the TLS context, in one place: the certificate swap (rotation) builds
 * the new context with this too, `server.setSecureContext(secureContextOptions(tls))`, so a
 * rotated certificate keeps the protocol floor, the ciphers and the client CA.
 */
export function secureContextOptions(tls: AdmissionTls): SecureContextOptions {
  return { ...TLS_OPTIONS, cert: tls.certPem, key: tls.keyPem, ...(tls.clientCaPem !== undefined && { ca: tls.clientCaPem }) };
}

/** The HTTPS server for the Koa app, with the limits of EdgeLimits and `opts`. */
export function createAdmissionServer(app: Koa, tls: AdmissionTls, opts: AdmissionServerOptions = {}): HttpsServer {
  const requestSeconds = opts.requestTimeout ?? 10;
  const mutualTls = tls.clientCaPem !== undefined;
  const server = createHttpsServer(
    {
      ...secureContextOptions(tls),
      // With a client CA only clients holding a certificate from it complete the handshake.
      requestCert: mutualTls,
      rejectUnauthorized: mutualTls,
      handshakeTimeout: Math.min(EdgeLimits.handshakeSeconds, requestSeconds) * 1000,
      requestTimeout: requestSeconds * 1000,
      headersTimeout: Math.min(EdgeLimits.headersSeconds, requestSeconds) * 1000,
      keepAliveTimeout: EdgeLimits.keepAliveSeconds * 1000,
      connectionsCheckingInterval: EdgeLimits.checkIntervalMs,
      maxHeaderSize: EdgeLimits.maxHeaderSize,
      insecureHTTPParser: false,
      requireHostHeader: true,
    },
    app.callback(),
  );
  server.maxRequestsPerSocket = EdgeLimits.maxRequestsPerSocket;
  server.maxHeadersCount = EdgeLimits.maxHeadersCount;
  server.maxConnections = opts.maxConnections ?? 1024;
  server.setTimeout(EdgeLimits.idleSocketSeconds * 1000);
  return server;
}
