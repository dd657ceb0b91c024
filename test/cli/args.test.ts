import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { describe, it } from 'node:test';
import { CLI_ENTRY } from '../helpers/cli.js';

/**
 * Runs the real CLI with its standard output a pipe whose reader is gone before the first write
 * (as `sidecar-injector ... | head -0` leaves it), and returns its exit status and standard error.
 */
async function runIntoClosedPipe(args: readonly string[]): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, [...CLI_ENTRY, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout.destroy();
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const [code] = (await once(child, 'close')) as [number | null];
  return { code, stderr };
}

describe('processIO', () => {
  it('exits quietly, with status 0, when the reader of standard output goes away (lint --help | head -1)', async () => {
    const r = await runIntoClosedPipe(['lint', '--help']);
    assert.deepEqual(r, { code: 0, stderr: '' });
  });

  it("keeps the command's own exit status when its report cannot be written (lint of broken templates exits 1)", async () => {
    const r = await runIntoClosedPipe(['lint', 'test/fixtures/cli/lint-load']);
    assert.deepEqual(r, { code: 1, stderr: '' });
  });
});
