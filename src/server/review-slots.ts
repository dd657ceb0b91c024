import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { InjectorError } from '../errors.js';

/**
 * Review slots. A slot is held from the end of a review's body until its answer has been flushed
 * to the socket or the connection is gone, so clients that never read hold at most `max` answers
 * (each bounded by the patch limit), never an unbounded heap of them. An answer not taken within
 * `answerTimeoutMs` closes its connection, so such clients cannot hold the slots for long either.
 * A review that finds every slot taken is answered 429: client-go retries it after Retry-After,
 * well inside the apiserver's timeout, where a queued review could outlive it.
 */
export class ReviewSlots {
  readonly #max: number;
  readonly #answerTimeoutMs: number;
  #held = 0;

  constructor(max: number, answerTimeoutMs: number) {
    this.#max = max;
    this.#answerTimeoutMs = answerTimeoutMs;
  }

  /** Takes a slot until `res` is flushed or closed; throws OVERLOADED when none is free. */
  hold(res: ServerResponse): void {
    if (this.#held >= this.#max) throw new InjectorError('OVERLOADED');
    this.#held++;
    const connection = res.socket ?? res.req.socket;
    const timer = setTimeout(() => connection.destroy(), this.#answerTimeoutMs);
    let released = false;
    // An answer queued behind another on its connection (HTTP/1.1 pipelining, which the apiserver
    // never does) has no socket yet, and if the connection goes before its turn Node emits nothing
    // on it: its slot is given back when the connection closes (one listener a connection), or at
    // once if it has closed already.
    const waiting = res.socket === null && !connection.destroyed ? this.#waitingOn(connection) : undefined;
    const release = (): void => {
      if (released) return;
      released = true;
      clearTimeout(timer);
      this.#held--;
      waiting?.delete(release);
    };
    // 'close': Node emits it on every response that has its connection, the tick after 'finish'
    // (the answer handed to the socket) or when the connection goes first.
    res.once('close', release);
    if (res.socket !== null) return;
    if (waiting === undefined) return release();
    waiting.add(release);
  }

  /** The slots of answers queued on each connection, released when it closes. */
  readonly #queued = new WeakMap<Socket, Set<() => void>>();

  #waitingOn(connection: Socket): Set<() => void> {
    const known = this.#queued.get(connection);
    if (known !== undefined) return known;
    const releases = new Set<() => void>();
    this.#queued.set(connection, releases);
    connection.once('close', () => {
      for (const release of [...releases]) release();
    });
    return releases;
  }
}
