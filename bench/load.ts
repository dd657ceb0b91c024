import { connect, type TLSSocket } from 'node:tls';

/**
 * A lean keep-alive HTTPS/1.1 load driver: one TLS socket per connection, one request in flight on
 * each, responses framed by Content-Length. It does far less per request than node:https' client,
 * so on a 2-core machine the server under test gets as much of the CPU as it can.
 */

export interface Target {
  readonly port: number;
  readonly path: string;
  /** The CA to verify the server with, as the apiserver does with the webhook's caBundle. */
  readonly ca: string;
}

export interface ReviewBody {
  readonly prefix: Buffer;
  /** When set, the uid goes in twice: prefix, uid, middle, uid, suffix (a distinct pod per review). */
  readonly middle?: Buffer;
  readonly suffix: Buffer;
}

export interface LoadResult {
  readonly requests: number;
  readonly errors: number;
  /** Wall time of the phase, seconds. */
  readonly seconds: number;
  /** Latency of each request, milliseconds. */
  readonly latenciesMs: Float64Array;
  /** The first error seen, for the report. */
  readonly firstError?: string;
  /** The first response body, to check the server really answered the review. */
  readonly sample?: string;
}

interface Exchange {
  readonly uid: string;
  readonly resolve: (r: { status: number; body: Buffer }) => void;
  readonly reject: (e: Error) => void;
}

class Connection {
  private socket: TLSSocket;
  /** Set while a new socket is being opened, after the server said `Connection: close`. */
  private reopening: Promise<void> | undefined;
  private pending: Exchange | undefined;
  private chunks: Buffer[] = [];
  private length = 0;
  private head: { status: number; bodyStart: number; bodyLength: number; close: boolean } | undefined;
  /** The socket closed while no review was pending; the next send opens a new one. */
  private closed = false;

  private constructor(
    private readonly target: Target,
    socket: TLSSocket,
  ) {
    this.socket = socket;
    this.attach(socket);
  }

  static async open(target: Target): Promise<Connection> {
    return new Connection(target, await handshake(target));
  }

  /**
   * Sends one review; like Go's transport, opens a new connection first if the server closed the
   * last one (with `Connection: close`, or while it sat idle). A review not answered within
   * ANSWER_TIMEOUT_MS fails, as the apiserver's call would, and the connection is replaced.
   */
  async send(header: Buffer, body: ReviewBody, uid: string): Promise<{ status: number; body: Buffer }> {
    if (this.closed && !this.reopening) this.reopen();
    if (this.reopening) await this.reopening;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.fail(new Error(`no answer within ${ANSWER_TIMEOUT_MS} ms`));
        this.reopen();
      }, ANSWER_TIMEOUT_MS);
      this.pending = {
        uid,
        resolve: (r) => {
          clearTimeout(timer);
          resolve(r);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      };
      const id = Buffer.from(uid);
      this.socket.write(Buffer.concat(body.middle ? [header, body.prefix, id, body.middle, id, body.suffix] : [header, body.prefix, id, body.suffix]));
    });
  }

  close(): void {
    // Nothing the old socket does after this may touch the exchange on the next one.
    this.socket.removeAllListeners();
    this.socket.on('error', () => {});
    this.socket.destroy();
  }

  private attach(socket: TLSSocket): void {
    this.closed = false;
    socket.on('data', (c: Buffer) => this.onData(c));
    socket.on('error', (e) => this.fail(e));
    socket.on('close', () => {
      this.closed = true;
      this.fail(new Error('connection closed by the server'));
    });
  }

  private reopen(): void {
    this.close();
    this.chunks = [];
    this.length = 0;
    this.head = undefined;
    this.reopening = handshake(this.target).then((socket) => {
      this.socket = socket;
      this.attach(socket);
      this.reopening = undefined;
    });
  }

  private onData(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.length += chunk.length;
    const buf = this.chunks.length === 1 ? chunk : Buffer.concat(this.chunks, this.length);
    this.chunks = [buf];
    if (this.head === undefined) {
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const text = buf.subarray(0, end).toString('latin1');
      const status = Number(text.slice(9, 12));
      const m = /\r\ncontent-length:\s*(\d+)/i.exec(text);
      if (m === null) return this.fail(new Error(`response without Content-Length: ${text.split('\r\n')[0]}`));
      this.head = { status, bodyStart: end + 4, bodyLength: Number(m[1]), close: /\r\nconnection:\s*close/i.test(text) };
    }
    const { status, bodyStart, bodyLength, close } = this.head;
    if (buf.length < bodyStart + bodyLength) return;
    const body = buf.subarray(bodyStart, bodyStart + bodyLength);
    const rest = buf.subarray(bodyStart + bodyLength);
    this.chunks = rest.length > 0 ? [rest] : [];
    this.length = rest.length;
    this.head = undefined;
    const p = this.pending;
    this.pending = undefined;
    if (close) this.reopen();
    p?.resolve({ status, body });
  }

  private fail(e: Error): void {
    const p = this.pending;
    this.pending = undefined;
    p?.reject(e);
  }
}

