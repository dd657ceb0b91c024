import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { clip, LOG_FIELD_MAX, LOG_FLUSH_MS } from '../src/log.js';

const LOG_MODULE = JSON.stringify(new URL('../src/log.ts', import.meta.url).pathname);

/** Runs `body` in a child process with the product's logger on its real stdout; collects its lines as they arrive. */
function child(body: string): { lines: Promise<string[]>; firstLineMs: Promise<number>; exited: Promise<number | null>; kill: () => void; closeStdout: () => void } {
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
  it('writes a lone line within the flush interval while the process keeps running', async () => {
    const c = child(`logger.info({ n: 1 }, 'review'); setTimeout(() => {}, 20000);`);
    try {
      // The child's start (tsx) takes most of this; the line itself waits at most LOG_FLUSH_MS.
      const ms = await within(LOG_FLUSH_MS + 8000, c.firstLineMs);
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
    assert.deepEqual(lines.map((l) => JSON.parse(l).n), [...Array(500).keys()]);
  });

  it('still exits promptly when the reader of stdout has gone away', async () => {
    const c = child(`await new Promise((r) => setTimeout(r, 1500)); for (let n = 0; n < 2000; n++) logger.info({ n }, 'review'); await flushLogs(logger); process.exit(0);`);
    c.closeStdout();
    try {
      assert.notEqual(await within(15000, c.exited), 'timeout', 'the process hung at exit');
    } finally {
      c.kill();
    }
  });
});

describe('clip', () => {
  it('keeps short values and cuts long ones, saying how much was cut', () => {
    assert.equal(clip('abc'), 'abc');
    const long = 'x'.repeat(LOG_FIELD_MAX + 10);
    assert.equal(clip(long), `${'x'.repeat(LOG_FIELD_MAX)}...(10 more)`);
  });
});
