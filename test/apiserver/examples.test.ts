import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { parse, parseAllDocuments } from 'yaml';
import { findKubeadmit, mapLimit, type Admission } from '../helpers/kubeadmit.js';
import { kustomizeObjects, kustomizeWithComponent } from '../manifests/render.js';
import { appPod, assertInjected, containerNames, INJECT, status } from './cases.js';
import { startInstall, writeConfigurations, type RunningInstall } from './install.js';

/**
 * What the README and examples/ promise, through the kube-apiserver's admission code (kubeadmit)
 * and the kustomize base install: every bundled template, every example pod, the README's commands
 * and its first template, each admitted and stored as the README says.
 */
const found = findKubeadmit();
const skip = 'skip' in found ? found.skip : false;
const binary = 'binary' in found ? found.binary : '';

const README = readFileSync('README.md', 'utf8');
const OPTED_IN = (ns: string) => ({ [ns]: { labels: { [INJECT]: 'true' } } });

/** The YAML block of the README that starts with the comment `# <file>`. */
function readmeYaml(file: string): string {
  const block = README.split('```yaml\n')
    .map((b) => b.split('\n```')[0]!)
    .find((b) => b.startsWith(`# ${file}\n`));
  if (block === undefined) throw new Error(`README.md has no yaml block starting "# ${file}"`);
  return block;
}

/** The pod a template of a workload becomes, as its controller creates it. */
function podOf(workload: any, generateName: string): any {
  const t = workload.spec.template;
  return { apiVersion: 'v1', kind: 'Pod', metadata: { generateName, ...t.metadata }, spec: t.spec };
}

describe('the README and examples/, through the apiserver admission code (kubeadmit)', { skip }, () => {
  let running: RunningInstall;
  before(async () => (running = await startInstall(binary, kustomizeObjects('base'))));
  after(() => running?.close());

  it('every bundled template (templates/), named by a pod, is injected whole', async () => {
    const templates = readdirSync('templates')
      .filter((f) => f.endsWith('.yaml'))
      .map((f) => parse(readFileSync(`templates/${f}`, 'utf8')));
    const results = await mapLimit(templates, 4, (t) =>
      running.admit({ namespace: 'shop', namespaces: OPTED_IN('shop'), object: appPod({}, { 'sidecar-injector.io/templates': t.metadata.name }) }),
    );
    for (const [i, t] of templates.entries()) {
      const res = results[i]!;
      assertInjected(res, { scope: 'namespace', templates: [t.metadata.name] });
      const native = t.spec.nativeSidecar === true;
      for (const c of t.spec.containers)
        assert.ok(containerNames(res).includes(native ? `init:${c.name}` : c.name), `${t.metadata.name}: ${c.name} in ${containerNames(res).join(' ')}`);
      for (const v of t.spec.volumes ?? [])
        assert.ok(
          res.object.spec.volumes.some((p: any) => p.name === v.name),
          `${t.metadata.name}: volume ${v.name}`,
        );
    }
  });

  it('examples/pod.yaml, examples/deployment.yaml and the objects of both example reviews (the v1beta1 one through a v1beta1-only configuration)', async () => {
    const pod = parse(readFileSync('examples/pod.yaml', 'utf8'));
    const deployment = parse(readFileSync('examples/deployment.yaml', 'utf8'));
    const v1 = JSON.parse(readFileSync('examples/review-v1.json', 'utf8')).request;
    const v1beta1 = JSON.parse(readFileSync('examples/review-v1beta1-controller-pod.json', 'utf8')).request;
    const v1beta1Only = structuredClone(running.configurations);
    for (const c of v1beta1Only) for (const w of c.webhooks) w.admissionReviewVersions = ['v1beta1'];
    const v1beta1Configs = await writeConfigurations(v1beta1Only);
    const [p, d, r1, r2] = await Promise.all([
      running.admit({ namespace: 'default', object: pod }),
      running.admit({ namespace: 'shop', object: podOf(deployment, 'checkout-6b8d7c9f4-') }),
      running.admit({ namespace: v1.namespace, object: v1.object }),
      running.admit({ namespace: v1beta1.namespace, object: v1beta1.object }, { configs: [v1beta1Configs] }),
    ]);
    // The pod names log-shipper and proxy; proxy is a native sidecar (templates/proxy.yaml).
    assertInjected(p!, { scope: 'pod', templates: ['log-shipper', 'proxy'] });
    assert.deepEqual(containerNames(p!), ['init:proxy', 'web', 'log-shipper']);
    assertInjected(d!, { scope: 'pod' });
    assert.deepEqual(containerNames(d!), ['checkout', 'log-shipper']);
    assertInjected(r1!, { scope: 'pod', templates: ['log-shipper', 'proxy'] });
    assertInjected(r2!, { scope: 'pod' });
    assert.deepEqual(
      r2!.calls.map((c) => c.version),
      ['v1beta1', 'v1beta1'],
    );
  });

  it("the README's kubectl commands: `kubectl -n demo run demo` in a labelled namespace, `kubectl run solo --labels=...`, a Deployment's pods, proxy by name", async () => {
    const run = (name: string, labels: Record<string, string> = {}) => ({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, labels: { run: name, ...labels } },
      spec: { containers: [{ name, image: 'nginx' }] },
    });
    const web = { spec: { template: { metadata: { labels: { app: 'web', [INJECT]: 'true' } }, spec: { containers: [{ name: 'nginx', image: 'nginx' }] } } } };
    const [demo, solo, deployment, proxy] = await Promise.all([
      running.admit({ namespace: 'demo', namespaces: OPTED_IN('demo'), object: run('demo') }),
      running.admit({ namespace: 'default', object: run('solo', { [INJECT]: 'true' }) }),
      running.admit({ namespace: 'default', object: podOf(web, 'web-5d4f8c7b9-') }),
      running.admit({
        namespace: 'demo',
        namespaces: OPTED_IN('demo'),
        object: { ...run('both'), metadata: { name: 'both', annotations: { 'sidecar-injector.io/templates': 'log-shipper,proxy' } } },
      }),
    ]);
    // README: kubectl -n demo get pod demo -o jsonpath='{.spec.containers[*].name}' prints the line after it.
    const printed = README.split('\n')[README.split('\n').findIndex((l) => l.startsWith('kubectl -n demo get pod demo -o jsonpath')) + 1]!.replace(/^# /, '');
    assert.equal(printed, 'demo log-shipper');
    assert.equal(containerNames(demo!).join(' '), printed);
    assertInjected(solo!, { scope: 'pod' });
    assertInjected(deployment!, { scope: 'pod' });
    assert.deepEqual(containerNames(proxy!), ['init:proxy', 'both', 'log-shipper']);
  });
});