function handshake(target: Target): Promise<TLSSocket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port: target.port, ca: target.ca, servername: 'localhost' }, () => {
      socket.off('error', reject);
      resolve(socket);
    });
    socket.once('error', reject);
    socket.setNoDelay(true);
  });
}

/** Longer than any answer takes here; the apiserver's own limit is the webhook's timeoutSeconds (5 s in manifests/). */
const ANSWER_TIMEOUT_MS = 15_000;

let counter = 0;
/** A fresh request uid of a UUID's length, as the apiserver makes one per call. */
function nextUid(): string {
  counter += 1;
  return `00000000-0000-4000-8000-${counter.toString(16).padStart(12, '0')}`;
}

function headerFor(target: Target, body: ReviewBody): Buffer {
  const length = body.prefix.length + 36 + (body.middle ? body.middle.length + 36 : 0) + body.suffix.length;
  return Buffer.from(
    `POST ${target.path}?timeout=10s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, */*\r\nContent-Length: ${length}\r\n\r\n`,
  );
}

class Recorder {
  latencies: number[] = [];
  errors = 0;
  firstError: string | undefined;
  sample: string | undefined;

  async one(conn: Connection, header: Buffer, body: ReviewBody, startedAt: number): Promise<void> {
    const uid = nextUid();
    try {
      const res = await conn.send(header, body, uid);
      this.latencies.push(performance.now() - startedAt);
      const ok = res.status === 200 && res.body.includes(uid);
      if (this.sample === undefined) this.sample = res.body.toString('utf8');
      if (!ok) this.error(`HTTP ${res.status}: ${res.body.toString('utf8').slice(0, 200)}`);
    } catch (e) {
      this.error((e as Error).message);
      throw e;
    }
  }

  private error(message: string): void {
    this.errors += 1;
    this.firstError ??= message;
  }

  result(seconds: number): LoadResult {
    return {
      requests: this.latencies.length,
      errors: this.errors,
      seconds,
      latenciesMs: Float64Array.from(this.latencies),
      ...(this.firstError !== undefined && { firstError: this.firstError }),
      ...(this.sample !== undefined && { sample: this.sample }),
    };
  }
}

/** As many reviews as the server takes: `connections` keep-alive connections, each sending the next review as soon as the last is answered. */
export async function closedLoop(target: Target, body: ReviewBody, connections: number, seconds: number): Promise<LoadResult> {
  const conns = await Promise.all(Array.from({ length: connections }, () => Connection.open(target)));
  const header = headerFor(target, body);
  const rec = new Recorder();
  const start = performance.now();
  const deadline = start + seconds * 1000;
  await Promise.all(
    conns.map(async (c) => {
      while (performance.now() < deadline) await rec.one(c, header, body, performance.now());
    }),
  );
  const wall = (performance.now() - start) / 1000;
  for (const c of conns) c.close();
  return rec.result(wall);
}

/**
 * A steady `rate` reviews per second for `seconds`, spread over a pool of keep-alive connections.
 * Latency counts from when each review was due, not when a connection came free, so a stall
 * shows as latency instead of silently lowering the rate (coordinated omission).
 */
export async function steadyRate(target: Target, body: ReviewBody, rate: number, seconds: number, connections = 16): Promise<LoadResult> {
  const idle = await Promise.all(Array.from({ length: connections }, () => Connection.open(target)));
  const all = [...idle];
  const header = headerFor(target, body);
  const rec = new Recorder();
  const due: number[] = [];
  const start = performance.now();
  const total = Math.round(rate * seconds);
  let scheduled = 0;
  let inFlight = 0;

  await new Promise<void>((resolve, reject) => {
    const pump = (): void => {
      while (due.length > 0 && idle.length > 0) {
        // Oldest idle first, so every connection carries requests: one opened and left without a
        // request for 5 s gets Node's headers timeout (408), which no apiserver connection meets
        // (Go dials a connection for a request and sends it at once).
        const conn = idle.shift()!;
        const at = due.shift()!;
        inFlight += 1;
        rec.one(conn, header, body, at).then(() => {
          inFlight -= 1;
          idle.push(conn);
          pump();
        }, reject);
      }
      if (scheduled === total && due.length === 0 && inFlight === 0) resolve();
    };
    const tick = (): void => {
      const now = performance.now();
      const target = Math.min(total, Math.floor(((now - start) / 1000) * rate));
      while (scheduled < target) due.push(start + (++scheduled * 1000) / rate);
      pump();
      if (scheduled < total) setTimeout(tick, 1);
    };
    tick();
  });
  const wall = (performance.now() - start) / 1000;
  for (const c of all) c.close();
  return rec.result(wall);
}

/** The q-quantile (0..1) of the latencies, nearest rank. */
export function quantile(sorted: Float64Array, q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
}

/** Joins the latencies of several phases and sorts them. */
export function mergeSorted(results: readonly LoadResult[]): Float64Array {
  const all = new Float64Array(results.reduce((n, r) => n + r.latenciesMs.length, 0));
  let at = 0;
  for (const r of results) {
    all.set(r.latenciesMs, at);
    at += r.latenciesMs.length;
  }
  return all.sort();
}
