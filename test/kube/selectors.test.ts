import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { InjectorError } from '../../src/errors.js';
import { namespaceCalls, selectorMatches, webhookCalls, type PodCreate } from '../../src/kube/selectors.js';
import { SHIPPED_WEBHOOK_CONFIGURATIONS } from '../../src/generated/shipped-webhooks.js';
import type { LabelSelector, WebhookConfiguration } from '../../src/kube/types.js';

// The cases of k8s.io/apimachinery's labels selector (LabelSelectorAsSelector and Requirement.Matches),
// written out by hand: each row is a selector, labels, and what the apiserver decides.
const cases: [string, LabelSelector | undefined, Record<string, string>, boolean][] = [
  ['an absent selector matches everything', undefined, {}, true],
  ['an empty selector matches everything', {}, { a: 'b' }, true],
  ['matchLabels needs the key with that value', { matchLabels: { app: 'web' } }, { app: 'web', x: 'y' }, true],
  ['matchLabels refuses another value', { matchLabels: { app: 'web' } }, { app: 'db' }, false],
  ['matchLabels refuses a missing key', { matchLabels: { app: 'web' } }, {}, false],
  ['matchLabels compares the empty value too', { matchLabels: { app: '' } }, { app: '' }, true],
  ['matchLabels ANDs its pairs', { matchLabels: { a: '1', b: '2' } }, { a: '1' }, false],
  ['In holds for a listed value', { matchExpressions: [{ key: 'k', operator: 'In', values: ['x', 'y'] }] }, { k: 'y' }, true],
  ['In fails for another value', { matchExpressions: [{ key: 'k', operator: 'In', values: ['x'] }] }, { k: 'z' }, false],
  ['In fails for a missing key', { matchExpressions: [{ key: 'k', operator: 'In', values: ['x'] }] }, {}, false],
  ['NotIn holds for a missing key', { matchExpressions: [{ key: 'k', operator: 'NotIn', values: ['x'] }] }, {}, true],
  ['NotIn holds for another value', { matchExpressions: [{ key: 'k', operator: 'NotIn', values: ['x'] }] }, { k: 'z' }, true],
  ['NotIn fails for a listed value', { matchExpressions: [{ key: 'k', operator: 'NotIn', values: ['x', 'y'] }] }, { k: 'x' }, false],
  ['Exists holds for any value, even empty', { matchExpressions: [{ key: 'k', operator: 'Exists' }] }, { k: '' }, true],
  ['Exists fails for a missing key', { matchExpressions: [{ key: 'k', operator: 'Exists' }] }, { kk: 'v' }, false],
  ['DoesNotExist holds for a missing key', { matchExpressions: [{ key: 'k', operator: 'DoesNotExist' }] }, {}, true],
  ['DoesNotExist fails for a present key', { matchExpressions: [{ key: 'k', operator: 'DoesNotExist' }] }, { k: 'v' }, false],
  ['matchLabels and matchExpressions are ANDed', { matchLabels: { a: '1' }, matchExpressions: [{ key: 'b', operator: 'Exists' }] }, { a: '1' }, false],
  [
    'expressions are ANDed',
    {
      matchExpressions: [
        { key: 'a', operator: 'Exists' },
        { key: 'b', operator: 'NotIn', values: ['2'] },
      ],
    },
    { a: '1', b: '2' },
    false,
  ],
  ['an inherited property is not a label', { matchExpressions: [{ key: 'toString', operator: 'Exists' }] }, {}, false],
];

describe('selectorMatches', () => {
  for (const [name, selector, labels, want] of cases) {
    it(name, () => assert.equal(selectorMatches(selector, labels), want));
  }

  it('refuses, with SELECTOR_INVALID, the selectors the API server would refuse to store', () => {
    const bad: LabelSelector[] = [
      { matchExpressions: [{ key: 'k', operator: 'In', values: [] }] },
      { matchExpressions: [{ key: 'k', operator: 'NotIn' }] },
      { matchExpressions: [{ key: 'k', operator: 'Exists', values: ['v'] }] },
      { matchExpressions: [{ key: 'k', operator: 'DoesNotExist', values: ['v'] }] },
      { matchExpressions: [{ key: 'k', operator: 'Equals' as 'In', values: ['v'] }] },
    ];
    for (const selector of bad) {
      assert.throws(
        () => selectorMatches(selector, { k: 'v' }),
        (err: unknown) => err instanceof InjectorError && err.code === 'SELECTOR_INVALID' && err.message.includes('key k'),
        JSON.stringify(selector),
      );
    }
  });
});

