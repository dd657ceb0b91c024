import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createKubeClients, type KubeClients } from '../../src/kube/client.js';
import { bundleOps, BundleState, isPublished, publishCaBundle } from '../../src/kube/webhooks.js';
import { SHIPPED_WEBHOOK_CONFIGURATIONS } from '../../src/generated/shipped-webhooks.js';
import { startFakeApiServer, webhookConfigObject, type FakeApiServer } from '../helpers/fake-apiserver.js';

const PEM = '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n';
const b64 = (s: string): string => Buffer.from(s).toString('base64');

describe('publishCaBundle', () => {
  let api: FakeApiServer;
  let kube: KubeClients;
  before(async () => {
    api = await startFakeApiServer();
    kube = createKubeClients({ kubeconfig: api.kubeconfig, namespace: 'sidecar-injector' });
  });
  after(() => api.close());

  it('reports both configurations missing before they are applied, without failing', async () => {
    const result = await publishCaBundle(kube.admission, 'sidecar-injector', PEM);
    assert.deepEqual(result, { mutating: BundleState.missing, validating: BundleState.missing });
    assert.equal(isPublished(result), false);
  });

  it('sets the caBundle of every webhook in both configurations, then leaves them alone', async () => {
    api.putWebhookConfig('mutating', webhookConfigObject('mutating', 'sidecar-injector', 2));
    api.putWebhookConfig('validating', webhookConfigObject('validating', 'sidecar-injector'));
    const first = await publishCaBundle(kube.admission, 'sidecar-injector', PEM);
    assert.deepEqual(first, { mutating: BundleState.patched, validating: BundleState.patched });
    for (const kind of ['mutating', 'validating'] as const) {
      for (const hook of api.webhookConfig(kind, 'sidecar-injector').webhooks) assert.equal(hook.clientConfig.caBundle, b64(PEM));
    }
    const patches = api.calls.filter((c) => c.method === 'PATCH').length;
    const second = await publishCaBundle(kube.admission, 'sidecar-injector', PEM);
    assert.deepEqual(second, { mutating: BundleState.unchanged, validating: BundleState.unchanged });
    assert.equal(api.calls.filter((c) => c.method === 'PATCH').length, patches, 'no PATCH when nothing differs');
    assert.equal(isPublished(second), true);
  });

  it('trusts the bundle in all four shipped webhooks, pod scope and namespace scope alike', async () => {
    for (const config of SHIPPED_WEBHOOK_CONFIGURATIONS) {
      const kind = config.kind === 'MutatingWebhookConfiguration' ? 'mutating' : 'validating';
      api.putWebhookConfig(kind, { apiVersion: 'admissionregistration.k8s.io/v1', ...structuredClone(config), metadata: { name: 'shipped' } });
    }
    assert.ok(isPublished(await publishCaBundle(kube.admission, 'shipped', PEM)));
    const paths: string[] = [];
    for (const kind of ['mutating', 'validating'] as const) {
      for (const hook of api.webhookConfig(kind, 'shipped').webhooks) {
        assert.equal(hook.clientConfig.caBundle, b64(PEM), hook.name);
        paths.push(hook.clientConfig.service.path);
      }
    }
    assert.deepEqual(paths, ['/mutate', '/mutate/namespace', '/validate', '/validate/namespace']);
  });

  it('guards each patch with the resourceVersion and the webhook names it read', () => {
    const config = {
      metadata: { resourceVersion: '7' },
      webhooks: [
        { name: 'a', clientConfig: { caBundle: b64(PEM) } },
        { name: 'b', clientConfig: {} },
      ],
    };
    assert.deepEqual(bundleOps(config, b64(PEM)), [
      { op: 'test', path: '/metadata/resourceVersion', value: '7' },
      { op: 'test', path: '/webhooks/1/name', value: 'b' },
      { op: 'add', path: '/webhooks/1/clientConfig/caBundle', value: b64(PEM) },
    ]);
  });
});
