import { describe, it, mock } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { Deadlines } from '../../src/server/deadlines.js';

describe('Deadlines', () => {
  it('fires each deadline at the first check after it falls due, in the order they were set: at most a quarter of its length late', () => {
    mock.timers.enable({ apis: ['setInterval'] });
    try {
      let now = 0;
      const deadlines = new Deadlines(40, () => now);
      const fired: [string, number][] = [];
      deadlines.set(() => fired.push(['a', now]));
      const advance = (ms: number): void => {
        for (let i = 0; i < ms; i++) {
          now++;
          mock.timers.tick(1);
        }
      };
      advance(15);
      deadlines.set(() => fired.push(['b', now]));
      advance(100);
      // a falls due at 40, b at 55; the checks run every 10 ms.
      assert.deepEqual(fired, [['a', 40], ['b', 60]]);
      assert.equal(deadlines.size, 0);
    } finally {
      mock.timers.reset();
    }
  });

  it('never fires a cancelled deadline, and fires the others', async () => {
    const deadlines = new Deadlines(20);
    const fired: string[] = [];
    const a = deadlines.set(() => fired.push('a'));
    deadlines.set(() => fired.push('b'));
    deadlines.cancel(a);
    await sleep(80);
    assert.deepEqual(fired, ['b']);
  });

  it('does not keep the process alive while a deadline is pending', async () => {
    const { spawnSync } = await import('node:child_process');
    const module = JSON.stringify(new URL('../../src/server/deadlines.ts', import.meta.url).pathname);
    const run = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', `import { Deadlines } from ${module}; new Deadlines(60000).set(() => {});`], { timeout: 20000 });
    assert.equal(run.status, 0, 'the process waited for the deadline');
  });
});
