import type { IncomingMessage, ServerResponse } from 'node:http';
import Koa from 'koa';
import { apiserverEnvelope, type BodyLimits } from '../admission/codec.js';
import { ReviewFault, ReviewPipeline, type ReviewHandler } from '../admission/pipeline.js';
import { errorRecord, type ReviewObserver, type ReviewRecord } from '../admission/record.js';
import { asInjectorError, InjectorError } from '../errors.js';
import { clip } from '../log.js';
import { checkContentType, readBody, TransitBudget } from './body.js';
import { ReviewSlots } from './review-slots.js';
import { encodeStatusAnswer } from './status-answer.js';

export interface AdmissionAppDeps {
  /**
   * The handler of each review path (the endpoint table) and the generation their verdicts belong
   * to: `createHandlers` in admission/handlers.ts. The server knows nothing of templates.
   */
  readonly handlers: { readonly byPath: ReadonlyMap<string, ReviewHandler>; readonly generation: (namespace: string) => unknown };
  /** Called with the one record of every request, answered or refused (the log line, the metrics). */
  readonly observers?: readonly ReviewObserver[];
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
  /** What a body may hold before it is parsed (--max-object-keys, --max-json-keys, --max-json-nodes); default: their defaults. */
  readonly bodyLimits?: BodyLimits;
  /** Records of denials an owner can fix carry the pod's controller, for its Event (--owner-events). */
  readonly ownerEvents?: boolean;
  /**
   * True while the server drains (a graceful stop): every answer then says `Connection: close`,
   * so the apiserver drops its pooled connections to this replica one by one instead of finding
   * them closed under a POST.
   */
  readonly draining?: () => boolean;
}

/** Default of `answerCacheBytes`: about 400 typical Deployment pods per endpoint. */
export const ANSWER_CACHE_BYTES = 4 * 1024 * 1024;

/** Default of `transitBytes`: ten of the apiserver's largest requests (3 MiB) at once. */
const TRANSIT_BYTES = 32 * 1024 * 1024;

/** What the review port runs for every request: the Koa app's callback, for node:https. */
export type AdmissionApp = (req: IncomingMessage, res: ServerResponse) => Promise<void>;

/** What the middleware of one request hand on to the next, in the order they run. */
interface ReviewState {
  /** From the error edge: when the request began. */
  started: number;
  /** From routing: the pipeline of the path. */
  pipeline?: ReviewPipeline;
  /** From the body reader: the body's bytes, whole. */
  body?: Buffer;
  /** From the review: the record of the answered review. */
  record?: ReviewRecord;
}

type Middleware = Koa.Middleware<ReviewState>;

/**
 * The review port's Koa app, transport only: the error edge, routing to one review pipeline per
 * path of the endpoint table, the content type, the body (size, time and transit limits), the
 * review slots, then the pipeline, which knows nothing of HTTP. Every request ends in one record,
 * handed to each observer.
 */
export function createAdmissionApp(deps: AdmissionAppDeps): AdmissionApp {
  const pipelines = new Map<string, ReviewPipeline>();
  for (const [path, handle] of deps.handlers.byPath) {
    const options = {
      endpoint: path,
      handle,
      generation: deps.handlers.generation,
      answerCacheBytes: deps.answerCacheBytes ?? ANSWER_CACHE_BYTES,
      ownerEvents: deps.ownerEvents ?? false,
    };
    pipelines.set(path, new ReviewPipeline(deps.bodyLimits === undefined ? options : { ...options, bodyLimits: deps.bodyLimits }));
  }
  const app = new Koa<ReviewState>();
  // What reaches Koa past the error edge: a connection that failed under its answer (the client
  // went away; nothing is left to answer), or a failure of the edge itself, a bug of ours.
  app.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === undefined || !CLIENT_GONE.has(err.code)) process.emitWarning(err, 'ReviewAnswerFailed');
  });
  app.use(errorEdge(deps.observers ?? [], deps.draining ?? (() => false)));
  app.use(route(pipelines));
  app.use(contentType);
  app.use(body(new TransitBudget(deps.transitBytes ?? TRANSIT_BYTES), (deps.bodyTimeout ?? 2) * 1000));
  // After the body: a slow client holds the bytes it sent of the transit budget, never a slot, so
  // stalled bodies never keep reviews out (test/server/hostile.test.ts).
  app.use(slot(new ReviewSlots(deps.maxInflight ?? 32, (deps.answerTimeout ?? 10) * 1000)));
  app.use(review);
  return app.callback();
}

/** Errors of a connection whose client has gone. */
const CLIENT_GONE: ReadonlySet<string> = new Set(['ECONNRESET', 'EPIPE', 'ECONNABORTED', 'ERR_STREAM_PREMATURE_CLOSE']);

/**
 * The one place that turns errors into HTTP answers, and hands every request's record to the
 * observers once the rest of the chain is done.
 */
function errorEdge(observers: readonly ReviewObserver[], draining: () => boolean): Middleware {
  const observe = (record: ReviewRecord): void => {
    // Every failure of a review is answered before this; what is left is an observer's bug,
    // reported without taking the process down.
    try {
      for (const observer of observers) observer(record);
    } catch (err) {
      process.emitWarning(err instanceof Error ? err : new Error(String(err)), 'ReviewObserverFailed');
    }
  };
  return async (ctx, next) => {
    ctx.state.started = performance.now();
    if (draining()) ctx.set('Connection', 'close');
    let record: ReviewRecord;
    try {
      await next();
      record = ctx.state.record!;
    } catch (err) {
      record = answerError(ctx, err);
    }
    observe(record);
  };
}

