import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Deployment } from 'kubernetes-models/apps/v1';
import { ConfigMap, Namespace, Service, ServiceAccount } from 'kubernetes-models/v1';
import { MutatingWebhookConfiguration, ValidatingWebhookConfiguration } from 'kubernetes-models/admissionregistration.k8s.io/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { ClusterRole, ClusterRoleBinding, Role, RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1';
import { serviceDnsNames } from '../../src/certs/bootstrap.js';
import { loadConfig } from '../../src/config/config.js';
import { loadTemplateSet } from '../../src/templates/load.js';
import { INSTALL_YAML, MANIFESTS, renderKustomization, templateDrift, toYaml } from '../../scripts/render-install.js';

type Obj = Record<string, any>;

/** The Kubernetes schemas kubernetes-models ships, by apiVersion/kind. */
const Models: Record<string, new (data: any) => { validate(): void }> = {
  'v1/Namespace': Namespace,
  'v1/ServiceAccount': ServiceAccount,
  'v1/Service': Service,
  'v1/ConfigMap': ConfigMap,
  'apps/v1/Deployment': Deployment,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'rbac.authorization.k8s.io/v1/Role': Role,
  'rbac.authorization.k8s.io/v1/RoleBinding': RoleBinding,
  'rbac.authorization.k8s.io/v1/ClusterRole': ClusterRole,
  'rbac.authorization.k8s.io/v1/ClusterRoleBinding': ClusterRoleBinding,
  'admissionregistration.k8s.io/v1/MutatingWebhookConfiguration': MutatingWebhookConfiguration,
  'admissionregistration.k8s.io/v1/ValidatingWebhookConfiguration': ValidatingWebhookConfiguration,
};

const base = renderKustomization(MANIFESTS);
const overlay = renderKustomization(join(MANIFESTS, 'overlays', 'cert-manager'));
const one = (objects: Obj[], kind: string): Obj => {
  const found = objects.filter((o) => o.kind === kind);
  assert.equal(found.length, 1, `one ${kind}`);
  return found[0]!;
};
const container = (objects: Obj[]): Obj => one(objects, 'Deployment').spec.template.spec.containers[0];
const argsConfig = (objects: Obj[]) => loadConfig(container(objects).args.slice(1), {});

/** A label selector's verdict on a set of labels (k8s.io/apimachinery labels.Selector). */
function selects(selector: Obj, labels: Record<string, string>): boolean {
  const byLabels = Object.entries(selector.matchLabels ?? {}).every(([k, v]) => labels[k] === v);
  const byExpr = (selector.matchExpressions ?? []).every((e: Obj) => {
    const has = Object.hasOwn(labels, e.key);
    if (e.operator === 'In') return has && e.values.includes(labels[e.key]);
    if (e.operator === 'NotIn') return !has || !e.values.includes(labels[e.key]);
    if (e.operator === 'Exists') return has;
    if (e.operator === 'DoesNotExist') return !has;
    throw new Error(`unknown operator ${e.operator}`);
  });
  return byLabels && byExpr;
}
/** The labels a namespace carries (the apiserver sets kubernetes.io/metadata.name on every one). */
const nsLabels = (name: string, extra: Record<string, string> = {}) => ({ 'kubernetes.io/metadata.name': name, ...extra });

