import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { clip, createLogger, LOG_BATCH_BYTES, LOG_BATCH_DELAY_MS, LOG_FIELD_MAX, LOG_MAX_PENDING_CHARS, stdoutDestination } from '../src/log.js';

const LOG_MODULE = JSON.stringify(new URL('../src/log.ts', import.meta.url).pathname);

/** Runs `body` in a child process with the product's logger on its real stdout; collects its lines as they arrive. */
function child(body: string): {
  lines: Promise<string[]>;
  firstLineMs: Promise<number>;
  exited: Promise<number | null>;
  kill: () => void;
  closeStdout: () => void;
} {
  const script = `import { createLogger, flushLogs } from ${LOG_MODULE}; const logger = createLogger('info'); ${body}`;
  const started = performance.now();
  const proc = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const lines: string[] = [];
  let first: (ms: number) => void = () => {};
  const firstLineMs = new Promise<number>((resolve) => (first = resolve));
  createInterface({ input: proc.stdout }).on('line', (line) => {
    if (lines.push(line) === 1) first(performance.now() - started);
  });
  const exited = new Promise<number | null>((resolve) => proc.on('close', (code) => resolve(code)));
  return { lines: exited.then(() => lines), firstLineMs, exited, kill: () => proc.kill('SIGKILL'), closeStdout: () => proc.stdout.destroy() };
}

function within<T>(ms: number, promise: Promise<T>): Promise<T | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), ms)));
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

