import { writeSync } from 'node:fs';
import { pino, type Logger, type DestinationStream } from 'pino';

export type { Logger };

/**
 * Characters of log lines gathered before they are written to stdout: one write carries about 45
 * review lines. pino's own asynchronous destination (sonic-boom) costs about 6.5 µs a line in
 * process, each batch a thread-pool round trip plus copies of the batch as it grows; a batch
 * written to process.stdout costs about 1.5 (measured in process: 300 000 review lines, 4 per turn
 * of the event loop, stdout piped to cat).
 */
const LOG_BATCH_CHARS = 16 * 1024;

/** How long a line may wait in the batch when reviews are few. */
export const LOG_FLUSH_MS = 250;

/**
 * Characters of lines held while stdout does not take them (its reader stalled): later lines are
 * dropped, so a stalled log reader costs log lines, never memory without bound or the event loop.
 */
export const LOG_MAX_PENDING_CHARS = 16 * 1024 * 1024;

/** The product's logger: pino JSON on stdout, one line per review at info level. */
export function createLogger(level: string, destination: DestinationStream = stdoutDestination()): Logger {
  return pino({ level, base: { name: 'sidecar-injector' }, timestamp: isoTime }, destination);
}

/** The one destination of every logger on stdout: one stream, one batch. */
function stdoutDestination(): StdoutBatches {
  return (stdoutBatches ??= new StdoutBatches(process.stdout));
}

let stdoutBatches: StdoutBatches | undefined;

/** What StdoutBatches needs of process.stdout. */
type Stdout = Pick<NodeJS.WriteStream, 'write' | 'writableLength' | 'on'> & { readonly fd: number };

/**
 * stdout as the logger's destination: lines gathered into batches, each batch one write to
 * process.stdout. For a pipe (a container's stdout) Node writes from the event loop without
 * blocking, and what the pipe cannot take yet waits in the stream's buffer; a file or a terminal
 * is written at once. So a slow reader never stalls reviews, and the lines waiting for it are
 * bounded (LOG_MAX_PENDING_CHARS, then dropped). A reader that has gone (EPIPE) ends the writing,
 * never the process. The graceful stop (flushLogs) waits for everything (at most 2 s). Any other
 * exit writes the batch still gathered (flushSync), but loses what waits in the stream for a slow
 * reader; a kill -9 loses both: LOG_FLUSH_MS of lines while stdout keeps up.
 */
export class StdoutBatches implements DestinationStream {
  readonly #out: Stdout;
  #batch = '';
  #timer: NodeJS.Timeout | undefined;
  #gone = false;

  constructor(out: Stdout) {
    this.#out = out;
    out.on('error', () => {
      this.#gone = true;
      this.#batch = '';
    });
    process.once('exit', () => this.flushSync());
  }

