import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { namespaceLabels, parseWebhooks, receivingWebhooks, shippedWebhooks } from '../../src/cli/routes.js';

describe('the shipped webhook configurations', () => {
  it('has a mutating and a validating webhook for pods labelled "true"', () => {
    const webhooks = shippedWebhooks();
    const shop = namespaceLabels('shop');
    assert.deepEqual(receivingWebhooks(webhooks, 'mutating', shop, { 'sidecar-injector.io/inject': 'true' }).map((w) => w.path), ['/mutate']);
    assert.deepEqual(receivingWebhooks(webhooks, 'validating', shop, { 'sidecar-injector.io/inject': 'true' }).map((w) => w.path), ['/validate']);
    assert.deepEqual(receivingWebhooks(webhooks, 'mutating', namespaceLabels('kube-system'), { 'sidecar-injector.io/inject': 'true' }), []);
  });

  it('refuses a webhook without a service path', () => {
    const text = 'kind: MutatingWebhookConfiguration\nwebhooks:\n  - name: x\n    clientConfig: {url: "https://example.com"}\n';
    assert.throws(() => parseWebhooks(text, 'w.yaml'), /cannot read w\.yaml: webhook x has no clientConfig\.service\.path/);
  });
});
