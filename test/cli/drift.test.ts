import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { readFile, writeFile, mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { oldTemplates, RETIRED, runningPod, storedPod, templates } from '../helpers/running-pods.js';
import { kubeconfigYaml, startFakeApiServer, webhookConfigObject, type FakeApiServer, type Rollout } from '../helpers/fake-apiserver.js';
import { cli, golden } from '../helpers/cli.js';
import { SHIPPED_WEBHOOK_CONFIGURATIONS } from '../../src/generated/shipped-webhooks.js';

const TEMPLATES_DIR = 'test/fixtures/cli/templates';

const apps = (kind: string, name: string) => ({ apiVersion: 'apps/v1', kind, name });
const batch = (kind: string, name: string) => ({ apiVersion: 'batch/v1', kind, name });
/**
 * A controller as the apiserver stores it: uid `uid-NAME` (the helpers' pods reference their owner
 * so), a selector on `app`, a pod template with that label, and its own controller when given.
 */
const owned = (
  kind: string,
  namespace: string,
  name: string,
  app: string,
  owner?: { apiVersion: string; kind: string; name: string },
  templateLabels: Record<string, string> = {},
) => {
  const template = { metadata: { labels: { app, ...templateLabels } } };
  return {
    apiVersion: kind === 'Job' || kind === 'CronJob' ? 'batch/v1' : 'apps/v1',
    kind,
    metadata: {
      name,
      namespace,
      uid: `uid-${name}`,
      generation: 1,
      ...(owner !== undefined && { ownerReferences: [{ ...owner, uid: `uid-${owner.name}`, controller: true }] }),
    },
    spec: kind === 'CronJob' ? { jobTemplate: { spec: { template } } } : { selector: { matchLabels: { app } }, template },
  };
};
const optedIn = { 'sidecar-injector.io/inject': 'true' };

/**
 * A cluster after a template release: the installed ConfigMap holds the current templates; some pods
 * were injected by them, others by the release before (older log agent image, a retired template).
 */
function seed(api: FakeApiServer): void {
  const current = templates();
  const old = oldTemplates();
  const withRetired = templates(undefined, [RETIRED]);
  for (const name of ['shop', 'billing', 'sidecar-injector'])
    api.putObject({ apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels: { 'kubernetes.io/metadata.name': name } } });
  api.putObject({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'sidecar-injector-templates', namespace: 'sidecar-injector' },
    data: Object.fromEntries(['log-agent.yaml', 'mesh.yaml'].map((f) => [f, readFileSync(join(TEMPLATES_DIR, f), 'utf8')])),
  });
  api.putObject(owned('Deployment', 'shop', 'web', 'web', undefined, optedIn));
  api.putObject(owned('ReplicaSet', 'shop', 'web-7c9f8b6d4', 'web', apps('Deployment', 'web'), optedIn));
  api.putObject(owned('ReplicaSet', 'shop', 'web-5d4f9c8b7', 'web', apps('Deployment', 'web'), optedIn));
  api.putObject(owned('StatefulSet', 'shop', 'db', 'db', undefined, optedIn));
  api.putObject(owned('DaemonSet', 'shop', 'node-agent', 'node-agent', undefined, optedIn));
  api.putObject(owned('CronJob', 'shop', 'nightly', 'nightly', undefined, optedIn));
  api.putObject(owned('Job', 'shop', 'nightly-29123', 'nightly', batch('CronJob', 'nightly'), optedIn));
  api.putObject(owned('Job', 'shop', 'migrate', 'migrate', undefined, optedIn));
  api.putObject(owned('StatefulSet', 'billing', 'invoices', 'invoices', undefined, optedIn));
  const app = (name: string) => ({ app: name });
  const pods = [
    // Deployment web: one pod of the new ReplicaSet is current, two of the old one are stale.
    runningPod(current, { namespace: 'shop', generateName: 'web-5d4f9c8b7-', suffix: 'q2w3e', owner: apps('ReplicaSet', 'web-5d4f9c8b7'), labels: app('web') }),
    runningPod(old, { namespace: 'shop', generateName: 'web-7c9f8b6d4-', suffix: 'a1b2c', owner: apps('ReplicaSet', 'web-7c9f8b6d4'), labels: app('web') }),
    runningPod(old, { namespace: 'shop', generateName: 'web-7c9f8b6d4-', suffix: 'd4e5f', owner: apps('ReplicaSet', 'web-7c9f8b6d4'), labels: app('web') }),
    runningPod(current, { namespace: 'shop', name: 'db-0', owner: apps('StatefulSet', 'db'), labels: app('db') }),
    runningPod(withRetired, {
      namespace: 'shop',
      generateName: 'node-agent-',
      owner: apps('DaemonSet', 'node-agent'),
      labels: app('node-agent'),
      annotations: { 'sidecar-injector.io/templates': 'log-agent,retired' },
    }),
    runningPod(old, { namespace: 'shop', generateName: 'nightly-29123-', owner: batch('Job', 'nightly-29123'), labels: app('nightly') }),
    runningPod(old, { namespace: 'shop', generateName: 'migrate-', owner: batch('Job', 'migrate'), labels: app('migrate') }),
    runningPod(old, { namespace: 'shop', name: 'debug' }),
    // A finished Job's pod runs nothing: never listed, though stale.
    runningPod(old, {
      namespace: 'shop',
      generateName: 'migrate-',
      suffix: 'done1',
      owner: batch('Job', 'migrate'),
      labels: app('migrate'),
      phase: 'Succeeded',
    }),
    // Another team's namespace: only with -A.
    runningPod(old, { namespace: 'billing', name: 'invoices-0', owner: apps('StatefulSet', 'invoices'), labels: app('invoices') }),
  ];
  for (const pod of pods) api.putObject(pod);
  api.putObject({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'plain', namespace: 'shop' },
    spec: { containers: [{ name: 'a', image: 'a' }] },
    status: { phase: 'Running' },
  });
}

