import { pino, type Logger, type DestinationStream } from 'pino';

export type { Logger };

/**
 * Bytes of log lines gathered before they are written to stdout. A write per line (pino's default)
 * is a thread-pool round trip per review, about 30 µs of a review's CPU against ~8 µs for the
 * line itself; batched, one write carries about a dozen review lines.
 */
const LOG_BATCH_BYTES = 4096;

/** How long a line may wait in the batch when reviews are few. */
export const LOG_FLUSH_MS = 1000;

/**
 * Bytes of lines held while stdout does not take them (its reader stalled); later lines are
 * dropped, so a stalled log reader costs log lines, never memory without bound or the event loop.
 */
const LOG_MAX_PENDING_BYTES = 16 * 1024 * 1024;

/** The product's logger: pino JSON on stdout, one line per review at info level. */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  const options = { level, base: { name: 'sidecar-injector' }, timestamp: isoTime };
  if (destination !== undefined) return pino(options, destination);
  // Asynchronous, as pino's default: a write waits in the thread pool, never on the event loop, so
  // a slow reader of stdout cannot stall reviews. pino writes what is pending at exit; flushLogs
  // waits for a write in flight too (the graceful stop). A kill -9 or an out-of-memory abort loses
  // at most LOG_FLUSH_MS of lines.
  const stdout = pino.destination({ dest: 1, sync: false, minLength: LOG_BATCH_BYTES, maxLength: LOG_MAX_PENDING_BYTES, periodicFlush: LOG_FLUSH_MS });
  return pino(options, stdout);
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
