import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InjectorError } from '../../src/errors.js';
import { isOwnedByJob } from '../../src/inject/render.js';
import { PodTemplatePaths, getIn, podSites } from '../../src/workload/workload.js';

const podSpec = { containers: [{ name: 'app', image: 'registry.example.com/app:1' }] };
/** The pod template every workload kind carries; its own name fields never reach the pod. */
const template = { metadata: { name: 'ignored', generateName: 'ignored-', labels: { app: 'web' } }, spec: podSpec };

function workload(kind: string, extraSpec: object = {}): Record<string, unknown> {
  const apiVersion = kind === 'Job' || kind === 'CronJob' ? 'batch/v1' : kind === 'ReplicationController' ? 'v1' : 'apps/v1';
  const spec = kind === 'CronJob' ? { schedule: '0 * * * *', jobTemplate: { spec: { template } } } : { ...extraSpec, template };
  return { apiVersion, kind, metadata: { name: 'web', namespace: 'shop' }, spec };
}

const ref = (apiVersion: string, kind: string, name: string) => [{ apiVersion, kind, name, controller: true, blockOwnerDeletion: true }];

describe('podSites: the pod in each workload kind, as its controller creates it', () => {
  const cases: [string, object, readonly (string | number)[], object, boolean][] = [
    [
      'Deployment',
      workload('Deployment'),
      ['spec', 'template'],
      { generateName: 'web-<hash>-', ownerReferences: ref('apps/v1', 'ReplicaSet', 'web-<hash>') },
      false,
    ],
    [
      'StatefulSet',
      workload('StatefulSet'),
      ['spec', 'template'],
      { name: 'web-<ordinal>', generateName: 'web-', ownerReferences: ref('apps/v1', 'StatefulSet', 'web') },
      false,
    ],
    ['DaemonSet', workload('DaemonSet'), ['spec', 'template'], { generateName: 'web-', ownerReferences: ref('apps/v1', 'DaemonSet', 'web') }, false],
    ['ReplicaSet', workload('ReplicaSet'), ['spec', 'template'], { generateName: 'web-', ownerReferences: ref('apps/v1', 'ReplicaSet', 'web') }, false],
    [
      'ReplicationController',
      workload('ReplicationController'),
      ['spec', 'template'],
      { generateName: 'web-', ownerReferences: ref('v1', 'ReplicationController', 'web') },
      false,
    ],
    ['Job', workload('Job'), ['spec', 'template'], { generateName: 'web-', ownerReferences: ref('batch/v1', 'Job', 'web') }, true],
    [
      'Indexed Job',
      workload('Job', { completionMode: 'Indexed' }),
      ['spec', 'template'],
      { generateName: 'web-<index>-', ownerReferences: ref('batch/v1', 'Job', 'web') },
      true,
    ],
    [
      'CronJob',
      workload('CronJob'),
      ['spec', 'jobTemplate', 'spec', 'template'],
      { generateName: 'web-<time>-', ownerReferences: ref('batch/v1', 'Job', 'web-<time>') },
      true,
    ],
  ];
  for (const [title, doc, path, naming, ownedByJob] of cases) {
    it(`finds the pod of a ${title} at ${path.join('/')}`, () => {
      const sites = podSites(doc as never, 'default');
      assert.equal(sites.length, 1);
      const site = sites[0]!;
      assert.equal(site.kind, (doc as { kind: string }).kind);
      assert.equal(site.title, `${site.kind} shop/web`);
      assert.deepEqual(site.path, path);
      assert.equal(site.namespace, 'shop');
      assert.equal(isOwnedByJob(site.pod), ownedByJob, "a Job's pod, as the handlers read it");
      assert.deepEqual(site.pod, { metadata: { labels: { app: 'web' }, ...naming }, spec: podSpec });
    });
  }

  // Issue 21: Knative's storage-version-migration Job has only generateName; its pod is still a Job's pod.
  for (const [title, doc, path, naming] of cases) {
    it(`gives the pod of a ${title} written with only generateName its owner, named as the apiserver names it`, () => {
      const unnamed = { ...doc, metadata: { generateName: 'web-', namespace: 'shop' } };
      const [site] = podSites(unnamed as never, 'default');
      const owner = JSON.parse(JSON.stringify(naming).replaceAll('web', 'web-<suffix>'));
      assert.equal(site?.title, `${site?.kind} shop/web-<suffix>`);
      assert.deepEqual(site?.path, path);
      assert.deepEqual(site?.pod, { metadata: { labels: { app: 'web' }, ...owner }, spec: podSpec });
    });
  }

  it('takes a Pod as it is, leaving whether it belongs to a Job to its ownerReferences', () => {
    const pod = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'one' }, spec: podSpec };
    const [site] = podSites(pod, 'team-a');
    assert.deepEqual(site?.path, []);
    assert.equal(site?.namespace, 'team-a', 'the given namespace when the object has none');
    assert.deepEqual(site?.pod, pod);
  });

  it('covers every kind in PodTemplatePaths', () => {
    assert.deepEqual(Object.keys(PodTemplatePaths).sort(), [
      'CronJob',
      'DaemonSet',
      'Deployment',
      'Job',
      'Pod',
      'ReplicaSet',
      'ReplicationController',
      'StatefulSet',
    ]);
  });

  it('recurses into a List, with the item paths, and skips what holds no pod', () => {
    const list = {
      apiVersion: 'v1',
      kind: 'List',
      items: [{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c' } }, workload('DaemonSet'), 'not an object', workload('Job')],
    };
    assert.deepEqual(
      podSites(list, 'default').map((s) => [s.kind, s.path]),
      [
        ['DaemonSet', ['items', 1, 'spec', 'template']],
        ['Job', ['items', 3, 'spec', 'template']],
      ],
    );
  });

  it('finds nothing in a kind without pods, or in a workload without its template', () => {
    assert.deepEqual(podSites({ apiVersion: 'v1', kind: 'Service', metadata: { name: 's' } }, 'default'), []);
    assert.deepEqual(podSites({ apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'd' }, spec: {} }, 'default'), []);
  });

  it('refuses a malformed pod template with INPUT_INVALID naming the workload', () => {
    const bad = { ...workload('Deployment'), spec: { template: { spec: { containers: 'app' } } } };
    assert.throws(
      () => podSites(bad, 'default'),
      (err: unknown) => err instanceof InjectorError && err.code === 'INPUT_INVALID' && /^cannot read Deployment shop\/web: /.test(err.message),
    );
  });
});

describe('getIn', () => {
  it('reads a path, undefined past a leaf', () => {
    const doc = { a: [{ b: 1 }] };
    assert.equal(getIn(doc, ['a', 0, 'b']), 1);
    assert.equal(getIn(doc, ['a', 0, 'b', 'c']), undefined);
    assert.equal(getIn(doc, []), doc);
  });
});
