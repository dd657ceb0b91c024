import { pino, type Logger, type DestinationStream } from 'pino';

export type { Logger };

/**
 * Characters of log lines that may wait for stdout's reader: later lines are dropped, so a
 * stalled log reader costs log lines, never memory without bound or the event loop.
 */
export const LOG_MAX_PENDING_CHARS = 16 * 1024 * 1024;

/** The product's logger: pino JSON, one line per review at info level, on stdout unless given a destination. */
export function createLogger(level: string, destination: DestinationStream = stdoutDestination(process.stdout)): Logger {
  return pino({ level, base: { name: 'sidecar-injector' }, timestamp: pino.stdTimeFunctions.isoTime }, destination);
}

/** What stdoutDestination needs of process.stdout. */
export type Stdout = Pick<NodeJS.WriteStream, 'write' | 'writableLength' | 'on'>;

/**
 * stdout as pino's destination: each line is handed to process.stdout as it comes. For a pipe (a
 * container's stdout) Node writes from the event loop without blocking: a line the pipe cannot
 * take yet waits in the stream's buffer, and the lines waiting are bounded (LOG_MAX_PENDING_CHARS,
 * then dropped). A line of up to 4 KiB (PIPE_BUF) goes into a pipe whole or not at all, so none is
 * torn. A reader that has gone (EPIPE) ends the writing, never the process. What a pipe took is
 * safe at any exit; only lines still waiting for a stalled reader are lost.
 *
 * Not pino.destination: its exit hook (sonic-boom's flushSync) retries a write to a reader that
 * has gone forever, so a process that logged after its reader left never exited (measured with
 * pino 10.4, sonic-boom 4.2). Its buffering saves about 5 µs of a review's CPU, under 2% of a
 * distinct review (docs/performance.md).
 */
export function stdoutDestination(out: Stdout): DestinationStream & { flush(done: (err?: Error) => void): void } {
  let gone = false;
  out.on('error', () => {
    gone = true;
  });
  return {
    write(line: string): void {
      if (gone || out.writableLength > LOG_MAX_PENDING_CHARS) return;
      out.write(line);
    },
    /** Calls `done` once stdout has taken every line (pino's logger.flush). */
    flush(done: (err?: Error) => void): void {
      if (gone || out.writableLength === 0) setImmediate(done);
      // Writes complete in order, so an empty one completes after every line. ('drain' would not
      // do: it comes only after a write that found the stream's buffer full.)
      else out.write('', () => done());
    },
  };
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

/** The most characters a log field taken from a request keeps (issue 11: a client must not make log lines long). */
export const LOG_FIELD_MAX = 256;

/** A value taken from a request, cut to LOG_FIELD_MAX characters, saying how many more there were. */
export function clip(value: string, max = LOG_FIELD_MAX): string {
  // Joined: a string of its own. V8 makes a cut of 13 characters or more a view of the whole
  // value, and the answer cache keeps clipped values past their review.
  return value.length <= max ? value : [value.slice(0, max), `...(${value.length - max} more)`].join('');
}
