import { pino, type Logger, type DestinationStream } from 'pino';

export type { Logger };

/**
 * stdout is written in batches of up to this many bytes (about a dozen review lines): one write,
 * and one wake-up of the reader (the container runtime), per batch instead of per line. At
 * thousands of reviews a second the per-line write cost more than the rest of a cached review.
 */
export const LOG_BATCH_BYTES = 4096;
/** A batch that has not filled is written after this long, so a quiet replica's lines are not held back. */
export const LOG_FLUSH_MS = 100;

/** The product's logger: pino JSON on stdout, one line per review at info level. */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  const options = { level, base: { name: 'sidecar-injector' }, timestamp: pino.stdTimeFunctions.isoTime };
  return pino(options, destination ?? stdout());
}

let shared: ReturnType<typeof pino.destination> | undefined;

/**
 * The one stdout destination of the process: synchronous writes of whole batches, flushed every
 * LOG_FLUSH_MS and when the process exits (a crash included; only SIGKILL can lose a partial batch).
 */
function stdout(): DestinationStream {
  if (shared === undefined) {
    const destination = pino.destination({ dest: 1, sync: true, minLength: LOG_BATCH_BYTES, periodicFlush: LOG_FLUSH_MS });
    process.on('exit', () => destination.flushSync());
    shared = destination;
  }
  return shared;
}
