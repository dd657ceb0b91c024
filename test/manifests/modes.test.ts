import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { CHART } from '../../scripts/render-install.js';
import { run } from '../../scripts/tools.js';
import { selectorMatches } from '../../src/kube/selectors.js';
import {
  assertSameObjects,
  helmArgs,
  helmError,
  helmObjects,
  injector,
  key,
  kustomizeWithComponent,
  one,
  serverConfig,
  templated,
  tools,
  type HelmOptions,
  type Obj,
} from './render.js';

/** Kubernetes 1.36: MutatingAdmissionPolicy is GA and served, so the chart renders policy and hybrid. */
const K136 = ['--kube-version', '1.36.0'];
const BETA = 'admissionregistration.k8s.io/v1beta1/MutatingAdmissionPolicy';
const POLICY_RULE = {
  apiGroups: ['admissionregistration.k8s.io'],
  resources: ['mutatingadmissionpolicies', 'mutatingadmissionpolicybindings', 'validatingadmissionpolicies', 'validatingadmissionpolicybindings'],
  verbs: ['get', 'list', 'create', 'patch', 'delete'],
};
/** What only a webhook needs: its configurations, its Service, its certificates. */
const WEBHOOK_KINDS = ['MutatingWebhookConfiguration', 'ValidatingWebhookConfiguration', 'Service', 'Certificate', 'Issuer'];

/** `helm template` of the chart as text, exactly as it prints it. */
function helmText(opts: HelmOptions, extra: readonly string[] = []): string {
  const { args, cleanup } = helmArgs(opts);
  try {
    return run(tools, 'helm', ['template', ...args, ...extra]);
  } finally {
    cleanup();
  }
}

/** Every RBAC rule the injector's ServiceAccount is bound to, Role or ClusterRole. */
function injectorRules(objects: readonly Obj[]): Obj[] {
  const account = one(objects, 'ServiceAccount').metadata;
  const bindings = objects.filter(
    (o) => o.kind.endsWith('RoleBinding') && o.subjects.some((s: Obj) => s.kind === 'ServiceAccount' && s.name === account.name && s.namespace === account.namespace),
  );
  return bindings.flatMap((b) => one(objects, b.roleRef.kind, b.roleRef.name).rules);
}

/** Asserts what policy mode runs: no webhook, the Deployment serving only its health port, RBAC on the policies and, with SidecarTemplates, on those. */
function assertPolicyInstall(objects: Obj[], what: string): void {
  assert.deepEqual(
    objects.filter((o) => WEBHOOK_KINDS.includes(o.kind) && !o.metadata.name.endsWith('-metrics')).map(key),
    [],
    `${what}: no webhook configuration, Service or certificate`,
  );
  const config = serverConfig(objects);
  assert.equal(config.mode, 'policy', `${what}: serve runs in policy mode`);
  assert.deepEqual([config.certSecret, config.certDir, config.ownerEvents], ['', '', 'off'], `${what}: no certificate to keep, no Events to write`);
  const c = injector(objects);
  assert.deepEqual(c.ports, [{ name: 'health', containerPort: config.healthPort, protocol: 'TCP' }], `${what}: the health port alone`);
  for (const probe of ['startupProbe', 'readinessProbe', 'livenessProbe']) assert.equal(c[probe].httpGet.port, 'health', `${what}: ${probe}`);
  const rules = injectorRules(objects);
  const templates = config.templatesSource === 'dir' ? [] : [{ apiGroups: ['sidecar-injector.io'], resources: ['sidecartemplates'] }, { apiGroups: ['sidecar-injector.io'], resources: ['sidecartemplates/status'] }];
  assert.deepEqual(
    rules.map((r) => ({ apiGroups: r.apiGroups, resources: r.resources })),
    [{ apiGroups: POLICY_RULE.apiGroups, resources: POLICY_RULE.resources }, ...templates],
    `${what}: RBAC on the four policy kinds${templates.length > 0 ? ' and the SidecarTemplates' : ''}, nothing more`,
  );
  assert.deepEqual(rules[0], POLICY_RULE, what);
}

