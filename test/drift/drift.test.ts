import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  compareStatus,
  driftReport,
  MissingReason,
  missingSidecars,
  podDrift,
  recordedStatus,
  rolloutCommand,
  StaleReason,
  workloadOf,
} from '../../src/drift/drift.js';
import { SHIPPED_WEBHOOK_CONFIGURATIONS } from '../../src/generated/shipped-webhooks.js';
import type { Pod } from '../../src/kube/types.js';
import { injectSidecars } from '../../src/inject/mutate.js';
import { selectTemplates } from '../../src/inject/policy.js';
import { clusterSet, compileObject } from '../../src/templates/cluster.js';
import { setFor } from '../../src/templates/load.js';
import { oldTemplates, RETIRED, runningPod, storedPod, templates } from '../helpers/running-pods.js';
import { ownerIndex, type OwnerKind } from '../../src/drift/owners.js';

const current = templates();
const NO_NAMESPACE_OPT_IN = { configurations: SHIPPED_WEBHOOK_CONFIGURATIONS, source: 'shipped', namespaceLabels: new Map() };
const web = { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-7c9f8b6d4' };

/**
 * The listed owners of the test pods, as the apiserver keeps them: uid `uid-NAME` (as the helpers'
 * ownerReferences carry), a selector on no label (so it takes every test pod: each has the inject
 * label or none), and the controller above it when given.
 */
function owners(...objects: [OwnerKind, string, { kind: string; name: string }?, Record<string, string>?][]) {
  const item = ([, name, controller, templateLabels]: (typeof objects)[number]) => ({
    metadata: {
      name,
      namespace: 'shop',
      uid: `uid-${name}`,
      ...(controller !== undefined && { ownerReferences: [{ ...controller, uid: `uid-${controller.name}`, controller: true }] }),
    },
    spec: {
      selector: { matchExpressions: [{ key: 'app', operator: 'DoesNotExist' }] },
      template: { metadata: { labels: templateLabels ?? { 'sidecar-injector.io/inject': 'true' } } },
    },
  });
  const kinds = [...new Set(objects.map(([kind]) => kind))];
  return ownerIndex(kinds.map((kind) => ({ kind, items: objects.filter(([k]) => k === kind).map(item) })));
}

describe('drift', () => {
  it('finds a pod injected by the current templates up to date, though {{ pod.name }} rendered its generateName', () => {
    const pod = runningPod(current, { namespace: 'shop', generateName: 'web-7c9f8b6d4-', owner: web });
    assert.equal(pod.metadata?.name, 'web-7c9f8b6d4-x7k2p');
    assert.deepEqual(podDrift(pod, current), { name: 'web-7c9f8b6d4-x7k2p', state: 'current', recorded: recordedStatus(pod), current: recordedStatus(pod) });
    assert.notEqual(recordedStatus(pod), undefined);
  });

  it('finds a pod with an explicit name up to date (it rendered its own name)', () => {
    const pod = runningPod(current, { namespace: 'shop', name: 'debug' });
    assert.equal(podDrift(pod, current)?.state, 'current');
  });

  it('finds a pod stale when its templates render differently now, naming both digests', () => {
    const pod = runningPod(oldTemplates(), { namespace: 'shop', generateName: 'web-7c9f8b6d4-', owner: web });
    const verdict = podDrift(pod, current)!;
    assert.equal(verdict.state, 'stale');
    assert.equal(verdict.reason, StaleReason.SidecarsChanged);
    // The digest of the rendering, or the template's version: alike in either status format.
    assert.match(verdict.detail!, /^"log-agent" changed \(was [0-9a-f]{16}, now [0-9a-f]{16}\)$/);
    assert.notDeepEqual(verdict.recorded, verdict.current);
  });

  it('finds a pod stale when a template it got is gone', () => {
    const before = templates(undefined, [RETIRED]);
    const pod = runningPod(before, { namespace: 'shop', name: 'legacy', annotations: { 'sidecar-injector.io/templates': 'log-agent,retired' } });
    assert.deepEqual([podDrift(pod, current)?.reason, podDrift(pod, current)?.detail], [StaleReason.TemplateRemoved, 'template "retired" no longer exists']);
  });

  it('finds a pod stale when it would get other templates now (a new default)', () => {
    const pod = runningPod(current, { namespace: 'shop', name: 'p' });
    const meshDefault = templates((t) => t.replace('placement: first', 'placement: first\n  default: true'));
    assert.deepEqual(
      [podDrift(pod, meshDefault)?.reason, podDrift(pod, meshDefault)?.detail],
      [StaleReason.TemplatesChanged, 'injected with "log-agent", would get "log-agent", "mesh" now'],
    );
  });

  it('finds a pod stale when the templates would refuse it now, or no longer inject it', () => {
    const pod = runningPod(current, { namespace: 'shop', name: 'p', annotations: { 'sidecar-injector.io/templates': 'log-agent,mesh' } });
    // mesh now brings a container of the same name as log-agent's: a pod naming both is denied.
    const clash = templates((t) => t.replace('name: mesh-proxy', 'name: log-agent'));
    const refused = podDrift(pod, clash);
    assert.equal(refused?.reason, StaleReason.WouldBeRefused, refused?.detail);
    assert.match(refused?.detail ?? '', /^the templates would refuse it now: the selected templates conflict: /);
    const noDefault = templates((t) => t.replace('default: true', 'default: false'));
    assert.equal(podDrift(runningPod(current, { namespace: 'shop', name: 'q' }), noDefault)?.reason, StaleReason.NoLongerSelected);
  });

  it('judges a pod of an opted-in namespace (no inject label) like any other', () => {
    const pod = runningPod(current, { namespace: 'shop', name: 'p' });
    delete pod.metadata!.labels!['sidecar-injector.io/inject'];
    assert.equal(podDrift(pod, current)?.state, 'current');
  });

  it('skips pods that were never injected and reports an unreadable status annotation', () => {
    assert.equal(podDrift({ metadata: { name: 'plain', namespace: 'shop' }, spec: { containers: [{ name: 'a' }] } }, current), undefined);
    const edited = { metadata: { name: 'x', namespace: 'shop', annotations: { 'sidecar-injector.io/status': '{"templates":"log-agent"}' } } };
    assert.equal(podDrift(edited, current)?.reason, StaleReason.StatusUnreadable);
    assert.equal(recordedStatus({ metadata: { annotations: { 'sidecar-injector.io/status': 'not json' } } }), 'unreadable');
  });

  it('compares statuses by template list, in order, then by what each format records (a digest, or per-template versions)', () => {
    assert.equal(compareStatus({ templates: ['a', 'b'], digest: 'd' }, { templates: ['a', 'b'], digest: 'd' }), undefined);
    assert.equal(compareStatus({ templates: ['a', 'b'], digest: 'd' }, { templates: ['b', 'a'], digest: 'd' })?.reason, StaleReason.TemplatesChanged);
    assert.equal(compareStatus({ templates: ['a'], digest: 'd' }, { templates: ['a'], digest: 'e' })?.reason, StaleReason.SidecarsChanged);
    // The per-template format of the rollout work: the template whose record differs is named.
    const versioned = (v: string) => ({
      templates: ['a', 'b'],
      injected: [
        { template: 'a', version: '1' },
        { template: 'b', version: v },
      ],
    });
    assert.equal(compareStatus(versioned('2'), versioned('2')), undefined);
    assert.deepEqual(compareStatus(versioned('2'), versioned('3')), { reason: StaleReason.SidecarsChanged, detail: '"b" changed (was 2, now 3)' });
    assert.match(compareStatus({ templates: ['a', 'b'], digest: 'd' }, versioned('3'))?.detail ?? '', /recorded in another format/);
  });

  it('finds the owning workload through ReplicaSets and Jobs, and says how to roll each', () => {
    const listed = owners(
      ['ReplicaSet', 'web-7c9f8b6d4', { kind: 'Deployment', name: 'web' }],
      ['Deployment', 'web'],
      ['ReplicaSet', 'orphan-rs'],
      ['StatefulSet', 'db'],
      ['DaemonSet', 'node-agent'],
      ['Job', 'nightly-29123', { kind: 'CronJob', name: 'nightly' }],
      ['CronJob', 'nightly'],
      ['Job', 'migrate'],
    );
    const owned = (kind: string, name: string, apiVersion = 'apps/v1') => ({
      metadata: { name: `${name}-x`, namespace: 'shop', ownerReferences: [{ apiVersion, kind, name, uid: `uid-${name}`, controller: true }] },
    });
    const cases: [Pod, string, string][] = [
      [owned('ReplicaSet', 'web-7c9f8b6d4'), 'Deployment/web', 'kubectl -n shop rollout restart deployment/web'],
      [owned('ReplicaSet', 'orphan-rs'), 'ReplicaSet/orphan-rs', 'kubectl -n shop delete pod orphan-rs-x   # the ReplicaSet creates them again'],
      [owned('StatefulSet', 'db'), 'StatefulSet/db', 'kubectl -n shop rollout restart statefulset/db'],
      [owned('DaemonSet', 'node-agent'), 'DaemonSet/node-agent', 'kubectl -n shop rollout restart daemonset/node-agent'],
      [
        owned('Job', 'nightly-29123', 'batch/v1'),
        'CronJob/nightly',
        'kubectl -n shop create job nightly-refresh --from=cronjob/nightly   # or wait: the next scheduled Job gets the current templates',
      ],
      [owned('Job', 'migrate', 'batch/v1'), 'Job/migrate', 'kubectl -n shop delete job migrate   # then create it again from its manifest'],
      [
        { metadata: { name: 'debug', namespace: 'shop' } },
        'Pod/debug',
        'kubectl -n shop delete pod debug   # then create it again from its manifest: nothing re-creates a bare pod',
      ],
      [owned('Rollout', 'canary', 'argoproj.io/v1alpha1'), 'Rollout/canary', '# restart Rollout shop/canary through its controller'],
    ];
    for (const [pod, ref, command] of cases) {
      const w = workloadOf(pod, listed);
      assert.equal(`${w.kind}/${w.name}`, ref);
      assert.equal(rolloutCommand(w, [(pod as any).metadata.name]), command);
    }
  });

  it('groups injected pods by workload, sorted, keeping only the stale ones unless --all', () => {
    const listed = owners(['ReplicaSet', 'web-7c9f8b6d4', { kind: 'Deployment', name: 'web' }], ['Deployment', 'web'], ['StatefulSet', 'db']);
    const pods = [
      runningPod(current, { namespace: 'shop', generateName: 'web-7c9f8b6d4-', suffix: 'bbbbb', owner: web }),
      runningPod(oldTemplates(), { namespace: 'shop', generateName: 'web-7c9f8b6d4-', suffix: 'aaaaa', owner: web }),
      runningPod(current, { namespace: 'shop', name: 'db-0', owner: { apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'db' } }),
      { metadata: { name: 'plain', namespace: 'shop' } },
    ];
    const stale = driftReport(pods, listed, current, { all: false, source: 'directory x', optIn: NO_NAMESPACE_OPT_IN });
    assert.deepEqual([stale.injected, stale.stale], [3, 1]);
    assert.deepEqual(
      stale.workloads.map((w) => [w.kind, w.name, w.injected, w.stale, w.pods.map((p) => p.name)]),
      [['Deployment', 'web', 2, 1, ['web-7c9f8b6d4-aaaaa']]],
    );
    const all = driftReport(pods, listed, current, { all: true, source: 'directory x', optIn: NO_NAMESPACE_OPT_IN });
    assert.deepEqual(
      all.workloads.map((w) => [w.kind, w.name, w.pods.map((p) => `${p.name}:${p.state}`)]),
      [
        ['Deployment', 'web', ['web-7c9f8b6d4-aaaaa:stale', 'web-7c9f8b6d4-bbbbb:current']],
        ['StatefulSet', 'db', ['db-0:current']],
      ],
    );
  });

  describe('missing sidecars', () => {
    const optedInNamespace = {
      configurations: SHIPPED_WEBHOOK_CONFIGURATIONS,
      source: 'shipped',
      namespaceLabels: new Map([['orders', { 'sidecar-injector.io/inject': 'true' }]]),
    };
    const labelled = { 'sidecar-injector.io/inject': 'true' };

    it('finds a pod injected as admission saw it (defaulted, with the ServiceAccount volume) up to date once stored', () => {
      const seen = storedPod({ namespace: 'shop', generateName: 'web-7c9f8b6d4-', owner: web, labels: labelled });
      // Admission sees generateName alone; the apiserver names the pod after the webhooks.
      const admitted: Pod = structuredClone(seen);
      delete admitted.metadata!.name;
      const selection = selectTemplates(admitted, current);
      assert.ok(selection.inject);
      const injected = injectSidecars(admitted, selection.templates, 'shop').pod;
      const stored: Pod = { ...injected, metadata: { ...injected.metadata, name: 'web-7c9f8b6d4-x7k2p' } };
      assert.equal(podDrift(stored, current)?.state, 'current');
      assert.equal(
        missingSidecars(stored, current, NO_NAMESPACE_OPT_IN)?.state,
        'missing',
        'missingSidecars alone does not read the status; driftReport asks podDrift first',
      );
      assert.deepEqual(driftReport([stored], new Map(), current, { all: false, source: 'x', optIn: NO_NAMESPACE_OPT_IN }).missing, 0);
    });

    it('finds a pod labelled in, stored without an injection status, missing its sidecars', () => {
      const pod = storedPod({ namespace: 'shop', generateName: 'web-7c9f8b6d4-', owner: web, labels: labelled });
      assert.equal(podDrift(pod, current), undefined);
      assert.deepEqual(missingSidecars(pod, current, NO_NAMESPACE_OPT_IN), {
        name: 'web-7c9f8b6d4-x7k2p',
        state: 'missing',
        reason: MissingReason.NotInjected,
        detail: 'no sidecars: label sidecar-injector.io/inject="true", would get "log-agent"',
      });
    });

    it('finds an unlabelled pod of a namespace labelled in missing its sidecars, as /mutate/namespace would inject it', () => {
      const pod = storedPod({ namespace: 'orders', name: 'api-0' });
      assert.equal(missingSidecars(pod, current, optedInNamespace)?.state, 'missing');
      assert.match(missingSidecars(pod, current, optedInNamespace)?.detail ?? '', /^no sidecars: the namespace is labelled sidecar-injector.io\/inject="true"/);
      // The same pod in a namespace not labelled in was never to be injected.
      assert.equal(missingSidecars(pod, current, NO_NAMESPACE_OPT_IN), undefined);
    });

    it('leaves alone the pods the webhooks would not inject: not opted in, opted out, an excluded namespace', () => {
      assert.equal(missingSidecars(storedPod({ namespace: 'shop', name: 'plain' }), current, optedInNamespace), undefined);
      assert.equal(
        missingSidecars(storedPod({ namespace: 'orders', name: 'out', labels: { 'sidecar-injector.io/inject': 'false' } }), current, optedInNamespace),
        undefined,
      );
      // The shipped namespaceSelector keeps kube-system out, whatever the pod's label says.
      assert.equal(missingSidecars(storedPod({ namespace: 'kube-system', name: 'dns', labels: labelled }), current, optedInNamespace), undefined);
      const noDefault = templates((t) => t.replace('default: true', 'default: false'));
      assert.equal(missingSidecars(storedPod({ namespace: 'shop', name: 'p', labels: labelled }), noDefault, NO_NAMESPACE_OPT_IN), undefined);
    });

    it('says when the templates would refuse a missing pod (a restart would leave its workload without pods)', () => {
      const pod = storedPod({ namespace: 'shop', name: 'p', labels: labelled, annotations: { 'sidecar-injector.io/templates': 'log-agent,nope' } });
      const verdict = missingSidecars(pod, current, NO_NAMESPACE_OPT_IN);
      assert.equal(verdict?.reason, MissingReason.WouldBeRefused);
      assert.match(verdict?.detail ?? '', /^no sidecars, and the templates would refuse it now: .*"nope"/);
    });

    it('counts missing pods apart from stale ones, listed with their workload', () => {
      const listed = owners(['ReplicaSet', 'web-7c9f8b6d4', { kind: 'Deployment', name: 'web' }], ['Deployment', 'web']);
      const pods = [
        runningPod(oldTemplates(), { namespace: 'shop', generateName: 'web-7c9f8b6d4-', suffix: 'aaaaa', owner: web }),
        storedPod({ namespace: 'shop', generateName: 'web-7c9f8b6d4-', suffix: 'bbbbb', owner: web, labels: labelled }),
        runningPod(current, { namespace: 'shop', generateName: 'web-7c9f8b6d4-', suffix: 'ccccc', owner: web }),
        storedPod({ namespace: 'shop', name: 'plain' }),
      ];
      const report = driftReport(pods, listed, current, { all: false, source: 'directory x', optIn: NO_NAMESPACE_OPT_IN });
      assert.deepEqual([report.injected, report.stale, report.missing], [2, 1, 1]);
      assert.deepEqual(
        report.workloads.map((w) => [w.kind, w.name, w.injected, w.stale, w.missing, w.pods.map((p) => `${p.name}:${p.state}`), w.rollout]),
        [['Deployment', 'web', 2, 1, 1, ['web-7c9f8b6d4-aaaaa:stale', 'web-7c9f8b6d4-bbbbb:missing'], 'kubectl -n shop rollout restart deployment/web']],
      );
    });
  });

  it("judges per revision (drift --revision): the pods an install injected against its templates, never another install's", () => {
    const rs = (name: string) => ({ apiVersion: 'apps/v1', kind: 'ReplicaSet', name });
    const pods = [
      runningPod(current, { namespace: 'shop', generateName: 'web-7c9f8b6d4-', owner: rs('web-7c9f8b6d4') }),
      runningPod(current, {
        namespace: 'shop',
        generateName: 'api-5d8f9c7b6-',
        owner: rs('api-5d8f9c7b6'),
        labels: { 'sidecar-injector.io/rev': 'canary' },
        revision: 'canary',
      }),
    ];
    const listed = owners(
      ['ReplicaSet', 'web-7c9f8b6d4', { kind: 'Deployment', name: 'web' }],
      ['Deployment', 'web'],
      ['ReplicaSet', 'api-5d8f9c7b6', { kind: 'Deployment', name: 'api' }],
      ['Deployment', 'api'],
    );
    // Each install's webhooks take its own pods: the canary's require sidecar-injector.io/rev=canary.
    const rev = (s: any) => ({ ...s, matchExpressions: s.matchExpressions.filter((r: any) => r.key !== 'sidecar-injector.io/rev') });
    const canaryHooks = SHIPPED_WEBHOOK_CONFIGURATIONS.map((c) => ({
      ...c,
      webhooks: c.webhooks.map((w: any) => ({
        ...w,
        namespaceSelector: rev(w.namespaceSelector),
        objectSelector: {
          ...rev(w.objectSelector),
          matchExpressions: [...rev(w.objectSelector).matchExpressions, { key: 'sidecar-injector.io/rev', operator: 'In', values: ['canary'] }],
        },
      })),
    }));
    const report = (revision?: string) =>
      driftReport(pods, listed, current, {
        all: true,
        source: 'x',
        optIn: revision === 'canary' ? { ...NO_NAMESPACE_OPT_IN, configurations: canaryHooks } : NO_NAMESPACE_OPT_IN,
        ...(revision !== undefined && { revision }),
      });
    const byDefault = report();
    assert.deepEqual([byDefault.injected, byDefault.stale, byDefault.revision], [1, 0, undefined]);
    assert.deepEqual(
      byDefault.workloads.map((w) => w.name),
      ['web'],
    );
    const canary = report('canary');
    assert.deepEqual([canary.injected, canary.stale, canary.revision], [1, 0, 'canary'], 'the canary pod is current with the same templates');
    assert.deepEqual(
      canary.workloads.map((w) => w.name),
      ['api'],
    );
    assert.equal(report('b').injected, 0);
  });

  it("judges each pod against its namespace's templates (SidecarTemplates of team-a over the cluster-wide ones), and counts per namespace", () => {
    const object = (namespace: string, image: string) =>
      compileObject({
        apiVersion: 'sidecar-injector.io/v1alpha1',
        kind: 'SidecarTemplate',
        metadata: { name: 'log', namespace },
        spec: { default: true, containers: [{ name: 'log', image }] },
      });
    const served = (...results: ReturnType<typeof object>[]) =>
      clusterSet(
        results.map((r) => (r.ok ? { key: `${r.template.namespace}/log`, created: '', candidates: [r.template] } : assert.fail(JSON.stringify(r.faults)))),
        'sidecar-injector',
      ).set;
    const wideOnly = served(object('sidecar-injector', 'log:2'));
    const set = served(object('sidecar-injector', 'log:2'), object('team-a', 'log-team:1'));
    const pods = [
      runningPod(setFor(set, 'team-a'), { namespace: 'team-a', name: 'matches-team' }),
      runningPod(wideOnly, { namespace: 'team-a', name: 'before-team' }),
      runningPod(wideOnly, { namespace: 'team-b', name: 'cluster-wide' }),
    ];
    const report = driftReport(pods, new Map(), set, { all: true, source: 'x', optIn: NO_NAMESPACE_OPT_IN });
    assert.deepEqual(
      report.workloads.flatMap((w) => w.pods.map((p) => `${w.namespace}/${p.name}:${p.state}`)),
      ['team-a/before-team:stale', 'team-a/matches-team:current', 'team-b/cluster-wide:current'],
    );
    assert.deepEqual(report.namespaces, [
      { namespace: 'team-a', injected: 2, stale: 1, missing: 0, current: 1 },
      { namespace: 'team-b', injected: 1, stale: 0, missing: 0, current: 1 },
    ]);
  });
});