describe('createLogger', () => {
  it('writes a lone line at once while the process keeps running', async () => {
    const c = child(`logger.info({ n: 1 }, 'review'); setTimeout(() => {}, 20000);`);
    try {
      // The child's start (tsx) takes most of this.
      const ms = await within(8000, c.firstLineMs);
      assert.notEqual(ms, 'timeout', 'the line never came while the process lived');
    } finally {
      c.kill();
    }
    const [line] = await c.lines;
    assert.equal(JSON.parse(line!).msg, 'review');
  });

  it('loses no line when the process flushes and exits right after logging, as serve does on SIGTERM', async () => {
    const c = child(`for (let n = 0; n < 500; n++) logger.info({ n }, 'review'); await flushLogs(logger); process.exit(0);`);
    const lines = await c.lines;
    assert.equal(lines.length, 500);
    assert.deepEqual(
      lines.map((l) => JSON.parse(l).n),
      [...Array(500).keys()],
    );
  });

  it('loses no line when the process exits without flushing', async () => {
    const c = child(`logger.info({ n: 1 }, 'review'); logger.info({ n: 2 }, 'review'); process.exit(0);`);
    assert.deepEqual(
      (await c.lines).map((l) => JSON.parse(l).n),
      [1, 2],
    );
  });

  it('never tears a line when the pipe fills, at exit too', async () => {
    // The pipe (64 KiB on Linux, in 4 KiB pages) is filled to one free page with whole lines, then
    // 9 KB of lines are logged and the process exits: its reader starts once the process has exited.
    const script = `import { writeSync } from 'node:fs'; import { createLogger } from ${LOG_MODULE};
      const logger = createLogger('info');
      writeSync(1, '{"filler":true}\\n'.repeat((65536 - 4096) / 16));
      for (let n = 0; n < 40; n++) logger.info({ n, pad: 'x'.repeat(150) }, 'review');
      process.exit(0);`;
    // The reader starts once the writer has exited (a marker file, not a sleep: a slow start of the
    // writer on a loaded machine would let the reader drain the pipe first).
    const marker = join(mkdtempSync(join(tmpdir(), 'log-exit-')), 'exited');
    const shell = `{ ${JSON.stringify(process.execPath)} --import tsx --input-type=module -e "$SCRIPT"; touch "$MARKER"; } | (until [ -e "$MARKER" ]; do sleep 0.05; done; cat)`;
    const proc = spawn('sh', ['-c', shell], { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, SCRIPT: script, MARKER: marker } });
    const lines: string[] = [];
    createInterface({ input: proc.stdout }).on('line', (line) => lines.push(line));
    await new Promise((resolve) => proc.on('close', resolve));
    for (const line of lines) assert.doesNotThrow(() => JSON.parse(line), `a torn line arrived: ${line.slice(0, 80)}`);
    // The filler, then the lines that fit the free page, whole and in order from the first.
    const logged = lines.map((l) => JSON.parse(l)).filter((l) => l.msg === 'review');
    assert.equal(lines.length - logged.length, (65536 - 4096) / 16, 'the filler did not all arrive');
    assert.ok(logged.length >= 10 && logged.length < 40, `${logged.length} of the 40 lines arrived: none were written, or more than the free page holds`);
    assert.deepEqual(
      logged.map((l) => l.n),
      [...Array(logged.length).keys()],
    );
  });

  it('keeps the event loop running and the waiting lines bounded while the reader of stdout stalls', async () => {
    // About 1.5 times the cap in lines, then a timer: it fires only if no write blocked.
    const script = `import { createLogger } from ${LOG_MODULE}; const logger = createLogger('info');
      const pad = 'x'.repeat(1000);
      for (let n = 0; n < ${Math.ceil((1.5 * LOG_MAX_PENDING_CHARS) / 1100)}; n++) logger.info({ n, pad }, 'review');
      setTimeout(() => { process.stderr.write(JSON.stringify({ waiting: process.stdout.writableLength, rss: process.memoryUsage().rss })); process.exit(0); }, 100);`;
    const proc = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    // stdout is never read: the pipe fills after 64 KiB.
    let report = '';
    proc.stderr.on('data', (d: Buffer) => (report += d.toString()));
    const exited = new Promise<number | null>((resolve) => proc.on('exit', resolve));
    try {
      assert.notEqual(await within(20000, exited), 'timeout', 'the timer never fired: a write blocked the event loop');
    } finally {
      proc.kill('SIGKILL');
    }
    const { waiting } = JSON.parse(report);
    assert.ok(waiting <= LOG_MAX_PENDING_CHARS + 64 * 1024, `${waiting} characters waiting, over the cap`);
    assert.ok(waiting >= LOG_MAX_PENDING_CHARS / 2, `${waiting} characters waiting: the lines did not reach stdout`);
  });

  it('still exits promptly when the reader of stdout has gone away', async () => {
    const c = child(
      `await new Promise((r) => setTimeout(r, 1500)); for (let n = 0; n < 2000; n++) logger.info({ n }, 'review'); await flushLogs(logger); process.exit(0);`,
    );
    c.closeStdout();
    try {
      assert.notEqual(await within(15000, c.exited), 'timeout', 'the process hung at exit');
    } finally {
      c.kill();
    }
  });

  it('still exits promptly when the reader of stdout left before the last lines, unflushed', async () => {
    // The exit is the first write to find the reader gone (pino.destination's exit hook retries it forever).
    const c = child(`await new Promise((r) => setTimeout(r, 1500)); logger.info({ n: 1 }, 'review'); process.exit(0);`);
    c.closeStdout();
    try {
      assert.notEqual(await within(15000, c.exited), 'timeout', 'the process hung at exit');
    } finally {
      c.kill();
    }
  });

  it("writes pino's JSON lines: the level, an ISO time, the name, a child's bindings, the fields, the message", () => {
    const written: string[] = [];
    const logger = createLogger('info', { write: (line: string) => void written.push(line) });
    logger.child({ replica: 'a' }).info({ uid: 'u-1', pod: 'web' }, 'review');
    const { time, ...fields } = JSON.parse(written[0]!);
    assert.deepEqual(fields, { level: 30, name: 'sidecar-injector', replica: 'a', uid: 'u-1', pod: 'web', msg: 'review' });
    assert.match(time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  });
});

