import { pino, type Logger, type DestinationStream } from 'pino';

export type { Logger };

/**
 * Characters of log lines that may wait for stdout's reader: later lines are dropped, so a
 * stalled log reader costs log lines, never memory without bound or the event loop.
 */
export const LOG_MAX_PENDING_CHARS = 16 * 1024 * 1024;

/** The product's logger: pino JSON, one line per review at info level, on stdout unless given a destination. */
export function createLogger(level: string, destination: DestinationStream = processStdout()): Logger {
  return pino({ level, base: { name: 'sidecar-injector' }, timestamp: pino.stdTimeFunctions.isoTime }, destination);
}

/** What stdoutDestination needs of process.stdout. */
export type Stdout = Pick<NodeJS.WriteStream, 'write' | 'writableLength' | 'on'>;

/** A destination of whole lines that hands them on in batches. */
export interface LineDestination extends DestinationStream {
  /** Hands the batch on now; calls `done` once stdout has taken every line (pino's logger.flush). */
  flush(done: (err?: Error) => void): void;
  /** Hands the batch on now, without waiting (at exit). */
  handOn(): void;
}

/**
 * The most bytes a batch of lines holds: PIPE_BUF on Linux. A write of at most this many bytes
 * goes into a pipe whole or not at all, so no line is ever torn, at exit either.
 */
export const LOG_BATCH_BYTES = 4096;

/** How long the first line of a batch waits for others before the batch is handed on. */
export const LOG_BATCH_DELAY_MS = 10;

/**
 * stdout as pino's destination: lines are gathered into batches of at most LOG_BATCH_BYTES, each
 * handed to `out` as one write when it is full, LOG_BATCH_DELAY_MS after its first line, on flush
 * or at exit. For a pipe (a container's stdout) Node writes from the event loop without blocking:
 * a batch the pipe cannot take yet waits in the stream's buffer, and what waits is bounded
 * (LOG_MAX_PENDING_CHARS, then batches are dropped), so a stalled reader costs lines, never memory
 * without bound or the event loop. A reader that has gone (EPIPE) ends the writing, never the
 * process. What a pipe took is safe at any exit; only lines still waiting for a stalled reader are
 * lost. test/log.test.ts holds each of these.
 *
 * Exists for speed: one write system call per line, each waking the reader, cost a quarter of a
 * distinct review's CPU under apisim (docs/performance.md, "The log line"). Not pino.destination
 * (sonic-boom), whose exit hook writes synchronously to a descriptor it leaves blocking and
 * retries EAGAIN without end, so a stalled reader could hold the process at exit.
 */
export function stdoutDestination(out: Stdout): LineDestination {
  let gone = false;
  let batch = '';
  let batchBytes = 0;
  let timer: NodeJS.Timeout | undefined;
  out.on('error', () => {
    gone = true;
  });
  const handOn = (): void => {
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
    const lines = batch;
    batch = '';
    batchBytes = 0;
    if (gone || lines === '' || out.writableLength > LOG_MAX_PENDING_CHARS) return;
    out.write(lines);
  };
  return {
    write(line: string): void {
      const bytes = Buffer.byteLength(line);
      if (batchBytes + bytes > LOG_BATCH_BYTES) handOn();
      batch += line;
      batchBytes += bytes;
      if (batchBytes >= LOG_BATCH_BYTES) handOn();
      else timer ??= setTimeout(handOn, LOG_BATCH_DELAY_MS).unref();
    },
    handOn,
    flush(done: (err?: Error) => void): void {
      handOn();
      if (gone || out.writableLength === 0) setImmediate(done);
      // Writes complete in order, so an empty one completes after every line. ('drain' would not
      // do: it comes only after a write that found the stream's buffer full.)
      else out.write('', () => done());
    },
  };
}

/** The one destination of process.stdout, whose last batch is handed on when the process exits. */
let stdoutLines: LineDestination | undefined;

function processStdout(): LineDestination {
  if (stdoutLines !== undefined) return stdoutLines;
  const lines = stdoutDestination(process.stdout);
  // A pipe's write is tried at once and never blocks: at exit the batch goes if the pipe has room.
  process.once('exit', lines.handOn);
  stdoutLines = lines;
  return lines;
}

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

/** The most characters a log field taken from a request keeps: a client cannot make log lines long (test/server/admission.test.ts). */
export const LOG_FIELD_MAX = 256;

/** A value taken from a request, cut to LOG_FIELD_MAX characters, saying how many more there were. */
export function clip(value: string, max = LOG_FIELD_MAX): string {
  // Joined: a string of its own. V8 makes a cut of 13 characters or more a view of the whole
  // value, and the answer cache keeps clipped values past their review.
  return value.length <= max ? value : [value.slice(0, max), `...(${value.length - max} more)`].join('');
}