describe('sidecar-injector drift (against a fake API server, through a kubeconfig)', () => {
  let api: FakeApiServer;
  let kube: string[];

  before(async () => {
    api = await startFakeApiServer();
    kube = ['--kubeconfig', api.kubeconfig];
    seed(api);
  });
  after(() => api.close());

  it('lists the stale pods by workload with the command that rolls each (text golden)', async () => {
    const r = await cli(['drift', '-n', 'shop', ...kube]);
    assert.equal(r.code, 0, r.err);
    await golden('drift.txt', r.out.replace(/\b[0-9a-f]{16}\b/g, 'D'));
    assert.match(r.out, /^shop Deployment\/web: 2 of 3 pod\(s\) out of date\n {2}web-7c9f8b6d4-a1b2c: "log-agent" changed \(was /m);
    assert.match(r.out, /\n {2}roll: kubectl -n shop rollout restart deployment\/web\n/);
    assert.match(r.out, /node-agent-x7k2p: template "retired" no longer exists/);
    assert.doesNotMatch(r.out, /db-0|q2w3e|plain|done1|invoices/);
    assert.match(
      r.out,
      /6 of 8 injected pod\(s\) in namespace shop are out of date, in 5 workload\(s\) \(templates: configmap sidecar-injector\/sidecar-injector-templates/,
    );
  });

  it('lists every injected pod with --all, and prints JSON with -o json', async () => {
    const r = await cli(['drift', '-n', 'shop', '--all', '-o', 'json', ...kube]);
    const report = JSON.parse(r.out);
    assert.deepEqual([report.injected, report.stale], [8, 6]);
    assert.deepEqual(
      report.workloads.map((w: any) => [`${w.kind}/${w.name}`, w.pods.map((p: any) => `${p.name}:${p.state}:${p.reason ?? ''}`)]),
      [
        ['CronJob/nightly', ['nightly-29123-x7k2p:stale:sidecars-changed']],
        ['DaemonSet/node-agent', ['node-agent-x7k2p:stale:template-removed']],
        ['Deployment/web', ['web-5d4f9c8b7-q2w3e:current:', 'web-7c9f8b6d4-a1b2c:stale:sidecars-changed', 'web-7c9f8b6d4-d4e5f:stale:sidecars-changed']],
        ['Job/migrate', ['migrate-x7k2p:stale:sidecars-changed']],
        ['Pod/debug', ['debug:stale:sidecars-changed']],
        ['StatefulSet/db', ['db-0:current:']],
      ],
    );
    assert.equal(report.workloads.find((w: any) => w.kind === 'Job').rollout, 'kubectl -n shop delete job migrate   # then create it again from its manifest');
  });

  it('looks in every namespace with -A, and compares with a directory given by --templates-dir', async () => {
    const r = await cli(['drift', '-A', '-o', 'json', '--templates-dir', TEMPLATES_DIR, ...kube]);
    const report = JSON.parse(r.out);
    assert.equal(report.templates.source, `directory ${TEMPLATES_DIR}`);
    assert.deepEqual([report.injected, report.stale], [9, 7]);
    assert.deepEqual(report.namespaces, [
      { namespace: 'billing', injected: 1, stale: 1, missing: 0, current: 0 },
      { namespace: 'shop', injected: 8, stale: 6, missing: 0, current: 2 },
    ]);
    assert.deepEqual(report.workloads[0], { ...report.workloads[0], namespace: 'billing', kind: 'StatefulSet', name: 'invoices' });
  });

  it('reads the namespace and the cluster from $KUBECONFIG when no flag names them', async () => {
    const ca = Buffer.from(/certificate-authority-data: "([^"]+)"/.exec(await readFile(api.kubeconfig, 'utf8'))![1]!, 'base64').toString();
    const file = join(await mkdtemp(join(tmpdir(), 'drift-kubeconfig-')), 'config');
    await writeFile(file, kubeconfigYaml(api.url, ca, api.token, 'billing'));
    const r = await withEnv({ KUBECONFIG: file, KUBERNETES_SERVICE_HOST: undefined }, () => cli(['drift']));
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /^billing StatefulSet\/invoices: 1 of 1 pod\(s\) out of date\n/);
    assert.match(r.out, /in namespace billing are out of date/);
  });

  it('says to pass --kubeconfig when there is no kubeconfig at all', async () => {
    const home = await mkdtemp(join(tmpdir(), 'drift-home-'));
    const r = await withEnv({ HOME: home, KUBECONFIG: undefined, KUBERNETES_SERVICE_HOST: undefined }, () => cli(['drift']));
    assert.equal(r.code, 1);
    assert.equal(
      r.err,
      'sidecar-injector: cannot configure the Kubernetes client: no kubeconfig found ($KUBECONFIG is not set and ~/.kube/config does not exist); pass --kubeconfig or run in a pod with a ServiceAccount\n',
    );
  });

  it('says what to do when the templates ConfigMap is not there, or named wrongly', async () => {
    const missing = await cli(['drift', '-n', 'shop', '--templates-configmap', 'sidecar-injector/nope', ...kube]);
    assert.equal(missing.code, 1);
    assert.equal(
      missing.err,
      'sidecar-injector: ConfigMap sidecar-injector/nope not found; name the installed templates with --templates-configmap NAMESPACE/NAME, or compare with a directory with --templates-dir\n',
    );
    // A revision's templates are its own ConfigMap, named as components/revision and the chart name it.
    const revision = await cli(['drift', '-n', 'shop', '--revision', 'canary', ...kube]);
    assert.equal(revision.code, 1);
    assert.match(revision.err, /ConfigMap sidecar-injector\/sidecar-injector-templates-canary not found/);
    const malformed = await cli(['drift', '--templates-configmap', 'nope', ...kube]);
    assert.equal(malformed.code, 2);
    assert.match(malformed.err, /--templates-configmap must be NAMESPACE\/NAME, got "nope"/);
  });

  it('says which call failed when the API server refuses', async () => {
    const r = await cli(['drift', '-n', 'shop', '--kubeconfig', await wrongTokenKubeconfig(api)]);
    assert.equal(r.code, 1);
    assert.match(
      r.err,
      /^sidecar-injector: Kubernetes API call (list pods|list replicasets|list jobs|get namespace shop|list mutatingwebhookconfigurations|get configmap sidecar-injector\/sidecar-injector-templates) failed: HTTP 401: Unauthorized\n$/,
    );
  });
});

