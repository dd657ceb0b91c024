import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createKubeClients, type KubeClients } from '../../src/kube/client.js';
import { injectorWebhooks } from '../../src/kube/injector-webhooks.js';
import { SHIPPED_WEBHOOK_CONFIGURATIONS } from '../../src/generated/shipped-webhooks.js';
import { startFakeApiServer, webhookConfigObject, type FakeApiServer } from '../helpers/fake-apiserver.js';

const LIST = '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations';
const shipped = SHIPPED_WEBHOOK_CONFIGURATIONS.find((c) => c.kind === 'MutatingWebhookConfiguration')!;

describe('the injector webhooks drift judges the opt-in by', () => {
  let api: FakeApiServer;
  let kube: KubeClients;
  before(async () => {
    api = await startFakeApiServer();
    kube = createKubeClients({ kubeconfig: api.kubeconfig, namespace: 'default' });
  });
  after(() => api.close());

  it('stands in the shipped ones, with a note, when none is installed', async () => {
    api.putWebhookConfig('mutating', webhookConfigObject('mutating', 'another-product'));
    const found = await injectorWebhooks(kube);
    assert.equal(found.configurations, SHIPPED_WEBHOOK_CONFIGURATIONS);
    assert.match(found.note ?? '', /^no MutatingWebhookConfiguration holds the injector's webhooks/);
  });

  it("keeps the installed configuration's own webhooks, with its selectors as installed", async () => {
    const excluding = { ...shipped, metadata: { name: 'release-sidecar-injector' }, webhooks: shipped.webhooks.map((w) => ({ ...w, namespaceSelector: { matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: ['legacy'] }] } })) };
    api.putWebhookConfig('mutating', { apiVersion: 'admissionregistration.k8s.io/v1', ...excluding });
    const found = await injectorWebhooks(kube);
    assert.equal(found.note, undefined);
    assert.equal(found.source, 'MutatingWebhookConfiguration release-sidecar-injector');
    assert.deepEqual(found.configurations.map((c) => [c.kind, c.metadata.name, c.webhooks?.map((w) => [w.name, w.namespaceSelector?.matchExpressions?.[0]?.values])]), [
      ['MutatingWebhookConfiguration', 'release-sidecar-injector', [['inject.sidecar-injector.io', ['legacy']], ['namespace.inject.sidecar-injector.io', ['legacy']]]],
    ]);
  });

  it('stands in the shipped ones, with a note, when listing them is forbidden', async () => {
    api.forbid(LIST);
    const found = await injectorWebhooks(kube);
    assert.equal(found.configurations, SHIPPED_WEBHOOK_CONFIGURATIONS);
    assert.match(found.note ?? '', /^cannot list mutatingwebhookconfigurations \(HTTP 403\)/);
  });
});
