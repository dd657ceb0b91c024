/**
 * Deadlines of one length (the body timeout, the answer timeout), checked by one interval timer
 * while any is pending. Every review sets and cancels two of them: a Node timer each costs a
 * Timeout object, a timer list that is made and dropped whenever it empties, and calls into libuv
 * to schedule it (about 6 µs of a review's CPU in the server, measured with perf); here they cost
 * a Set insertion and deletion. Deadlines of one length fall due in the order they were set, so a
 * check stops at the first that has not. A deadline fires up to a quarter of its length (at most
 * 100 ms) late.
 */
export class Deadlines {
  /** The length of every deadline, in milliseconds. */
  readonly ms: number;
  readonly #tickMs: number;
  /** Pending deadlines in the order they were set: the order they fall due. */
  readonly #pending = new Set<Deadline>();
  #timer: NodeJS.Timeout | undefined;

  constructor(ms: number) {
    this.ms = ms;
    this.#tickMs = Math.max(1, Math.min(MAX_LATENESS_MS, ms / 4));
  }

  /** Calls `expire` once `ms` have passed, unless the deadline is cancelled first. */
  set(expire: () => void): Deadline {
    const deadline: Deadline = { at: performance.now() + this.ms, expire };
    this.#pending.add(deadline);
    // Unref'd: a pending deadline never keeps the process alive.
    this.#timer ??= setInterval(() => this.#check(), this.#tickMs).unref();
    return deadline;
  }

  /** Cancels a deadline that has not fallen due (nothing happens for one that has). */
  cancel(deadline: Deadline): void {
    this.#pending.delete(deadline);
  }

  /** Deadlines pending. */
  get size(): number {
    return this.#pending.size;
  }

  #check(): void {
    const now = performance.now();
    for (const deadline of this.#pending) {
      if (deadline.at > now) break;
      this.#pending.delete(deadline);
      deadline.expire();
    }
    if (this.#pending.size === 0) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  }
}

/** A deadline as `set` gives it, for `cancel`. */
export interface Deadline {
  readonly at: number;
  readonly expire: () => void;
}

/** The latest a deadline fires after it falls due. */
const MAX_LATENESS_MS = 100;
