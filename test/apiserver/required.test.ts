import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { findKubeadmit, mapLimit } from '../helpers/kubeadmit.js';
import { kustomizeWithComponent, one, type Obj } from '../manifests/render.js';
import { containerNames, INJECT, paths, REV, status, scenario } from './cases.js';
import { startInstall, writeConfigurations, type RunningInstall } from './install.js';

/**
 * manifests/components/required on the kustomize base, rendered with the real kustomize, the
 * injector started as the image starts it, pods run through the kube-apiserver's admission code
 * (kubeadmit). The platform's `agent` is required everywhere but namespace legacy; the namespaces
 * labelled sidecar-injector.io/required: "true" are enforced. The pods here are those the base's
 * objectSelectors never send to /mutate and /validate.
 */
const found = findKubeadmit();
const skip = 'skip' in found ? found.skip : false;
const binary = 'binary' in found ? found.binary : '';

const ENFORCED = { 'sidecar-injector.io/required': 'true' };
const AGENT = `apiVersion: sidecar-injector.io/v1alpha1
kind: SidecarTemplate
metadata:
  name: agent
spec:
  required:
    namespaceSelector:
      matchExpressions:
        - { key: kubernetes.io/metadata.name, operator: NotIn, values: [legacy] }
  containers:
    - name: agent
      image: registry.example.com/agent:1
`;
const REQUIRED_PATHS = ['m:/mutate/required', 'v:/validate/required'];

describe('the required component, through the apiserver admission code (kubeadmit)', { skip }, () => {
  let running: RunningInstall;
  let objects: Obj[];
  before(async () => {
    objects = kustomizeWithComponent('base', 'components/required');
    const files = one(objects, 'ConfigMap').data as Record<string, string>;
    running = await startInstall(binary, objects, { templates: { ...files, 'agent.yaml': AGENT } });
  });
  after(() => running?.close());

  it('gives the required sidecar alone to the pods that escape the other webhooks: opted out, an uninstalled revision, a namespace that did not opt in', async () => {
    const cases = [scenario('shop', ENFORCED, { [INJECT]: 'false' }), scenario('shop', ENFORCED, { [REV]: 'nobody' }), scenario('shop', ENFORCED, {})];
    for (const res of await mapLimit(cases, 3, (s) => running.admit(s))) {
      assert.equal(res.allowed, true, res.reason);
      assert.deepEqual(paths(res), REQUIRED_PATHS);
      assert.deepEqual(containerNames(res), ['app', 'agent']);
      assert.deepEqual(status(res).templates, ['agent']);
    }
  });

  it('adds it once to a pod the other webhooks inject too', async () => {
    const res = await running.admit(scenario('shop', { ...ENFORCED, [INJECT]: 'true' }, {}));
    assert.equal(res.allowed, true, res.reason);
    // Mutating webhooks in order, /mutate first; the validating ones run in parallel.
    assert.deepEqual(paths(res).slice(0, 2), ['m:/mutate/namespace', 'm:/mutate/required']);
    assert.deepEqual(paths(res).slice(2).sort(), ['v:/validate/namespace', 'v:/validate/required']);
    assert.deepEqual(
      containerNames(res).filter((n) => n === 'agent'),
      ['agent'],
    );
    assert.deepEqual(status(res).templates, ['log-shipper', 'agent']);
  });

  it('refuses, with the validating webhook alone (the mutating one failed open), an opted-out pod without it', async () => {
    const validating = await writeConfigurations([one(running.configurations, 'ValidatingWebhookConfiguration')]);
    const res = await running.admit(scenario('shop', ENFORCED, { [INJECT]: 'false' }), { configs: [validating] });
    assert.equal(res.allowed, false);
    assert.equal(res.code, 403);
    assert.match(
      res.reason ?? '',
      /template "agent" is required in namespace shop \(its namespaceSelector takes it\) by the platform's spec\.required, and the pod lacks it \(container "agent" \(template "agent"\)\)/,
    );
  });

  it('leaves alone a namespace the template leaves out, and a namespace the webhooks leave out', async () => {
    const [legacy, other] = await mapLimit([scenario('legacy', ENFORCED, { [INJECT]: 'false' }), scenario('other', {}, { [INJECT]: 'false' })], 2, (s) =>
      running.admit(s),
    );
    assert.equal(legacy!.allowed, true, legacy!.reason);
    assert.deepEqual(paths(legacy!), REQUIRED_PATHS);
    assert.deepEqual(containerNames(legacy!), ['app']);
    assert.equal(other!.allowed, true, other!.reason);
    assert.deepEqual(paths(other!), []);
    assert.deepEqual(containerNames(other!), ['app']);
  });
});