describe('install modes (Helm mode, kustomize components policy and hybrid)', () => {
  it('renders with mode=webhook exactly what the chart renders without the value, byte for byte, whatever else is set', () => {
    const variants: HelmOptions[] = [
      {},
      { set: { 'certificates.mode': 'cert-manager' } },
      { set: { revision: 'canary', 'templates.source': 'both' } },
      { set: { 'templates.source': 'cluster', 'required.enabled': true } },
      { set: { 'networkPolicy.enabled': true, ownerEvents: false, 'autoscaling.enabled': true } },
    ];
    for (const opts of variants) {
      const without = helmText(opts);
      assert.match(without, /kind: MutatingWebhookConfiguration/);
      assert.equal(helmText({ ...opts, set: { ...opts.set, mode: 'webhook' } }), without, JSON.stringify(opts));
    }
  });

  it('renders with mode=policy the objects of components/policy on the base, alone and after the sidecartemplates and networkpolicy components', () => {
    assertSameObjects(helmObjects({ set: { mode: 'policy', 'namespace.create': true } }, K136), templated(kustomizeWithComponent('base', 'components/policy')));
    assertSameObjects(
      helmObjects({ set: { mode: 'policy', 'templates.source': 'both', 'namespace.create': true } }, K136),
      templated(kustomizeWithComponent('base', ['components/sidecartemplates', 'components/policy'])),
    );
    assertSameObjects(
      helmObjects({ set: { mode: 'policy', 'networkPolicy.enabled': true, 'namespace.create': true } }, K136),
      templated(kustomizeWithComponent('base', ['components/networkpolicy', 'components/policy'])),
    );
  });

  it('renders with mode=hybrid the objects of components/hybrid, on self-managed certificates, on cert-manager, and before components/revision', () => {
    assertSameObjects(helmObjects({ set: { mode: 'hybrid', 'namespace.create': true } }, K136), templated(kustomizeWithComponent('base', 'components/hybrid')));
    assertSameObjects(
      helmObjects({ set: { mode: 'hybrid', 'certificates.mode': 'cert-manager', 'namespace.create': true } }, K136),
      templated(kustomizeWithComponent('overlays/cert-manager', 'components/hybrid')),
    );
    assertSameObjects(
      helmObjects({ set: { mode: 'hybrid', revision: 'canary' } }, K136),
      templated(kustomizeWithComponent('base', ['components/hybrid', 'components/revision'])),
    );
  });

  it('installs in policy mode no webhook configuration, Service or certificate, runs serve in policy mode on its health port, with RBAC on the four policy kinds and nothing more', () => {
    const installs: [string, Obj[]][] = [
      ['helm mode=policy', helmObjects({ set: { mode: 'policy' } }, K136)],
      ['helm mode=policy with cert-manager', helmObjects({ set: { mode: 'policy', 'certificates.mode': 'cert-manager' } }, K136)],
      ['helm mode=policy, templates.source=cluster', helmObjects({ set: { mode: 'policy', 'templates.source': 'cluster' } }, K136)],
      ['helm mode=policy, revision=canary', helmObjects({ release: 'mesh', set: { mode: 'policy', revision: 'canary' } }, K136)],
      ['kustomize base + components/policy', kustomizeWithComponent('base', 'components/policy')],
      ['kustomize base + components/sidecartemplates + components/policy', kustomizeWithComponent('base', ['components/sidecartemplates', 'components/policy'])],
    ];
    for (const [what, objects] of installs) assertPolicyInstall(objects, what);
    // With cert-manager chosen and nothing to serve, the injector still calls the API: its token stays.
    const certManager = installs[1]![1];
    assert.equal(one(certManager, 'Deployment').spec.template.spec.automountServiceAccountToken, undefined);
    assert.ok(!one(certManager, 'Deployment').spec.template.spec.volumes.some((v: Obj) => v.name === 'tls'), 'no certificate mounted');
    // A revision keeps its name and its selector label, and passes --revision to the sync.
    const canary = installs[3]![1];
    assert.equal(serverConfig(canary).revision, 'canary');
    assert.ok(one(canary, 'ClusterRole', 'mesh-sidecar-injector-policies-canary'));
    // The NetworkPolicy opens the health port to the metrics namespaces and no review port; without them, nothing.
    const np = one(helmObjects({ set: { mode: 'policy', 'networkPolicy.enabled': true } }, K136), 'NetworkPolicy');
    assert.deepEqual(np.spec.ingress.map((r: Obj) => r.ports.map((p: Obj) => p.port)), [['health']]);
    assert.deepEqual(one(helmObjects({ values: { mode: 'policy', networkPolicy: { enabled: true, metricsNamespaces: [] } } }, K136), 'NetworkPolicy').spec.ingress, []);
  });

  it('installs in hybrid mode everything of the webhook install, plus the policy RBAC and serve in hybrid mode', () => {
    for (const set of [{}, { 'certificates.mode': 'cert-manager' }, { 'templates.source': 'both', 'required.enabled': true }]) {
      const webhook = helmObjects({ set }, K136);
      const hybrid = helmObjects({ set: { ...set, mode: 'hybrid' } }, K136);
      const added = hybrid.filter((o) => !webhook.some((w) => key(w) === key(o))).map(key);
      assert.deepEqual(added, ['ClusterRole//sidecar-injector-policies', 'ClusterRoleBinding//sidecar-injector-policies'], JSON.stringify(set));
      for (const o of webhook.filter((w) => w.kind !== 'Deployment')) assert.deepEqual(hybrid.find((h) => key(h) === key(o)), o, key(o));
      const deployment = structuredClone(one(hybrid, 'Deployment'));
      deployment.spec.template.spec.containers[0].env = deployment.spec.template.spec.containers[0].env.filter((e: Obj) => e.name !== 'SIDECAR_INJECTOR_MODE');
      assert.deepEqual(deployment, one(webhook, 'Deployment'), 'the Deployment of the webhook install, but the mode');
      assert.equal(serverConfig(hybrid).mode, 'hybrid');
      assert.deepEqual(one(hybrid, 'ClusterRole', 'sidecar-injector-policies').rules, [POLICY_RULE]);
      assert.ok(selectorMatches({ matchLabels: one(hybrid, 'Service').spec.selector }, deployment.spec.template.metadata.labels), 'the Service still fronts the injector');
    }
    assert.equal(serverConfig(kustomizeWithComponent('overlays/cert-manager', ['components/hybrid', 'components/sidecartemplates'])).mode, 'hybrid', 'kept when another patch replaces the args');
  });

  it('refuses policy and hybrid below Kubernetes 1.36, unless 1.34+ serves the v1beta1 MutatingAdmissionPolicy, saying the versions and how to enable the beta API', () => {
    const cases: [string, string[], boolean][] = [
      ['1.36.0', [], true],
      ['1.37.2', [], true],
      ['1.35.3', [], false],
      ['1.35.3', [BETA], true],
      ['1.34.0', [BETA], true],
      ['1.34.0', ['admissionregistration.k8s.io/v1beta1'], false], // the group version alone: ValidatingAdmissionPolicy's beta, not the mutating kind
      ['1.33.5', [BETA], false],
      ['1.29.0', [], false],
    ];
    for (const mode of ['policy', 'hybrid']) {
      for (const [version, apis, renders] of cases) {
        const extra = ['--kube-version', version, ...apis.flatMap((a) => ['--api-versions', a])];
        const err = helmError({ set: { mode } }, extra);
        const what = `${mode} on ${version} ${apis.join(' ')}`;
        if (renders) {
          assert.equal(err, undefined, what);
          continue;
        }
        assert.match(err ?? 'rendered', new RegExp(`mode ${mode} needs MutatingAdmissionPolicy, which this cluster \\(v${version.replace(/\./g, '\\.')}\\) does not serve`), what);
        assert.match(err ?? '', /Kubernetes 1\.36 or newer, or 1\.34\/1\.35 with the beta API on \(kube-apiserver --runtime-config=admissionregistration\.k8s\.io\/v1beta1=true --feature-gates=MutatingAdmissionPolicy=true\)/, what);
        assert.match(err ?? '', /--kube-version/, what);
      }
    }
    assert.equal(helmError({ set: { mode: 'webhook' } }, ['--kube-version', '1.29.0']), undefined, 'webhook mode: the chart\'s own minimum');
    assert.match(helmError({ set: { mode: 'policy' } }) ?? 'rendered', /needs MutatingAdmissionPolicy/, 'helm template without --kube-version: helm\'s default (1.35) without the beta API');
  });

  it('refuses in policy mode the webhook-only values that would otherwise silently not hold: required.enabled, excludedNamespaces, namespaceOptIn.enabled=false', () => {
    assert.match(helmError({ set: { mode: 'policy', 'required.enabled': true } }, K136) ?? 'rendered', /required\.enabled adds the required webhooks, and mode policy runs no webhook.*mode=hybrid/);
    const hybrid = helmObjects({ set: { mode: 'hybrid', 'required.enabled': true } }, K136);
    assert.equal(one(hybrid, 'MutatingWebhookConfiguration').webhooks.at(-1).name, 'required.mutate.sidecar-injector.io', 'hybrid keeps the required webhooks');
    for (const mode of ['policy', 'hybrid']) {
      assert.match(helmError({ values: { mode, webhooks: { excludedNamespaces: ['kube-system'] } } }, K136) ?? 'rendered', /webhooks\.excludedNamespaces and namespaceOptIn\.enabled=false apply to the webhooks only/, mode);
      assert.match(helmError({ set: { mode, 'namespaceOptIn.enabled': false } }, K136) ?? 'rendered', /apply to the webhooks only/, mode);
    }
    assert.match(helmError({ set: { mode: 'policies' } }, K136) ?? 'rendered', /mode/, 'values.schema.json names the allowed modes');
  });

  it('passes helm lint --strict in every mode', () => {
    for (const mode of ['webhook', 'policy', 'hybrid']) {
      const out = run(tools, 'helm', ['lint', '--strict', CHART, '--set', `mode=${mode}`, ...K136]);
      assert.doesNotMatch(out, /\[(INFO|WARNING|ERROR)\]/, `${mode}: ${out}`);
    }
  });
});
