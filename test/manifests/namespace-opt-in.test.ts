import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { SHIPPED_WEBHOOK_CONFIGURATIONS } from '../../src/generated/shipped-webhooks.js';
import { admissionRouter } from '../helpers/admission-routing.js';
import { helmObjects, kustomizeObjects, type Obj } from './render.js';

const INJECT = 'sidecar-injector.io/inject';
const POD_SCOPE = ['/mutate', '/validate'];
const NAMESPACE_SCOPE = ['/mutate/namespace', '/validate/namespace'];

const namespaces = {
  labelled: { name: 'shop', labels: { [INJECT]: 'true' } },
  unlabelled: { name: 'shop', labels: {} },
  'labelled "false"': { name: 'shop', labels: { [INJECT]: 'false' } },
  'system (labelled)': { name: 'kube-system', labels: { [INJECT]: 'true' } },
  "injector's own (labelled)": { name: 'sidecar-injector', labels: { [INJECT]: 'true' } },
  'runlevel 0 (labelled)': { name: 'addons', labels: { [INJECT]: 'true', runlevel: '0' } },
} as const;
const pods = { 'labelled "true"': { [INJECT]: 'true' }, 'labelled "false"': { [INJECT]: 'false' }, unlabelled: {}, 'labelled "yes"': { [INJECT]: 'yes' } } as const;

/**
 * Where the apiserver sends each pod CREATE (contract 1 of the brief). A pod labelled "yes" in an
 * opted-in namespace reaches the namespace paths, whose server skips any value but "true".
 */
const expected: Record<keyof typeof namespaces, Record<keyof typeof pods, string[]>> = {
  labelled: { 'labelled "true"': NAMESPACE_SCOPE, 'labelled "false"': [], unlabelled: NAMESPACE_SCOPE, 'labelled "yes"': NAMESPACE_SCOPE },
  unlabelled: { 'labelled "true"': POD_SCOPE, 'labelled "false"': [], unlabelled: [], 'labelled "yes"': [] },
  'labelled "false"': { 'labelled "true"': POD_SCOPE, 'labelled "false"': [], unlabelled: [], 'labelled "yes"': [] },
  'system (labelled)': { 'labelled "true"': [], 'labelled "false"': [], unlabelled: [], 'labelled "yes"': [] },
  "injector's own (labelled)": { 'labelled "true"': [], 'labelled "false"': [], unlabelled: [], 'labelled "yes"': [] },
  'runlevel 0 (labelled)': { 'labelled "true"': [], 'labelled "false"': [], unlabelled: [], 'labelled "yes"': [] },
};

function checkMatrix(objects: Obj[]): void {
  const router = admissionRouter(objects);
  for (const [nsCase, ns] of Object.entries(namespaces)) {
    for (const [podCase, labels] of Object.entries(pods)) {
      const want = expected[nsCase as keyof typeof namespaces][podCase as keyof typeof pods];
      assert.deepEqual(router.paths(ns.name, ns.labels, labels), want, `namespace ${nsCase}, pod ${podCase}`);
    }
  }
}

describe('namespace opt-in, through the shipped webhook configurations', () => {
  it('routes them the same with the cert-manager overlay', () => checkMatrix(kustomizeObjects('overlays/cert-manager')));
  it('routes them the same with the Helm chart, in either certificate mode', () => {
    checkMatrix(helmObjects());
    checkMatrix(helmObjects({ set: { 'certificates.mode': 'cert-manager' } }));
  });

  it('routes them the same through the typed copy the CLI uses (src/generated/shipped-webhooks.ts)', () => checkMatrix([...SHIPPED_WEBHOOK_CONFIGURATIONS]));

  it('sends each pod to one mutating and one validating webhook, the mutating one failing open and the validating one closed', () => {
    const router = admissionRouter(kustomizeObjects(''));
    for (const [ns, pod] of [[namespaces.labelled, pods.unlabelled], [namespaces.unlabelled, pods['labelled "true"']]] as const) {
      const calls = router.calls(ns.name, ns.labels, pod);
      assert.deepEqual(calls.map((c) => [c.configuration, c.failurePolicy]), [['MutatingWebhookConfiguration', 'Ignore'], ['ValidatingWebhookConfiguration', 'Fail']]);
    }
  });

  it('with namespaceOptIn.enabled=false (chart), only pods labelled "true" are sent, wherever they are', () => {
    const router = admissionRouter(helmObjects({ set: { 'namespaceOptIn.enabled': false } }));
    assert.deepEqual(router.paths('shop', { [INJECT]: 'true' }, {}), []);
    assert.deepEqual(router.paths('shop', { [INJECT]: 'true' }, { [INJECT]: 'true' }), POD_SCOPE);
    assert.deepEqual(router.paths('shop', {}, { [INJECT]: 'true' }), POD_SCOPE);
    assert.deepEqual(router.paths('kube-system', {}, { [INJECT]: 'true' }), []);
  });

  it("excludes the release's own namespace and the configured ones when the chart installs elsewhere", () => {
    const router = admissionRouter(helmObjects({ namespace: 'platform', values: { webhooks: { excludedNamespaces: ['kube-system', 'legacy'] } } }));
    for (const ns of ['platform', 'kube-system', 'legacy']) assert.deepEqual(router.paths(ns, { [INJECT]: 'true' }, {}), [], ns);
    assert.deepEqual(router.paths('sidecar-injector', { [INJECT]: 'true' }, {}), NAMESPACE_SCOPE, 'no longer excluded');
    assert.deepEqual(router.paths('kube-public', {}, { [INJECT]: 'true' }), POD_SCOPE, 'the list replaces the default');
  });
});
