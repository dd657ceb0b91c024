import type { Logger } from '../log.js';
import type { KeyPair } from './pki.js';
import { verifyServingPair } from './source.js';

/** A value a poller keeps current: the serving certificate, or the client CA of mutual TLS. */
export interface Watcher<T> {
  /** The value in use. */
  current(): T;
  /** Loads once now; resolves true when a new value was swapped in. Never throws: a failure keeps the current value. */
  check(): Promise<boolean>;
  stop(): void;
}

export interface WatchOptions<T> {
  /** The value in use now. */
  readonly initial: T;
  /** Fetches the value that should be in use (re-reads files, or reconciles the Secret). */
  readonly load: () => Promise<T>;
  readonly same: (a: T, b: T) => boolean;
  /** Throws when a changed value cannot be used (a half-written file); the current one is kept. */
  readonly verify: (next: T) => void;
  readonly intervalMs: number;
  /** Called with a new, verified value; swaps it into the server. Should it throw, the current value is kept. */
  readonly onChange: (next: T) => void;
  /** Called after every check that found a change or failed: whether a new value now serves (metrics hook). */
  readonly onResult?: (swapped: boolean) => void;
  readonly logger: Logger;
  /** What is watched, for the log lines. */
  readonly what: string;
}

/**
 * Polls `load` every `intervalMs` and hands a changed value to `onChange` once it has proved
 * usable. A failed load, or a value caught half-written (a Secret volume between tls.crt and
 * tls.key, an editor's empty file), keeps the current value until the next poll. No path ends
 * in a rejection: whatever `load`, `verify` or `onChange` throw is logged, counted and survived.
 */
export function watchForChange<T>(opts: WatchOptions<T>): Watcher<T> {
  let current = opts.initial;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  let running: Promise<boolean> | undefined;

  const keep = (err: unknown, why: string): false => {
    opts.logger.warn({ err }, `${why}; keeping the current ${opts.what}`);
    opts.onResult?.(false);
    return false;
  };
  const checkOnce = async (): Promise<boolean> => {
    let next: T;
    try {
      next = await opts.load();
    } catch (err) {
      return keep(err, `${opts.what} check failed`);
    }
    if (opts.same(next, current)) return false;
    try {
      opts.verify(next);
      opts.onChange(next);
    } catch (err) {
      return keep(err, `the new ${opts.what} is not usable`);
    }
    current = next;
    opts.onResult?.(true);
    return true;
  };
  // One check at a time: a slow API call must not overlap the next tick. The catch is a second
  // guard: an unhandled rejection would end the process (test/certs/watcher.test.ts serves through an empty tls.crt).
  const check = (): Promise<boolean> =>
    (running ??= checkOnce()
      .catch((err: unknown) => keep(err, `${opts.what} check failed`))
      .finally(() => (running = undefined)));
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

export type CertWatcherOptions = Omit<WatchOptions<KeyPair>, 'same' | 'verify' | 'what'>;
export type CertWatcher = Watcher<KeyPair>;

/**
 * Keeps the serving certificate current: a changed pair is swapped in once both files parse, the
 * key is the certificate's and the certificate has not expired.
 */
export function watchCertificate(opts: CertWatcherOptions): CertWatcher {
  return watchForChange({
    ...opts,
    what: 'certificate',
    same: (a, b) => a.certPem === b.certPem && a.keyPem === b.keyPem,
    verify: (pair) => verifyServingPair(pair),
  });
}