describe('webhookCalls', () => {
  const hook = (name: string, extra: object = {}) => ({
    name,
    clientConfig: { service: { name: 's', namespace: 'n', path: `/${name}` } },
    rules: [{ operations: ['CREATE'], apiGroups: [''], apiVersions: ['v1'], resources: ['pods'] }],
    ...extra,
  });
  const configs: WebhookConfiguration[] = [
    { kind: 'ValidatingWebhookConfiguration', metadata: { name: 'v' }, webhooks: [hook('v1')] },
    {
      kind: 'MutatingWebhookConfiguration',
      metadata: { name: 'm' },
      webhooks: [
        hook('m1', { failurePolicy: 'Ignore' }),
        hook('deletes', { rules: [{ operations: ['DELETE'], apiGroups: [''], apiVersions: ['v1'], resources: ['pods'] }] }),
        hook('services', { rules: [{ operations: ['*'], apiGroups: ['*'], apiVersions: ['*'], resources: ['services'] }] }),
        hook('wildcard', { rules: [{ operations: ['*'], apiGroups: ['*'], apiVersions: ['*'], resources: ['*'], scope: '*' }] }),
        hook('named', { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'shop' } } }),
        hook('labelled', { objectSelector: { matchLabels: { app: 'web' } } }),
      ],
    },
  ];

  it('calls mutating webhooks first, in order, then validating ones, and only those whose rules cover a pod CREATE', () => {
    const calls = webhookCalls({ namespace: 'other', podLabels: { app: 'web' } }, configs);
    assert.deepEqual(
      calls.map((c) => c.webhook),
      ['m1', 'wildcard', 'labelled', 'v1'],
    );
    assert.deepEqual(calls[0], { configuration: 'MutatingWebhookConfiguration', webhook: 'm1', path: '/m1', failurePolicy: 'Ignore' });
    assert.equal(calls[1]!.failurePolicy, 'Fail', 'admissionregistration/v1 defaults failurePolicy to Fail');
  });

  it('sends the review of a url-based webhook to its URL', () => {
    const remote: WebhookConfiguration = {
      kind: 'MutatingWebhookConfiguration',
      metadata: { name: 'r' },
      webhooks: [{ ...hook('remote'), clientConfig: { url: 'https://hooks.example.com/inject' } }],
    };
    assert.deepEqual(
      webhookCalls({ namespace: 'shop' }, [remote]).map((c) => c.path),
      ['https://hooks.example.com/inject'],
    );
  });

  it('gives every namespace the kubernetes.io/metadata.name label the apiserver sets, whatever the caller says', () => {
    assert.ok(webhookCalls({ namespace: 'shop' }, configs).some((c) => c.webhook === 'named'));
    assert.ok(!webhookCalls({ namespace: 'other', namespaceLabels: { 'kubernetes.io/metadata.name': 'shop' } }, configs).some((c) => c.webhook === 'named'));
  });
});

describe('webhookCalls with the shipped webhook configurations', () => {
  const paths = (pod: PodCreate): string[] => webhookCalls(pod, SHIPPED_WEBHOOK_CONFIGURATIONS).map((c) => c.path);

  it('sends pods labelled "true" to the pod-scope paths, and every pod not labelled "false" of an opted-in namespace to the namespace paths', () => {
    const optedIn = { [`sidecar-injector.io/inject`]: 'true' };
    assert.deepEqual(paths({ namespace: 'shop', podLabels: optedIn }), ['/mutate', '/validate']);
    assert.deepEqual(paths({ namespace: 'shop' }), []);
    assert.deepEqual(paths({ namespace: 'shop', namespaceLabels: optedIn }), ['/mutate/namespace', '/validate/namespace']);
    assert.deepEqual(paths({ namespace: 'shop', namespaceLabels: optedIn, podLabels: { 'sidecar-injector.io/inject': 'false' } }), []);
    assert.deepEqual(paths({ namespace: 'kube-system', namespaceLabels: optedIn, podLabels: optedIn }), []);
  });
});

describe('namespaceCalls', () => {
  it('lists the webhooks that take some pod of the namespace, whatever their objectSelector, and none for an excluded namespace', () => {
    const open = namespaceCalls({ namespace: 'shop' }, SHIPPED_WEBHOOK_CONFIGURATIONS);
    assert.deepEqual(
      open.map((c) => c.path),
      ['/mutate', '/validate'],
    );
    assert.deepEqual(
      namespaceCalls({ namespace: 'shop', namespaceLabels: { 'sidecar-injector.io/inject': 'true' } }, SHIPPED_WEBHOOK_CONFIGURATIONS).map((c) => c.path),
      ['/mutate/namespace', '/validate/namespace'],
    );
    assert.deepEqual(namespaceCalls({ namespace: 'kube-system' }, SHIPPED_WEBHOOK_CONFIGURATIONS), []);
    assert.deepEqual(namespaceCalls({ namespace: 'infra', namespaceLabels: { runlevel: '0' } }, SHIPPED_WEBHOOK_CONFIGURATIONS), []);
  });
});