  write(line: string): void {
    if (this.#gone || this.#batch.length + this.#out.writableLength > LOG_MAX_PENDING_CHARS) return;
    this.#batch += line;
    if (this.#batch.length >= LOG_BATCH_CHARS) this.#send();
    else this.#timer ??= setTimeout(() => this.#send(), LOG_FLUSH_MS).unref();
  }

  /** Sends the batch, then calls `done` once stdout has taken every line (pino's logger.flush). */
  flush(done: (err?: Error) => void = () => {}): void {
    this.#send();
    if (this.#gone || this.#out.writableLength === 0) setImmediate(done);
    // Writes complete in order, so an empty one completes after every line. ('drain' would not
    // do: it comes only after a write that found the stream's buffer full.)
    else this.#out.write('', () => done());
  }

  #send(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#batch === '' || this.#gone) return;
    const batch = this.#batch;
    this.#batch = '';
    this.#out.write(batch);
  }

  /**
   * Writes the batch to the descriptor now, synchronously (at exit, where nothing asynchronous
   * runs; pino calls it after a fatal line). Never tears a line: nothing is written while earlier
   * lines still wait in the stream (they would be cut off by these), and a pipe is given whole
   * lines at most PIPE_BUF bytes at a time, which it takes whole or not at all. A pipe that stays
   * full for EXIT_WAIT_MS keeps the rest: they are lost, and the exit goes on.
   */
  flushSync(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const batch = this.#batch;
    this.#batch = '';
    if (batch === '' || this.#gone || this.#out.writableLength > 0) return;
    const bytes = Buffer.from(batch);
    const started = Date.now();
    for (let at = 0; at < bytes.length; ) {
      let end = Math.min(bytes.length, at + PIPE_BUF);
      if (end < bytes.length) {
        const newline = bytes.lastIndexOf(NEWLINE, end - 1);
        if (newline >= at) end = newline + 1;
      }
      try {
        at += writeSync(this.#out.fd, bytes, at, end - at);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EAGAIN' || Date.now() - started >= EXIT_WAIT_MS) return;
        Atomics.wait(PAUSE, 0, 0, 1);
      }
    }
  }
}

/** Bytes a pipe writes whole or not at all (POSIX's minimum, Linux's value). */
const PIPE_BUF = 4096;
const NEWLINE = 0x0a;
/** How long the exit write waits for a full pipe. */
const EXIT_WAIT_MS = 100;
/** For a 1 ms pause in synchronous code. */
const PAUSE = new Int32Array(new SharedArrayBuffer(4));

/**
 * pino's `"time"` field in ISO 8601 (pino.stdTimeFunctions.isoTime). Its text up to the
 * milliseconds is made once per second, and the milliseconds are taken from a table: at thousands
 * of reviews a second, a Date and its toISOString per line (which asks the OS for the local
 * offset) add up.
 */
export function isoTime(): string {
  const now = Date.now();
  if (now !== timeMs) {
    timeMs = now;
    const second = Math.floor(now / 1000);
    if (second !== timeSecond) {
      timeSecond = second;
      // "2026-11-23T18:00:38." : everything but the milliseconds and the Z.
      timeHead = `,"time":"${new Date(second * 1000).toISOString().slice(0, -4)}`;
    }
    timeField = timeHead + MILLIS[now - second * 1000]! + 'Z"';
  }
  return timeField;
}

let timeMs = -1;
let timeSecond = NaN;
let timeHead = '';
let timeField = '';
const MILLIS = Array.from({ length: 1000 }, (_, ms) => String(ms).padStart(3, '0'));

/**
 * A writer of one kind of line at one level, for the line written on every review: the line is
 * the one `logger[level](pick(values, fields), msg)` writes (pino's level, time, bindings, the
 * fields in order, the message), to the logger's own destination, without pino's walk over an
 * object: about 8 µs of a review in process. It differs in one thing: a lone surrogate in a string
 * is escaped (`\udc00`, as JSON.stringify does) where pino writes it raw (U+FFFD once encoded).
 * Nothing is written while the level is off. A logger whose lines pino shapes further (a message
 * prefix, a destination that needs pino's metadata) is written through pino itself.
 */
export function lineWriter<F extends string>(logger: Logger, level: 'info' | 'warn' | 'error', msg: string, fields: readonly F[]): (values: Readonly<Record<F, unknown>>) => void {
  const internals = logger as unknown as Record<symbol, unknown>;
  const stream = internals[pino.symbols.streamSym] as DestinationStream & Record<symbol, unknown>;
  if (internals[MSG_PREFIX] !== undefined || stream[pino.symbols.needsMetadataGsym] === true) {
    return (values) => logger[level](Object.fromEntries(fields.map((f) => [f, values[f]])), msg);
  }
  const levelValue = logger.levels.values[level]!;
  const head = `{"level":${levelValue}`;
  const bindings = (internals[pino.symbols.chindingsSym] as string | undefined) ?? '';
  const keys = fields.map((f) => ',' + JSON.stringify(f) + ':');
  const tail = `,"${MESSAGE_KEY}":${JSON.stringify(msg)}}\n`;
  // The memo of the last line: each field's value and text, and the text of runs of fields that
  // did not change, made flat once (a line of a few flat pieces is cheap to copy into the batch's
  // write; a line of a piece a field is not). The reviews of one ReplicaSet carry the very same
  // values but the uid and the duration (the answer cache keeps them, their arrays frozen).
  // Array.prototype.join of two or more non-empty strings makes one flat string of its own; `+`
  // makes a pair that points at both.
  const memo = new LineMemo(fields.length);
  let lineTime = '';
  let lineHead = '';
  return (values) => {
    if (logger.levelVal > levelValue) return;
    const time = isoTime();
    if (time !== lineTime) {
      lineTime = time;
      lineHead = [head, time, bindings].join('');
    }
    let line = lineHead;
    let run = -1;
    for (let i = 0; i < fields.length; i++) {
      const value = values[fields[i]!];
      if (memo.holds(i, value)) {
        if (run < 0) run = i;
        continue;
      }
      if (run >= 0) line += memo.run(run, i);
      run = -1;
      line += memo.set(i, value, keys[i]! + jsonText(value));
    }
    if (run >= 0) line += memo.run(run, fields.length);
    stream.write(line + tail);
  };
}

/**
 * What lineWriter remembers of the last line. Nothing in it is a view of a larger string: a
 * string of 13 characters or more cut from another is one in V8 (a uid cut from a review body),
 * and the memo would keep that whole body alive; such a string is kept as a copy of its own
 * (joined), compared by its characters.
 */
class LineMemo {
  readonly #values: unknown[];
  readonly #texts: string[];
  /** When each field's text was set, counting every set. */
  readonly #setAt: number[];
  /** The flat text of the run of fields from each index, up to #runEnds, as it was at #runMadeAt. */
  readonly #runTexts: string[];
  readonly #runEnds: number[];
  readonly #runMadeAt: number[];
  #sets = 0;

  constructor(fields: number) {
    this.#values = new Array<unknown>(fields).fill(NO_VALUE);
    this.#texts = new Array<string>(fields).fill('');
    this.#setAt = new Array<number>(fields).fill(0);
    this.#runTexts = new Array<string>(fields).fill('');
    this.#runEnds = new Array<number>(fields).fill(-1);
    this.#runMadeAt = new Array<number>(fields).fill(-1);
  }

  /** True when field `i` has the value it had on the last line (an object only if frozen). */
  holds(i: number, value: unknown): boolean {
    return value === this.#values[i] && (typeof value !== 'object' || value === null || Object.isFrozen(value));
  }

  /** Remembers field `i`'s value and text; returns the text. */
  set(i: number, value: unknown, text: string): string {
    this.#values[i] = typeof value === 'string' ? owned(value) : value;
    this.#setAt[i] = ++this.#sets;
    return (this.#texts[i] = text);
  }

  /** The text of fields `from` to `to` (excluded), none changed since the last line. */
  run(from: number, to: number): string {
    if (this.#runEnds[from] === to && this.#unchangedSince(from, to, this.#runMadeAt[from]!)) return this.#runTexts[from]!;
    this.#runEnds[from] = to;
    this.#runMadeAt[from] = this.#sets;
    return (this.#runTexts[from] = this.#texts.slice(from, to).join(''));
  }

  #unchangedSince(from: number, to: number, madeAt: number): boolean {
    for (let i = from; i < to; i++) if (this.#setAt[i]! > madeAt) return false;
    return true;
  }
}

/**
 * JSON.stringify(value), with the values of a review line written directly: a string that needs
 * no escape, a finite number, a boolean, an array of such strings. JSON.stringify is a call into
 * the runtime, eleven times a line; these are most of a review line's fields.
 */
export function jsonText(value: unknown): string {
  switch (typeof value) {
    case 'string':
      // A string of 13 characters or more may be a view of the string it was cut from (V8 makes
      // such substrings views), and the line would keep that alive while it waits in the batch (a
      // uid cut from a 50 KB review body kept 45 bodies alive and grew the heap round after
      // round): it is written as a copy, joined.
      if (!PLAIN.test(value)) return JSON.stringify(value);
      return value.length < SLICE_MIN ? '"' + value + '"' : ['"', value, '"'].join('');
    case 'number':
      // JSON writes a finite number as Number.prototype.toString does (and -0 as 0); NaN and the infinities as null.
      return Number.isFinite(value) ? '' + value : 'null';
    case 'boolean':
      return value ? 'true' : 'false';
    default:
      if (Array.isArray(value) && value.every((item) => typeof item === 'string' && PLAIN.test(item))) return value.length === 0 ? '[]' : '["' + value.join('","') + '"]';
      return JSON.stringify(value);
  }
}

/**
 * The string's characters in a string of their own. V8 makes a substring of 13 characters or more
 * a view of the string it was cut from (a uid cut from a review body), and whatever keeps the view
 * keeps the whole parent: the line memo keeps values past their review, so it keeps copies.
 * Array.prototype.join of two non-empty strings makes a new flat string.
 */
function owned(value: string): string {
  return value.length < SLICE_MIN ? value : [value.charAt(0), value.slice(1)].join('');
}

/** The shortest substring V8 makes as a view of its parent (`SlicedString::kMinLength`). */
const SLICE_MIN = 13;

/** Characters JSON writes as they are: printable ASCII but the quote and the backslash. */
const PLAIN = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

/** No value yet: what lineWriter's memo of the last line holds before the first. */
const NO_VALUE = Symbol('no value');

/** Where pino keeps a child's msgPrefix (exported at run time, not in pino's types). */
const MSG_PREFIX = (pino.symbols as unknown as Record<string, symbol>)['msgPrefixSym']!;

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
  // Joined: a string of its own, never a view that would keep the whole value (see owned).
  return value.length <= max ? value : [value.slice(0, max), `...(${value.length - max} more)`].join('');
}
