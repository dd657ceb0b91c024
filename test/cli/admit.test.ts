import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { before, describe, it } from 'node:test';
import { checkBody } from '../../src/admission/codec.js';
import { admitPod, type Cluster } from '../../src/cli/admit.js';
import { SHIPPED_WEBHOOK_CONFIGURATIONS } from '../../src/generated/shipped-webhooks.js';
import { loadTemplateSet, type TemplateSet } from '../../src/templates/load.js';
import { parseDocuments, podSites } from '../../src/workload/workload.js';
import { applyPatchV4 } from '../helpers/jsonpatch-v4.js';
import { managedFieldsOf } from '../helpers/managed-fields.js';
import { decodePatch, mutate, podReview, validate } from '../helpers/review.js';

const FIXTURES = 'test/fixtures/cli';
let set: TemplateSet;
before(async () => {
  set = await loadTemplateSet(`${FIXTURES}/templates`);
});

const shipped = (namespaceLabels: Record<string, string> = {}): Cluster => ({ configurations: SHIPPED_WEBHOOK_CONFIGURATIONS, namespaceLabels });

function pod(namespace: string, labels: Record<string, string>): any {
  return podSites(
    { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p', namespace, labels }, spec: { containers: [{ name: 'app', image: 'busybox' }] } },
    'default',
  )[0]!;
}

const optedInNamespace = { 'sidecar-injector.io/inject': 'true' };

describe('admitPod with the namespace opt-in webhooks (issue 12)', () => {
  const cases: [string, string, Record<string, string>, Record<string, string>, string, string][] = [
    ['a pod without the label in an opted-in namespace', 'shop', optedInNamespace, {}, 'injected', 'injected'],
    ['a pod labelled "true" in an opted-in namespace', 'shop', optedInNamespace, { 'sidecar-injector.io/inject': 'true' }, 'injected', 'injected'],
    ['a pod labelled "false" in an opted-in namespace', 'shop', optedInNamespace, { 'sidecar-injector.io/inject': 'false' }, 'not-injected', 'opted-out'],
    ['a pod labelled "yes" in an opted-in namespace', 'shop', optedInNamespace, { 'sidecar-injector.io/inject': 'yes' }, 'not-injected', 'opted-out'],
    ['a pod without the label in a namespace without it', 'shop', {}, {}, 'not-injected', 'not-opted-in'],
    ['a pod labelled "true" in a namespace without the label', 'shop', {}, { 'sidecar-injector.io/inject': 'true' }, 'injected', 'injected'],
    ['a pod of kube-system, even labelled so', 'kube-system', optedInNamespace, {}, 'not-injected', 'namespace-rule'],
  ];
  for (const [title, namespace, nsLabels, labels, verdict, reason] of cases) {
    it(`decides ${title}: ${verdict} (${reason})`, () => {
      const a = admitPod(pod(namespace, labels), set, shipped(nsLabels));
      assert.deepEqual([a.verdict, a.reason], [verdict, reason], a.why.join('; '));
    });
  }

  it('says that the namespace opted the pod in', () => {
    const a = admitPod(pod('shop', {}), set, shipped(optedInNamespace));
    assert.equal(a.why[0], 'the namespace is labelled sidecar-injector.io/inject="true" and the pod has no sidecar-injector.io/inject label');
    assert.ok(a.pod.spec?.containers?.some((c) => c.name === 'log-agent'));
  });
});

describe('admitPod with the shipped webhook configurations', () => {
  it('never sends pods of the system namespaces, nor of a runlevel 0 or 1 namespace', async () => {
    const cluster = shipped();
    for (const ns of ['kube-system', 'kube-public', 'kube-node-lease', 'sidecar-injector']) {
      assert.equal(admitPod(pod(ns, { 'sidecar-injector.io/inject': 'true' }), set, cluster).reason, 'namespace-rule', ns);
    }
    assert.equal(admitPod(pod('infra', { 'sidecar-injector.io/inject': 'true' }), set, shipped({ runlevel: '1' })).reason, 'namespace-rule');
    assert.equal(admitPod(pod('shop', { 'sidecar-injector.io/inject': 'true' }), set, cluster).verdict, 'injected');
  });

  it("gives the validating handler's verdict on the mutated pod", async () => {
    const cluster = shipped();
    const site = pod('shop', { 'sidecar-injector.io/inject': 'true' });
    // The template's container is already in the pod, with another image: /mutate keeps the pod's, /validate refuses it.
    site.pod.spec.containers.push({ name: 'log-agent', image: 'registry.example.com/other:1' });
    const a = admitPod(site, set, cluster);
    assert.equal(a.verdict, 'rejected');
    assert.equal(a.reason, 'sidecars-missing');
    assert.match(
      a.why.at(-1) ?? '',
      /validate\.sidecar-injector\.io \(\/validate\) would reject it: .*container "log-agent" with image repository registry\.example\.com\/log-agent/,
    );
  });
});

describe('admitPod with the review limits of serve', () => {
  /** A Deployment whose containers hold `perContainer` env vars each, every name distinct. */
  const envDeployment = (containers: number, perContainer: number): any =>
    podSites(
      {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: 'envs', namespace: 'shop' },
        spec: {
          selector: { matchLabels: { app: 'envs' } },
          template: {
            metadata: { labels: { app: 'envs', 'sidecar-injector.io/inject': 'true' } },
            spec: {
              containers: Array.from({ length: containers }, (_, c) => ({
                name: `c${c}`,
                image: 'busybox',
                env: Array.from({ length: perContainer }, (_, i) => ({ name: `E${c}_${i}`, value: 'v' })),
              })),
            },
          },
        },
      },
      'default',
    )[0]!;

  it('rejects a pod whose review the server refuses before reading it, counting the managedFields the apiserver adds', () => {
    const site = envDeployment(8, 900);
    // The pod alone fits every body limit: only the managedFields entry (an object of keys per env var) takes it over --max-json-keys.
    assert.doesNotThrow(() => checkBody(JSON.stringify(podReview(site.pod))));
    assert.throws(
      () =>
        checkBody(
          JSON.stringify(podReview({ ...site.pod, metadata: { ...site.pod.metadata, managedFields: [managedFieldsOf(site.pod, 'kube-controller-manager')] } })),
        ),
      /--max-json-keys/,
    );
    const a = admitPod(site, set, shipped());
    assert.deepEqual([a.verdict, a.reason], ['rejected', 'REVIEW_INVALID'], a.why.join('; '));
    assert.match(a.why[0] ?? '', /validate\.sidecar-injector\.io \(\/validate\) receives the pod and has failurePolicy Fail/);
    assert.match(a.why.at(-1) ?? '', /refused before it is read \(HTTP 400\): .*--max-json-keys/);
  });

  it('says the pod goes without sidecars when only webhooks that fail open receive it', () => {
    const mutatingOnly: Cluster = {
      configurations: SHIPPED_WEBHOOK_CONFIGURATIONS.filter((c) => c.kind === 'MutatingWebhookConfiguration'),
      namespaceLabels: {},
    };
    const a = admitPod(envDeployment(8, 900), set, mutatingOnly);
    assert.deepEqual([a.verdict, a.reason], ['not-injected', 'REVIEW_INVALID'], a.why.join('; '));
    assert.match(a.why[0] ?? '', /failurePolicy Ignore, so it is created without sidecars/);
  });

  it('injects a pod of many env vars that stays within the limits', () => {
    const a = admitPod(envDeployment(4, 500), set, shipped());
    assert.equal(a.verdict, 'injected', a.why.join('; '));
    // 3 x 900 env vars: 16 200 keys with the managedFields entry, within --max-json-keys.
    const many = admitPod(envDeployment(3, 900), set, shipped());
    assert.equal(many.verdict, 'injected', many.why.join('; '));
  });
});

