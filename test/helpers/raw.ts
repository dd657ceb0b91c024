import { connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect, type ConnectionOptions, type TLSSocket } from 'node:tls';

/** What came back on a raw connection: the bytes, whether the server closed it, and when. */
export interface RawResult {
  readonly text: string;
  /** The server closed (or reset) the connection before `waitMs` ran out. */
  readonly closed: boolean;
  /** Milliseconds from the first write to the close (or to `waitMs`). */
  readonly ms: number;
  readonly error?: string;
  /** The status of the first HTTP response in `text`, or undefined. */
  readonly status?: number;
}

/** Opens a TLS connection to 127.0.0.1 that verifies the server against `ca`. */
export function openTls(port: number, ca: string, extra: ConnectionOptions = {}): Promise<TLSSocket> {
  return new Promise((resolve, reject) => {
    const socket = tlsConnect({ host: '127.0.0.1', port, ca, servername: 'localhost', ALPNProtocols: ['http/1.1'], ...extra }, () => resolve(socket));
    socket.once('error', reject);
  });
}

/** Opens a plain TCP connection to 127.0.0.1. */
export function openTcp(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = netConnect({ host: '127.0.0.1', port }, () => resolve(socket));
    socket.once('error', reject);
  });
}

/** Writes `chunks` (if any) and collects what the server sends until it closes or `waitMs` passes. */
export function exchange(socket: Socket, chunks: readonly (string | Buffer)[], waitMs: number): Promise<RawResult> {
  return new Promise((resolve) => {
    const started = Date.now();
    const parts: Buffer[] = [];
    let error: string | undefined;
    const finish = (closed: boolean): void => {
      clearTimeout(timer);
      socket.destroy();
      const text = Buffer.concat(parts).toString('utf8');
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(text);
      resolve({ text, closed, ms: Date.now() - started, ...(error !== undefined && { error }), ...(m && { status: Number(m[1]) }) });
    };
    const timer = setTimeout(() => finish(false), waitMs);
    socket.on('data', (c: Buffer) => parts.push(c));
    socket.on('error', (err) => {
      error = (err as NodeJS.ErrnoException).code ?? err.message;
    });
    socket.once('close', () => finish(true));
    for (const c of chunks) socket.write(c);
  });
}

/** An HTTP/1.1 POST of `body` to `path`, as bytes, with the headers given (Host and Content-Length added unless set). */
export function rawPost(path: string, body: string, headers: Record<string, string> = {}, version = 'HTTP/1.1'): string {
  const all: Record<string, string> = { Host: 'localhost', 'Content-Type': 'application/json', 'Content-Length': String(Buffer.byteLength(body)), ...headers };
  const lines = Object.entries(all).map(([k, v]) => `${k}: ${v}`);
  return `POST ${path} ${version}\r\n${lines.join('\r\n')}\r\n\r\n${body}`;
}

/** The JSON body of a raw HTTP/1.1 response (Content-Length framed, as the server answers). */
export function responseJson(text: string): any {
  const at = text.indexOf('\r\n\r\n');
  return JSON.parse(text.slice(at + 4));
}
