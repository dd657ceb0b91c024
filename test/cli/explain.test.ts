import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { cli } from './io.js';

const FIXTURES = 'test/fixtures/cli';
const ARGS = ['-f', `${FIXTURES}/explain.yaml`, '--templates-dir', `${FIXTURES}/templates`];

async function explain(args: string[]): Promise<string> {
  const r = await cli(['explain', ...args]);
  assert.equal(r.code, 0, r.err);
  return r.out;
}

describe('sidecar-injector explain', () => {
  it('gives each pod its verdict and reason', async () => {
    const report = JSON.parse(await explain([...ARGS, '-o', 'json']));
    assert.deepEqual(
      report.map((e: any) => [e.object, e.verdict, e.reason]),
      [
        ['Pod default/no-label', 'not-injected', 'not-opted-in'],
        ['Pod default/opted-out', 'not-injected', 'opted-out'],
        ['Pod default/defaults', 'injected', 'injected'],
        ['Pod default/named', 'injected', 'injected'],
        ['Pod default/typo', 'rejected', 'unknown-template'],
        ['Pod default/refused', 'rejected', 'override-refused'],
        ['Pod kube-system/coredns-x', 'not-injected', 'namespace-rule'],
        ['Job default/migrate', 'injected', 'injected'],
      ],
    );
  });

  it('says why, with which templates, where each goes, and what was overridden (text golden)', async () => {
    const text = await explain(ARGS);
    const file = join(FIXTURES, 'golden', 'explain.txt');
    if (process.env['REFRESH_GOLDEN'] === 'true') await writeFile(file, text);
    assert.equal(text, await readFile(file, 'utf8'));
    assert.match(text, /Pod default\/defaults: injected with log-agent \(injected\)\n {2}- label sidecar-injector.io\/inject="true"\n {2}- no sidecar-injector.io\/templates annotation: the default templates apply/);
    assert.match(text, /\* mesh: container "mesh-proxy" \(registry.example.com\/mesh-proxy:2.0.1\) in containers, first/);
    assert.match(text, /\* log-agent: .*image overridden to registry.example.com\/log-agent:2.0.0/);
    assert.match(text, /Job default\/migrate: .*\n {2}- .*\n {2}- .*\n {2}- the pod belongs to a Job\n {2}\* log-agent: native sidecar "log-agent" .* in initContainers, first/);
    assert.match(text, /unknown sidecar template\(s\) "log-agnet"/);
    assert.match(text, /template "mesh" does not allow overriding memory; it allows cpu/);
  });
});
