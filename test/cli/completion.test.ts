import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { cli } from '../helpers/cli.js';

const hasBash = spawnSync('bash', ['-c', 'true']).status === 0;

/** What bash offers after `words` (the last one being completed), with the script the CLI prints. */
function complete(script: string, words: readonly string[]): string[] {
  const array = words.map((w) => `'${w}'`).join(' ');
  const run = `${script}\nCOMP_WORDS=(${array}); COMP_CWORD=${words.length - 1}; _sidecar_injector; printf '%s\\n' "\${COMPREPLY[@]}"`;
  const r = spawnSync('bash', ['-c', run], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout.split('\n').filter((l) => l !== '');
}

describe('sidecar-injector completion', { skip: !hasBash && 'bash is not installed' }, () => {
  it("completes commands, each command's own flags, and the values of flags with choices", async () => {
    const r = await cli(['completion', 'bash']);
    assert.equal(r.code, 0, r.err);
    assert.deepEqual(complete(r.out, ['sidecar-injector', 'dr']), ['drift']);
    assert.deepEqual(complete(r.out, ['sidecar-injector', 'lint', '--po']), ['--pod-security', '--policies']);
    assert.deepEqual(complete(r.out, ['sidecar-injector', 'lint', '--pod-security', '']), ['privileged', 'baseline', 'restricted', 'none']);
    assert.deepEqual(complete(r.out, ['sidecar-injector', 'inject', '-o', 'j']), ['json']);
    assert.deepEqual(complete(r.out, ['sidecar-injector', 'serve', '--max-inf']), ['--max-inflight']);
    assert.ok(!complete(r.out, ['sidecar-injector', 'inject', '--']).includes('--pod-security'), "lint's flag is not offered to inject");
  });

  it('refuses a shell it has no script for', async () => {
    const r = await cli(['completion', 'fish']);
    assert.equal(r.code, 2);
    assert.match(r.err, /value 'fish' is invalid for argument 'shell'\. Allowed choices are bash/);
  });
});
