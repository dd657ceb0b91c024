import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { clip, LOG_FIELD_MAX, LOG_FLUSH_MS } from '../src/log.js';

/** Runs `body` in a child process with the product's logger on its real stdout; resolves to its lines as they arrive. */
function child(body: string): { lines: Promise<string[]>; firstLineMs: Promise<number>; kill: () => void } {
  const script = `import { createLogger } from ${JSON.stringify(new URL('../src/log.ts', import.meta.url).pathname)}; const logger = createLogger('info'); ${body}`;
  const started = performance.now();
  const proc = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const lines: string[] = [];
  let first: (ms: number) => void = () => {};
  const firstLineMs = new Promise<number>((resolve) => (first = resolve));
  createInterface({ input: proc.stdout }).on('line', (line) => {
    if (lines.push(line) === 1) first(performance.now() - started);
  });
  return { lines: new Promise((resolve) => proc.on('close', () => resolve(lines))), firstLineMs, kill: () => proc.kill() };
}

describe('createLogger', () => {
  it('writes a lone line within the flush interval while the process keeps running', async () => {
    const c = child(`logger.info({ n: 1 }, 'review'); setTimeout(() => {}, 20000);`);
    try {
      const ms = await Promise.race([c.firstLineMs, new Promise<number>((r) => setTimeout(() => r(Infinity), 10000))]);
      assert.ok(ms < 10000, 'the line never came while the process lived');
    } finally {
      c.kill();
    }
    const [line] = await c.lines;
    assert.equal(JSON.parse(line!).msg, 'review');
    assert.ok(LOG_FLUSH_MS <= 1000);
  });

  it('loses no line when the process exits right after logging', async () => {
    const c = child(`for (let n = 0; n < 500; n++) logger.info({ n }, 'review'); process.exit(0);`);
    const lines = await c.lines;
    assert.equal(lines.length, 500);
    assert.deepEqual(lines.map((l) => JSON.parse(l).n), [...Array(500).keys()]);
  });
});

describe('clip', () => {
  it('keeps short values and cuts long ones, saying how much was cut', () => {
    assert.equal(clip('abc'), 'abc');
    const long = 'x'.repeat(LOG_FIELD_MAX + 10);
    assert.equal(clip(long), `${'x'.repeat(LOG_FIELD_MAX)}...(10 more)`);
  });
});
