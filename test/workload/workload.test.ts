import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InjectorError } from '../../src/errors.js';
import { PodTemplatePaths, asTemplate, getIn, podSites, setIn } from '../../src/workload/workload.js';

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
    ['Deployment', workload('Deployment'), ['spec', 'template'], { generateName: 'web-<hash>-', ownerReferences: ref('apps/v1', 'ReplicaSet', 'web-<hash>') }, false],
    ['StatefulSet', workload('StatefulSet'), ['spec', 'template'], { name: 'web-<ordinal>', generateName: 'web-', ownerReferences: ref('apps/v1', 'StatefulSet', 'web') }, false],
    ['DaemonSet', workload('DaemonSet'), ['spec', 'template'], { generateName: 'web-', ownerReferences: ref('apps/v1', 'DaemonSet', 'web') }, false],
    ['ReplicaSet', workload('ReplicaSet'), ['spec', 'template'], { generateName: 'web-', ownerReferences: ref('apps/v1', 'ReplicaSet', 'web') }, false],
    ['ReplicationController', workload('ReplicationController'), ['spec', 'template'], { generateName: 'web-', ownerReferences: ref('v1', 'ReplicationController', 'web') }, false],
    ['Job', workload('Job'), ['spec', 'template'], { generateName: 'web-', ownerReferences: ref('batch/v1', 'Job', 'web') }, true],
    ['Indexed Job', workload('Job', { completionMode: 'Indexed' }), ['spec', 'template'], { generateName: 'web-<index>-', ownerReferences: ref('batch/v1', 'Job', 'web') }, true],
    ['CronJob', workload('CronJob'), ['spec', 'jobTemplate', 'spec', 'template'], { generateName: 'web-<time>-', ownerReferences: ref('batch/v1', 'Job', 'web-<time>') }, true],
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
      assert.equal(site.ownedByJob, ownedByJob);
      assert.deepEqual(site.pod, { metadata: { labels: { app: 'web' }, ...naming }, spec: podSpec });
    });
  }

  it('takes a Pod as it is, leaving ownedByJob to its ownerReferences', () => {
    const pod = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'one' }, spec: podSpec };
    const [site] = podSites(pod, 'team-a');
    assert.deepEqual(site?.path, []);
    assert.equal(site?.namespace, 'team-a', 'the given namespace when the object has none');
    assert.equal(site?.ownedByJob, undefined);
    assert.deepEqual(site?.pod, pod);
  });

  it('covers every kind in PodTemplatePaths', () => {
    assert.deepEqual(Object.keys(PodTemplatePaths).sort(), ['CronJob', 'DaemonSet', 'Deployment', 'Job', 'Pod', 'ReplicaSet', 'ReplicationController', 'StatefulSet']);
  });

  it('recurses into a List, with the item paths, and skips what holds no pod', () => {
    const list = { apiVersion: 'v1', kind: 'List', items: [{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c' } }, workload('DaemonSet'), 'not an object', workload('Job')] };
    assert.deepEqual(podSites(list, 'default').map((s) => [s.kind, s.path]), [['DaemonSet', ['items', 1, 'spec', 'template']], ['Job', ['items', 3, 'spec', 'template']]]);
  });

  it('finds nothing in a kind without pods, or in a workload without its template', () => {
    assert.deepEqual(podSites({ apiVersion: 'v1', kind: 'Service', metadata: { name: 's' } }, 'default'), []);
    assert.deepEqual(podSites({ apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'd' }, spec: {} }, 'default'), []);
  });

  it('refuses a malformed pod template with INPUT_INVALID naming the workload', () => {
    const bad = { ...workload('Deployment'), spec: { template: { spec: { containers: 'app' } } } };
    assert.throws(() => podSites(bad, 'default'), (err: unknown) => err instanceof InjectorError && err.code === 'INPUT_INVALID' && /^cannot read Deployment shop\/web: /.test(err.message));
  });
});

describe('asTemplate', () => {
  it('gives the injected pod back its template\'s name fields and owners, keeping what injection added', () => {
    const [site] = podSites(workload('Deployment') as never, 'default');
    const injected = { ...site!.pod, metadata: { ...site!.pod.metadata, annotations: { added: 'yes' } } };
    assert.deepEqual(asTemplate(template, injected).metadata, { name: 'ignored', generateName: 'ignored-', labels: { app: 'web' }, annotations: { added: 'yes' } });
  });
});

describe('getIn and setIn', () => {
  it('read a path, undefined past a leaf', () => {
    const doc = { a: [{ b: 1 }] };
    assert.equal(getIn(doc, ['a', 0, 'b']), 1);
    assert.equal(getIn(doc, ['a', 0, 'b', 'c']), undefined);
    assert.equal(getIn(doc, []), doc);
  });

  it('replace a value in a copy, sharing every branch off the path', () => {
    const doc = { a: [{ b: 1 }, { c: 2 }], d: { e: 3 } };
    const out = setIn(doc, ['a', 0, 'b'], 9);
    assert.deepEqual(out, { a: [{ b: 9 }, { c: 2 }], d: { e: 3 } });
    assert.deepEqual(doc.a[0], { b: 1 }, 'the input is not modified');
    assert.equal(out.d, doc.d);
    assert.equal(out.a[1], doc.a[1]);
  });
});
