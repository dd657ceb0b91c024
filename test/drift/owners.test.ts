import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ownerIndex, podOwner } from '../../src/drift/owners.js';
import type { Pod } from '../../src/kube/types.js';

const meta = (name: string, uid: string, controller?: { kind: string; name: string; uid: string }) => ({
  name,
  namespace: 'shop',
  uid,
  ...(controller !== undefined && { ownerReferences: [{ apiVersion: 'x', ...controller, controller: true }] }),
});
const spec = (app: string) => ({ selector: { matchLabels: { app } }, template: { metadata: { labels: { app, 'sidecar-injector.io/inject': 'true' } } } });
const owners = ownerIndex([
  { kind: 'Deployment', items: [{ metadata: meta('web', 'u-web'), spec: spec('web') }] },
  {
    kind: 'ReplicaSet',
    items: [
      { metadata: meta('web-1', 'u-web-1', { kind: 'Deployment', name: 'web', uid: 'u-web' }), spec: spec('web') },
      { metadata: meta('fake-rs', 'u-fake-rs', { kind: 'Deployment', name: 'web', uid: 'u-other' }), spec: spec('web') },
      { metadata: meta('open-rs', 'u-open-rs'), spec: { selector: {} } },
    ],
  },
  {
    kind: 'CronJob',
    items: [{ metadata: meta('nightly', 'u-nightly'), spec: { jobTemplate: { spec: { template: { metadata: { labels: { app: 'n' } } } } } } }],
  },
  { kind: 'Job', items: [{ metadata: meta('nightly-1', 'u-nightly-1', { kind: 'CronJob', name: 'nightly', uid: 'u-nightly' }), spec: spec('n') }] },
]);
const pod = (ref: { kind: string; name: string; uid?: string }, app = 'web'): Pod => ({
  metadata: { name: 'p', namespace: 'shop', labels: { app }, ownerReferences: [{ apiVersion: 'x', uid: '', ...ref, controller: true }] },
});
const where = (p: Pod) => {
  const o = podOwner(p, owners);
  return `${o.kind}/${o.name}`;
};

describe('owner chains', () => {
  it('follows a ReplicaSet to its Deployment and a Job to its CronJob when every uid and selector matches', () => {
    assert.equal(where(pod({ kind: 'ReplicaSet', name: 'web-1', uid: 'u-web-1' })), 'Deployment/web');
    assert.equal(where(pod({ kind: 'Job', name: 'nightly-1', uid: 'u-nightly-1' }, 'n')), 'CronJob/nightly');
    assert.deepEqual(podOwner(pod({ kind: 'ReplicaSet', name: 'web-1', uid: 'u-web-1' }), owners).object?.templateLabels, {
      app: 'web',
      'sidecar-injector.io/inject': 'true',
    });
  });

  it('leaves a pod on its own when the owner it names is absent, has another uid, or its selector does not take the pod', () => {
    assert.equal(where(pod({ kind: 'ReplicaSet', name: 'gone', uid: 'u-gone' })), 'Pod/p');
    assert.equal(where(pod({ kind: 'ReplicaSet', name: 'web-1', uid: 'u-guess' })), 'Pod/p');
    assert.equal(where(pod({ kind: 'ReplicaSet', name: 'web-1' })), 'Pod/p', 'no uid at all');
    assert.equal(where(pod({ kind: 'ReplicaSet', name: 'web-1', uid: 'u-web-1' }, 'other')), 'Pod/p');
    assert.equal(where(pod({ kind: 'ReplicaSet', name: 'open-rs', uid: 'u-open-rs' })), 'Pod/p', 'an empty selector proves nothing');
    assert.equal(where(pod({ kind: 'Deployment', name: 'web', uid: 'u-web' })), 'Pod/p', 'a Deployment never owns a pod directly');
  });

  it('stops at a ReplicaSet whose own controller reference is forged', () => {
    assert.equal(where(pod({ kind: 'ReplicaSet', name: 'fake-rs', uid: 'u-fake-rs' })), 'ReplicaSet/fake-rs');
  });
});