/** The MutatingWebhookConfiguration `kubectl apply -k manifests/` installs: the pod-label and the namespace opt-in webhooks. */
const MUTATING = { apiVersion: 'admissionregistration.k8s.io/v1', ...SHIPPED_WEBHOOK_CONFIGURATIONS.find((c) => c.kind === 'MutatingWebhookConfiguration')! };

/**
 * A cluster where the injector was installed after the workloads (or was down when they started):
 * namespace `orders` is labelled in (the namespace opt-in), and its pods carry no injection status.
 * Deployment api (2 pods missing their sidecars), StatefulSet ledger (1 stale pod), DaemonSet agent
 * (1 missing), a bare pod and a Job's pod (missing, never touched), a pod labelled out.
 */
async function coldStartCluster(rollouts: Record<string, Rollout> = {}, webhooks = [MUTATING]): Promise<FakeApiServer> {
  const api = await startFakeApiServer();
  for (const w of webhooks) api.putWebhookConfig('mutating', w);
  api.putObject({
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name: 'orders', labels: { 'kubernetes.io/metadata.name': 'orders', 'sidecar-injector.io/inject': 'true' } },
  });
  api.putObject({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'sidecar-injector', labels: { 'kubernetes.io/metadata.name': 'sidecar-injector' } } });
  api.putObject({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'sidecar-injector-templates', namespace: 'sidecar-injector' },
    data: Object.fromEntries(['log-agent.yaml', 'mesh.yaml'].map((f) => [f, readFileSync(join(TEMPLATES_DIR, f), 'utf8')])),
  });
  api.putObject(owned('ReplicaSet', 'orders', 'api-6b8d7f9c5', 'api', apps('Deployment', 'api')));
  api.putObject(owned('Job', 'orders', 'report', 'report'));
  const workload = (kind: string, name: string, spec: object, status: object) => ({
    apiVersion: 'apps/v1',
    kind,
    metadata: { name, namespace: 'orders', uid: `uid-${name}`, generation: 1 },
    spec: { selector: { matchLabels: { app: name } }, template: { metadata: { labels: { app: name } } }, ...spec },
    status: { observedGeneration: 1, ...status },
  });
  api.putObject(workload('Deployment', 'api', { replicas: 2 }, { replicas: 2, updatedReplicas: 2, readyReplicas: 2, availableReplicas: 2 }));
  api.putObject(
    workload(
      'StatefulSet',
      'ledger',
      { replicas: 1, updateStrategy: { type: 'RollingUpdate' } },
      { replicas: 1, readyReplicas: 1, currentRevision: 'ledger-1', updateRevision: 'ledger-1' },
    ),
  );
  api.putObject(
    workload('DaemonSet', 'agent', { updateStrategy: { type: 'RollingUpdate' } }, { desiredNumberScheduled: 2, updatedNumberScheduled: 2, numberAvailable: 2 }),
  );
  for (const [name, rollout] of Object.entries(rollouts)) {
    const [kind, n] = name.split('/');
    api.setRollout(kind!, 'orders', n!, rollout);
  }
  const pods = [
    storedPod({ namespace: 'orders', generateName: 'api-6b8d7f9c5-', suffix: 'a1b2c', owner: apps('ReplicaSet', 'api-6b8d7f9c5'), labels: { app: 'api' } }),
    storedPod({ namespace: 'orders', generateName: 'api-6b8d7f9c5-', suffix: 'd4e5f', owner: apps('ReplicaSet', 'api-6b8d7f9c5'), labels: { app: 'api' } }),
    runningPod(oldTemplates(), { namespace: 'orders', name: 'ledger-0', owner: apps('StatefulSet', 'ledger'), labels: { app: 'ledger' } }),
    storedPod({ namespace: 'orders', generateName: 'agent-', suffix: 'k8s9x', owner: apps('DaemonSet', 'agent'), labels: { app: 'agent' } }),
    storedPod({ namespace: 'orders', name: 'one-off' }),
    storedPod({ namespace: 'orders', generateName: 'report-', owner: batch('Job', 'report'), labels: { app: 'report' } }),
    storedPod({ namespace: 'orders', name: 'opted-out', labels: { 'sidecar-injector.io/inject': 'false' } }),
  ];
  for (const pod of pods) api.putObject(pod);
  return api;
}

