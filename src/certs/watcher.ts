import { createSecureContext } from 'node:tls';
import type { Logger } from '../log.js';
import type { KeyPair } from './pki.js';

export interface CertWatcherOptions {
  /** The pair being served now. */
  readonly initial: KeyPair;
  /** Fetches the pair that should be served (re-reads files, or reconciles the Secret). */
  readonly load: () => Promise<KeyPair>;
  readonly intervalMs: number;
  /** Called with a new, verified pair; swaps it into the server. */
  readonly onChange: (pair: KeyPair) => void;
  readonly logger: Logger;
}

/** A polling certificate source that swaps changed pairs into the server without a restart. */
export interface CertWatcher {
  /** The pair being served. */
  current(): KeyPair;
  /** Loads once now; resolves true when a new pair was swapped in. Never throws: a failure keeps the current pair. */
  check(): Promise<boolean>;
  stop(): void;
}

/**
 * Polls `load` every `intervalMs` and hands a changed pair to `onChange` once it has proved usable
 * (the key matches the certificate). A failed load or a half-written pair (a Secret volume caught
 * between tls.crt and tls.key) keeps the current pair until the next poll.
 */
export function watchCertificate(opts: CertWatcherOptions): CertWatcher {
  let current = opts.initial;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  let running: Promise<boolean> | undefined;

  const checkOnce = async (): Promise<boolean> => {
    let next: KeyPair;
    try {
      next = await opts.load();
    } catch (err) {
      opts.logger.warn({ err }, 'certificate check failed; keeping the current certificate');
      return false;
    }
    if (next.certPem === current.certPem && next.keyPem === current.keyPem) return false;
    try {
      createSecureContext({ cert: next.certPem, key: next.keyPem });
    } catch (err) {
      opts.logger.warn({ err }, 'new certificate and key do not form a usable pair; keeping the current certificate');
      return false;
    }
    current = next;
    opts.onChange(next);
    return true;
  };
  // One check at a time: a slow API call must not overlap the next tick.
  const check = (): Promise<boolean> => (running ??= checkOnce().finally(() => (running = undefined)));
  const schedule = (): void => {
    if (stopped) return;
    timer = setTimeout(() => void check().finally(schedule), opts.intervalMs);
    timer.unref(); // never keeps the process alive on its own
  };
  schedule();
  return {
    current: () => current,
    check,
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
