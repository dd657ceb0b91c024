import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { readFile, writeFile, mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { oldTemplates, RETIRED, runningPod, templates } from '../helpers/running-pods.js';
import { kubeconfigYaml, startFakeApiServer, type FakeApiServer } from '../helpers/fake-apiserver.js';
import { cli, golden } from '../helpers/cli.js';

const TEMPLATES_DIR = 'test/fixtures/cli/templates';

const apps = (kind: string, name: string) => ({ apiVersion: 'apps/v1', kind, name });
const batch = (kind: string, name: string) => ({ apiVersion: 'batch/v1', kind, name });
const owned = (kind: string, namespace: string, name: string, owner?: { apiVersion: string; kind: string; name: string }) => ({
  apiVersion: kind === 'Job' ? 'batch/v1' : 'apps/v1',
  kind,
  metadata: { name, namespace, ...(owner !== undefined && { ownerReferences: [{ ...owner, uid: `uid-${owner.name}`, controller: true }] }) },
  spec: {},
});

/**
 * A cluster after a template release: the installed ConfigMap holds the current templates; some pods
 * were injected by them, others by the release before (older log agent image, a retired template).
 */
function seed(api: FakeApiServer): void {
  const current = templates();
  const old = oldTemplates();
  const withRetired = templates(undefined, [RETIRED]);
  for (const name of ['shop', 'billing', 'sidecar-injector']) api.putObject({ apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels: { 'kubernetes.io/metadata.name': name } } });
  api.putObject({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'sidecar-injector-templates', namespace: 'sidecar-injector' }, data: Object.fromEntries(['log-agent.yaml', 'mesh.yaml'].map((f) => [f, readFileSync(join(TEMPLATES_DIR, f), 'utf8')])) });
  api.putObject(owned('ReplicaSet', 'shop', 'web-7c9f8b6d4', apps('Deployment', 'web')));
  api.putObject(owned('ReplicaSet', 'shop', 'web-5d4f9c8b7', apps('Deployment', 'web')));
  api.putObject(owned('Job', 'shop', 'nightly-29123', batch('CronJob', 'nightly')));
  api.putObject(owned('Job', 'shop', 'migrate'));
  const pods = [
    // Deployment web: one pod of the new ReplicaSet is current, two of the old one are stale.
    runningPod(current, { namespace: 'shop', generateName: 'web-5d4f9c8b7-', suffix: 'q2w3e', owner: apps('ReplicaSet', 'web-5d4f9c8b7') }),
    runningPod(old, { namespace: 'shop', generateName: 'web-7c9f8b6d4-', suffix: 'a1b2c', owner: apps('ReplicaSet', 'web-7c9f8b6d4') }),
    runningPod(old, { namespace: 'shop', generateName: 'web-7c9f8b6d4-', suffix: 'd4e5f', owner: apps('ReplicaSet', 'web-7c9f8b6d4') }),
    runningPod(current, { namespace: 'shop', name: 'db-0', owner: apps('StatefulSet', 'db') }),
    runningPod(withRetired, { namespace: 'shop', generateName: 'node-agent-', owner: apps('DaemonSet', 'node-agent'), annotations: { 'sidecar-injector.io/templates': 'log-agent,retired' } }),
    runningPod(old, { namespace: 'shop', generateName: 'nightly-29123-', owner: batch('Job', 'nightly-29123') }),
    runningPod(old, { namespace: 'shop', generateName: 'migrate-', owner: batch('Job', 'migrate') }),
    runningPod(old, { namespace: 'shop', name: 'debug' }),
    // A finished Job's pod runs nothing: never listed, though stale.
    runningPod(old, { namespace: 'shop', generateName: 'migrate-', suffix: 'done1', owner: batch('Job', 'migrate'), phase: 'Succeeded' }),
    // Another team's namespace: only with -A.
    runningPod(old, { namespace: 'billing', name: 'invoices-0', owner: apps('StatefulSet', 'invoices') }),
  ];
  for (const pod of pods) api.putObject(pod);
  api.putObject({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'plain', namespace: 'shop' }, spec: { containers: [{ name: 'a', image: 'a' }] }, status: { phase: 'Running' } });
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
    assert.match(r.out, /6 of 8 injected pod\(s\) in namespace shop are out of date, in 5 workload\(s\) \(templates: configmap sidecar-injector\/sidecar-injector-templates/);
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
    assert.equal(r.err, 'sidecar-injector: cannot configure the Kubernetes client: no kubeconfig found ($KUBECONFIG is not set and ~/.kube/config does not exist); pass --kubeconfig or run in a pod with a ServiceAccount\n');
  });

  it('says what to do when the templates ConfigMap is not there, or named wrongly', async () => {
    const missing = await cli(['drift', '-n', 'shop', '--templates-configmap', 'sidecar-injector/nope', ...kube]);
    assert.equal(missing.code, 1);
    assert.equal(missing.err, 'sidecar-injector: ConfigMap sidecar-injector/nope not found; name the installed templates with --templates-configmap NAMESPACE/NAME, or compare with a directory with --templates-dir\n');
    const malformed = await cli(['drift', '--templates-configmap', 'nope', ...kube]);
    assert.equal(malformed.code, 2);
    assert.match(malformed.err, /--templates-configmap must be NAMESPACE\/NAME, got "nope"/);
  });

  it('says which call failed when the API server refuses', async () => {
    const r = await cli(['drift', '-n', 'shop', '--kubeconfig', await wrongTokenKubeconfig(api)]);
    assert.equal(r.code, 1);
    assert.match(r.err, /^sidecar-injector: Kubernetes API call (list pods|list replicasets|list jobs|get namespace shop|get configmap sidecar-injector\/sidecar-injector-templates) failed: HTTP 401: Unauthorized\n$/);
  });
});

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