describe('admitPod: keys that look meant for the injector (issue 21)', () => {
  const deployment = (workload: Record<string, unknown>, template: Record<string, unknown>): any =>
    podSites(
      {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: 'web', namespace: 'shop', ...workload },
        spec: { template: { metadata: template, spec: { containers: [{ name: 'app', image: 'busybox' }] } } },
      },
      'default',
    )[0]!;

  it('warns of the inject label set on the Deployment instead of its pod template, which admission never sees', () => {
    const a = admitPod(deployment({ labels: { 'sidecar-injector.io/inject': 'true' } }, { labels: { app: 'web' } }), set, shipped());
    assert.equal(a.verdict, 'not-injected');
    assert.deepEqual(a.warnings, [
      'label "sidecar-injector.io/inject" is on the Deployment, not on its pod template (spec.template.metadata): its pods never get it',
    ]);
  });

  it('warns of a typo of the templates annotation in the pod template, as the mutating webhook does', () => {
    const a = admitPod(
      deployment({}, { labels: { 'sidecar-injector.io/inject': 'true' }, annotations: { 'sidecar-injector.io/template': 'x' } }),
      set,
      shipped(),
    );
    assert.equal(a.verdict, 'injected');
    assert.equal(a.warnings[0], 'annotation "sidecar-injector.io/template" is not read by the injector; did you mean "sidecar-injector.io/templates"?');
  });
});

describe('admitPod: a port a sidecar and the pod both declare (issue 21)', () => {
  it("carries the mutating webhook's warning, naming both containers, for explain and inject", async () => {
    const bundled = await loadTemplateSet('templates');
    const site = podSites(
      {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'p', namespace: 'shop', labels: { 'sidecar-injector.io/inject': 'true' }, annotations: { 'sidecar-injector.io/templates': 'proxy' } },
        spec: { containers: [{ name: 'admin', image: 'busybox', ports: [{ containerPort: 9901 }] }] },
      },
      'default',
    )[0]!;
    const a = admitPod(site, bundled, shipped());
    assert.equal(a.verdict, 'injected', a.why.join('; '));
    assert.deepEqual(a.warnings, ['port 9901/TCP of sidecar "proxy" (template proxy) is also declared by container "admin"; one of them will fail to bind']);
  });
});

