import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { Deadlines } from '../../src/server/deadlines.js';

describe('Deadlines', () => {
  it('fires each deadline once its length has passed, in the order they were set, within a quarter of the length late', async () => {
    const deadlines = new Deadlines(40);
    const fired: [string, number][] = [];
    const start = performance.now();
    deadlines.set(() => fired.push(['a', performance.now() - start]));
    await sleep(15);
    deadlines.set(() => fired.push(['b', performance.now() - start]));
    await sleep(120);
    assert.deepEqual(fired.map(([name]) => name), ['a', 'b']);
    assert.ok(fired[0]![1] >= 40, `a fired after ${fired[0]![1]} ms, before its length`);
    assert.ok(fired[1]![1] >= 55, `b fired after ${fired[1]![1]} ms, before its length`);
    assert.equal(deadlines.size, 0);
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
