import assert from 'node:assert/strict';
import { writeFile, mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parse } from 'yaml';
import { cli } from '../helpers/cli.js';
import { startFakeApiServer, type FakeApiServer } from '../helpers/fake-apiserver.js';

const sct = (namespace: string, name: string, image: string, extra: object = {}): any => ({ metadata: { name, namespace }, spec: { containers: [{ name, image }], ...extra } });

describe('inject and explain with --templates-source cluster (issue 23)', () => {
  let api: FakeApiServer;
  let pod: string;
  before(async () => {
    api = await startFakeApiServer();
    api.applyTemplate(sct('sidecar-injector', 'proxy', 'registry.example.com/proxy:1', { default: true }));
    api.applyTemplate(sct('team-a', 'mesh', 'registry.example.com/mesh:1', { default: true }));
    const broken = sct('team-a', 'broken', 'registry.example.com/broken:1');
    broken.spec.contaners = [];
    api.applyTemplate(broken);
    const dir = await mkdtemp(join(tmpdir(), 'cluster-templates-'));
    pod = join(dir, 'pod.yaml');
    await writeFile(pod, 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  labels: {sidecar-injector.io/inject: "true"}\nspec:\n  containers: [{name: web, image: nginx}]\n');
  });
  after(() => api.close());

  it("injects a pod with its namespace's templates over the cluster-wide ones, naming invalid objects on stderr", async () => {
    const inTeamA = await cli(['inject', '-f', pod, '-n', 'team-a', '--templates-source', 'cluster', '--kubeconfig', api.kubeconfig]);
    assert.equal(inTeamA.code, 0, inTeamA.err);
    assert.deepEqual(parse(inTeamA.out).spec.containers.map((c: any) => c.image), ['nginx', 'registry.example.com/mesh:1']);
    assert.match(inTeamA.err, /sidecartemplate team-a\/broken is invalid and not served: .*contaners/);
    const inTeamB = await cli(['inject', '-f', pod, '-n', 'team-b', '--templates-source', 'cluster', '--kubeconfig', api.kubeconfig]);
    assert.deepEqual(parse(inTeamB.out).spec.containers.map((c: any) => c.image), ['nginx', 'registry.example.com/proxy:1']);
  });

  it('explains with the same set', async () => {
    const res = await cli(['explain', '-f', pod, '-n', 'team-a', '--templates-source', 'cluster', '--kubeconfig', api.kubeconfig, '-o', 'json']);
    assert.equal(res.code, 0, res.err);
    assert.match(res.out, /mesh/);
    assert.doesNotMatch(res.out, /"proxy"/);
  });
});
