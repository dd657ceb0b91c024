import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Deployment } from 'kubernetes-models/apps/v1';
import { ConfigMap, Namespace, Service, ServiceAccount } from 'kubernetes-models/v1';
import { MutatingWebhookConfiguration, ValidatingWebhookConfiguration } from 'kubernetes-models/admissionregistration.k8s.io/v1';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { CustomResourceDefinition } from 'kubernetes-models/apiextensions.k8s.io/v1';
import { ClusterRole, ClusterRoleBinding, Role, RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1';
import { serviceDnsNames } from '../../src/certs/bootstrap.js';
import { serveConfig } from '../../src/cli/serve-flags.js';
import { loadTemplateSet } from '../../src/templates/load.js';
import { selectorMatches } from '../../src/kube/selectors.js';
import { Endpoints, SIDECARTEMPLATES_PATH } from '../../src/admission/endpoints.js';
import { INSTALL_YAML, installYaml, kustomize, MANIFESTS, parseObjects, SHIPPED_WEBHOOKS_TS, shippedWebhooksModule, templateDrift } from '../../scripts/render-install.js';
import { injector as container, kustomizations, kustomizeObjects, kustomizeWithComponent, one as oneOf, serverConfig, tools, type Obj } from './render.js';

/** The Kubernetes schemas kubernetes-models ships, by apiVersion/kind. */
const Models: Record<string, new (data: any) => { validate(): void }> = {
  'v1/Namespace': Namespace,
  'v1/ServiceAccount': ServiceAccount,
  'v1/Service': Service,
  'v1/ConfigMap': ConfigMap,
  'apps/v1/Deployment': Deployment,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
  'rbac.authorization.k8s.io/v1/Role': Role,
  'rbac.authorization.k8s.io/v1/RoleBinding': RoleBinding,
  'rbac.authorization.k8s.io/v1/ClusterRole': ClusterRole,
  'rbac.authorization.k8s.io/v1/ClusterRoleBinding': ClusterRoleBinding,
  'apiextensions.k8s.io/v1/CustomResourceDefinition': CustomResourceDefinition,
  'admissionregistration.k8s.io/v1/MutatingWebhookConfiguration': MutatingWebhookConfiguration,
  'admissionregistration.k8s.io/v1/ValidatingWebhookConfiguration': ValidatingWebhookConfiguration,
};
/** Custom resources (cert-manager, Prometheus Operator) have no schema here: their fields are checked one by one below. */
const CUSTOM_GROUPS = ['cert-manager.io/v1', 'monitoring.coreos.com/v1'];

// `kubectl apply -k manifests/` and `kubectl apply -k manifests/overlays/cert-manager`, by real kustomize.
const base = kustomizeObjects('');
const overlay = kustomizeObjects('overlays/cert-manager');
const one = (objects: Obj[], kind: string, name?: string): Obj => oneOf(objects, kind, name);
const argsConfig = (objects: Obj[]) => serveConfig(container(objects).args.slice(1), {});
const selects = (selector: Obj, labels: Record<string, string>): boolean => selectorMatches(selector, labels);
/** The labels a namespace carries (the apiserver sets kubernetes.io/metadata.name on every one). */
const nsLabels = (name: string, extra: Record<string, string> = {}) => ({ 'kubernetes.io/metadata.name': name, ...extra });
const INJECT = 'sidecar-injector.io/inject';
const key = (o: Obj): string => `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`;
const byKey = (objects: Obj[]): Obj[] => [...objects].sort((a, b) => key(a).localeCompare(key(b)));
const SOURCE_ENV = 'SIDECAR_INJECTOR_TEMPLATES_SOURCE';

describe('manifests', () => {
  it('builds every kustomization and component with real kustomize, and each object passes the Kubernetes schemas', () => {
    const { kustomizations: dirs, components } = kustomizations();
    assert.deepEqual(dirs.sort(), ['', 'base', 'overlays/cert-manager']);
    assert.deepEqual(components.sort(), ['components/autoscaling', 'components/hybrid', 'components/networkpolicy', 'components/podmonitor', 'components/policy', 'components/required', 'components/revision', 'components/sidecartemplates']);
    // The revision component builds on the base (self-managed certificates) only, and names itself;
    // the policy component on the base only (it runs no webhook to serve with cert-manager's certificates).
    const baseOnly = ['components/revision', 'components/policy'];
    const onBoth = components.filter((c) => !baseOnly.includes(c));
    const builds = [...dirs.map((d) => kustomizeObjects(d)), ...onBoth.flatMap((c) => [kustomizeWithComponent('base', c), kustomizeWithComponent('overlays/cert-manager', c)]), ...baseOnly.map((c) => kustomizeWithComponent('base', c))];
    for (const objects of builds) {
      const nameLabel = objects.some((o) => o.metadata.name.endsWith('-canary')) ? 'sidecar-injector-canary' : 'sidecar-injector';
      for (const o of objects) {
        const Model = Models[`${o.apiVersion}/${o.kind}`];
        assert.ok(Model || CUSTOM_GROUPS.includes(o.apiVersion), `a schema for ${o.apiVersion} ${o.kind}`);
        if (Model) assert.doesNotThrow(() => new Model(o).validate(), `${o.kind} ${o.metadata?.name}`);
        if (o.kind !== 'Namespace' && !o.kind.endsWith('Configuration') && !o.kind.startsWith('Cluster') && o.kind !== 'CustomResourceDefinition') assert.equal(o.metadata.namespace, 'sidecar-injector', `${o.kind} ${o.metadata.name} namespace`);
        assert.equal(o.metadata.labels?.['app.kubernetes.io/name'], nameLabel, `${o.kind} ${o.metadata.name} carries the name label`);
      }
    }
    assert.deepEqual(base.map((o) => o.kind), ['Namespace', 'CustomResourceDefinition', 'ServiceAccount', 'Role', 'ClusterRole', 'ClusterRole', 'RoleBinding', 'ClusterRoleBinding', 'ClusterRoleBinding', 'ConfigMap', 'Service', 'Deployment', 'PodDisruptionBudget', 'MutatingWebhookConfiguration', 'ValidatingWebhookConfiguration']);
    assert.deepEqual(kustomizeObjects('base'), base, 'manifests/ is the base');
    // Every build runs the image of this version (package.json), as the chart's appVersion does.
    const version = JSON.parse(readFileSync('package.json', 'utf8')).version as string;
    for (const objects of builds) assert.equal(container(objects).image, `ghcr.io/sidecar-injector/sidecar-injector:${version}`);
    assert.match(readFileSync('charts/sidecar-injector/Chart.yaml', 'utf8'), new RegExp(`^appVersion: "${version.replace(/\./g, '\\.')}"$`, 'm'));
    assert.deepEqual(new Set(base.map((o) => o.metadata.name)), new Set(['sidecar-injector', 'sidecar-injector-events', 'sidecar-injector-templates', 'sidecartemplates.sidecar-injector.io']));
  });

  it('keeps install.yaml, the typed webhook copy and the template copies in step (make install-yaml)', () => {
    assert.deepEqual(templateDrift(), []);
    const rendered = kustomize(tools, MANIFESTS);
    assert.equal(readFileSync(INSTALL_YAML, 'utf8'), installYaml(rendered), 'manifests/install.yaml is out of date: run make install-yaml');
    assert.equal(readFileSync(SHIPPED_WEBHOOKS_TS, 'utf8'), shippedWebhooksModule(rendered), 'src/generated/shipped-webhooks.ts is out of date: run make install-yaml');
  });

  it('adds the PodMonitor component to the base or the overlay: it scrapes /metrics on the health port of the injector pods', () => {
    for (const objects of [kustomizeWithComponent('base', 'components/podmonitor'), kustomizeWithComponent('overlays/cert-manager', 'components/podmonitor')]) {
      const monitor = one(objects, 'PodMonitor');
      assert.equal(monitor.apiVersion, 'monitoring.coreos.com/v1');
      assert.equal(monitor.metadata.namespace, one(objects, 'Deployment').metadata.namespace);
      assert.ok(selects(monitor.spec.selector, one(objects, 'Deployment').spec.template.metadata.labels));
      const [endpoint, ...more] = monitor.spec.podMetricsEndpoints;
      assert.equal(more.length, 0);
      assert.equal(endpoint.path, '/metrics');
      const port = container(objects).ports.find((p: Obj) => p.name === endpoint.port);
      assert.equal(port?.containerPort, argsConfig(objects).healthPort, 'the port /metrics is served on');
    }
  });

  it('adds the NetworkPolicy component to the base or the overlay: the review port open to every source, the health port to the monitoring namespace only', () => {
    for (const objects of [kustomizeWithComponent('base', 'components/networkpolicy'), kustomizeWithComponent('overlays/cert-manager', 'components/networkpolicy')]) {
      const policy = one(objects, 'NetworkPolicy');
      const deployment = one(objects, 'Deployment');
      assert.equal(policy.metadata.namespace, deployment.metadata.namespace);
      assert.ok(selects(policy.spec.podSelector, deployment.spec.template.metadata.labels), 'it selects the injector pods');
      assert.deepEqual(policy.spec.policyTypes, ['Ingress']);
      const config = argsConfig(objects);
      const portOf = (name: string): number | undefined => container(objects).ports.find((p: Obj) => p.name === name)?.containerPort;
      const [review, health, ...more] = policy.spec.ingress;
      assert.equal(more.length, 0);
      assert.deepEqual(review.ports.map((p: Obj) => portOf(p.port)), [config.port], 'the review port');
      assert.equal(review.from, undefined, 'from anywhere: the apiserver');
      assert.deepEqual(health.ports.map((p: Obj) => portOf(p.port)), [config.healthPort], 'the health port');
      const [peer, ...others] = health.from;
      assert.equal(others.length, 0);
      assert.equal(peer.podSelector, undefined);
      assert.equal(selects(peer.namespaceSelector, nsLabels('monitoring')), true);
      assert.equal(selects(peer.namespaceSelector, nsLabels('default')), false, 'any other namespace is kept off the health port');
    }
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
    const hooks: { kind: 'mutating' | 'validating'; w: Obj }[] = [...mutating.webhooks.map((w: Obj) => ({ kind: 'mutating', w })), ...validating.webhooks.map((w: Obj) => ({ kind: 'validating', w }))];
    const byName = (config: Obj, name: string): Obj => config.webhooks.find((w: Obj) => w.name === name);

    it('carry a pod-scope and a namespace-scope webhook each, on the paths of the opt-in contract', () => {
      assert.deepEqual(mutating.webhooks.map((w: Obj) => [w.name, w.clientConfig.service.path]), [
        ['inject.sidecar-injector.io', '/mutate'],
        ['namespace.inject.sidecar-injector.io', '/mutate/namespace'],
      ]);
      assert.deepEqual(validating.webhooks.map((w: Obj) => [w.name, w.clientConfig.service.path]), [
        ['validate.sidecar-injector.io', '/validate'],
        ['namespace.validate.sidecar-injector.io', '/validate/namespace'],
      ]);
    });

    it('send pod CREATE only: pod scope the pods labelled "true", namespace scope every pod not labelled "false"', () => {
      for (const { w } of hooks) {
        assert.deepEqual(w.rules, [{ operations: ['CREATE'], apiGroups: [''], apiVersions: ['v1'], resources: ['pods'], scope: 'Namespaced' }]);
        const namespaceScope = w.clientConfig.service.path.endsWith('/namespace');
        assert.equal(selects(w.objectSelector, { [INJECT]: 'true' }), true);
        assert.equal(selects(w.objectSelector, {}), namespaceScope, `${w.name}: a pod without the label`);
        assert.equal(selects(w.objectSelector, { [INJECT]: 'false' }), false, `${w.name}: a pod labelled "false" is never sent`);
      }
    });

    it('split namespaces between the two scopes by the namespace label: never both, never neither (outside the exclusions)', () => {
      for (const config of [mutating, validating]) {
        const [pod, ns] = config.webhooks;
        for (const labels of [{}, { [INJECT]: 'true' }, { [INJECT]: 'false' }, { [INJECT]: 'yes' }]) {
          const namespace = nsLabels('shop', labels);
          assert.notEqual(selects(pod.namespaceSelector, namespace), selects(ns.namespaceSelector, namespace), `${config.kind} ${JSON.stringify(labels)}`);
          assert.equal(selects(ns.namespaceSelector, namespace), labels[INJECT as keyof typeof labels] === 'true');
        }
      }
    });

    it('never send pods of system namespaces, of the injector itself, or of runlevel 0/1 namespaces, even opted in', () => {
      for (const { w } of hooks) {
        const own = w.clientConfig.service.namespace;
        assert.equal(own, service.metadata.namespace);
        for (const optIn of [{}, { [INJECT]: 'true' }]) {
          for (const ns of ['kube-system', 'kube-public', 'kube-node-lease', own]) assert.ok(!selects(w.namespaceSelector, nsLabels(ns, optIn)), `${w.name} skips ${ns}`);
          for (const runlevel of ['0', '1']) assert.ok(!selects(w.namespaceSelector, nsLabels('addons', { runlevel, ...optIn })), `${w.name} skips runlevel ${runlevel}`);
        }
        const optIn = w.clientConfig.service.path.endsWith('/namespace') ? { [INJECT]: 'true' } : {};
        for (const ns of ['default', 'shop']) assert.ok(selects(w.namespaceSelector, nsLabels(ns, optIn)), `${w.name} serves ${ns}`);
        assert.ok(selects(w.namespaceSelector, nsLabels('apps', { runlevel: '2', ...optIn })));
      }
    });

    it('fail open for mutation and closed for validation, so an opted-in pod is never stored without sidecars', () => {
      assert.deepEqual(mutating.webhooks.map((w: Obj) => w.failurePolicy), ['Ignore', 'Ignore']);
      assert.deepEqual(validating.webhooks.map((w: Obj) => w.failurePolicy), ['Fail', 'Fail']);
      assert.deepEqual(mutating.webhooks.map((w: Obj) => w.reinvocationPolicy), ['IfNeeded', 'IfNeeded']);
      // Each validating webhook sees exactly the pods its mutating twin sees: whatever that one may skip, this one checks.
      for (const [m, v] of [['inject.sidecar-injector.io', 'validate.sidecar-injector.io'], ['namespace.inject.sidecar-injector.io', 'namespace.validate.sidecar-injector.io']] as const) {
        assert.deepEqual(byName(mutating, m).objectSelector, byName(validating, v).objectSelector);
        assert.deepEqual(byName(mutating, m).namespaceSelector, byName(validating, v).namespaceSelector);
      }
    });

    it('declare no side effects, equivalent matching, both review versions, a short timeout and an empty caBundle', () => {
      for (const { kind, w } of hooks) {
        assert.equal(w.sideEffects, 'None');
        assert.equal(w.matchPolicy, 'Equivalent');
        assert.deepEqual(w.admissionReviewVersions, ['v1', 'v1beta1']);
        assert.ok(w.timeoutSeconds >= 1 && w.timeoutSeconds <= 5, `${w.name} timeout ${w.timeoutSeconds}`);
        assert.equal(w.clientConfig.caBundle, undefined, 'filled at run time');
        assert.match(w.clientConfig.service.path, kind === 'mutating' ? /^\/mutate(\/namespace)?$/ : /^\/validate(\/namespace)?$/);
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
    it('grants one Secret in its own namespace, its own two webhook configurations, and creating Events (--owner-events), nothing else', () => {
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
      const cluster = one(base, 'ClusterRole', 'sidecar-injector');
      assert.deepEqual(cluster.rules, [
        { apiGroups: ['admissionregistration.k8s.io'], resources: ['mutatingwebhookconfigurations', 'validatingwebhookconfigurations'], resourceNames: [config.webhookConfig], verbs: ['get', 'patch'] },
      ]);
      for (const o of base.filter((x) => x.rules)) for (const r of o.rules) assert.ok(![...r.verbs, ...r.resources, ...r.apiGroups].includes('*'), 'no wildcard');
      const sa = one(base, 'ServiceAccount');
      assert.deepEqual(one(base, 'ClusterRole', 'sidecar-injector-events').rules, [
        { apiGroups: [''], resources: ['events'], verbs: ['create', 'patch'] },
        { apiGroups: ['apps'], resources: ['replicasets'], verbs: ['get'] },
      ]);
      assert.equal(one(base, 'ClusterRoleBinding', 'sidecar-injector-events').roleRef.name, 'sidecar-injector-events');
      for (const b of [one(base, 'RoleBinding'), one(base, 'ClusterRoleBinding', 'sidecar-injector'), one(base, 'ClusterRoleBinding', 'sidecar-injector-events')]) assert.deepEqual(b.subjects, [{ kind: 'ServiceAccount', name: sa.metadata.name, namespace: sa.metadata.namespace }]);
      assert.equal(one(base, 'Deployment').spec.template.spec.serviceAccountName, sa.metadata.name);
    });
  });

  describe('cert-manager overlay', () => {
    it('serves the cert-manager Secret from files, has cainjector fill both caBundles, and drops the API access but creating Events', () => {
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
      // What is left is the Events RBAC of --owner-events, its one call to the API.
      for (const kind of ['Role', 'RoleBinding', 'ClusterRole', 'ClusterRoleBinding']) assert.ok(!overlay.some((o) => o.kind === kind && o.metadata.name !== 'sidecar-injector-events'), `no ${kind} but the Events one`);
      for (const o of overlay.filter((x) => x.apiVersion === 'cert-manager.io/v1')) assert.equal(o.metadata.namespace, 'sidecar-injector');
    });
  });

  describe('sidecartemplates component', () => {
    const SCT_WEBHOOK = 'sidecartemplates.validate.sidecar-injector.io';
    const RBAC = parseObjects(readFileSync(join(MANIFESTS, 'components/sidecartemplates/rbac.yaml'), 'utf8'));

    it('adds to the base or the overlay the objects of its rbac.yaml, the source in the environment and the SidecarTemplate webhook, nothing more', () => {
      for (const [resource, without] of [['base', base], ['overlays/cert-manager', overlay]] as const) {
        const objects = kustomizeWithComponent(resource, 'components/sidecartemplates');
        const added = objects.filter((o) => !without.some((w) => key(w) === key(o)));
        assert.deepEqual(byKey(added), byKey(RBAC), `${resource}: rbac.yaml, the one source of this RBAC`);
        const changed = new Set(['Deployment', 'ValidatingWebhookConfiguration']);
        for (const o of without.filter((w) => !changed.has(w.kind))) assert.deepEqual(objects.find((x) => key(x) === key(o)), o, `${resource}: ${key(o)} as it was`);
        // The validating configuration as it was, its caBundle source (the injector's patch, cert-manager's annotation) included, and one webhook more, last.
        const validating = one(objects, 'ValidatingWebhookConfiguration');
        const before = one(without, 'ValidatingWebhookConfiguration');
        assert.deepEqual({ ...validating, webhooks: validating.webhooks.slice(0, -1) }, before, `${resource}: the other webhooks as they were`);
        assert.equal(validating.webhooks.at(-1).name, SCT_WEBHOOK);
        assert.equal(serverConfig(objects).templatesSource, 'both', 'the ConfigMap stays, the objects come in');
        // The Deployment as it was, but the source and (cert-manager) the token the injector now needs for the API.
        const deployment = one(objects, 'Deployment');
        assert.equal(deployment.spec.template.spec.automountServiceAccountToken, undefined, `${resource}: the token is mounted`);
        const c = deployment.spec.template.spec.containers[0];
        assert.deepEqual(c.env.filter((e: Obj) => e.name === SOURCE_ENV), [{ name: SOURCE_ENV, value: 'both' }]);
        c.env = c.env.filter((e: Obj) => e.name !== SOURCE_ENV);
        const deploymentBefore = one(without, 'Deployment');
        delete deploymentBefore.spec.template.spec.automountServiceAccountToken;
        assert.deepEqual(deployment, deploymentBefore, resource);
      }
    });

    it("validates every write of a SidecarTemplate on the CRD's own group, versions and plural, through the injector's Service, failing closed", () => {
      const objects = kustomizeWithComponent('base', 'components/sidecartemplates');
      const crd = one(objects, 'CustomResourceDefinition');
      const hook = one(objects, 'ValidatingWebhookConfiguration').webhooks.find((w: Obj) => w.name === SCT_WEBHOOK);
      assert.deepEqual(hook.rules, [
        {
          operations: ['CREATE', 'UPDATE'],
          apiGroups: [crd.spec.group],
          apiVersions: crd.spec.versions.filter((v: Obj) => v.served).map((v: Obj) => v.name),
          resources: [crd.spec.names.plural],
          scope: crd.spec.scope,
        },
      ]);
      const service = one(objects, 'Service');
      assert.deepEqual(hook.clientConfig, { service: { name: service.metadata.name, namespace: service.metadata.namespace, path: SIDECARTEMPLATES_PATH, port: 443 } });
      assert.ok(Endpoints.some((e) => e.path === hook.clientConfig.service.path), 'a path the server serves');
      assert.deepEqual(hook.admissionReviewVersions, ['v1']);
      assert.equal(hook.sideEffects, 'None');
      assert.equal(hook.failurePolicy, 'Fail');
      assert.ok(hook.timeoutSeconds >= 1 && hook.timeoutSeconds <= 5, `timeout ${hook.timeoutSeconds}`);
      // No selector: every namespace's templates are checked, the injector's own (the cluster-wide ones) first of all.
      assert.equal(hook.namespaceSelector, undefined);
      assert.equal(hook.objectSelector, undefined);
      new ValidatingWebhookConfiguration(one(objects, 'ValidatingWebhookConfiguration')).validate();
    });

    it('lets the injector read every namespace\'s SidecarTemplates and write only their status, and teams edit theirs', () => {
      const objects = kustomizeWithComponent('base', 'components/sidecartemplates');
      const binding = oneOf(objects, 'ClusterRoleBinding', 'sidecar-injector-templates');
      const sa = one(objects, 'ServiceAccount');
      assert.deepEqual(binding.subjects, [{ kind: 'ServiceAccount', name: sa.metadata.name, namespace: sa.metadata.namespace }]);
      assert.equal(one(objects, 'Deployment').spec.template.spec.serviceAccountName, sa.metadata.name);
      assert.deepEqual(oneOf(objects, 'ClusterRole', binding.roleRef.name).rules, [
        { apiGroups: ['sidecar-injector.io'], resources: ['sidecartemplates'], verbs: ['get', 'list', 'watch'] },
        { apiGroups: ['sidecar-injector.io'], resources: ['sidecartemplates/status'], verbs: ['update'] },
      ]);
      const editor = oneOf(objects, 'ClusterRole', 'sidecar-injector-template-editor');
      assert.equal(editor.metadata.labels['rbac.authorization.k8s.io/aggregate-to-edit'], 'true', 'namespace editors hold it');
      assert.deepEqual(editor.rules.map((r: Obj) => r.resources), [['sidecartemplates'], ['sidecartemplates/status']]);
      // What test/cli/cluster-templates.test.ts grants a team besides the editor role in its namespace:
      // reading the cluster-wide templates in the injector's namespace.
      const reader = oneOf(objects, 'RoleBinding', 'sidecar-injector-template-reader');
      assert.equal(reader.metadata.namespace, sa.metadata.namespace);
      assert.deepEqual(reader.subjects, [{ kind: 'Group', name: 'system:authenticated', apiGroup: 'rbac.authorization.k8s.io' }]);
      const role = oneOf(objects, 'Role', reader.roleRef.name);
      assert.equal(role.metadata.namespace, sa.metadata.namespace);
      assert.deepEqual(role.rules, [{ apiGroups: ['sidecar-injector.io'], resources: ['sidecartemplates'], verbs: ['get', 'list', 'watch'] }]);
    });
  });

  describe('revision component', () => {
    it('carries neither the Namespace nor the SidecarTemplate CRD, which the default install owns: applying or deleting a revision leaves them alone', () => {
      const canary = kustomizeWithComponent('base', 'components/revision');
      assert.deepEqual(canary.filter((o) => o.kind === 'Namespace' || o.kind === 'CustomResourceDefinition').map(key), []);
      for (const o of canary) assert.ok(!base.some((b) => key(b) === key(o)), `${key(o)} is not the default install's`);
    });

    it('after the sidecartemplates component: RBAC of its own for its ServiceAccount, and the editor ClusterRole left to the default install', () => {
      const main = kustomizeWithComponent('base', 'components/sidecartemplates');
      const canary = kustomizeWithComponent('base', ['components/sidecartemplates', 'components/revision']);
      for (const o of canary) assert.ok(!main.some((m) => key(m) === key(o)), `${key(o)} is not the default install's`);
      assert.equal(serverConfig(canary).templatesSource, 'both');
      const binding = oneOf(canary, 'ClusterRoleBinding', 'sidecar-injector-templates-canary');
      assert.deepEqual(binding.subjects, [{ kind: 'ServiceAccount', name: one(canary, 'ServiceAccount').metadata.name, namespace: 'sidecar-injector' }]);
      // The revision renames its own webhooks in its ClusterRole, not this one.
      assert.deepEqual(oneOf(canary, 'ClusterRole', binding.roleRef.name).rules, oneOf(main, 'ClusterRole', 'sidecar-injector-templates').rules);
      assert.ok(!canary.some((o) => o.metadata.name.startsWith('sidecar-injector-template-editor')), 'no editor ClusterRole');
      assert.ok(!canary.some((o) => o.metadata.name.startsWith('sidecar-injector-template-reader')), 'no second reader of the shared namespace');
      const hooks = one(canary, 'ValidatingWebhookConfiguration').webhooks.map((w: Obj) => w.name);
      assert.ok(!hooks.includes('sidecartemplates.validate.sidecar-injector.io'), 'the default install alone validates SidecarTemplates, as it owns their CRD');
    });
  });
});
