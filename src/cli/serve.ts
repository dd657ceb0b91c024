import type { Config } from '../config/config.js';
import { flushLogs } from '../log.js';
import { start, type Injector } from '../main.js';
import { templatesDirError } from './errors.js';

/** `sidecar-injector serve [flags]`: runs the webhook (or, in --mode policy, the sync of the policies) until SIGTERM or SIGINT, then stops gracefully. */
export async function serveCommand(config: Config): Promise<number> {
  const running = await start(config).catch((err: unknown) => {
    throw templatesDirError(err, config.templatesDir);
  });
  const signal = await new Promise<string>((resolve) => {
    process.once('SIGTERM', () => resolve('SIGTERM'));
    process.once('SIGINT', () => resolve('SIGINT'));
  });
  // A second signal (Ctrl-C twice) cuts the drain short.
  const hurry = (): void => running.forceClose();
  process.once('SIGTERM', hurry).once('SIGINT', hurry);
  running.logger.info({ signal, shutdownDelaySeconds: config.shutdownDelay, drainTimeoutSeconds: config.drainTimeout }, 'shutting down');
  const outcome = await shutdown(running, { delayMs: config.shutdownDelay * 1000, drainTimeoutMs: config.drainTimeout * 1000 });
  running.logger.info({ outcome }, 'stopped');
  await flushLogs(running.logger);
  process.exit(0); // a kube client's keep-alive agent or a pending timer must not hold the pod in Terminating
}

export interface ShutdownOptions {
  /** How long to keep answering, not ready, before closing the listener (the preStop window). */
  readonly delayMs: number;
  /** How long in-flight reviews get to finish once the listener is closed. */
  readonly drainTimeoutMs: number;
}

/**
 * The graceful stop a Deployment needs: readiness false at once, so the endpoints controller drops
 * the pod, while reviews that still arrive through stale kube-proxy rules or pooled apiserver
 * connections are answered (with Connection: close) for `delayMs`; then the listener closes and
 * in-flight reviews finish, for at most `drainTimeoutMs`. Resolves 'drained' or 'forced'.
 */
export async function shutdown(running: Injector, opts: ShutdownOptions): Promise<'drained' | 'forced'> {
  running.beginShutdown();
  if (opts.delayMs > 0) await new Promise((resolve) => setTimeout(resolve, opts.delayMs));
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<'forced'>((resolve) => {
    timer = setTimeout(() => resolve('forced'), opts.drainTimeoutMs);
  });
  const outcome = await Promise.race([running.close().then(() => 'drained' as const), deadline]);
  clearTimeout(timer);
  if (outcome === 'forced') running.forceClose();
  return outcome;
}
