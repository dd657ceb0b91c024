import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtemp } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { parseLabels } from '../../src/cli/program.js';
import { Options } from '../../src/config/config.js';
import { cli, golden } from '../helpers/cli.js';

/** The flags each command must list in its own help (the contract between the engineers, BRIEF 2). */
const Flags: Record<string, readonly string[]> = {
  inject: ['-f, --filename', '--templates-dir', '-n, --namespace', '-o, --output', '--patch', '--namespace-labels', '-h, --help'],
  explain: ['-f, --filename', '--templates-dir', '-n, --namespace', '-o, --output', '--namespace-labels', '-h, --help'],
  lint: ['[dir]', '-o, --output', '--pod-security', '--strict', '--policies', '-h, --help'],
  drift: ['--templates-dir', '--templates-configmap', '-n, --namespace', '-A, --all-namespaces', '--all ', '-o, --output', '--kubeconfig', '-h, --help'],
  policies: [
    '[dir]',
    '-o, --output',
    '--templates-source',
    '--templates-namespace',
    '--kubeconfig',
    '-n, --namespace',
    '--revision',
    '--api-version',
    '-h, --help',
  ],
  version: ['-o, --output', '-h, --help'],
  completion: ['<shell>', '-h, --help'],
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

  it("shows serve's environment variables and defaults from the config table", async () => {
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

  it('reads --namespace-labels as a label map', () => {
    assert.deepEqual(parseLabels('sidecar-injector.io/inject=true, team=a,empty=,'), { 'sidecar-injector.io/inject': 'true', team: 'a', empty: '' });
    assert.throws(() => parseLabels('=x'), /got "=x"/);
  });

  it('passes --namespace-labels on as a label map, and refuses a pair without "="', async () => {
    const bad = await cli(['explain', '-f', '-', '--namespace-labels', 'team=a,oops']);
    assert.equal(bad.code, 2);
    assert.match(bad.err, /Expected key=value pairs separated by commas, got "oops"/);
  });
});

// serve's flags are one line per row of the Options table, which other changes extend: the golden file
// holds serve's text around them (the help column's width, which the longest flag sets, too), and the
// test above checks that every row is there.
function withoutServeFlags(help: string): string {
  return help.replace(/\nOptions:\n[\s\S]*?\n {2}-h, --help +/, '\nOptions:\n  (one flag per row of Options in src/config/config.ts)\n  -h, --help  ');
}

describe('sidecar-injector help and error texts (golden)', () => {
  for (const command of ['', ...Object.keys(Flags)]) {
    it(`prints the same help for ${command === '' ? 'the program' : command}`, async () => {
      const r = await cli(command === '' ? ['--help'] : [command, '--help']);
      assert.equal(r.code, 0);
      await golden(`help/${command === '' ? 'sidecar-injector' : command}.txt`, command === 'serve' ? withoutServeFlags(r.out) : r.out);
    });
  }

  it('says what to do in one line, never a stack trace, for each mistake', async () => {
    const taken = createServer().listen(0, '127.0.0.1');
    await once(taken, 'listening');
    const port = String((taken.address() as AddressInfo).port);
    const selfSigned = await mkdtemp(join(tmpdir(), 'golden-'));
    const T = 'test/fixtures/cli';
    const cases: string[][] = [
      ['frob'],
      ['inject', '-f', `${T}/inputs/pod.yaml`, '--pach'],
      ['inject', '--templates-dir', `${T}/templates`],
      ['inject', '-f', `${T}/inputs/none.yaml`, '--templates-dir', `${T}/templates`],
      ['inject', '-f', `${T}/inputs/pod.yaml`, '--templates-dir', `${T}/no-such-dir`],
      ['inject', '-f', `${T}/inputs/pod.yaml`, '-o', 'xml'],
      ['inject', '-f', `${T}/malformed.yaml`, '--templates-dir', `${T}/templates`],
      ['inject', '-f', '-', '--templates-dir', `${T}/templates`],
      ['explain', '-f', '-', '--namespace-labels', 'team=a,oops'],
      ['lint', '--pod-security', 'lax'],
      ['lint', `${T}/no-such-dir`],
      ['drift', '-n', 'team-a', '-A'],
      ['drift', '--templates-dir', 'templates', '--templates-configmap', 'sidecar-injector/templates'],
      ['version', '-o', 'yaml'],
      ['serve', '--bogus'],
      ['serve', 'now'],
      ['serve', '--port', 'https'],
      ['serve', '--log-level', 'verbose'],
      ['serve', '--templates-dir', `${T}/no-such-dir`],
      ['serve', '--host', '127.0.0.1', '--port', port, '--health-port', '0', '--self-signed-dir', selfSigned],
    ];
    const transcript: string[] = [];
    try {
      for (const args of cases) {
        const r = await cli(args);
        assert.equal(r.out, '', args.join(' '));
        assert.notEqual(r.code, 0, args.join(' '));
        assert.equal(r.err.split('\n').length, 2, `one line: ${r.err}`);
        assert.doesNotMatch(r.err, /\n\s+at /);
        transcript.push(`$ sidecar-injector ${args.join(' ')}\n${r.err}exit ${r.code}\n`);
      }
    } finally {
      taken.close();
    }
    await golden('errors.txt', transcript.join('\n').replaceAll(port, 'PORT').replaceAll(selfSigned, 'DIR'));
  });
});
