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
    const excluding = {
      ...shipped,
      metadata: { name: 'release-sidecar-injector' },
      webhooks: shipped.webhooks.map((w) => ({
        ...w,
        namespaceSelector: { matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: ['legacy'] }] },
      })),
    };
    api.putWebhookConfig('mutating', { apiVersion: 'admissionregistration.k8s.io/v1', ...excluding });
    const found = await injectorWebhooks(kube);
    assert.equal(found.note, undefined);
    assert.equal(found.source, 'MutatingWebhookConfiguration release-sidecar-injector');
    assert.deepEqual(
      found.configurations.map((c) => [c.kind, c.metadata.name, c.webhooks?.map((w) => [w.name, w.namespaceSelector?.matchExpressions?.[0]?.values])]),
      [
        [
          'MutatingWebhookConfiguration',
          'release-sidecar-injector',
          [
            ['inject.sidecar-injector.io', ['legacy']],
            ['namespace.inject.sidecar-injector.io', ['legacy']],
          ],
        ],
      ],
    );
  });

  it("keeps only the webhooks of the revision asked for, the default install's by default", async () => {
    const rev = (name: string, selector: object) => ({
      name,
      clientConfig: { service: { name: 'x', namespace: 'x', path: '/mutate' } },
      admissionReviewVersions: ['v1'],
      sideEffects: 'None',
      objectSelector: selector,
    });
    const canary = {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'MutatingWebhookConfiguration',
      metadata: { name: 'sidecar-injector-canary' },
      webhooks: [
        rev('inject.sidecar-injector.io', { matchExpressions: [{ key: 'sidecar-injector.io/rev', operator: 'In', values: ['canary'] }] }),
        {
          ...rev('ns-revision.inject.sidecar-injector.io', { matchExpressions: [{ key: 'sidecar-injector.io/rev', operator: 'DoesNotExist' }] }),
          namespaceSelector: { matchExpressions: [{ key: 'sidecar-injector.io/rev', operator: 'In', values: ['canary'] }] },
        },
      ],
    };
    api.putWebhookConfig('mutating', { apiVersion: 'admissionregistration.k8s.io/v1', ...shipped });
    api.putWebhookConfig('mutating', canary);
    const names = (found: Awaited<ReturnType<typeof injectorWebhooks>>) => found.configurations.map((c) => [c.metadata.name, c.webhooks?.map((w) => w.name)]);
    assert.deepEqual(names(await injectorWebhooks(kube, 'canary')), [
      ['sidecar-injector-canary', ['inject.sidecar-injector.io', 'ns-revision.inject.sidecar-injector.io']],
    ]);
    const byDefault = names(await injectorWebhooks(kube));
    assert.ok(
      byDefault.some(([name]) => name === shipped.metadata.name),
      'the default install',
    );
    assert.ok(!byDefault.some(([name]) => name === 'sidecar-injector-canary'), 'not the canary');
  });

  it('stands in the shipped ones, with a note, when listing them is forbidden', async () => {
    api.forbid(LIST);
    const found = await injectorWebhooks(kube);
    assert.equal(found.configurations, SHIPPED_WEBHOOK_CONFIGURATIONS);
    assert.match(found.note ?? '', /^cannot list mutatingwebhookconfigurations \(HTTP 403\)/);
  });
});
