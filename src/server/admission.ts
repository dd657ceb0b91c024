import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import type { SecureContextOptions } from 'node:tls';
import { ApiserverPrefixes, type BodyLimits } from '../admission/codec.js';
import { ReviewFault, ReviewPipeline, type ReviewHandler, type Reviewed } from '../admission/pipeline.js';
import { errorRecord, type ReviewObserver, type ReviewRecord } from '../admission/record.js';
import { InjectorError } from '../errors.js';
import { clip } from '../log.js';
import { checkContentType, readBody, TransitBudget } from './body.js';
import { Deadlines } from './deadlines.js';
import { encodeStatus } from './status.js';

export interface AdmissionAppDeps {
  /**
   * The handler of each review path (the endpoint table) and the generation their verdicts belong
   * to: `createHandlers` in admission/handlers.ts. The server knows nothing of templates.
   */
  readonly handlers: { readonly byPath: ReadonlyMap<string, ReviewHandler>; readonly generation: () => unknown };
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
}

/** Default of `answerCacheBytes`: about 400 typical Deployment pods per endpoint. */
export const ANSWER_CACHE_BYTES = 4 * 1024 * 1024;

/** Default of `transitBytes`: ten of the apiserver's largest requests (3 MiB) at once. */
export const TRANSIT_BYTES = 32 * 1024 * 1024;

/** What the review port runs for every request: node:https's own request listener. */
export type AdmissionApp = (req: IncomingMessage, res: ServerResponse) => void;

/**
 * The review port's request listener, transport only: routing to one review pipeline per path of
 * the endpoint table, the body, slot and transit limits, and the one error edge. Every request
 * ends in one record, handed to each observer.
 *
 * Plain node:http, not a framework: a review is one POST to a fixed path with one JSON answer, so
 * routing is a Map lookup; Koa's context, middleware chain and on-finished hooks cost 50-70 µs of
 * CPU per request on this hardware, a third of a bare server's whole cost per review (issue 13).
 */
export function createAdmissionApp(deps: AdmissionAppDeps): AdmissionApp {
  const pipelines = new Map<string, ReviewPipeline>();
  for (const [path, handle] of deps.handlers.byPath) {
    const options = { endpoint: path, handle, generation: deps.handlers.generation, answerCacheBytes: deps.answerCacheBytes ?? ANSWER_CACHE_BYTES };
    pipelines.set(path, new ReviewPipeline(deps.bodyLimits === undefined ? options : { ...options, bodyLimits: deps.bodyLimits }));
  }
  const observers = deps.observers ?? [];
  const transit = new TransitBudget(deps.transitBytes ?? TRANSIT_BYTES);
  const bodyDeadlines = new Deadlines((deps.bodyTimeout ?? 2) * 1000);
  const slots = new ReviewSlots(deps.maxInflight ?? 32, (deps.answerTimeout ?? 10) * 1000);

  const observe = (record: ReviewRecord): void => {
    // Every failure of a review is answered before this; what is left is an observer's bug after
    // the answer went out, reported without taking the process down.
    try {
      for (const observer of observers) observer(record);
    } catch (err) {
      process.emitWarning(err instanceof Error ? err : new Error(String(err)), 'ReviewObserverFailed');
    }
  };
  /**
   * Answers a refused request (answerError) and observes its record. This runs from the request's
   * events or a timer, where a throw would take the process down: should the error edge itself
   * fail (a bug of ours), the connection goes instead.
   */
  const refuse = (req: IncomingMessage, res: ServerResponse, refused: Refused, err: unknown): void => {
    let record: ReviewRecord;
    try {
      record = answerError(req, res, refused, err);
    } catch (bug) {
      process.emitWarning(bug instanceof Error ? bug : new Error(String(bug)), 'ReviewAnswerFailed');
      res.destroy();
      return;
    }
    observe(record);
  };
  return (req, res) => {
    const started = performance.now();
    const path = pathOf(req.url);
    let pipeline: ReviewPipeline;
    try {
      pipeline = route(req, res, path, pipelines);
      checkContentType(req.headers['content-type']);
    } catch (err) {
      return refuse(req, res, { path, body: undefined, started }, err);
    }
    // A slot is taken only once the whole body is here: a slow client holds the bytes it sent of
    // the transit budget, never a slot (32 stalled bodies once kept every review out; issue 11).
    readBody(req, { deadlines: bodyDeadlines, transit }, (refused, body) => {
      let reviewed: Reviewed;
      try {
        if (refused !== undefined) throw refused;
        slots.hold(res);
        reviewed = pipeline.review(body!, started);
        send(res, 200, reviewed.text);
      } catch (err) {
        return refuse(req, res, { path, body, started }, err);
      }
      observe(reviewed.record);
    });
  };
}

