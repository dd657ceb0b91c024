import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { admissionView } from '../corpus/admission-view.js';
import { PodsDir, readYaml11 } from '../corpus/corpus.js';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { CLI_ENTRY } from '../helpers/cli.js';
import { startFakeApiServer, type PolicyKind } from '../helpers/fake-apiserver.js';
import { findKubeadmit, kubeadmit, mapLimit, type Admission, type Scenario } from '../helpers/kubeadmit.js';
import { differences, stored } from '../helpers/policy-parity.js';
import { helmObjects, key, kustomizeWithComponent, one, serverConfig, type Obj } from '../manifests/render.js';
import { appPod, INJECT } from './cases.js';
import { deploymentCommand, startInstall, type RunningInstall } from './install.js';

/**
 * An install in policy mode, end to end: the chart (--set mode=policy, Kubernetes 1.36) and the
 * kustomize base with components/policy, rendered by the real helm and kustomize, install no webhook
 * configuration; the admission policies their injector keeps in the cluster, run through the
 * kube-apiserver's own policy plugins (kubeadmit), store the pods the webhook install (the chart's
 * defaults, its injector started as the image starts it) stores, but the status annotation only the
 * webhook writes (docs/policies.md, "Where the stored pods differ"), and refuse what it refuses.
 */
const found = findKubeadmit();
const skip = 'skip' in found ? found.skip : false;
const binary = 'binary' in found ? found.binary : '';

const installs: { name: string; objects: () => Obj[] }[] = [
  { name: 'helm --set mode=policy (Kubernetes 1.36)', objects: () => helmObjects({ set: { mode: 'policy' } }, ['--kube-version', '1.36.0']) },
  { name: 'kustomize manifests/base + components/policy', objects: () => kustomizeWithComponent('base', 'components/policy') },
];

/** The HTTP methods each RBAC verb allows (enough for the calls the injector makes). */
const METHODS: Record<string, string[]> = {
  get: ['GET'],
  list: ['GET'],
  watch: ['GET'],
  create: ['POST', 'CREATE'], // CREATE: the stand-in asks it of a server-side apply that creates the object
  update: ['PUT'],
  patch: ['PATCH'],
  delete: ['DELETE'],
};

/** What the API stand-in grants: discovery, and the calls the rendered RBAC bound to the injector's ServiceAccount allows, nothing else. */
function rbacOf(objects: readonly Obj[]): (method: string, path: string) => boolean {
  const account = one(objects, 'ServiceAccount').metadata;
  const rules = objects
    .filter((o) => o.kind.endsWith('RoleBinding') && o.subjects.some((s: Obj) => s.kind === 'ServiceAccount' && s.name === account.name))
    .flatMap((b) => one(objects, b.roleRef.kind, b.roleRef.name).rules as Obj[]);
  return (method, path) => {
    if (/^\/(api|apis)(\/[^/]+(\/[^/]+)?)?$/.test(path)) return true; // discovery: every authenticated user (system:discovery)
    const m = /^\/apis\/([^/]+)\/[^/]+\/([a-z]+)/.exec(path);
    return (
      m !== null && rules.some((r) => r.apiGroups.includes(m[1]) && r.resources.includes(m[2]) && r.verbs.some((v: string) => METHODS[v]?.includes(method)))
    );
  };
}

/**
 * The policies the install's injector keeps in the cluster: its injector started as its Deployment
 * runs it in the image (args, environment, the templates ConfigMap as the kubelet mounts it), in
 * front of the API stand-in, which grants only what the install's RBAC grants; what it has written
 * once its first sync is logged.
 */