/** The pipeline for the request's path (the query ignored: the apiserver calls `/mutate?timeout=10s`), or 404 / 405. */
function route(pipelines: ReadonlyMap<string, ReviewPipeline>): Middleware {
  return async (ctx, next) => {
    const pipeline = pipelines.get(ctx.path);
    if (pipeline === undefined) throw new InjectorError('NOT_FOUND', [clip(ctx.path)]);
    if (ctx.method !== 'POST') {
      ctx.set('Allow', 'POST');
      throw new InjectorError('METHOD_NOT_ALLOWED', [clip(ctx.method), ctx.path, 'POST']);
    }
    ctx.state.pipeline = pipeline;
    await next();
  };
}

/** 415 for anything but JSON. */
const contentType: Middleware = async (ctx, next) => {
  checkContentType(ctx.req.headers['content-type']);
  await next();
};

/** The body, whole, within --body-timeout and --bodies-in-transit-mb (body.ts). */
function body(transit: TransitBudget, timeoutMs: number): Middleware {
  return async (ctx, next) => {
    ctx.state.body = await readBody(ctx.req, { timeoutMs, transit });
    await next();
  };
}

/** A review slot (--max-inflight) from here until the answer is flushed; 429 when none is free. */
function slot(slots: ReviewSlots): Middleware {
  return async (ctx, next) => {
    slots.hold(ctx.res);
    await next();
  };
}

/** The review itself: the pipeline, synchronous from the body's bytes to the answer's text. */
const review: Middleware = (ctx) => {
  const reviewed = ctx.state.pipeline!.review(ctx.state.body!, ctx.state.started);
  send(ctx, 200, reviewed.text);
  ctx.state.record = reviewed.record;
};

/** A JSON answer; Koa sends it whole with its Content-Length. */
function send(ctx: Koa.ParameterizedContext<ReviewState>, status: number, text: string): void {
  ctx.status = status;
  ctx.set('Content-Type', 'application/json');
  ctx.body = text;
}

/**
 * Answers an error: a metav1.Status (status-answer.ts), the body the apiserver's webhook client decodes
 * into the error its user reads, so the message reaches them. That holds for a fault after the
 * review was decoded too (ReviewFault): an AdmissionReview under a 500 would be read by nobody
 * (client-go's Result.Into returns Result.Error() for any non-2xx and never decodes into the
 * response), the user would see "an error on the server ("unknown")". The HTTP status is the
 * failurePolicy's input and stays the error's. Returns the request's record.
 */
function answerError(ctx: Koa.ParameterizedContext<ReviewState>, err: unknown): ReviewRecord {
  const fault = err instanceof ReviewFault ? err : undefined;
  // A bug of ours is INTERNAL, said alike before and after the review was decoded.
  const error = fault?.error ?? asInjectorError(err);
  const { status, code, message } = error;
  // A body left unread (refused before or while it was read: the client gone, too slow, over the
  // transit budget, chunked, sent to a wrong path) goes with its connection, so no byte more of
  // it is read. A body over the size limit, refused by its Content-Length, is
  // discarded by Node instead: closing at once would reset the connection while the client still
  // writes, losing the 413 (soak).
  if (!ctx.req.complete && code !== 'BODY_TOO_LARGE') ctx.set('Connection', 'close');
  const retryAfterSeconds = code === 'OVERLOADED' ? RETRY_AFTER_SECONDS : undefined;
  if (retryAfterSeconds !== undefined) ctx.set('Retry-After', String(retryAfterSeconds));
  send(ctx, status, encodeStatusAnswer(retryAfterSeconds === undefined ? { status, code, message } : { status, code, message, retryAfterSeconds }));
  const uid = fault?.review.request.uid ?? claimedUid(ctx.state.body);
  return errorRecord(ctx.path, ctx.method, error, uid, ctx.state.started);
}

/**
 * The uid a body refused before it was decoded claims, for its record (the log line) alone, so an
 * operator can find the review in the apiserver's audit log: the kube-apiserver writes
 * `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"` first
 * (apiserverEnvelope in the codec reads it) and its uids are UUIDs (`uuid.NewUUID()` in apiserver
 * pkg/admission/plugin/webhook/request/admissionreview.go). Nothing checked it, so it is taken
 * only when it is a short run of letters, digits and dashes closed by a quote; anything else
 * (an escape, a control character, a long run) gives ''. Never used for anything but the record.
 */
function claimedUid(body: Buffer | undefined): string {
  // The codec finds the apiserver's envelope and its raw uid (apiserverEnvelope, as the answer cache does).
  const uid = body === undefined ? undefined : apiserverEnvelope(body)?.uid;
  return uid !== undefined && CLEAN_UID.test(uid) ? uid : '';
}

/** A uid as the apiserver writes one (a UUID is 36 characters). */
const CLEAN_UID = /^[0-9A-Za-z-]{1,64}$/;

/** Seconds a client is told to wait after a 429; client-go honours it (rest/with_retry.go). */
const RETRY_AFTER_SECONDS = 1;
