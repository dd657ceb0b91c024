import { writeSync } from 'node:fs';
import { pino, type Logger, type DestinationStream } from 'pino';

export type { Logger };

/**
 * Characters of log lines gathered before they are written to stdout: one write carries about 45
 * review lines. pino's own asynchronous destination (sonic-boom) costs about 6.5 µs a line in
 * process, each batch a thread-pool round trip plus copies of the batch as it grows; a batch
 * written to process.stdout costs about 1.5 (bench/_log-style loop, 4 lines per turn, to a pipe).
 */
const LOG_BATCH_CHARS = 16 * 1024;

/** How long a line may wait in the batch when reviews are few. */
export const LOG_FLUSH_MS = 250;

/**
 * Characters of lines held while stdout does not take them (its reader stalled): later lines are
 * dropped, so a stalled log reader costs log lines, never memory without bound or the event loop.
 */
export const LOG_MAX_PENDING_CHARS = 16 * 1024 * 1024;

/** The product's logger: pino JSON on stdout, one line per review at info level. */
export function createLogger(level: string, destination: DestinationStream = stdoutDestination()): Logger {
  return pino({ level, base: { name: 'sidecar-injector' }, timestamp: isoTime }, destination);
}

/** The one destination of every logger on stdout: one stream, one batch. */
function stdoutDestination(): StdoutBatches {
  return (stdoutBatches ??= new StdoutBatches(process.stdout));
}

let stdoutBatches: StdoutBatches | undefined;

/** What StdoutBatches needs of process.stdout. */
type Stdout = Pick<NodeJS.WriteStream, 'write' | 'writableLength' | 'on'> & { readonly fd: number };

/**
 * stdout as the logger's destination: lines gathered into batches, each batch one write to
 * process.stdout. For a pipe (a container's stdout) Node writes from the event loop without
 * blocking, and what the pipe cannot take yet waits in the stream's buffer; a file or a terminal
 * is written at once. So a slow reader never stalls reviews, and the lines waiting for it are
 * bounded (LOG_MAX_PENDING_CHARS, then dropped). A reader that has gone (EPIPE) ends the writing,
 * never the process. At exit, what is still gathered is written if stdout takes it at once; the
 * graceful stop (flushLogs) waits for everything. A kill -9 loses at most LOG_FLUSH_MS of lines.
 */
export class StdoutBatches implements DestinationStream {
  readonly #out: Stdout;
  #batch = '';
  #timer: NodeJS.Timeout | undefined;
  #gone = false;

  constructor(out: Stdout) {
    this.#out = out;
    out.on('error', () => {
      this.#gone = true;
      this.#batch = '';
    });
    process.once('exit', () => this.#writeAtExit());
  }

  write(line: string): void {
    if (this.#gone || this.#batch.length + this.#out.writableLength > LOG_MAX_PENDING_CHARS) return;
    this.#batch += line;
    if (this.#batch.length >= LOG_BATCH_CHARS) this.#send();
    else this.#timer ??= setTimeout(() => this.#send(), LOG_FLUSH_MS).unref();
  }

  /** Sends the batch, then calls `done` once stdout has taken every line (pino's logger.flush). */
  flush(done: (err?: Error) => void = () => {}): void {
    this.#send();
    if (this.#gone || this.#out.writableLength === 0) setImmediate(done);
    // Writes complete in order, so an empty one completes after every line. ('drain' would not
    // do: it comes only after a write that found the stream's buffer full.)
    else this.#out.write('', () => done());
  }

  #send(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#batch === '' || this.#gone) return;
    const batch = this.#batch;
    this.#batch = '';
    this.#out.write(batch);
  }

  // At exit only synchronous work runs: the batch goes to the descriptor directly, if it takes it now.
  #writeAtExit(): void {
    if (this.#batch === '' || this.#gone) return;
    try {
      writeSync(this.#out.fd, this.#batch);
    } catch {
      // A pipe that is full (EAGAIN) or gone: the lines are lost, the exit goes on.
    }
    this.#batch = '';
  }
}

/**
 * pino's `"time"` field in ISO 8601 (pino.stdTimeFunctions.isoTime), its text made once per
 * millisecond: at thousands of reviews a second a Date and its toISOString per line add up.
 */
export function isoTime(): string {
  const now = Date.now();
  if (now !== timeMs) {
    timeMs = now;
    timeField = `,"time":"${new Date(now).toISOString()}"`;
  }
  return timeField;
}

let timeMs = -1;
let timeField = '';

/**
 * A writer of one kind of line at one level, for the line written on every review: the caller
 * gives the fields' JSON (`"a":1,"b":"x"`) and the line is the one `logger[level](fields, msg)`
 * writes, byte for byte (pino's level, time, bindings and message key), to the logger's own
 * destination, without pino's walk over a fields object (about 8 µs of a review in process).
 * Nothing is written while the level is off.
 */
export function lineWriter(logger: Logger, level: 'info' | 'warn' | 'error', msg: string): (fieldsJson: string) => void {
  const levelValue = logger.levels.values[level]!;
  const head = `{"level":${levelValue}`;
  const bindings = (logger as unknown as Record<symbol, string>)[pino.symbols.chindingsSym] ?? '';
  const tail = `,"${MESSAGE_KEY}":${JSON.stringify(msg)}}\n`;
  const stream = (logger as unknown as Record<symbol, DestinationStream>)[pino.symbols.streamSym]!;
  return (fieldsJson) => {
    if (logger.levelVal > levelValue) return;
    stream.write(head + isoTime() + bindings + ',' + fieldsJson + tail);
  };
}

/** pino's default messageKey. */
const MESSAGE_KEY = 'msg';

/** Resolves once the logger's lines are written, or after `timeoutMs` (stdout gone or stalled): the last step before exit. */
export function flushLogs(logger: Logger, timeoutMs = 2000): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, timeoutMs);
    timer.unref();
    try {
      logger.flush(() => {
        clearTimeout(timer);
        resolve();
      });
    } catch {
      // The destination is gone (its reader left): nothing more can be written.
      clearTimeout(timer);
      resolve();
    }
  });
}

/** The most characters a log field taken from a request keeps (issue 11: a client must not make log lines long). */
export const LOG_FIELD_MAX = 256;

/** A value taken from a request, cut to LOG_FIELD_MAX characters, saying how many more there were. */
export function clip(value: string, max = LOG_FIELD_MAX): string {
  return value.length <= max ? value : `${value.slice(0, max)}...(${value.length - max} more)`;
}
