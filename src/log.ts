import { pino, type Logger, type DestinationStream } from 'pino';

export type { Logger };

/**
 * Bytes of log lines gathered before they are written to stdout. One write per line (pino's
 * default) is a thread-pool round trip per review: measured at ~35 µs of CPU per review against
 * ~8 µs for the line itself, for the pipe a container runtime reads stdout through. Batched, a
 * write carries about a dozen review lines.
 */
export const LOG_BATCH_BYTES = 4096;

/** How long a line may wait in the batch when reviews are few; lines pending at exit are written by pino's exit hook. */
export const LOG_FLUSH_MS = 1000;

/** The product's logger: pino JSON on stdout, one line per review at info level. */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  const options = { level, base: { name: 'sidecar-injector' }, timestamp: pino.stdTimeFunctions.isoTime };
  if (destination !== undefined) return pino(options, destination);
  const stdout = pino.destination({ dest: 1, sync: false, minLength: LOG_BATCH_BYTES });
  const timer = setInterval(() => stdout.flush(), LOG_FLUSH_MS);
  timer.unref();
  return pino(options, stdout);
}

/** The most characters a log field taken from a request keeps (issue 11: a client must not make log lines long). */
export const LOG_FIELD_MAX = 256;

/** A value taken from a request, cut to LOG_FIELD_MAX characters, saying how many more there were. */
export function clip(value: string, max = LOG_FIELD_MAX): string {
  return value.length <= max ? value : `${value.slice(0, max)}...(${value.length - max} more)`;
}