/**
 * Issue 21: the CLI's verdict is admission's for every workload kind, named or written with only
 * generateName. The reference is built apart from src/workload: the pod each controller really
 * creates (owner named by the apiserver, a uid), sent through the real handlers, its patch applied
 * by the strict evanphx/json-patch v4 applier.
 */
describe('admitPod agrees with admission for every workload kind', () => {
  const kinds: [string, string, string, string][] = [
    // kind, apiVersion, the kind that owns the pods, its apiVersion
    ['Deployment', 'apps/v1', 'ReplicaSet', 'apps/v1'],
    ['StatefulSet', 'apps/v1', 'StatefulSet', 'apps/v1'],
    ['DaemonSet', 'apps/v1', 'DaemonSet', 'apps/v1'],
    ['ReplicaSet', 'apps/v1', 'ReplicaSet', 'apps/v1'],
    ['ReplicationController', 'v1', 'ReplicationController', 'v1'],
    ['Job', 'batch/v1', 'Job', 'batch/v1'],
    ['CronJob', 'batch/v1', 'Job', 'batch/v1'],
  ];
  const template = {
    metadata: { labels: { app: 'w', 'sidecar-injector.io/inject': 'true' } },
    spec: { restartPolicy: 'OnFailure', containers: [{ name: 'main', image: 'busybox' }] },
  };
  const workload = (kind: string, apiVersion: string, meta: object): any => ({
    apiVersion,
    kind,
    metadata: { ...meta, namespace: 'shop' },
    spec: kind === 'CronJob' ? { schedule: '@daily', jobTemplate: { spec: { template } } } : { template },
  });
  /** What admission stores for the pod a controller makes: /mutate's patch applied, then /validate. */
  const admission = (ownerKind: string, ownerApiVersion: string): { allowed: boolean; pod: any } => {
    const owner = 'w-x7k2p';
    const pod = {
      ...template,
      metadata: {
        ...template.metadata,
        generateName: `${owner}-`,
        ownerReferences: [
          {
            apiVersion: ownerApiVersion,
            kind: ownerKind,
            name: owner,
            uid: '6f1c1c44-0d61-4c8e-9a53-7d0f0f6b8a11',
            controller: true,
            blockOwnerDeletion: true,
          },
        ],
      },
    };
    const mutated = applyPatchV4(pod, decodePatch(mutate(podReview(pod, { namespace: 'shop' }).request, set).response));
    return { allowed: validate(podReview(mutated, { namespace: 'shop' }).request, set).response.allowed, pod: mutated };
  };
  const lists = (pod: any): unknown => [pod.spec.initContainers?.map((c: any) => [c.name, c.restartPolicy]), pod.spec.containers.map((c: any) => c.name)];

  for (const [kind, apiVersion, ownerKind, ownerApiVersion] of kinds) {
    for (const [how, meta] of [
      ['named', { name: 'w' }],
      ['written with only generateName', { generateName: 'w-' }],
    ] as const) {
      it(`admits the pod of a ${kind} ${how} as admission does`, () => {
        const reference = admission(ownerKind, ownerApiVersion);
        const a = admitPod(podSites(workload(kind, apiVersion, meta), 'default')[0]!, set, shipped());
        assert.equal(a.verdict === 'injected', reference.allowed, a.why.join('; '));
        assert.deepEqual(lists(a.pod), lists(reference.pod));
      });
    }
  }

  it("injects Knative's storage-version-migration Job (only generateName) with a native sidecar and renders {{ pod.name }}", async () => {
    const [doc] = parseDocuments(await readFile('test/fixtures/yaml/knative-storage-version-migration.yaml', 'utf8'), 'knative');
    const a = admitPod(podSites(doc!, 'default')[0]!, set, shipped(optedInNamespace));
    assert.deepEqual([a.verdict, a.reason], ['injected', 'injected'], a.why.join('; '));
    const agent = a.pod.spec?.initContainers?.find((c) => c.name === 'log-agent');
    assert.equal(agent?.restartPolicy, 'Always');
    assert.deepEqual(
      agent?.env?.find((e) => e.name === 'POD_NAME'),
      { name: 'POD_NAME', value: 'storage-version-migration-serving-<suffix>-' },
    );
  });
});

describe('admitPod at the limits', () => {
  it('says rejected, as /validate answers, for a pod that goes over --max-containers once injected (it threw before)', () => {
    const containers = Array.from({ length: 250 }, (_, i) => ({ name: `c${i}`, image: 'busybox' }));
    const site = podSites(
      { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p', namespace: 'shop', labels: optedInNamespace }, spec: { containers } },
      'default',
    )[0]!;
    const a = admitPod(site, set, shipped());
    assert.deepEqual([a.verdict, a.reason], ['rejected', 'invalid-review'], a.why.join('; '));
    assert.match(a.why.join('; '), /containers/);
  });
});