describe('manifests', () => {
  it('validates every object of the base and the cert-manager overlay against the Kubernetes schemas', () => {
    for (const o of [...base, ...overlay]) {
      if (o.apiVersion === 'cert-manager.io/v1') continue; // a CRD: checked below
      const Model = Models[`${o.apiVersion}/${o.kind}`];
      assert.ok(Model, `a schema for ${o.apiVersion} ${o.kind}`);
      assert.doesNotThrow(() => new Model(o).validate(), `${o.kind} ${o.metadata?.name}`);
    }
    assert.deepEqual(base.map((o) => o.kind), ['Namespace', 'ServiceAccount', 'Role', 'ClusterRole', 'RoleBinding', 'ClusterRoleBinding', 'ConfigMap', 'Service', 'Deployment', 'PodDisruptionBudget', 'MutatingWebhookConfiguration', 'ValidatingWebhookConfiguration']);
  });

  it('keeps install.yaml and manifests/templates in step with manifests/ and templates/ (make install-yaml)', () => {
    assert.deepEqual(templateDrift(), []);
    assert.equal(readFileSync(INSTALL_YAML, 'utf8'), toYaml(base), 'manifests/install.yaml is out of date: run make install-yaml');
  });

  it('ships the bundled templates in a ConfigMap that loads as a valid template set where the pod mounts it', async () => {
    const cm = one(base, 'ConfigMap');
    const dir = await mkdtemp(join(tmpdir(), 'cm-templates-'));
    for (const [name, text] of Object.entries(cm.data as Record<string, string>)) await writeFile(join(dir, name), text);
    const set = await loadTemplateSet(dir);
    assert.ok(set.templates.size >= 1);
    const pod = one(base, 'Deployment').spec.template.spec;
    const volume = pod.volumes.find((v: Obj) => v.configMap?.name === cm.metadata.name);
    const mount = container(base).volumeMounts.find((m: Obj) => m.name === volume.name);
    assert.equal(mount.mountPath, argsConfig(base).templatesDir);
  });

  describe('webhook configurations', () => {
    const mutating = one(base, 'MutatingWebhookConfiguration');
    const validating = one(base, 'ValidatingWebhookConfiguration');
    const service = one(base, 'Service');
    const hooks = [...mutating.webhooks.map((w: Obj) => ({ kind: 'mutating', w })), ...validating.webhooks.map((w: Obj) => ({ kind: 'validating', w }))];

    it('send pod CREATE only, and only pods that opted in', () => {
      for (const { w } of hooks) {
        assert.deepEqual(w.rules, [{ operations: ['CREATE'], apiGroups: [''], apiVersions: ['v1'], resources: ['pods'], scope: 'Namespaced' }]);
        assert.ok(selects(w.objectSelector, { 'sidecar-injector.io/inject': 'true' }));
        assert.ok(!selects(w.objectSelector, {}), 'a pod without the label is never sent');
        assert.ok(!selects(w.objectSelector, { 'sidecar-injector.io/inject': 'false' }));
      }
    });

    it('never send pods of system namespaces, of the injector itself, or of runlevel 0/1 namespaces', () => {
      for (const { w } of hooks) {
        const own = w.clientConfig.service.namespace;
        assert.equal(own, service.metadata.namespace);
        for (const ns of ['kube-system', 'kube-public', 'kube-node-lease', own]) assert.ok(!selects(w.namespaceSelector, nsLabels(ns)), `${w.name} skips ${ns}`);
        for (const runlevel of ['0', '1']) assert.ok(!selects(w.namespaceSelector, nsLabels('addons', { runlevel })), `${w.name} skips runlevel ${runlevel}`);
        for (const ns of ['default', 'shop']) assert.ok(selects(w.namespaceSelector, nsLabels(ns)), `${w.name} serves ${ns}`);
        assert.ok(selects(w.namespaceSelector, nsLabels('apps', { runlevel: '2' })));
      }
    });

    it('fail open for mutation and closed for validation, so an opted-in pod is never stored without sidecars', () => {
      assert.deepEqual(mutating.webhooks.map((w: Obj) => w.failurePolicy), ['Ignore']);
      assert.deepEqual(validating.webhooks.map((w: Obj) => w.failurePolicy), ['Fail']);
      assert.deepEqual(mutating.webhooks.map((w: Obj) => w.reinvocationPolicy), ['IfNeeded']);
      // Both see exactly the same pods: whatever the mutating one may skip, the validating one checks.
      assert.deepEqual(mutating.webhooks[0].objectSelector, validating.webhooks[0].objectSelector);
      assert.deepEqual(mutating.webhooks[0].namespaceSelector, validating.webhooks[0].namespaceSelector);
    });

    it('declare no side effects, equivalent matching, both review versions, a short timeout and an empty caBundle', () => {
      for (const { kind, w } of hooks) {
        assert.equal(w.sideEffects, 'None');
        assert.equal(w.matchPolicy, 'Equivalent');
        assert.deepEqual(w.admissionReviewVersions, ['v1', 'v1beta1']);
        assert.ok(w.timeoutSeconds >= 1 && w.timeoutSeconds <= 5, `${w.name} timeout ${w.timeoutSeconds}`);
        assert.equal(w.clientConfig.caBundle, undefined, 'filled at run time');
        assert.equal(w.clientConfig.service.path, kind === 'mutating' ? '/mutate' : '/validate');
        assert.equal(w.clientConfig.service.name, service.metadata.name);
        assert.ok(service.spec.ports.some((p: Obj) => p.port === w.clientConfig.service.port));
      }
    });
  });

  describe('deployment', () => {
    const deployment = one(base, 'Deployment');
    const pod = deployment.spec.template.spec;
    const c = container(base);
    const config = argsConfig(base);

    it('runs two replicas spread over nodes, rolls without dropping below them, and a PDB keeps one', () => {
      assert.equal(deployment.spec.replicas, 2);
      assert.deepEqual(deployment.spec.strategy.rollingUpdate, { maxSurge: 1, maxUnavailable: 0 });
      const spread = pod.topologySpreadConstraints.find((t: Obj) => t.topologyKey === 'kubernetes.io/hostname');
      assert.equal(spread.whenUnsatisfiable, 'DoNotSchedule');
      assert.ok(selects(spread.labelSelector, deployment.spec.template.metadata.labels));
      const pdb = one(base, 'PodDisruptionBudget');
      assert.equal(pdb.spec.minAvailable, 1);
      assert.ok(selects(pdb.spec.selector, deployment.spec.template.metadata.labels));
      assert.ok(selects({ matchLabels: one(base, 'Service').spec.selector }, deployment.spec.template.metadata.labels));
    });

    it('meets the Pod Security "restricted" profile', () => {
      assert.equal(one(base, 'Namespace').metadata.labels['pod-security.kubernetes.io/enforce'], 'restricted');
      assert.equal(pod.securityContext.runAsNonRoot, true);
      assert.ok(pod.securityContext.runAsUser > 0);
      assert.equal(pod.securityContext.seccompProfile.type, 'RuntimeDefault');
      assert.deepEqual(c.securityContext, { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, runAsNonRoot: true, capabilities: { drop: ['ALL'] }, seccompProfile: { type: 'RuntimeDefault' } });
      assert.ok(pod.volumes.every((v: Obj) => v.hostPath === undefined));
    });

    it('passes flags the server accepts, probes its health port, and sets requests and limits', () => {
      assert.equal(config.certSecret, 'sidecar-injector-tls');
      assert.equal(config.webhookConfig, one(base, 'MutatingWebhookConfiguration').metadata.name);
      assert.equal(config.webhookConfig, one(base, 'ValidatingWebhookConfiguration').metadata.name);
      assert.equal(config.serviceName, one(base, 'Service').metadata.name);
      const port = (name: string) => c.ports.find((p: Obj) => p.name === name).containerPort;
      assert.equal(port('https'), config.port);
      assert.equal(port('health'), config.healthPort);
      assert.equal(c.readinessProbe.httpGet.path, '/readyz');
      assert.equal(c.livenessProbe.httpGet.path, '/healthz');
      for (const probe of [c.readinessProbe, c.livenessProbe, c.startupProbe]) assert.equal(probe.httpGet.port, 'health');
      for (const r of ['cpu', 'memory']) {
        assert.ok(c.resources.requests[r], `request ${r}`);
        assert.ok(c.resources.limits[r], `limit ${r}`);
      }
    });

    it('gives the drain time to finish before SIGKILL', () => {
      assert.ok(config.shutdownDelay >= 5, 'a preStop window for endpoints to drop the pod');
      assert.ok(pod.terminationGracePeriodSeconds > config.shutdownDelay + config.drainTimeout);
      // The readiness probe notices within the delay (failureThreshold * periodSeconds).
      assert.ok(c.readinessProbe.periodSeconds * c.readinessProbe.failureThreshold < config.shutdownDelay);
    });
  });

  describe('rbac', () => {
    it('grants one Secret in its own namespace and its own two webhook configurations, nothing else', () => {
      const config = argsConfig(base);
      const role = one(base, 'Role');
      assert.equal(role.metadata.namespace, one(base, 'Deployment').metadata.namespace);
      for (const rule of role.rules) {
        assert.deepEqual([rule.apiGroups, rule.resources], [[''], ['secrets']]);
        // create cannot be limited by name; every other verb is.
        if (rule.resourceNames === undefined) assert.deepEqual(rule.verbs, ['create']);
        else assert.deepEqual(rule.resourceNames, [config.certSecret]);
      }
      assert.deepEqual(role.rules.flatMap((r: Obj) => r.verbs).sort(), ['create', 'get', 'update']);
      const cluster = one(base, 'ClusterRole');
      assert.deepEqual(cluster.rules, [
        { apiGroups: ['admissionregistration.k8s.io'], resources: ['mutatingwebhookconfigurations', 'validatingwebhookconfigurations'], resourceNames: [config.webhookConfig], verbs: ['get', 'patch'] },
      ]);
      for (const o of base.filter((x) => x.rules)) for (const r of o.rules) assert.ok(![...r.verbs, ...r.resources, ...r.apiGroups].includes('*'), 'no wildcard');
      const sa = one(base, 'ServiceAccount');
      for (const b of [one(base, 'RoleBinding'), one(base, 'ClusterRoleBinding')]) assert.deepEqual(b.subjects, [{ kind: 'ServiceAccount', name: sa.metadata.name, namespace: sa.metadata.namespace }]);
      assert.equal(one(base, 'Deployment').spec.template.spec.serviceAccountName, sa.metadata.name);
    });
  });

  describe('cert-manager overlay', () => {
    it('serves the cert-manager Secret from files, has cainjector fill both caBundles, and drops the API access', () => {
      const config = argsConfig(overlay);
      assert.equal(config.certSecret, '');
      const serving = overlay.find((o) => o.kind === 'Certificate' && !o.spec.isCA)!;
      assert.deepEqual(serving.spec.dnsNames, serviceDnsNames('sidecar-injector', 'sidecar-injector'));
      const issuer = overlay.find((o) => o.kind === 'Issuer' && o.metadata.name === serving.spec.issuerRef.name)!;
      const ca = overlay.find((o) => o.kind === 'Certificate' && o.spec.isCA)!;
      assert.equal(issuer.spec.ca.secretName, ca.spec.secretName);
      const pod = one(overlay, 'Deployment').spec.template.spec;
      const volume = pod.volumes.find((v: Obj) => v.secret?.secretName === serving.spec.secretName);
      assert.equal(container(overlay).volumeMounts.find((m: Obj) => m.name === volume.name).mountPath, config.certDir);
      for (const kind of ['MutatingWebhookConfiguration', 'ValidatingWebhookConfiguration']) {
        assert.equal(one(overlay, kind).metadata.annotations['cert-manager.io/inject-ca-from'], `${serving.metadata.namespace}/${serving.metadata.name}`);
      }
      for (const kind of ['Role', 'RoleBinding', 'ClusterRole', 'ClusterRoleBinding']) assert.ok(!overlay.some((o) => o.kind === kind), `no ${kind}`);
      for (const o of overlay.filter((x) => x.apiVersion === 'cert-manager.io/v1')) assert.equal(o.metadata.namespace, 'sidecar-injector');
    });
  });
});
