import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Options } from '../../src/config/config.js';
import { cli } from './io.js';

/** The flags each command must list in its own help (the contract between the engineers, BRIEF 2). */
const Flags: Record<string, readonly string[]> = {
  inject: ['-f, --filename', '--templates-dir', '-n, --namespace', '-o, --output', '--patch', '--namespace-labels', '-h, --help'],
  explain: ['-f, --filename', '--templates-dir', '-n, --namespace', '-o, --output', '--namespace-labels', '-h, --help'],
  lint: ['[dir]', '-o, --output', '--pod-security', '--strict', '-h, --help'],
  drift: ['--templates-dir', '--templates-configmap', '-n, --namespace', '-A, --all-namespaces', '--all ', '-o, --output', '--kubeconfig', '-h, --help'],
  version: ['-o, --output', '-h, --help'],
  serve: [...Object.values(Options).map((o) => `--${o.flag} `), '-h, --help'],
};

describe('sidecar-injector (the command line)', () => {
  for (const [command, flags] of Object.entries(Flags)) {
    it(`${command} --help and -h list ${command}'s own flags and examples, and exit 0`, async () => {
      for (const help of ['--help', '-h']) {
        const r = await cli([command, help]);
        assert.equal(r.code, 0, r.err);
        assert.match(r.out, new RegExp(`^Usage: sidecar-injector ${command} `));
        for (const flag of flags) assert.ok(r.out.includes(flag), `${command} ${help} lacks ${flag}:\n${r.out}`);
        assert.match(r.out, new RegExp(`Examples:\\n {2}\\$ sidecar-injector ${command}`));
      }
    });
  }

  it('shows serve\'s environment variables and defaults from the config table', async () => {
    const r = await cli(['serve', '--help']);
    for (const o of Object.values(Options)) assert.ok(r.out.replace(/\s+/g, ' ').includes(`env ${o.env}`), o.env);
  });

  it('lists every command with a summary, and exits 2 without one', async () => {
    const r = await cli([]);
    assert.equal(r.code, 2);
    for (const command of Object.keys(Flags)) assert.match(r.err, new RegExp(`\\n {2}${command} `));
  });

  it('refuses an unknown flag in one line that names the command and where to look', async () => {
    const r = await cli(['inject', '-f', 'pod.yaml', '--pach']);
    assert.equal(r.code, 2);
    assert.equal(r.err, "sidecar-injector inject: unknown option '--pach' (did you mean --patch?); see 'sidecar-injector inject --help'\n");
  });

  it('passes --namespace-labels on as a label map, and refuses a pair without "="', async () => {
    const bad = await cli(['explain', '-f', '-', '--namespace-labels', 'team=a,oops']);
    assert.equal(bad.code, 2);
    assert.match(bad.err, /expected key=value pairs separated by commas, got "oops"/);
  });
});
