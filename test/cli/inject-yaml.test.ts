import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { describe, it } from 'node:test';
import { printDocuments } from '../../src/cli/inject.js';
import { parseDocuments } from '../../src/workload/workload.js';
import { parseKubectl } from '../../src/yaml/kubectl.js';

/** The documents of a text as kubectl reads them: the reference the output is held to. */
const kubectlReads = (text: string): unknown[] => parseKubectl(text).map((d) => d.value).filter((v) => v !== null);
import { cli } from '../helpers/cli.js';

/** Real manifests (see the header of each for its source) that hold YAML 1.1 traps. */
const REAL = ['test/fixtures/yaml/argocd-redis-deployment.yaml', 'test/fixtures/yaml/calico-kube-controllers.yaml'];

describe('inject keeps the meaning kubectl gives the input (YAML 1.1)', () => {
  for (const file of REAL) {
    it(`prints ${file} so that kubectl reads back exactly what it read from the input, when nothing opts in`, async () => {
      const r = await cli(['inject', '-f', file, '--templates-dir', 'templates']);
      assert.equal(r.code, 0, r.err);
      assert.deepEqual(kubectlReads(r.out), kubectlReads(await readFile(file, 'utf8')));
    });
  }

  it('keeps Argo CD redis\'s "no" argument a string: printed unquoted, kubectl would read false', async () => {
    const [doc] = parseDocuments(await readFile(REAL[0]!, 'utf8'), 'argo');
    const out = printDocuments([doc!], 'yaml');
    assert.match(out, /- "no"\n/);
    assert.match(out, /- ""\n/);
  });

  it('reads defaultMode 0440 as octal (288) and prints it as 0440, not as decimal 440', async () => {
    const [doc] = parseDocuments(await readFile(REAL[1]!, 'utf8'), 'calico');
    const volumes = (doc as any).spec.template.spec.volumes;
    assert.equal(volumes[0].secret.defaultMode, 0o440);
    assert.match(printDocuments([doc!], 'yaml'), /defaultMode: 0440\n/);
  });

  it('reports a YAML error in inject -f with its line and column', async () => {
    const r = await cli(['inject', '-f', '-', '--templates-dir', 'templates'], 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: [unclosed\n');
    assert.equal(r.code, 1);
    assert.match(r.err, /^sidecar-injector: cannot read standard input: YAML at line \d+, column \d+: [^\n]*\n$/);
  });
});