describe('stdoutDestination', () => {
  /** A stdout that keeps what it is given until `take()`, never says 'drain', and can fail like a pipe whose reader left. */
  function slowStdout() {
    const queued: { chunk: string; done?: () => void }[] = [];
    let onError: (err: Error) => void = () => {};
    const out = {
      written: [] as string[],
      get writableLength() {
        return queued.reduce((n, q) => n + q.chunk.length, 0);
      },
      write(chunk: string, done?: () => void) {
        queued.push({ chunk, ...(done && { done }) });
        return true;
      },
      on(_event: string, listener: (err: Error) => void) {
        onError = listener;
        return out;
      },
      take() {
        for (const q of queued.splice(0)) {
          out.written.push(q.chunk);
          q.done?.();
        }
      },
      fail() {
        queued.length = 0;
        onError(Object.assign(new Error('write EPIPE'), { code: 'EPIPE' }));
      },
    };
    return out;
  }

  it('drops batches while stdout holds more than the cap', () => {
    const out = slowStdout();
    const destination = stdoutDestination(out as never);
    destination.write('a\n');
    destination.write('x'.repeat(LOG_MAX_PENDING_CHARS) + '\n');
    destination.write('dropped\n');
    destination.handOn();
    out.take();
    destination.write('b\n');
    destination.handOn();
    out.take();
    assert.deepEqual(
      out.written.map((w) => w.slice(0, 2)),
      ['a\n', 'xx', 'b\n'],
    );
  });

  it('hands lines on in whole batches of at most PIPE_BUF bytes, the last after a short delay', async () => {
    const out = slowStdout();
    const destination = stdoutDestination(out as never);
    // 100-byte lines, one with a character of 3 bytes in UTF-8: batches are counted in bytes.
    const lines = Array.from({ length: 100 }, (_, n) => `${String(n).padStart(3, '0')}${n === 5 ? '€' : 'x'}${'y'.repeat(95)}\n`);
    for (const line of lines) destination.write(line);
    out.take();
    const full = out.written.length;
    assert.ok(full >= 2, 'no batch was handed on when full');
    for (const batch of out.written) assert.ok(Buffer.byteLength(batch) <= LOG_BATCH_BYTES, `a batch of ${Buffer.byteLength(batch)} bytes`);
    assert.ok(
      out.written.every((batch) => batch.endsWith('\n')),
      'a batch ended inside a line',
    );
    await new Promise((r) => setTimeout(r, LOG_BATCH_DELAY_MS + 50));
    out.take();
    assert.equal(out.written.length, full + 1, 'the last lines were not handed on after the delay');
    assert.equal(out.written.join(''), lines.join(''));
  });

  it('a line longer than a batch goes alone', () => {
    const out = slowStdout();
    const destination = stdoutDestination(out as never);
    const long = 'z'.repeat(3 * LOG_BATCH_BYTES) + '\n';
    destination.write('a\n');
    destination.write(long);
    destination.write('b\n');
    destination.handOn();
    out.take();
    assert.deepEqual(out.written, ['a\n', long, 'b\n']);
  });

  it('calls back from flush once stdout has taken every line, though it never says drain', async () => {
    const out = slowStdout();
    const destination = stdoutDestination(out as never);
    destination.write('a\n');
    let flushed = false;
    destination.flush(() => (flushed = true));
    await new Promise((r) => setImmediate(r));
    assert.equal(flushed, false, 'flushed before stdout took the line');
    out.take();
    assert.equal(flushed, true);
    assert.equal(out.written.join(''), 'a\n');
  });

  it('stops writing once the reader of stdout has gone, and flushes at once', async () => {
    const out = slowStdout();
    const destination = stdoutDestination(out as never);
    destination.write('a\n');
    out.fail();
    destination.write('b\n');
    out.take();
    assert.deepEqual(out.written, []);
    await new Promise<void>((resolve) => destination.flush(() => resolve()));
  });
});

describe('clip', () => {
  it('keeps short values and cuts long ones, saying how much was cut', () => {
    assert.equal(clip('abc'), 'abc');
    const long = 'x'.repeat(LOG_FIELD_MAX + 10);
    assert.equal(clip(long), `${'x'.repeat(LOG_FIELD_MAX)}...(10 more)`);
  });
});
