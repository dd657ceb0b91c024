import { loadConfig } from '../config/config.js';
import { serve } from '../main.js';

/** `sidecar-injector serve [flags]`: runs the webhook until SIGTERM or SIGINT. */
export async function serveCommand(args: readonly string[]): Promise<number> {
  const running = await serve(loadConfig(args));
  const stop = (signal: string): void => {
    running.logger.info({ signal }, 'shutting down');
    void running.close().then(() => process.exit(0));
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
  return new Promise<number>(() => {}); // runs until a signal ends the process
}