/** The path of a request target, without its query: the apiserver calls `/mutate?timeout=10s`. */
function pathOf(url: string | undefined): string {
  if (url === undefined) return '';
  const query = url.indexOf('?');
  return query < 0 ? url : url.slice(0, query);
}

/** The pipeline for the request's path and method, or the 404 / 405 that refuses it. */
function route(req: IncomingMessage, res: ServerResponse, path: string, pipelines: ReadonlyMap<string, ReviewPipeline>): ReviewPipeline {
  const pipeline = pipelines.get(path);
  if (pipeline === undefined) throw new InjectorError('NOT_FOUND', [clip(path)]);
  if (req.method !== 'POST') {
    res.setHeader('Allow', 'POST');
    throw new InjectorError('METHOD_NOT_ALLOWED', [clip(req.method ?? ''), path, 'POST']);
  }
  return pipeline;
}

/** Writes a JSON answer whole: its length is known, so it goes out with the headers in one write. */
function send(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

/** What the error edge knows of a request: its path, its body once read whole, when it began. */
interface Refused {
  readonly path: string;
  readonly body: Buffer | undefined;
  readonly started: number;
}

/**
 * The one place that turns errors into HTTP answers: a metav1.Status (status.ts), the body the
 * apiserver's webhook client decodes into the error its user reads, so the message reaches them.
 * That holds for a fault after the review was decoded too (ReviewFault): an AdmissionReview under
 * a 500 would be read by nobody (client-go's Result.Into returns Result.Error() for any non-2xx
 * and never decodes into the response), the user would see "an error on the server ("unknown")".
 * The HTTP status is the failurePolicy's input and stays the error's. Returns the request's record.
 */
function answerError(req: IncomingMessage, res: ServerResponse, refused: Refused, err: unknown): ReviewRecord {
  const fault = err instanceof ReviewFault ? err : undefined;
  // Anything else is a bug of ours: its message stays in the log, the client reads "internal error".
  const error = fault?.error ?? (err instanceof InjectorError ? err : new InjectorError('INTERNAL', [err instanceof Error ? err.message : String(err)], { cause: err }));
  const { status, code } = error;
  const message = fault !== undefined || err instanceof InjectorError ? error.message : 'internal error';
  // A body left half-read (the client gone, too slow, over the transit budget) goes with its
  // connection. A body over the size limit is discarded by the reader instead: closing at once
  // would reset the connection while the client still writes, losing the 413 (soak).
  if (code === 'BODY_ABORTED' || code === 'BODY_TIMEOUT' || (code === 'OVERLOADED' && !req.complete)) res.setHeader('Connection', 'close');
  const retryAfterSeconds = code === 'OVERLOADED' ? RETRY_AFTER_SECONDS : undefined;
  if (retryAfterSeconds !== undefined) res.setHeader('Retry-After', String(retryAfterSeconds));
  const text = encodeStatus(retryAfterSeconds === undefined ? { status, code, message } : { status, code, message, retryAfterSeconds });
  // The answer may be gone already (the client closed the connection under a 413).
  if (!res.headersSent && !res.destroyed) send(res, status, text);
  const uid = fault?.review.request.uid ?? claimedUid(refused.body);
  return errorRecord(refused.path, req.method ?? '', error, uid, refused.started);
}

/**
 * The uid a body refused before it was decoded claims, for its record (the log line) alone, so an
 * operator can find the review in the apiserver's audit log: the kube-apiserver writes
 * `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"` first
 * (ApiserverPrefixes) and its uids are UUIDs (`uuid.NewUUID()` in apiserver
 * pkg/admission/plugin/webhook/request/admissionreview.go). Nothing checked it, so it is taken
 * only when it is a short run of letters, digits and dashes closed by a quote; anything else
 * (an escape, a control character, a long run) gives ''. Never used for anything but the record.
 */
function claimedUid(body: Buffer | undefined): string {
  if (body === undefined) return '';
  // Latin-1 reads one character a byte: the prefix and a clean uid are ASCII either way.
  const head = body.toString('latin1', 0, Math.min(body.length, CLAIM_BYTES));
  for (const prefix of APISERVER_PREFIXES) {
    if (!head.startsWith(prefix)) continue;
    CLEAN_UID.lastIndex = prefix.length;
    return CLEAN_UID.exec(head)?.[1] ?? '';
  }
  return '';
}

const APISERVER_PREFIXES = Object.values(ApiserverPrefixes);

/** A uid as the apiserver writes one (a UUID is 36 characters), then its closing quote. */
const CLEAN_UID = /([0-9A-Za-z-]{1,64})"/y;

/** Bytes of a refused body read for its uid: the longest prefix, the longest clean uid and its quote. */
const CLAIM_BYTES = Math.max(...APISERVER_PREFIXES.map((p) => p.length)) + 65;

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
  readonly #answerDeadlines: Deadlines;
  #held = 0;

  constructor(max: number, answerTimeoutMs: number) {
    this.#max = max;
    this.#answerDeadlines = new Deadlines(answerTimeoutMs);
  }

  /** Takes a slot until `res` is flushed or closed; throws OVERLOADED when none is free. */
  hold(res: ServerResponse): void {
    if (this.#held >= this.#max) throw new InjectorError('OVERLOADED');
    this.#held++;
    const connection = res.socket ?? res.req.socket;
    const deadline = this.#answerDeadlines.set(() => connection.destroy());
    let released = false;
    let waiting: Set<() => void> | undefined;
    const release = (): void => {
      if (released) return;
      released = true;
      this.#answerDeadlines.cancel(deadline);
      this.#held--;
      waiting?.delete(release);
    };
    // 'close': Node emits it on every response that has its connection, the tick after 'finish'
    // (the answer handed to the socket) or when the connection goes first. `on`, not `once`:
    // release runs once by itself, and removing a listener leaves the response's event table in
    // V8's dictionary mode (see collect in body.ts).
    res.on('close', release);
    // An answer queued behind another on its connection (HTTP/1.1 pipelining, which the apiserver
    // never does) has no socket yet, and if the connection goes before its turn Node emits nothing
    // on it: its slot is given back when the connection closes (one listener a connection), or at
    // once if it has closed already.
    if (res.socket !== null) return;
    if (connection.destroyed) return release();
    waiting = this.#waitingOn(connection);
    waiting.add(release);
  }

  /** The slots of answers queued on each connection, released when it closes. */
  readonly #queued = new WeakMap<Socket, Set<() => void>>();

  #waitingOn(connection: Socket): Set<() => void> {
    const known = this.#queued.get(connection);
    if (known !== undefined) return known;
    const releases = new Set<() => void>();
    this.#queued.set(connection, releases);
    connection.once('close', () => {
      for (const release of [...releases]) release();
    });
    return releases;
  }
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

/** The HTTPS server for the review listener, with the limits of EdgeLimits and `opts`. */
export function createAdmissionServer(app: AdmissionApp, tls: AdmissionTls, opts: AdmissionServerOptions = {}): HttpsServer {
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
    app,
  );
  server.maxRequestsPerSocket = EdgeLimits.maxRequestsPerSocket;
  server.maxHeadersCount = EdgeLimits.maxHeadersCount;
  server.maxConnections = opts.maxConnections ?? 1024;
  server.setTimeout(EdgeLimits.idleSocketSeconds * 1000);
  return server;
}
