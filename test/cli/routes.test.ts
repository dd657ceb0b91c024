import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { matchesSelector, namespaceLabels, parseWebhooks, receivingWebhooks, shippedWebhooks } from '../../src/cli/routes.js';

describe('label selectors, as the apiserver evaluates them', () => {
  const labels = { app: 'web', tier: 'front' };
  const cases: [string, Parameters<typeof matchesSelector>[0], boolean][] = [
    ['no selector', undefined, true],
    ['an empty selector', {}, true],
    ['matchLabels that hold', { matchLabels: { app: 'web' } }, true],
    ['matchLabels with another value', { matchLabels: { app: 'db' } }, false],
    ['matchLabels on a missing key', { matchLabels: { team: 'a' } }, false],
    ['In', { matchExpressions: [{ key: 'app', operator: 'In', values: ['web', 'api'] }] }, true],
    ['In on a missing key', { matchExpressions: [{ key: 'team', operator: 'In', values: ['a'] }] }, false],
    ['NotIn', { matchExpressions: [{ key: 'app', operator: 'NotIn', values: ['web'] }] }, false],
    ['NotIn on a missing key', { matchExpressions: [{ key: 'team', operator: 'NotIn', values: ['a'] }] }, true],
    ['Exists', { matchExpressions: [{ key: 'tier', operator: 'Exists' }] }, true],
    ['DoesNotExist', { matchExpressions: [{ key: 'tier', operator: 'DoesNotExist' }] }, false],
    ['an unknown operator', { matchExpressions: [{ key: 'tier', operator: 'Gt', values: ['1'] }] }, false],
    ['labels and expressions together', { matchLabels: { app: 'web' }, matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['front'] }] }, false],
  ];
  for (const [title, selector, expected] of cases) {
    it(`${expected ? 'matches' : 'does not match'} with ${title}`, () => assert.equal(matchesSelector(selector, labels), expected));
  }
});

describe('the shipped webhook configurations', () => {
  it('has a mutating and a validating webhook for pods labelled "true"', async () => {
    const webhooks = await shippedWebhooks();
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