describe("the README's first template (my-templates/hello-agent.yaml), and a template that renders an invalid value, through kubeadmit", { skip }, () => {
  let running: RunningInstall;
  before(async () => {
    const versioned = [
      'apiVersion: sidecar-injector.io/v1alpha1',
      'kind: SidecarTemplate',
      'metadata:',
      '  name: versioned-agent',
      'spec:',
      '  containers:',
      '    - name: versioned-agent',
      `      image: "registry.example.com/agent:{{ pod.labels['version'] }}"`,
      '',
    ].join('\n');
    running = await startInstall(binary, kustomizeObjects('base'), {
      templates: { 'hello-agent.yaml': readmeYaml('my-templates/hello-agent.yaml'), 'versioned-agent.yaml': versioned },
    });
  });
  after(() => running?.close());

  it('hello-agent: a container "hello-agent" (busybox:1.36) in containers, last, as `explain` says; a native sidecar in a Job pod', async () => {
    const job = appPod({ 'batch.kubernetes.io/job-name': 'once' });
    job.metadata.ownerReferences = [{ apiVersion: 'batch/v1', kind: 'Job', name: 'once', uid: '5f0d4c1e-93a4-4b55-8d7e-2a9c8e1b7f30', controller: true }];
    job.spec.restartPolicy = 'Never';
    const [pod, jobPod] = await Promise.all([
      running.admit({ namespace: 'shop', namespaces: OPTED_IN('shop'), object: appPod() }),
      running.admit({ namespace: 'shop', namespaces: OPTED_IN('shop'), object: job }),
    ]);
    assertInjected(pod!, { scope: 'namespace', templates: ['hello-agent'] });
    assert.deepEqual(containerNames(pod!), ['app', 'hello-agent']);
    const agent = pod!.object.spec.containers[1];
    assert.equal(agent.image, 'busybox:1.36');
    assert.deepEqual(agent.env, [
      { name: 'POD_NAME', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.name' } } },
      { name: 'POD_NAMESPACE', value: 'shop' },
    ]);
    assert.deepEqual(containerNames(jobPod!), ['init:hello-agent', 'app']);
  });

  it('a placeholder that renders an invalid image for this pod: the mutating webhook refuses it, saying which template, field and value', async () => {
    const asks = (labels: Record<string, string>) => ({
      namespace: 'shop',
      namespaces: OPTED_IN('shop'),
      object: appPod(labels, { 'sidecar-injector.io/templates': 'versioned-agent' }),
    });
    const [without, withVersion] = await Promise.all([running.admit(asks({})), running.admit(asks({ version: '1.4.2' }))]);
    assert.equal(without!.stage, 'mutating');
    assert.equal(without!.code, 400);
    assert.equal(
      without!.reason,
      `admission webhook "namespace.inject.sidecar-injector.io" denied the request: template "versioned-agent" renders /spec/containers/0/image as "registry.example.com/agent:" (from "registry.example.com/agent:{{ pod.labels['version'] }}"), which Kubernetes refuses as an image: is not an image reference the container runtime can pull (InvalidImageName): tag "" is not valid (letters, digits, _ . -, at most 128, not starting with . or -)`,
    );
    assertInjected(withVersion!, { scope: 'namespace', templates: ['versioned-agent'] });
    assert.equal(withVersion!.object.spec.containers[1].image, 'registry.example.com/agent:1.4.2');
  });
});

describe("Templates per team (README): a team's SidecarTemplate object, with components/sidecartemplates, through kubeadmit", { skip }, () => {
  let running: RunningInstall;
  before(async () => (running = await startInstall(binary, kustomizeWithComponent('base', 'components/sidecartemplates'))));
  after(() => running?.close());

  it("a team's default template replaces the cluster defaults for its own pods only", async () => {
    const hello = parseAllDocuments(readmeYaml('my-templates/hello-agent.yaml'))[0]!.toJS();
    hello.metadata.namespace = 'team-a';
    running.api!.applyTemplate(hello);
    const admit = (ns: string): Promise<Admission> => running.admit({ namespace: ns, namespaces: OPTED_IN(ns), object: appPod() });
    // The injector serves the object once its watch delivers it.
    let teamA = await admit('team-a');
    for (let i = 0; i < 50 && status(teamA)?.templates?.[0] !== 'hello-agent'; i++) {
      await sleep(200);
      teamA = await admit('team-a');
    }
    assertInjected(teamA, { scope: 'namespace', templates: ['hello-agent'] });
    assert.deepEqual(containerNames(teamA), ['app', 'hello-agent']);
    assertInjected(await admit('team-b'), { scope: 'namespace', templates: ['log-shipper'] });
  });
});
