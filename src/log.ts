import { pino, type Logger, type DestinationStream } from 'pino';

export type { Logger };

/** The product's logger: pino JSON on stdout, one line per review at info level. */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  const options = { level, base: { name: 'sidecar-injector' }, timestamp: pino.stdTimeFunctions.isoTime };
  return destination ? pino(options, destination) : pino(options);
}
