import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serviceDnsNames } from '../../src/certs/bootstrap.js';
import { imageMirrors, loadConfig } from '../../src/config/config.js';
import { selectorMatches } from '../../src/kube/selectors.js';
import { loadTemplateSet } from '../../src/templates/load.js';
import { CHART } from '../../scripts/render-install.js';
import { run } from '../../scripts/tools.js';
import { helmError, helmObjects, injector, kustomizeObjects, kustomizeWithComponent, one, tools, type Obj } from './render.js';

/** Labels Helm charts conventionally add to every object's metadata (never to selectors or pod templates). */
const HELM_LABELS = ['helm.sh/chart', 'app.kubernetes.io/instance', 'app.kubernetes.io/version', 'app.kubernetes.io/managed-by'];

const key = (o: Obj): string => `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`;

/** The object without the Helm-only metadata labels, so it can be compared with kustomize's. */
function withoutHelmLabels(o: Obj): Obj {
  const out = structuredClone(o);
  for (const label of HELM_LABELS) {
    assert.ok(out.metadata.labels?.[label] !== undefined, `${key(o)} carries ${label}`);
    delete out.metadata.labels[label];
  }
  return out;
}

/** Asserts that two renderings hold the same objects, compared one by one. */
function assertSameObjects(helm: Obj[], kustomize: Obj[]): void {
  const fromHelm = new Map(helm.map((o) => [key(o), withoutHelmLabels(o)]));
  const fromKustomize = new Map(kustomize.map((o) => [key(o), o]));
  assert.deepEqual([...fromHelm.keys()].sort(), [...fromKustomize.keys()].sort(), 'the same objects');
  for (const [k, o] of fromKustomize) assert.deepEqual(fromHelm.get(k), o, k);
}

const args = (objects: Obj[]) => loadConfig(injector(objects).args.slice(1), {});

/**
 * The kustomize objects the chart templates: all but the SidecarTemplate CRD, which the chart ships
 * as is in crds/ (helm installs it first and never templates it), the same file as the base's
 * (`npm run schema` writes both; test/scripts/render-schema.test.ts checks them).
 */
const templated = (objects: any[]): any[] => objects.filter((o) => o.kind !== 'CustomResourceDefinition');

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
        assert.deepEqual(one(objects, 'ClusterRole').rules[0].resourceNames, [config.webhookConfig]);
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

  it('ships inline templates as a ConfigMap the injector loads, or mounts an existing ConfigMap and renders none', async () => {
    const template = readFileSync('templates/proxy.yaml', 'utf8');
    const inline = helmObjects({ values: { templates: { inline: { 'only.yaml': template } } } });
    const cm = one(inline, 'ConfigMap');
    assert.deepEqual(Object.keys(cm.data), ['only.yaml']);
    const dir = await mkdtemp(join(tmpdir(), 'chart-templates-'));
    for (const [name, text] of Object.entries(cm.data as Record<string, string>)) await writeFile(join(dir, name), text);
    assert.ok((await loadTemplateSet(dir)).templates.size >= 1, 'a valid template set');

    const existing = helmObjects({ set: { 'templates.existingConfigMap': 'team-sidecars' } });
    assert.ok(!existing.some((o) => o.kind === 'ConfigMap'));
    assert.equal(one(existing, 'Deployment').spec.template.spec.volumes.find((v: Obj) => v.name === 'templates').configMap.name, 'team-sidecars');
    assert.match(helmError({ values: { templates: { inline: { 'a.yaml': template }, existingConfigMap: 'x' } } }) ?? '', /templates.inline or templates.existingConfigMap, not both/);
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

  it('refuses values outside values.schema.json with a message naming the value', () => {
    const bad: [Record<string, unknown>, RegExp][] = [
      [{ certificates: { mode: 'vault' } }, /certificates\/mode/],
      [{ webhooks: { mutating: { failurePolicy: 'Sometimes' } } }, /failurePolicy/],
      [{ webhooks: { timeoutSeconds: 31 } }, /timeoutSeconds/],
      [{ replicas: 0 }, /replicas/],
      [{ replica: 2 }, /replica/],
      [{ image: { repository: 'x', digest: 'latest' } }, /digest/],
      [{ templates: { inline: { 'no-extension': 'x' } } }, /no-extension/],
      [{ metrics: { podMonitor: { enabled: 'yes' } } }, /podMonitor/],
      [{ imageMirrors: ['docker.io'] }, /imageMirrors/],
      [{ imageMirrors: 'docker.io=mirror.example.com' }, /imageMirrors/],
    ];
    for (const [values, message] of bad) assert.match(helmError({ values }) ?? 'rendered', message, JSON.stringify(values));
  });
});