describe('sidecar-injector drift: missing sidecars and --restart (against a fake API server)', () => {
  const patched = (api: FakeApiServer) => api.patches.map((p) => p.path.replace('/apis/apps/v1/namespaces/orders/', ''));

  it('lists opted-in pods without an injection status as missing, apart from stale ones (text and -o json)', async () => {
    const api = await coldStartCluster();
    try {
      const text = await cli(['drift', '-n', 'orders', '--kubeconfig', api.kubeconfig]);
      assert.equal(text.code, 0, text.err);
      assert.match(
        text.out,
        /^orders Deployment\/api: 2 pod\(s\) missing their sidecars\n {2}api-6b8d7f9c5-a1b2c: no sidecars: the namespace is labelled sidecar-injector.io\/inject="true" and the pod has no sidecar-injector.io\/inject label, would get "log-agent"\n/m,
      );
      assert.match(text.out, /\n {2}roll: kubectl -n orders rollout restart deployment\/api\n/);
      assert.match(text.out, /^orders StatefulSet\/ledger: 1 of 1 pod\(s\) out of date\n/m);
      assert.match(text.out, /^orders Pod\/one-off: 1 pod\(s\) missing their sidecars\n/m);
      assert.doesNotMatch(text.out, /opted-out/);
      assert.match(
        text.out,
        /1 of 1 injected pod\(s\) in namespace orders are out of date; 5 opted-in pod\(s\) run without their sidecars, in 5 workload\(s\)/,
      );
      assert.equal(text.err, '');
      const json = JSON.parse((await cli(['drift', '-n', 'orders', '-o', 'json', '--kubeconfig', api.kubeconfig])).out);
      assert.deepEqual([json.injected, json.stale, json.missing], [1, 1, 5]);
      assert.deepEqual(json.webhooks, { source: 'MutatingWebhookConfiguration sidecar-injector' });
      assert.deepEqual(
        json.workloads.map((w: any) => [`${w.kind}/${w.name}`, w.stale, w.missing, w.pods.map((p: any) => `${p.name}:${p.state}:${p.reason}`)]),
        [
          ['DaemonSet/agent', 0, 1, ['agent-k8s9x:missing:not-injected']],
          ['Deployment/api', 0, 2, ['api-6b8d7f9c5-a1b2c:missing:not-injected', 'api-6b8d7f9c5-d4e5f:missing:not-injected']],
          ['Job/report', 0, 1, ['report-x7k2p:missing:not-injected']],
          ['Pod/one-off', 0, 1, ['one-off:missing:not-injected']],
          ['StatefulSet/ledger', 1, 0, ['ledger-0:stale:sidecars-changed']],
        ],
      );
    } finally {
      await api.close();
    }
  });

  it('judges the opt-in by the webhooks as installed: without the namespace opt-in webhook, no pod of an opted-in namespace is judged', async () => {
    // A Helm release with namespaceOptIn.enabled=false installs the pod-label webhook alone.
    const podLabelOnly = { ...MUTATING, metadata: { name: 'injector' }, webhooks: MUTATING.webhooks.filter((w) => w.name === 'inject.sidecar-injector.io') };
    const api = await coldStartCluster({}, [podLabelOnly, { ...webhookConfigObject('mutating', 'someone-else') }]);
    try {
      const json = JSON.parse((await cli(['drift', '-n', 'orders', '-o', 'json', '--kubeconfig', api.kubeconfig])).out);
      // No installed webhook takes namespace orders (the pod-label webhook excludes opted-in
      // namespaces): its unlabelled pods are not missing, and the injected ledger-0 is not judged.
      assert.deepEqual([json.injected, json.stale, json.missing], [0, 0, 0]);
      assert.deepEqual(json.webhooks, { source: 'MutatingWebhookConfiguration injector' });
    } finally {
      await api.close();
    }
  });

  it('falls back to the shipped webhooks, and says so, when none of the injector is installed', async () => {
    const api = await coldStartCluster({}, []);
    try {
      const r = await cli(['drift', '-n', 'orders', '-o', 'json', '--kubeconfig', api.kubeconfig]);
      assert.equal(r.code, 0, r.err);
      assert.deepEqual(JSON.parse(r.out).missing, 5);
      assert.equal(
        r.err,
        "note: no MutatingWebhookConfiguration holds the injector's webhooks (inject.sidecar-injector.io, namespace.inject.sidecar-injector.io): judging which pods are opted in by manifests/base/webhooks.yaml\n",
      );
    } finally {
      await api.close();
    }
  });

  it('prints the plan with --restart --dry-run and patches nothing', async () => {
    const api = await coldStartCluster();
    try {
      const r = await cli(['drift', '-n', 'orders', '--restart', '--dry-run', '--kubeconfig', api.kubeconfig]);
      assert.equal(r.code, 0, r.err);
      assert.equal(
        r.out,
        [
          'would restart orders DaemonSet/agent: 1 missing pod(s)',
          'would restart orders Deployment/api: 2 missing pod(s)',
          'would restart orders StatefulSet/ledger: 1 stale pod(s)',
          'leave orders Job/report (1 missing pod(s)): never restarted by drift: kubectl -n orders delete job report   # then create it again from its manifest',
          'leave orders Pod/one-off (1 missing pod(s)): never restarted by drift: kubectl -n orders delete pod one-off   # then create it again from its manifest: nothing re-creates a bare pod',
          '',
        ].join('\n'),
      );
      assert.deepEqual(api.patches, []);
      assert.deepEqual(
        api.calls.filter((c) => c.method !== 'GET'),
        [],
      );
    } finally {
      await api.close();
    }
  });

  it("rolls each workload with kubectl rollout restart's patch, one at a time, waiting for each rollout", async () => {
    const api = await coldStartCluster();
    try {
      const before = Date.now();
      const r = await cli(['drift', '-n', 'orders', '--restart', '--poll-interval', '10ms', '--kubeconfig', api.kubeconfig]);
      assert.equal(r.code, 0, r.err);
      assert.deepEqual(patched(api), ['daemonsets/agent', 'deployments/api', 'statefulsets/ledger']);
      for (const p of api.patches) {
        assert.equal(p.contentType, 'application/strategic-merge-patch+json');
        const at = p.body.spec.template.metadata.annotations['kubectl.kubernetes.io/restartedAt'];
        assert.deepEqual(p.body, { spec: { template: { metadata: { annotations: { 'kubectl.kubernetes.io/restartedAt': at } } } } });
        assert.match(at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
        assert.ok(Math.abs(Date.parse(at) - before) < 60_000);
      }
      assert.equal(
        api.object('Deployment', 'orders', 'api').spec.template.metadata.annotations['kubectl.kubernetes.io/restartedAt'],
        api.patches[1]!.body.spec.template.metadata.annotations['kubectl.kubernetes.io/restartedAt'],
      );
      // One at a time: a workload is patched only after the one before reads as rolled out.
      const order = api.calls
        .filter((c) => c.path.startsWith('/apis/apps/v1/namespaces/orders/'))
        .map((c) => `${c.method} ${c.path.split('/').slice(-2).join('/')}`);
      const agentLast = order.lastIndexOf('GET daemonsets/agent');
      assert.ok(
        agentLast < order.indexOf('PATCH deployments/api') && order.lastIndexOf('GET deployments/api') < order.indexOf('PATCH statefulsets/ledger'),
        order.join('\n'),
      );
      assert.match(r.out, /^will restart orders DaemonSet\/agent: 1 missing pod\(s\)\n/);
      assert.match(
        r.out,
        /\norders DaemonSet\/agent: restarting\norders DaemonSet\/agent: waiting for the controller to observe the restart\norders DaemonSet\/agent: 1 out of 2 new pods have been updated\norders DaemonSet\/agent: successfully rolled out\n/,
      );
      assert.match(r.out, /\norders Deployment\/api: successfully rolled out\n/);
      assert.match(r.out, /\norders StatefulSet\/ledger: successfully rolled out: 1 pod\(s\) at revision ledger-new\n/);
      assert.match(r.out, /\nrestart: 3 restarted, 0 skipped, 0 failed, 0 not started of 3 workload\(s\)\n$/);
      // Bare pods and Jobs are never touched.
      assert.deepEqual(
        api.calls.filter((c) => c.method !== 'GET' && c.method !== 'PATCH'),
        [],
      );
    } finally {
      await api.close();
    }
  });

  it('rolls at most --max-workloads workloads', async () => {
    const api = await coldStartCluster();
    try {
      const r = await cli([
        'drift',
        '-n',
        'orders',
        '--restart',
        '--max-workloads',
        '1',
        '--poll-interval',
        '10ms',
        '-o',
        'json',
        '--kubeconfig',
        api.kubeconfig,
      ]);
      assert.equal(r.code, 0, r.err);
      assert.deepEqual(patched(api), ['daemonsets/agent']);
      const json = JSON.parse(r.out);
      assert.deepEqual(
        json.restart.results.map((x: any) => `${x.kind}/${x.name}:${x.outcome}`),
        ['DaemonSet/agent:restarted'],
      );
      assert.deepEqual(
        json.restart.untouched.map((x: any) => `${x.kind}/${x.name}`),
        ['Deployment/api', 'Job/report', 'Pod/one-off', 'StatefulSet/ledger'],
      );
      assert.match(r.err, /leave orders Deployment\/api \(2 missing pod\(s\)\): over --max-workloads 1: run again to roll it/);
    } finally {
      await api.close();
    }
  });

  it('stops at a rollout that fails, and exits 1', async () => {
    const api = await coldStartCluster({ 'Deployment/api': 'deadline' });
    try {
      const r = await cli(['drift', '-n', 'orders', '--restart', '--poll-interval', '10ms', '--kubeconfig', api.kubeconfig]);
      assert.equal(r.code, 1);
      assert.deepEqual(patched(api), ['daemonsets/agent', 'deployments/api']);
      assert.match(r.out, /\norders Deployment\/api: failed: deployment "api" exceeded its progress deadline\n/);
      assert.match(r.out, /\nrestart: 1 restarted, 0 skipped, 1 failed, 1 not started of 3 workload\(s\)\n$/);
    } finally {
      await api.close();
    }
  });

  it('stops at a rollout that outlasts --timeout, and exits 1', async () => {
    const api = await coldStartCluster({ 'DaemonSet/agent': 'stuck' });
    try {
      const r = await cli(['drift', '-n', 'orders', '--restart', '--timeout', '300ms', '--poll-interval', '10ms', '--kubeconfig', api.kubeconfig]);
      assert.equal(r.code, 1);
      assert.deepEqual(patched(api), ['daemonsets/agent']);
      assert.match(r.out, /\norders DaemonSet\/agent: timed-out: not rolled out after 0.3s \(--timeout\): 1 out of 2 new pods have been updated\n/);
    } finally {
      await api.close();
    }
  });

  it('says which call the API server refused when the restart RBAC is missing', async () => {
    const api = await coldStartCluster({ 'DaemonSet/agent': 'forbidden' });
    try {
      const r = await cli(['drift', '-n', 'orders', '--restart', '--poll-interval', '10ms', '--kubeconfig', api.kubeconfig]);
      assert.equal(r.code, 1);
      assert.match(
        r.out,
        /\norders DaemonSet\/agent: failed: Kubernetes API call patch daemonset orders\/agent failed: HTTP 403: daemonsets.apps "agent" is forbidden: User "drift" cannot patch/,
      );
    } finally {
      await api.close();
    }
  });

  it("makes only calls that manifests/rbac/drift.yaml grants, and the server's own RBAC grants none of the restart", async () => {
    const api = await coldStartCluster();
    try {
      const r = await cli(['drift', '-n', 'orders', '--restart', '--poll-interval', '10ms', '--kubeconfig', api.kubeconfig]);
      assert.equal(r.code, 0, r.err);
      const drift = rbacRules('manifests/rbac/drift.yaml');
      const server = rbacRules('manifests/base/rbac.yaml');
      const requests = api.calls.map(authorizationOf);
      assert.ok(requests.some((q) => q.verb === 'patch' && q.resource === 'deployments'));
      for (const q of requests) {
        assert.ok(granted(drift, q), `manifests/rbac/drift.yaml grants ${JSON.stringify(q)}`);
        if (q.group === 'apps' && q.verb === 'patch') assert.ok(!granted(server, q), `the server's RBAC must not grant ${JSON.stringify(q)}`);
      }
    } finally {
      await api.close();
    }
  });

  it('refuses a --timeout or --max-workloads it cannot read', async () => {
    const bad = await cli(['drift', '--restart', '--timeout', '5 minutes', '--kubeconfig', '/nonexistent']);
    assert.equal(bad.code, 2);
    assert.match(bad.err, /--timeout must be a duration such as 30s, 5m or 1h, got "5 minutes"/);
    const none = await cli(['drift', '--restart', '--max-workloads', '0', '--kubeconfig', '/nonexistent']);
    assert.equal(none.code, 2);
    assert.match(none.err, /--max-workloads must be a whole number of at least 1, got "0"/);
  });
});

interface Authorization {
  readonly verb: string;
  readonly group: string;
  readonly resource: string;
  readonly namespace: string | undefined;
  readonly name: string | undefined;
}

/** What the apiserver's RBAC authorizer checks for a request: the verb (list for a GET of a collection) and the resource. */
function authorizationOf(call: { method: string; path: string }): Authorization {
  const m = /^\/(?:api\/v1|apis\/([^/]+)\/v1)(?:\/namespaces\/([^/]+))?\/([a-z]+)(?:\/([^/]+))?$/.exec(call.path);
  assert.ok(m, call.path);
  // /api/v1/namespaces/NAME is the namespace itself, not a collection in it.
  const [group, namespace, resource, name] = m[3] === undefined ? [m[1], undefined, 'namespaces', m[2]] : [m[1], m[2], m[3], m[4]];
  const verb = call.method === 'GET' ? (name === undefined ? 'list' : 'get') : call.method.toLowerCase();
  return { verb, group: group ?? '', resource: resource!, namespace, name };
}

type Rule = { apiGroups: string[]; resources: string[]; verbs: string[]; resourceNames?: string[]; namespace?: string };

function rbacRules(file: string): Rule[] {
  const docs = parseAllDocuments(readFileSync(file, 'utf8'))
    .map((d) => d.toJS())
    .filter((o) => o?.rules);
  return docs.flatMap((o) => o.rules.map((r: Rule) => ({ ...r, ...(o.kind === 'Role' && { namespace: o.metadata.namespace }) })));
}

function granted(rules: readonly Rule[], q: Authorization): boolean {
  return rules.some(
    (r) =>
      r.apiGroups.includes(q.group) &&
      r.resources.includes(q.resource) &&
      r.verbs.includes(q.verb) &&
      (r.resourceNames === undefined || r.resourceNames.includes(q.name ?? '')) &&
      (r.namespace === undefined || r.namespace === q.namespace),
  );
}

/** Runs `fn` with these environment variables set (undefined: unset), then puts them back. */
async function withEnv<T>(vars: Record<string, string | undefined>, fn: () => Promise<T>): Promise<T> {
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  const apply = (values: Record<string, string | undefined>): void => {
    for (const [k, v] of Object.entries(values)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  };
  apply(vars);
  try {
    return await fn();
  } finally {
    apply(saved);
  }
}

async function wrongTokenKubeconfig(api: FakeApiServer): Promise<string> {
  const file = join(await mkdtemp(join(tmpdir(), 'drift-bad-')), 'config');
  await writeFile(file, (await readFile(api.kubeconfig, 'utf8')).replace(api.token, 'wrong-token'));
  return file;
}
