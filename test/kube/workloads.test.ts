import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createKubeClients, type KubeClients } from '../../src/kube/client.js';
import { readWorkload, restartWorkload } from '../../src/kube/workloads.js';
import { startFakeApiServer, type FakeApiServer } from '../helpers/fake-apiserver.js';

describe('the workload calls of drift --restart', () => {
  let api: FakeApiServer;
  let kube: KubeClients;
  before(async () => {
    api = await startFakeApiServer();
    kube = createKubeClients({ kubeconfig: api.kubeconfig, namespace: 'default' });
    for (const kind of ['Deployment', 'StatefulSet', 'DaemonSet']) {
      api.putObject({
        apiVersion: 'apps/v1',
        kind,
        metadata: { name: 'w', namespace: 'shop', generation: 4 },
        spec: { template: { metadata: { annotations: { keep: 'me' } } } },
        status: { observedGeneration: 4 },
      });
    }
  });
  after(() => api.close());

  it('patches each kind with a strategic merge patch that adds restartedAt and keeps the other annotations', async () => {
    const at = new Date('2026-11-28T02:30:00Z');
    for (const kind of ['Deployment', 'StatefulSet', 'DaemonSet'] as const) {
      const patched = await restartWorkload(kube, { namespace: 'shop', kind, name: 'w' }, at);
      assert.equal(patched.metadata?.generation, 5);
      assert.deepEqual(patched.spec?.template.metadata?.annotations, { keep: 'me', 'kubectl.kubernetes.io/restartedAt': '2026-11-28T02:30:00Z' });
      assert.equal((await readWorkload(kube, { namespace: 'shop', kind, name: 'w' })).metadata?.generation, 5);
    }
    assert.deepEqual(
      api.patches.map((p) => [p.path, p.contentType]),
      [
        ['/apis/apps/v1/namespaces/shop/deployments/w', 'application/strategic-merge-patch+json'],
        ['/apis/apps/v1/namespaces/shop/statefulsets/w', 'application/strategic-merge-patch+json'],
        ['/apis/apps/v1/namespaces/shop/daemonsets/w', 'application/strategic-merge-patch+json'],
      ],
    );
  });

  it('names the call that failed', async () => {
    await assert.rejects(
      readWorkload(kube, { namespace: 'shop', kind: 'Deployment', name: 'gone' }),
      /Kubernetes API call get deployment shop\/gone failed: HTTP 404: deployments.apps "gone" not found/,
    );
  });
});
