import type { IncomingMessage } from 'node:http';
import { InjectorError } from '../errors.js';
import type { Deadlines } from './deadlines.js';

/** controller-runtime's limit: above the apiserver's own 3 MiB request limit, with room to spare. */
export const MAX_BODY_BYTES = 7 * 1024 * 1024;

/** Rejects anything but `application/json` (parameters such as charset are allowed). */
export function checkContentType(header: string | undefined): void {
  // What the apiserver sends, without taking it apart.
  if (header === 'application/json') return;
  const type = (header ?? '').split(';', 1)[0]!.trim().toLowerCase();
  if (type !== 'application/json') throw new InjectorError('UNSUPPORTED_MEDIA_TYPE', [header ? JSON.stringify(header) : 'none']);
}

/**
 * Bytes of review bodies being received at once, by every connection together. A body holds what
 * it has received so far (not what its Content-Length announces), so a client that stalls after
 * one byte holds one byte: stalled clients cannot keep others out, and memory for bodies in
 * transit stays bounded whatever the number of connections.
 */
export class TransitBudget {
  readonly maxBytes: number;
  #used = 0;

  constructor(maxBytes: number) {
    this.maxBytes = maxBytes;
  }

  /** Bytes held now by bodies in transit. */
  get used(): number {
    return this.#used;
  }

  /** Takes `n` bytes; false (and nothing taken) when they do not fit. */
  take(n: number): boolean {
    if (this.#used + n > this.maxBytes) return false;
    this.#used += n;
    return true;
  }

  /** Gives back bytes taken before. */
  give(n: number): void {
    this.#used -= n;
  }
}

export interface ReadBodyOptions {
  /** The largest body accepted (413 beyond it). */
  readonly limit?: number;
  /**
   * The deadline from the end of the headers to the end of the body: the apiserver sends a whole
   * review at once, so a body still arriving after it is dropped (408).
   */
  readonly deadlines: Deadlines;
  /** Shared bound on bytes in transit; a body that does not fit is refused (429). */
  readonly transit: TransitBudget;
}

/** What readBody calls once the body has come whole (its bytes), or has been refused (the error). */
export type BodyDone = (err: InjectorError | undefined, bytes: Buffer | undefined) => void;

/**
 * Reads a body's bytes within the size limit, the time limit and the transit budget, mapping each
 * failure to its 4xx; an empty body, or one of white space alone, is refused too. The bytes are
 * left as they came (the answer cache looks a review up without decoding it). `done` is called
 * once: from the request's events, from the body deadline's timer (BODY_TIMEOUT), or at once for
 * a Content-Length over the limit. A callback,
 * not a promise, since a review is answered from the body's last event with no turn of the
 * microtask queue in between (a promise and an await cost about 1 µs of a review in the server).
 */
export function readBody(req: IncomingMessage, opts: ReadBodyOptions, done: BodyDone): void {
  const limit = opts.limit ?? MAX_BODY_BYTES;
  const announced = Number(req.headers['content-length'] ?? NaN);
  // Refused before a byte is read: the apiserver always sends Content-Length.
  if (announced > limit) return done(new InjectorError('BODY_TOO_LARGE', [limit]), undefined);
  collect(req, limit, opts, done);
}

/** True for a body of nothing but white space (as String.prototype.trim sees it). */
function blank(bytes: Buffer): boolean {
  // A review begins with `{`; only another body is decoded to be sure.
  return bytes[0] !== OPEN_BRACE && bytes.toString('utf8').trim() === '';
}

const OPEN_BRACE = 0x7b;

/**
 * The body's bytes, without a copy when they came in one chunk. Whatever way it ends (complete,
 * too large, too slow, over the budget, the client gone), the deadline is cancelled, the bytes
 * held are given back once, and the listeners do nothing more.
 * A body refused for any reason but its size is left unread, and the edge answers it with
 * `Connection: close`.
 */
function collect(req: IncomingMessage, limit: number, opts: ReadBodyOptions, done: BodyDone): void {
  // What a body holds while it arrives, dropped the moment it ends. The listeners stay on the
  // request, idle (a 'close' still comes): removing them deletes keys of the request's event
  // table, which leaves it in V8's dictionary mode, and Node's stream code that meets such
  // tables was deoptimized and recompiled without end (perf: about 8 µs of a review in the
  // optimizing compiler's thread). So they reach the bytes and `done` only through this: a
  // request lives until its answer is flushed, and its body's chunks and their joined copy must
  // not (RSS grew round after round with 50 KB pods, and 32 answers waiting on slow readers
  // would have held two copies of every body).
  let body: Receiving | undefined = { chunks: [], received: 0, done };
  const finish = (err?: InjectorError): void => {
    const ended = body;
    if (ended === undefined) return;
    body = undefined;
    opts.deadlines.cancel(deadline);
    opts.transit.give(ended.received);
    if (err === undefined) {
      const bytes = ended.chunks.length === 1 ? ended.chunks[0]! : Buffer.concat(ended.chunks, ended.received);
      return blank(bytes) ? ended.done(new InjectorError('BODY_EMPTY'), undefined) : ended.done(undefined, bytes);
    }
    // The rest of a body over the limit is discarded, so the 413 reaches a client still writing
    // (closing would reset the connection under it); any other refused body stops being read.
    if (err.code === 'BODY_TOO_LARGE') req.resume();
    else req.pause();
    ended.done(err, undefined);
  };
  const onData = (chunk: Buffer): void => {
    if (body === undefined) return;
    if (body.received + chunk.length > limit) return finish(new InjectorError('BODY_TOO_LARGE', [limit]));
    if (!opts.transit.take(chunk.length)) return finish(new InjectorError('OVERLOADED'));
    body.received += chunk.length;
    body.chunks.push(chunk);
  };
  const onEnd = (): void => finish();
  // A client gone mid-body ends the request with 'close' (after 'aborted', which says no more);
  // checked before the error is made: the 'close' that ends every request comes after the body.
  const onClose = (): void => void (body && finish(new InjectorError('BODY_ABORTED', ['the client closed the connection'])));
  const onError = (err: Error): void => void (body && finish(new InjectorError('BODY_ABORTED', [err.message], { cause: err })));
  const deadline = opts.deadlines.set(() => finish(new InjectorError('BODY_TIMEOUT', [opts.deadlines.ms / 1000])));
  req.on('data', onData).on('end', onEnd).on('error', onError).on('close', onClose);
}

/** A body being received: its chunks, their bytes, and whom to tell how it ended. */
interface Receiving {
  readonly chunks: Buffer[];
  received: number;
  readonly done: BodyDone;
}
