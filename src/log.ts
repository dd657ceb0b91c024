import { pino, type Logger, type DestinationStream } from 'pino';

export type { Logger };

/** The product's logger: pino JSON on stdout, one line per review at info level. */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  const options = { level, base: { name: 'sidecar-injector' }, timestamp: pino.stdTimeFunctions.isoTime };
  return destination ? pino(options, destination) : pino(options);
}

/** The most characters a log field taken from a request keeps (issue 11: a client must not make log lines long). */
export const LOG_FIELD_MAX = 256;

/** A value taken from a request, cut to LOG_FIELD_MAX characters, saying how many more there were. */
export function clip(value: string, max = LOG_FIELD_MAX): string {
  return value.length <= max ? value : `${value.slice(0, max)}...(${value.length - max} more)`;
}
