import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serviceDnsNames } from '../../src/certs/bootstrap.js';
import { serveConfig } from '../../src/cli/serve-flags.js';
import { imageMirrors } from '../../src/config/config.js';
import { parseImageMirrors } from '../../src/kube-values/image.js';
import { parseKubectl } from '../../src/yaml/kubectl.js';
import { selectorMatches } from '../../src/kube/selectors.js';
import { loadTemplateSet } from '../../src/templates/load.js';
import { CHART } from '../../scripts/render-install.js';
import { run } from '../../scripts/tools.js';
import { assertSameObjects, helmError, helmObjects, injector, key, kustomizeObjects, kustomizeWithComponent, one, serverConfig, templated, tools, type Obj } from './render.js';

const args = (objects: Obj[]) => serveConfig(injector(objects).args.slice(1), {});

/** A template file as the values of templates.inline give it: the document itself, read as kubectl (and the server) read YAML. */
function templateValue(file: string): Obj {
  const [doc] = parseKubectl(readFileSync(file, 'utf8'));
  return structuredClone(doc!.value) as Obj;
}

describe('Helm chart', () => {
  it('passes helm lint --strict without a single message', () => {
    const out = run(tools, 'helm', ['lint', '--strict', CHART]);
    assert.doesNotMatch(out, /\[(INFO|WARNING|ERROR)\]/, out);
    assert.match(out, /1 chart\(s\) linted, 0 chart\(s\) failed/);
  });

  it('renders with default values the same objects as kubectl kustomize manifests/, but the Namespace (helm install creates it)', () => {
    const kustomize = templated(kustomizeObjects(''));
    assertSameObjects(helmObjects(), kustomize.filter((o) => o.kind !== 'Namespace'));
    assertSameObjects(helmObjects({ set: { 'namespace.create': true } }), kustomize);
  });

  it('renders with certificates.mode=cert-manager the same objects as the cert-manager overlay', () => {
    const overlay = templated(kustomizeObjects('overlays/cert-manager'));
    assertSameObjects(helmObjects({ set: { 'certificates.mode': 'cert-manager', 'namespace.create': true } }), overlay);
  });

  it('renders with metrics.podMonitor.enabled the PodMonitor of the kustomize component', () => {
    const withComponent = templated(kustomizeWithComponent('base', 'components/podmonitor'));
    assertSameObjects(helmObjects({ set: { 'metrics.podMonitor.enabled': true, 'namespace.create': true } }), withComponent);
  });

  it('renders with networkPolicy.enabled the NetworkPolicy of the kustomize component, and the health port rule from metricsNamespaces', () => {
    const withComponent = templated(kustomizeWithComponent('base', 'components/networkpolicy'));
    assertSameObjects(helmObjects({ set: { 'networkPolicy.enabled': true, 'namespace.create': true } }), withComponent);
    assert.equal(helmObjects().filter((o) => o.kind === 'NetworkPolicy').length, 0, 'off by default');
    const named = one(helmObjects({ values: { networkPolicy: { enabled: true, metricsNamespaces: ['prometheus', 'observability'] } } }), 'NetworkPolicy');
    assert.deepEqual(named.spec.ingress[1].from[0].namespaceSelector.matchExpressions[0].values, ['prometheus', 'observability']);
    const none = one(helmObjects({ values: { networkPolicy: { enabled: true, metricsNamespaces: [] } } }), 'NetworkPolicy');
    assert.deepEqual(none.spec.ingress.map((r: Obj) => r.ports[0].port), ['https'], 'no namespace: the health port reached from the node alone');
  });

  it('renders with required.enabled the webhooks of the required component, after the others, on the namespaces required.namespaceSelector takes; never for a revision', () => {
    const withComponent = templated(kustomizeWithComponent('base', 'components/required'));
    assertSameObjects(helmObjects({ set: { 'required.enabled': true, 'namespace.create': true } }), withComponent);
    const names = (objects: Obj[]): string[] => objects.filter((o) => o.kind.endsWith('WebhookConfiguration')).flatMap((o) => o.webhooks.map((w: Obj) => w.name));
    assert.equal(names(helmObjects()).filter((n) => n.startsWith('required.')).length, 0, 'off by default');
    assert.deepEqual(names(helmObjects({ set: { 'required.enabled': true, revision: 'canary' } })).filter((n) => n.startsWith('required.')), [], 'a revision never renders them');
    const mutating = one(helmObjects({ values: { required: { enabled: true, namespaceSelector: { matchLabels: null, matchExpressions: [{ key: 'team', operator: 'Exists' }] } } } }), 'MutatingWebhookConfiguration');
    const hook = mutating.webhooks.at(-1);
    assert.equal(hook.name, 'required.mutate.sidecar-injector.io');
    assert.equal(hook.objectSelector, undefined, 'every pod of the namespace, whatever its labels');
    assert.deepEqual(hook.namespaceSelector, {
      matchExpressions: [
        { key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: ['kube-system', 'kube-public', 'kube-node-lease', 'sidecar-injector'] },
        { key: 'runlevel', operator: 'NotIn', values: ['0', '1'] },
        { key: 'team', operator: 'Exists' },
      ],
    });
    assert.match(helmError({ values: { required: { enabled: true, namespaceSelector: { matchExpressions: [{ key: 'team', operator: 'Maybe' }] } } } }) ?? 'rendered', /operator/);
  });

  it('renders with revision=canary the objects of the revision component: a second install, every name suffixed, its own selector label', () => {
    const component = templated(kustomizeWithComponent('base', 'components/revision'));
    assertSameObjects(helmObjects({ set: { revision: 'canary' } }), component);
    assertSameObjects(helmObjects({ set: { revision: 'canary', 'namespace.create': true } }), component); // the default install owns the namespace
    const canary = helmObjects({ release: 'mesh', set: { revision: 'canary' } });
    const main = helmObjects({ release: 'mesh' });
    const names = (objects: Obj[]) => new Set(objects.filter((o) => o.kind !== 'Namespace').map(key));
    for (const k of names(canary)) assert.ok(!names(main).has(k), `${k} is not the default install's`);
    for (const o of canary) assert.match(o.metadata.name, /^mesh-sidecar-injector-canary($|-)|^mesh-sidecar-injector-(templates|events)-canary$/, key(o));
    // The default install's Deployment, Service and PDB never take the canary's pods, nor the other way round.
    const podLabels = (objects: Obj[]) => one(objects, 'Deployment').spec.template.metadata.labels;
    for (const [own, other] of [[main, canary], [canary, main]] as const) {
      for (const o of own.filter((x) => ['Deployment', 'PodDisruptionBudget'].includes(x.kind))) assert.ok(!selectorMatches(o.spec.selector, podLabels(other)), key(o));
      assert.ok(!selectorMatches({ matchLabels: one(own, 'Service').spec.selector }, podLabels(other)), 'Service');
    }
    const config = args(canary);
    assert.equal(config.revision, 'canary', 'the server knows its revision');
    assert.equal(config.webhookConfig, one(canary, 'MutatingWebhookConfiguration').metadata.name);
    assert.deepEqual(one(canary, 'Role').rules[0].resourceNames, [config.certSecret]);
    for (const bad of ['Canary', 'a_b', '-x', 'x'.repeat(21)]) assert.match(helmError({ set: { revision: bad } }) ?? 'rendered', /revision/, bad);
  });

  it('renders with templates.source=both the objects of the sidecartemplates component, on self-managed certificates and on cert-manager', () => {
    assertSameObjects(helmObjects({ set: { 'templates.source': 'both', 'namespace.create': true } }), templated(kustomizeWithComponent('base', 'components/sidecartemplates')));
    const certManager = { 'templates.source': 'both', 'certificates.mode': 'cert-manager', 'namespace.create': true };
    assertSameObjects(helmObjects({ set: certManager }), templated(kustomizeWithComponent('overlays/cert-manager', 'components/sidecartemplates')));
  });

  it('renders with revision=canary and templates.source=both the objects of the sidecartemplates and revision components, in that order', () => {
    const canary = helmObjects({ set: { revision: 'canary', 'templates.source': 'both' } });
    assertSameObjects(canary, templated(kustomizeWithComponent('base', ['components/sidecartemplates', 'components/revision'])));
    assert.ok(!canary.some((o) => o.metadata.name === 'sidecar-injector-template-editor'), 'the default install owns the editor ClusterRole');
  });

  it('renders for each templates.source the server\'s --templates-source, and the RBAC and ConfigMap that source reads, nothing more', () => {
    const before = helmObjects();
    const READERS = ['ClusterRole//sidecar-injector-template-editor', 'ClusterRole//sidecar-injector-templates', 'ClusterRoleBinding//sidecar-injector-templates', 'Role/sidecar-injector/sidecar-injector-template-reader', 'RoleBinding/sidecar-injector/sidecar-injector-template-reader'];
    const CONFIGMAP = ['ConfigMap/sidecar-injector/sidecar-injector-templates'];
    const cases = [
      { source: 'configmap', server: 'dir', added: [], removed: [] },
      { source: 'both', server: 'both', added: READERS, removed: [] },
      { source: 'cluster', server: 'cluster', added: READERS, removed: CONFIGMAP },
    ] as const;
    for (const c of cases) {
      const objects = helmObjects({ set: { 'templates.source': c.source } });
      assert.equal(serverConfig(objects).templatesSource, c.server, c.source);
      assert.deepEqual(objects.filter((o) => !before.some((b) => key(b) === key(o))).map(key).sort(), c.added, `${c.source}: added`);
      assert.deepEqual(before.filter((b) => !objects.some((o) => key(b) === key(o))).map(key), c.removed, `${c.source}: removed`);
      const changed = new Set(['Deployment', 'ValidatingWebhookConfiguration']);
      for (const o of before.filter((b) => !changed.has(b.kind) && objects.some((x) => key(x) === key(b)))) assert.deepEqual(objects.find((x) => key(x) === key(o)), o, `${c.source}: ${key(o)}`);
      // The SidecarTemplate webhook, last, when the injector serves SidecarTemplates; the other webhooks as they were.
      const validating = one(objects, 'ValidatingWebhookConfiguration');
      const hooks = one(before, 'ValidatingWebhookConfiguration').webhooks.map((w: Obj) => w.name);
      assert.deepEqual(validating.webhooks.map((w: Obj) => w.name), c.source === 'configmap' ? hooks : [...hooks, 'sidecartemplates.validate.sidecar-injector.io'], c.source);
      assert.deepEqual({ ...validating, webhooks: validating.webhooks.slice(0, hooks.length) }, one(before, 'ValidatingWebhookConfiguration'), c.source);
    }
    // cluster: the Deployment of both, without the directory the server no longer reads.
    const cluster = one(helmObjects({ set: { 'templates.source': 'cluster' } }), 'Deployment');
    const both = one(helmObjects({ set: { 'templates.source': 'both' } }), 'Deployment');
    const pod = both.spec.template.spec;
    pod.volumes = pod.volumes.filter((v: Obj) => v.name !== 'templates');
    pod.containers[0].volumeMounts = pod.containers[0].volumeMounts.filter((m: Obj) => m.name !== 'templates');
    pod.containers[0].args = pod.containers[0].args.filter((a: string) => !a.startsWith('--templates-dir'));
    pod.containers[0].env.find((e: Obj) => e.name === 'SIDECAR_INJECTOR_TEMPLATES_SOURCE').value = 'cluster';
    assert.deepEqual(cluster, both);
    // The injector's binding names its ServiceAccount, per release.
    const mesh = helmObjects({ release: 'mesh', set: { 'templates.source': 'cluster' } });
    assert.deepEqual(one(mesh, 'ClusterRoleBinding', 'mesh-sidecar-injector-templates').subjects, [{ kind: 'ServiceAccount', name: one(mesh, 'ServiceAccount').metadata.name, namespace: 'sidecar-injector' }]);
    // With cert-manager too, the injector reading the cluster has its token.
    assert.equal(one(helmObjects({ set: { 'templates.source': 'cluster', 'certificates.mode': 'cert-manager' } }), 'Deployment').spec.template.spec.automountServiceAccountToken, undefined);
    // One release per cluster renders the editor ClusterRole, whose name every team's RoleBinding names.
    assert.ok(!helmObjects({ set: { 'templates.source': 'cluster', 'templates.editorClusterRole': false } }).some((o) => o.metadata.name === 'sidecar-injector-template-editor'));
    // Templates the server would not read are refused, not dropped.
    assert.match(helmError({ set: { 'templates.source': 'cluster', 'templates.existingConfigMap': 'team-sidecars' } }) ?? 'rendered', /templates.source=both/);
    assert.match(helmError({ values: { templates: { source: 'cluster', inline: { 'proxy.yaml': templateValue('templates/proxy.yaml') } } } }) ?? 'rendered', /templates.source=both/);
  });

  it('renders, opted in with templates.quota.namespaces, a ResourceQuota on the count of SidecarTemplates in each team namespace', () => {
    assert.ok(!helmObjects({ set: { 'templates.source': 'cluster' } }).some((o) => o.kind === 'ResourceQuota'), 'none by default');
    const quotas = helmObjects({ values: { templates: { source: 'cluster', quota: { namespaces: ['team-a', 'team-b'], maxObjects: 20 } } } }).filter((o) => o.kind === 'ResourceQuota');
    assert.deepEqual(quotas.map((q) => [q.metadata.namespace, q.spec.hard]), [['team-a', { 'count/sidecartemplates.sidecar-injector.io': '20' }], ['team-b', { 'count/sidecartemplates.sidecar-injector.io': '20' }]]);
    assert.ok(!helmObjects({ values: { templates: { quota: { namespaces: ['team-a'] } } } }).some((o) => o.kind === 'ResourceQuota'), 'none with the ConfigMap source: no team writes templates');
  });

  it('renders with autoscaling.enabled the objects of the autoscaling component: an HPA on CPU, no replicas, a PDB that evicts one at a time', () => {
    const objects = helmObjects({ set: { 'autoscaling.enabled': true, 'namespace.create': true } });
    assertSameObjects(objects, templated(kustomizeWithComponent('base', 'components/autoscaling')));
    const hpa = one(objects, 'HorizontalPodAutoscaler');
    assert.equal(hpa.apiVersion, 'autoscaling/v2');
    assert.deepEqual(hpa.spec.scaleTargetRef, { apiVersion: 'apps/v1', kind: 'Deployment', name: one(objects, 'Deployment').metadata.name });
    assert.deepEqual([hpa.spec.minReplicas, hpa.spec.maxReplicas, hpa.spec.metrics[0].resource], [2, 6, { name: 'cpu', target: { type: 'Utilization', averageUtilization: 70 } }]);
    assert.equal(one(objects, 'Deployment').spec.replicas, undefined, 'an upgrade never resets what the autoscaler chose');
    const pdb = one(objects, 'PodDisruptionBudget');
    assert.deepEqual([pdb.spec.maxUnavailable, pdb.spec.minAvailable], [1, undefined]);
    // With replicas: 1 there is no PDB (it would block drains); the autoscaler keeps at least 2, so there is one.
    assert.ok(helmObjects({ set: { 'autoscaling.enabled': true, replicas: 1 } }).some((o) => o.kind === 'PodDisruptionBudget'));
    assert.ok(!helmObjects().some((o) => o.kind === 'HorizontalPodAutoscaler'), 'off by default');
    const custom = one(helmObjects({ values: { autoscaling: { enabled: true, minReplicas: 3, maxReplicas: 10, targetCPUUtilizationPercentage: 50 } } }), 'HorizontalPodAutoscaler');
    assert.deepEqual([custom.spec.minReplicas, custom.spec.maxReplicas, custom.spec.metrics[0].resource.target.averageUtilization], [3, 10, 50]);
    assert.match(helmError({ set: { 'autoscaling.enabled': true, 'autoscaling.minReplicas': 1 } }) ?? 'rendered', /minReplicas/);
    assert.match(helmError({ set: { 'autoscaling.enabled': true, 'autoscaling.minReplicas': 4, 'autoscaling.maxReplicas': 3 } }) ?? 'rendered', /maxReplicas \(3\) is below/);
  });

  it('names everything after the release, consistently, and the certificate covers the Service it fronts', () => {
    for (const mode of ['self-managed', 'cert-manager']) {
      const objects = helmObjects({ release: 'mesh', namespace: 'platform', set: { 'certificates.mode': mode } });
      const service = one(objects, 'Service');
      assert.equal(service.metadata.name, 'mesh-sidecar-injector');
      for (const o of objects) {
        assert.match(o.metadata.name, /^mesh-sidecar-injector/, key(o));
        if (o.metadata.namespace !== undefined) assert.equal(o.metadata.namespace, 'platform', key(o));
      }
      for (const config of [one(objects, 'MutatingWebhookConfiguration'), one(objects, 'ValidatingWebhookConfiguration')]) {
        for (const w of config.webhooks) assert.deepEqual([w.clientConfig.service.name, w.clientConfig.service.namespace], [service.metadata.name, 'platform']);
      }
      const pod = one(objects, 'Deployment').spec.template.spec;
      assert.equal(pod.serviceAccountName, one(objects, 'ServiceAccount').metadata.name);
      assert.equal(pod.volumes.find((v: Obj) => v.name === 'templates').configMap.name, one(objects, 'ConfigMap').metadata.name);
      const config = args(objects);
      if (mode === 'self-managed') {
        assert.equal(config.serviceName, service.metadata.name);
        assert.equal(config.webhookConfig, one(objects, 'MutatingWebhookConfiguration').metadata.name);
        assert.deepEqual(one(objects, 'Role').rules[0].resourceNames, [config.certSecret]);
        assert.deepEqual(one(objects, 'ClusterRole', 'mesh-sidecar-injector').rules[0].resourceNames, [config.webhookConfig]);
      } else {
        const serving = objects.find((o) => o.kind === 'Certificate' && !o.spec.isCA)!;
        assert.deepEqual(serving.spec.dnsNames, serviceDnsNames(service.metadata.name, 'platform'));
        assert.equal(pod.volumes.find((v: Obj) => v.name === 'tls').secret.secretName, serving.spec.secretName);
        assert.equal(one(objects, 'MutatingWebhookConfiguration').metadata.annotations['cert-manager.io/inject-ca-from'], `platform/${serving.metadata.name}`);
      }
    }
  });

  it('takes the image, replicas, resources and extra flags from values', () => {
    const objects = helmObjects({
      values: { image: { repository: 'registry.example/injector', tag: '9.9.9', pullPolicy: 'Always' }, replicas: 3, resources: { requests: { cpu: '50m', memory: '64Mi' }, limits: { cpu: null, memory: '1Gi' } }, extraArgs: ['--log-level=debug'] },
    });
    const c = injector(objects);
    assert.equal(c.image, 'registry.example/injector:9.9.9');
    assert.equal(c.imagePullPolicy, 'Always');
    assert.equal(one(objects, 'Deployment').spec.replicas, 3);
    // Helm merges maps with the defaults: null removes a default key (here the CPU limit).
    assert.deepEqual(c.resources, { requests: { cpu: '50m', memory: '64Mi' }, limits: { memory: '1Gi' } });
    assert.equal(args(objects).logLevel, 'debug', 'the server accepts the extra flag');
    const mirrored = args(helmObjects({ values: { imageMirrors: ['docker.io=mirror.example.com/dockerhub', 'quay.io=mirror.example.com/quay'] } }));
    assert.deepEqual(imageMirrors(mirrored).entries, [{ source: 'docker.io', mirror: 'mirror.example.com/dockerhub' }, { source: 'quay.io', mirror: 'mirror.example.com/quay' }], 'one --image-mirror per entry of imageMirrors');
    const digest = `sha256:${'a'.repeat(64)}`;
    assert.equal(injector(helmObjects({ set: { 'image.digest': digest } })).image, `ghcr.io/sidecar-injector/sidecar-injector@${digest}`);
    const appVersion = /appVersion: "(.*)"/.exec(readFileSync(join(CHART, 'Chart.yaml'), 'utf8'))![1];
    assert.equal(injector(helmObjects()).image, `ghcr.io/sidecar-injector/sidecar-injector:${appVersion}`, 'the tag defaults to appVersion');
  });

  it('ships inline templates as a ConfigMap the injector loads, each exactly as written, or mounts an existing ConfigMap and renders none', async () => {
    // A value YAML 1.1 reads as a boolean or an octal number must come out of toYaml as the string it was.
    const quoted: Obj = { ...templateValue('templates/proxy.yaml'), metadata: { name: 'quoted' } };
    quoted.spec.containers[0].args = ['--appendonly', 'no', '0644', 'on'];
    const inline = { 'proxy.yaml': templateValue('templates/proxy.yaml'), 'log-shipper.yaml': templateValue('templates/log-shipper.yaml'), 'quoted.yaml': quoted };
    const cm = one(helmObjects({ values: { templates: { inline } } }), 'ConfigMap');
    assert.deepEqual(Object.keys(cm.data).sort(), ['log-shipper.yaml', 'proxy.yaml', 'quoted.yaml']);
    const dir = await mkdtemp(join(tmpdir(), 'chart-templates-'));
    for (const [name, text] of Object.entries(cm.data as Record<string, string>)) await writeFile(join(dir, name), text);
    const loaded = await loadTemplateSet(dir);
    const bundled = await loadTemplateSet('templates');
    for (const name of ['proxy', 'log-shipper']) assert.deepEqual(loaded.templates.get(name)?.spec, bundled.templates.get(name)?.spec, `${name} loads as the bundled file does`);
    assert.deepEqual(loaded.templates.get('quoted')?.spec.containers[0]?.args, ['--appendonly', 'no', '0644', 'on']);

    const existing = helmObjects({ set: { 'templates.existingConfigMap': 'team-sidecars' } });
    assert.ok(!existing.some((o) => o.kind === 'ConfigMap'));
    assert.equal(one(existing, 'Deployment').spec.template.spec.volumes.find((v: Obj) => v.name === 'templates').configMap.name, 'team-sidecars');
    assert.match(helmError({ values: { templates: { inline: { 'a.yaml': quoted }, existingConfigMap: 'x' } } }) ?? '', /templates.inline or templates.existingConfigMap, not both/);
  });

  it('grants creating Events with ownerEvents (the default, on cert-manager too), and with ownerEvents=false neither the RBAC nor the Events', () => {
    for (const mode of ['self-managed', 'cert-manager']) {
      const on = helmObjects({ release: 'mesh', set: { 'certificates.mode': mode } });
      assert.deepEqual(one(on, 'ClusterRole', 'mesh-sidecar-injector-events').rules, [
        { apiGroups: [''], resources: ['events'], verbs: ['create', 'patch'] },
        { apiGroups: ['apps'], resources: ['replicasets'], verbs: ['get'] },
      ]);
      assert.deepEqual(one(on, 'ClusterRoleBinding', 'mesh-sidecar-injector-events').subjects, [{ kind: 'ServiceAccount', name: one(on, 'ServiceAccount').metadata.name, namespace: one(on, 'ServiceAccount').metadata.namespace }]);
      assert.equal(args(on).ownerEvents, 'on');
      const off = helmObjects({ release: 'mesh', set: { 'certificates.mode': mode, ownerEvents: false } });
      assert.ok(!off.some((o) => o.metadata.name === 'mesh-sidecar-injector-events'), 'no Events RBAC');
      assert.equal(args(off).ownerEvents, 'off');
    }
  });

  it('takes the failure policies and the timeout from values', () => {
    const objects = helmObjects({ values: { webhooks: { timeoutSeconds: 3, mutating: { failurePolicy: 'Fail' }, validating: { failurePolicy: 'Ignore' } } } });
    for (const w of one(objects, 'MutatingWebhookConfiguration').webhooks) assert.deepEqual([w.failurePolicy, w.timeoutSeconds], ['Fail', 3]);
    for (const w of one(objects, 'ValidatingWebhookConfiguration').webhooks) assert.deepEqual([w.failurePolicy, w.timeoutSeconds], ['Ignore', 3]);
  });

  it('renders a ServiceMonitor with a metrics Service in front of the health port', () => {
    const objects = helmObjects({ values: { metrics: { serviceMonitor: { enabled: true, interval: '15s', labels: { release: 'prom' } } } } });
    const monitor = one(objects, 'ServiceMonitor');
    assert.equal(monitor.metadata.labels.release, 'prom');
    const metrics = one(objects, 'Service', 'sidecar-injector-metrics');
    assert.ok(selectorMatches(monitor.spec.selector, metrics.metadata.labels), 'selects the metrics Service');
    assert.ok(!selectorMatches(monitor.spec.selector, one(objects, 'Service', 'sidecar-injector').metadata.labels), 'not the webhook Service');
    assert.ok(selectorMatches({ matchLabels: metrics.spec.selector }, one(objects, 'Deployment').spec.template.metadata.labels), 'in front of the injector pods');
    assert.deepEqual(monitor.spec.endpoints, [{ port: 'health', path: '/metrics', interval: '15s' }]);
    const port = metrics.spec.ports.find((p: Obj) => p.name === 'health');
    assert.equal(port.targetPort, 'health');
    assert.equal(injector(objects).ports.find((p: Obj) => p.name === 'health').containerPort, args(objects).healthPort);
  });

  it('renders no PodDisruptionBudget with one replica, where minAvailable: 1 would block every drain (issue 21)', () => {
    assert.ok(!helmObjects({ set: { replicas: 1 } }).some((o) => o.kind === 'PodDisruptionBudget'), 'no budget for one replica');
    const pdb = one(helmObjects({ set: { replicas: 3 } }), 'PodDisruptionBudget');
    assert.equal(pdb.spec.minAvailable, 1, 'with more, a drain leaves one serving');
  });

  it('says one minimum Kubernetes version, the one native sidecars need, in Chart.yaml, the README and docs/operating.md (issue 21)', () => {
    const chart = readFileSync(join(CHART, 'Chart.yaml'), 'utf8');
    assert.equal(/^kubeVersion: "(.*)"$/m.exec(chart)?.[1], '>=1.29.0-0');
    for (const doc of ['README.md', 'docs/operating.md']) {
      const text = readFileSync(doc, 'utf8');
      const stated = [...text.matchAll(/Kubernetes (1\.\d+) or newer/g)].map((m) => m[1]);
      assert.deepEqual([...new Set(stated)], ['1.29'], `${doc} states 1.29 and no other minimum`);
      assert.doesNotMatch(text, /(on|On) 1\.27 or 1\.28/, `${doc}: and no support for older clusters`);
    }
    assert.match(helmError({ set: { replicas: 2 } }, ['--kube-version', '1.28.5']) ?? 'rendered', /kubeVersion|incompatible|compatible/i, 'helm refuses 1.28');
    assert.equal(helmError({}, ['--kube-version', '1.29.0']), undefined, 'and renders for 1.29');
  });

  it('refuses at render time the inline templates the server would refuse at start, naming the field (issue 21)', () => {
    const proxy = templateValue('templates/proxy.yaml');
    const broken = (change: (t: Obj) => void): Obj => {
      const t = structuredClone(proxy);
      change(t);
      return t;
    };
    const bad: [string, unknown, RegExp][] = [
      ['a template given as YAML text', readFileSync('templates/proxy.yaml', 'utf8'), /proxy\.yaml/],
      ['a container without an image', broken((t) => delete t.spec.containers[0].image), /image/],
      ['an unknown field deep in a probe', broken((t) => (t.spec.containers[0].readinessProbe.httpGet.prot = 9901)), /prot/],
      ['a pull policy Kubernetes does not have', broken((t) => (t.spec.containers[0].imagePullPolicy = 'Sometimes')), /imagePullPolicy/],
      ['a port name with a double dash', broken((t) => (t.spec.containers[0].ports[0].name = 'proxy--admin')), /ports\/0\/name/],
      ['a container name in capitals', broken((t) => (t.spec.containers[0].name = 'Proxy')), /containers\/0\/name/],
      ['a quantity that is not one', broken((t) => (t.spec.containers[0].resources.requests.cpu = 'lots')), /cpu/],
      ['a port out of range', broken((t) => (t.spec.containers[0].ports[0].containerPort = 70000)), /containerPort/],
      ['another apiVersion', broken((t) => (t.apiVersion = 'v1')), /apiVersion/],
      ['an unknown spec field', broken((t) => (t.spec.sidecars = [])), /sidecars/],
    ];
    for (const [what, template, message] of bad) {
      const err = helmError({ values: { templates: { inline: { 'proxy.yaml': template } } } });
      assert.match(err ?? 'rendered', message, what);
      assert.match(err ?? '', /values don't meet the specifications of the schema|schema/i, what);
    }
    // A port given by number passes the port-name patterns, which apply to strings only.
    assert.equal(helmError({ values: { templates: { inline: { 'proxy.yaml': proxy } } } }), undefined);
  });

  it('refuses at render time the imageMirrors entries the server would refuse at start, and takes those it accepts (issue 21)', () => {
    const entries = ['docker.io=mirror.example.com/dockerhub', 'localhost:5000=registry.example.com:5443/cache', 'quay.io/prometheus=mirror.example.com/quay', 'docker=mirror.example.com', 'docker.io=mirror', 'docker.io=mirror.example.com:tag/x', 'docker.io=mirror.example.com/Upper', 'docker.io', 'docker.io=mirror.example.com@sha256:abc', '=mirror.example.com'];
    for (const entry of entries) {
      const accepted = !('problem' in parseImageMirrors([entry]));
      const err = helmError({ values: { imageMirrors: [entry] } });
      assert.equal(err === undefined, accepted, `${entry}: the server ${accepted ? 'accepts' : 'refuses'} it, helm said ${err ?? 'nothing'}`);
      if (!accepted) assert.match(err ?? '', /imageMirrors/);
    }
    assert.match(helmError({ values: { imageMirrors: Array.from({ length: 65 }, (_, i) => `r${i}.example.com=mirror.example.com`) } }) ?? 'rendered', /imageMirrors/, 'more than the server takes');
  });

  it('refuses values outside values.schema.json with a message naming the value', () => {
    const bad: [Record<string, unknown>, RegExp][] = [
      [{ certificates: { mode: 'vault' } }, /certificates\/mode/],
      [{ webhooks: { mutating: { failurePolicy: 'Sometimes' } } }, /failurePolicy/],
      [{ webhooks: { timeoutSeconds: 31 } }, /timeoutSeconds/],
      [{ replicas: 0 }, /replicas/],
      [{ replica: 2 }, /replica/],
      [{ image: { repository: 'x', digest: 'latest' } }, /digest/],
      [{ templates: { inline: { 'no-extension': templateValue('templates/proxy.yaml') } } }, /no-extension/],
      [{ metrics: { podMonitor: { enabled: 'yes' } } }, /podMonitor/],
      [{ networkPolicy: { metricsNamespaces: ['Not_A_Namespace'] } }, /metricsNamespaces/],
      [{ imageMirrors: ['docker.io'] }, /imageMirrors/],
      [{ imageMirrors: 'docker.io=mirror.example.com' }, /imageMirrors/],
      [{ templates: { source: 'crd' } }, /templates\/source/],
    ];
    for (const [values, message] of bad) assert.match(helmError({ values }) ?? 'rendered', message, JSON.stringify(values));
  });
});
