import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { SHIPPED_WEBHOOK_CONFIGURATIONS } from '../../src/generated/shipped-webhooks.js';
import { cli } from '../helpers/cli.js';
import { startFakeApiServer, type FakeApiServer } from '../helpers/fake-apiserver.js';
import { oldTemplates, runningPod } from '../helpers/running-pods.js';

const TEMPLATES_DIR = 'test/fixtures/cli/templates';
const MUTATING = { apiVersion: 'admissionregistration.k8s.io/v1', ...SHIPPED_WEBHOOK_CONFIGURATIONS.find((c) => c.kind === 'MutatingWebhookConfiguration')! };
const rs = { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'payments-6d5f8c7b9' };

/**
 * A tenant of namespace shop who can create pods and nothing else attacks `drift --restart`:
 * Deployment payments (another team's, never opted in) runs through ReplicaSet payments-6d5f8c7b9.
 * Every forged pod carries a status annotation of templates a release old (stale), and a
 * `controller: true` ownerReference to that ReplicaSet:
 * - forged-quiet: no opt-in label (no webhook is ever sent it), the ReplicaSet's real uid and labels;
 * - forged-uid: opted in, but a uid that is not the ReplicaSet's;
 * - forged-labels: opted in, the real uid, labels the ReplicaSet's selector does not take;
 * - forged-member: opted in, the real uid and labels: the ReplicaSet does count it as its own, but
 *   the Deployment's pod template does not opt in, so restarting it injects nothing.
 */
async function attackedCluster(): Promise<FakeApiServer> {
  const api = await startFakeApiServer();
  api.putWebhookConfig('mutating', MUTATING);
  api.putObject({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'shop', labels: { 'kubernetes.io/metadata.name': 'shop' } } });
  api.putObject({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'sidecar-injector-templates', namespace: 'sidecar-injector' },
    data: Object.fromEntries(['log-agent.yaml', 'mesh.yaml'].map((f) => [f, readFileSync(join(TEMPLATES_DIR, f), 'utf8')])),
  });
  const spec = { selector: { matchLabels: { app: 'payments' } }, template: { metadata: { labels: { app: 'payments' } } } };
  api.putObject({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'payments', namespace: 'shop', uid: 'uid-payments', generation: 1 },
    spec: { replicas: 1, ...spec },
    status: { observedGeneration: 1, replicas: 1, updatedReplicas: 1, availableReplicas: 1 },
  });
  api.putObject({
    apiVersion: 'apps/v1',
    kind: 'ReplicaSet',
    metadata: {
      name: rs.name,
      namespace: 'shop',
      uid: `uid-${rs.name}`,
      ownerReferences: [{ apiVersion: 'apps/v1', kind: 'Deployment', name: 'payments', uid: 'uid-payments', controller: true }],
    },
    spec,
  });
  const forged = (name: string, labels: Record<string, string>, uid = `uid-${rs.name}`) => {
    const pod = runningPod(oldTemplates(), { namespace: 'shop', name, labels });
    pod.metadata!.ownerReferences = [{ ...rs, uid, controller: true }];
    return pod;
  };
  const quiet = forged('forged-quiet', { app: 'payments' });
  delete quiet.metadata!.labels!['sidecar-injector.io/inject'];
  for (const pod of [
    quiet,
    forged('forged-uid', { app: 'payments' }, 'uid-guessed'),
    forged('forged-labels', { app: 'other' }),
    forged('forged-member', { app: 'payments' }),
  ])
    api.putObject(pod);
  return api;
}

describe('drift follows only real owner chains (forged ownerReferences and status annotations)', () => {
  it('never restarts a Deployment that never opted in, on any run, and reports each forged pod as what it is', async () => {
    const api = await attackedCluster();
    try {
      for (let run = 0; run < 2; run++) {
        const r = await cli(['drift', '-n', 'shop', '--restart', '--poll-interval', '10ms', '--kubeconfig', api.kubeconfig]);
        assert.equal(r.code, 0, r.err);
        assert.deepEqual(api.patches, [], r.out);
        assert.match(r.out, /^leave shop Deployment\/payments \(1 stale pod\(s\)\): its pod template does not opt in to injection/m);
      }
      const report = JSON.parse((await cli(['drift', '-n', 'shop', '-o', 'json', '--kubeconfig', api.kubeconfig])).out);
      assert.deepEqual(
        report.workloads.map((w: any) => [`${w.kind}/${w.name}`, w.templateOptsIn, w.pods.map((p: any) => p.name)]),
        [
          ['Deployment/payments', false, ['forged-member']],
          ['Pod/forged-labels', undefined, ['forged-labels']],
          ['Pod/forged-uid', undefined, ['forged-uid']],
        ],
      );
      assert.equal(report.injected, 3, 'forged-quiet is never sent to the webhooks: not judged');
    } finally {
      await api.close();
    }
  });
});
