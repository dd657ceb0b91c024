import type { IncomingMessage } from 'node:http';
import getRawBody from 'raw-body';
import { InjectorError } from '../errors.js';

/** controller-runtime's limit: above the apiserver's own 3 MiB request limit, with room to spare. */
const MAX_BODY_BYTES = 7 * 1024 * 1024;

/**
 * What one chunk of a body costs in memory besides its bytes, rounded up: the Buffer, its backing
 * store and the list entry that keep it until the body is whole. A client may send a body one
 * byte a TLS record (or a chunk of a chunked body), and each byte then arrives as a chunk of its
 * own: about 200 bytes of heap and 400-500 of RSS a chunk, measured on Node 20. The transit
 * budget charges each chunk this on top of its bytes, so it bounds memory however a body is cut
 * (test/server/body.test.ts, test/server/hostile.test.ts).
 */
export const CHUNK_OVERHEAD_BYTES = 512;

/** Rejects anything but `application/json` (parameters such as charset are allowed). */
export function checkContentType(header: string | undefined): void {
  const type = (header ?? '').split(';', 1)[0]!.trim().toLowerCase();
  if (type !== 'application/json') throw new InjectorError('UNSUPPORTED_MEDIA_TYPE', [header ? JSON.stringify(header) : 'none']);
}

/**
 * Memory held by review bodies being received at once, by every connection together. A body
 * holds what it has received so far (not what its Content-Length announces), so a client that
 * stalls after one byte holds one byte's worth: stalled clients cannot keep others out, and memory
 * for bodies in transit stays bounded whatever the number of connections or the size of their
 * chunks.
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
   * Milliseconds from the end of the headers to the end of the body: the apiserver sends a whole
   * review at once, so a body still arriving after it is dropped (408).
   */
  readonly timeoutMs: number;
  /** Shared bound on memory in transit; a body that does not fit is refused (429). */
  readonly transit: TransitBudget;
}

/**
 * Reads a body's bytes (raw-body) within the size limit, the time limit and the transit budget,
 * mapping each failure to its 4xx; a body without Content-Length (chunked) is refused with 411
 * before a byte is read, as is one whose Content-Length is over the limit (413). An empty body, or
 * one of white space alone, is refused too. The bytes are left as they came (the answer cache
 * looks a review up without decoding it). A body refused for any reason but its size is left
 * unread: the edge answers it with `Connection: close`.
 */
export async function readBody(req: IncomingMessage, opts: ReadBodyOptions): Promise<Buffer> {
  const limit = opts.limit ?? MAX_BODY_BYTES;
  const length = contentLength(req);
  if (length > limit) throw new InjectorError('BODY_TOO_LARGE', [limit]);
  let held = 0;
  let refuse: (err: InjectorError) => void = () => {};
  const refused = new Promise<never>((_, reject) => (refuse = reject));
  const charge = (chunk: Buffer): void => {
    const cost = chunk.length + CHUNK_OVERHEAD_BYTES;
    if (!opts.transit.take(cost)) return refuse(new InjectorError('OVERLOADED'));
    held += cost;
  };
  const timer = setTimeout(() => refuse(new InjectorError('BODY_TIMEOUT', [opts.timeoutMs / 1000])), opts.timeoutMs);
  req.on('data', charge);
  const read = getRawBody(req, { length, limit });
  try {
    const bytes = await Promise.race([read, refused]);
    if (blank(bytes)) throw new InjectorError('BODY_EMPTY');
    return bytes;
  } catch (err) {
    // Refused first: raw-body is still listening; the request is paused until the edge closes
    // its connection, which ends raw-body's read (and its chunks) with the connection.
    read.catch(() => {});
    if (err instanceof InjectorError) req.pause();
    throw err instanceof InjectorError ? err : new InjectorError('BODY_ABORTED', [err instanceof Error ? err.message : String(err)], { cause: err });
  } finally {
    clearTimeout(timer);
    req.off('data', charge);
    opts.transit.give(held);
  }
}

/**
 * The body's announced length. The kube-apiserver always sends Content-Length (client-go's rest
 * client writes a whole encoded body); a chunked body, whose size is known only at its end and
 * whose tiny chunks cost hundreds of bytes each to hold, is refused with 411 (test/server/body.test.ts).
 */
function contentLength(req: IncomingMessage): number {
  const header = req.headers['content-length'];
  // Node's parser has checked the header: digits only, one value, never with Transfer-Encoding.
  if (header === undefined) throw new InjectorError('LENGTH_REQUIRED');
  return Number(header);
}

/** True for a body of nothing but white space (as String.prototype.trim sees it). */
function blank(bytes: Buffer): boolean {
  // A review begins with `{`; only another body is decoded to be sure.
  return bytes[0] !== OPEN_BRACE && bytes.toString('utf8').trim() === '';
}

const OPEN_BRACE = 0x7b;