async function policiesOf(objects: readonly Obj[], dir: string): Promise<string> {
  const { nodeFlags, args, env } = await deploymentCommand(objects, dir);
  const api = await startFakeApiServer();
  api.grantOnly(rbacOf(objects));
  const child = spawn(process.execPath, [...nodeFlags, ...CLI_ENTRY, ...args, `--kubeconfig=${api.kubeconfig}`, '--health-port=0', '--host=127.0.0.1'], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  try {
    await new Promise<void>((resolve, reject) => {
      createInterface({ input: child.stdout! }).on('line', (line) => {
        if (line.includes('"policies synced"')) resolve();
        if (line.includes('"policies not synced')) reject(new Error(line));
      });
      child.on('close', (code) => reject(new Error(`the injector exited (${code})`)));
    });
    const items = ['MutatingAdmissionPolicy', 'MutatingAdmissionPolicyBinding', 'ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding'].flatMap((k) =>
      api.policies(k as PolicyKind),
    );
    assert.ok(items.length > 0, 'the injector wrote its policies');
    const file = join(dir, 'policies.json');
    await writeFile(file, JSON.stringify({ apiVersion: 'v1', kind: 'List', items }));
    return file;
  } finally {
    child.kill('SIGKILL');
    await api.close();
  }
}

const shop = (nsLabels: Record<string, string>, pod: Obj, namespace = 'shop'): Scenario => ({
  namespace,
  namespaces: { [namespace]: { labels: nsLabels } },
  object: pod,
});

/** The pods each install is tried with: each way to opt in and out, each selection of the bundled templates, a Job's pod. */
function scenarios(): { what: string; scenario: Scenario }[] {
  const deployment = readYaml11('examples/deployment.yaml')[0]!;
  const job = readYaml11(
    join(
      PodsDir,
      readdirSync(PodsDir).find((f) => f === 'istio-job.yaml')!,
    ),
  )[0]!;
  return [
    { what: 'a pod opted in by its label', scenario: shop({}, appPod({ [INJECT]: 'true' })) },
    { what: 'a pod of a namespace opted in', scenario: shop({ [INJECT]: 'true' }, appPod()) },
    { what: 'a pod opted out in an opted-in namespace', scenario: shop({ [INJECT]: 'true' }, appPod({ [INJECT]: 'false' })) },
    { what: 'a pod of kube-system', scenario: shop({ [INJECT]: 'true' }, appPod({ [INJECT]: 'true' }), 'kube-system') },
    { what: "a pod of the injector's namespace", scenario: shop({}, appPod({ [INJECT]: 'true' }), 'sidecar-injector') },
    ...[['proxy'], ['log-shipper', 'proxy']].map((selection) => ({
      what: `examples/deployment.yaml with ${selection.join(',')}`,
      scenario: shop({}, admissionView(deployment, selection, 'shop').pod),
    })),
    { what: "a Job's pod (native sidecar)", scenario: shop({}, admissionView(job, [], 'shop').pod) },
    { what: 'a pod naming an unknown template', scenario: shop({}, admissionView(deployment, ['log-shiper'], 'shop').pod) },
  ];
}

describe('an install in policy mode, through the apiserver admission code (kubeadmit)', { skip }, () => {
  let webhook: RunningInstall;
  let dir: string;
  const webhookObjects = helmObjects();
  const cases = scenarios();
  let answers: Admission[];
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'policy-mode-'));
    webhook = await startInstall(binary, webhookObjects);
    answers = await mapLimit(cases, 3, (c) => webhook.admit(c.scenario));
  });
  after(async () => {
    await webhook?.close();
    await rm(dir, { recursive: true, force: true });
  });

  for (const install of installs) {
    it(`${install.name}: no webhook configuration; its policies store the pods the webhook install stores, and refuse what it refuses`, async () => {
      const objects = install.objects();
      assert.deepEqual(
        objects.filter((o) => o.kind.endsWith('WebhookConfiguration') || o.kind === 'Service').map(key),
        [],
        'no webhook configuration, no Service',
      );
      assert.equal(serverConfig(objects).mode, 'policy');
      const templates = (o: readonly Obj[]) => one(o, 'ConfigMap').data;
      assert.deepEqual(templates(objects), templates(webhookObjects), 'the same templates as the webhook install');
      const own = await mkdtemp(join(dir, 'install-'));
      const rendered = join(own, 'install.json');
      await writeFile(rendered, JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }));
      // Everything the install put in the cluster (a webhook configuration among the rendered objects would be called) and the policies its injector keeps.
      const configs = [rendered, await policiesOf(objects, own)];
      const results = await mapLimit(cases, 3, (c) => kubeadmit({ binary, configs, addr: webhook.addr, ca: webhook.caFile }, c.scenario));
      cases.forEach(({ what }, i) => {
        const [w, p] = [answers[i]!, results[i]!];
        assert.equal(p.calls.length, 0, `${what}: no webhook in the pod's path`);
        assert.equal(p.allowed, w.allowed, `${what}: webhook ${w.reason ?? 'allowed'}; policies ${p.reason ?? 'allowed'}`);
        if (!w.allowed) {
          assert.match(
            p.reason ?? '',
            /ValidatingAdmissionPolicy 'sidecar-injector-validate' with binding 'sidecar-injector-validate-pod' denied request: unknown sidecar template/,
            what,
          );
          return;
        }
        const diff = differences(stored(p), stored(w));
        assert.deepEqual(diff, [], `${what}: the policies' pod differs from the webhook's at ${diff.join('; ')}`);
      });
      assert.deepEqual(
        answers.map((a) => a.allowed && (a.object?.spec?.containers?.length ?? 0) + (a.object?.spec?.initContainers?.length ?? 0) > 1),
        cases.map((c) => !/opted out|kube-system|injector's namespace|unknown/.test(c.what)),
        'the webhook install injected where it should, so the comparison compares injected pods',
      );
    });
  }
});
