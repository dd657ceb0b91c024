import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { describe, it } from 'node:test';
import { versionCommand } from '../../src/cli/version.js';
import { captureIO, cli } from '../helpers/cli.js';

describe('sidecar-injector version', () => {
  it('prints the package version and the Node.js version; no commit when run from source', async () => {
    const { version } = JSON.parse(await readFile('package.json', 'utf8'));
    const text = await cli(['version']);
    assert.equal(text.code, 0);
    assert.equal(text.out, `sidecar-injector ${version} (commit unknown, node ${process.versions.node})\n`);
    const json = await cli(['version', '-o', 'json']);
    assert.deepEqual(JSON.parse(json.out), { version, node: process.versions.node });
  });

  it('prints the commit the build was stamped with', async () => {
    const info = { version: '1.2.3', commit: 'abc123', node: '24.1.0' };
    for (const [output, expected] of [
      ['text', 'sidecar-injector 1.2.3 (commit abc123, node 24.1.0)\n'],
      ['json', `${JSON.stringify(info, null, 2)}\n`],
    ] as const) {
      const io = captureIO();
      assert.equal(await versionCommand({ output }, io, info), 0);
      assert.equal(io.out(), expected);
    }
  });

  it('prints the same line for --version and -V, and exits 0', async () => {
    const line = (await cli(['version'])).out;
    for (const flag of ['--version', '-V']) {
      const r = await cli([flag]);
      assert.deepEqual([r.code, r.out, r.err], [0, line, ''], flag);
    }
  });
});
