import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { InjectorError } from '../../src/errors.js';
import { injectSidecars } from '../../src/inject/mutate.js';
import { applyPatchV4 } from '../helpers/jsonpatch-v4.js';
import { decodePatch, mutate, optedInPod, podReview } from '../helpers/review.js';
import { set, template } from '../helpers/templates.js';
import { podValidationErrors } from '../corpus/pod-validation.js';

// A regular sidecar (100m / 64Mi, limit 128Mi) and a native one (50m / 32Mi).
const templates = set(
  template('agent', `  default: true
  containers:
    - name: agent
      image: registry.example.com/agent:1.0
      resources:
        requests: { cpu: 100m, memory: 64Mi }
        limits: { memory: 128Mi }
`),
  template('proxy', `  nativeSidecar: true
  containers:
    - name: proxy
      image: registry.example.com/proxy:1.0
      resources:
        requests: { cpu: 50m, memory: 32Mi }
`),
);
const agent = [templates.templates.get('agent')!];
const both = [templates.templates.get('agent')!, templates.templates.get('proxy')!];

/** The Kubernetes docs' pod-level-resources.yaml, reduced: the pod requests 1 cpu / 100Mi, its container 500m / 50Mi. */
function podWithResources(resources: object, containers: object[] = [{ name: 'app', image: 'nginx', resources: { requests: { cpu: '500m', memory: '50Mi' }, limits: { cpu: '500m', memory: '100Mi' } } }], initContainers?: object[]): any {
  return optedInPod({ spec: { resources, containers, ...(initContainers && { initContainers }) } });
}

function refusal(fn: () => unknown): InjectorError {
  try {
    fn();
  } catch (err) {
    if (err instanceof InjectorError) return err;
    throw err;
  }
  assert.fail('not refused');
}

describe('pod-level resources (spec.resources) and the injected sidecars', () => {
  it('injects a pod whose pod-level requests and limits cover the sidecars, into a pod the apiserver stores', () => {
    const pod = podWithResources({ requests: { cpu: '1', memory: '200Mi' }, limits: { memory: '1Gi' } });
    const verdict = mutate(podReview(pod).request, templates);
    assert.equal(verdict.response.allowed, true);
    assert.deepEqual(podValidationErrors(applyPatchV4(pod, decodePatch(verdict.response))), []);
  });

  it('refuses, naming the resource and the sum, a pod whose pod-level request the sidecars would exceed', () => {
    const err = refusal(() => injectSidecars(podWithResources({ requests: { cpu: '1', memory: '100Mi' } }), both, 'ns'));
    assert.equal(err.code, 'POD_RESOURCES_EXCEEDED');
    assert.match(err.message, /requests\.memory is 100Mi, the containers with the sidecars request 146Mi together/);
    assert.ok(!err.message.includes('requests.cpu'), err.message);
  });

  it('refuses a sidecar whose own limit is above the pod-level limit', () => {
    const err = refusal(() => injectSidecars(podWithResources({ limits: { memory: '100Mi' } }), agent, 'ns'));
    assert.match(err.message, /limits\.memory is 100Mi, sidecar "agent" limits it to 128Mi/);
  });

  it('counts an init container with the native sidecars started before it, or the containers, whichever is more', () => {
    // init 90Mi alone; the proxy (32Mi, started first) makes it 122Mi, more than containers and sidecars (50 + 32).
    const init = [{ name: 'setup', image: 'busybox', resources: { requests: { memory: '90Mi' } } }];
    const pod = podWithResources({ requests: { memory: '120Mi' } }, undefined, init);
    const proxy = (placement: string) => set(template('proxy', `  nativeSidecar: true
  placement: ${placement}
  containers:
    - name: proxy
      image: registry.example.com/proxy:1.0
      resources:
        requests: { memory: 32Mi }
`)).templates.get('proxy')!;
    assert.match(refusal(() => injectSidecars(pod, [proxy('first')], 'ns')).message, /requests\.memory is 120Mi, the containers with the sidecars request 122Mi/);
    // Placed after the init container, the proxy starts after it: max(90, 50 + 32) = 90Mi fits.
    assert.doesNotThrow(() => injectSidecars(pod, [proxy('last')], 'ns'));
  });

  it('leaves to the apiserver a pod that did not fit before injection (the sidecars did not cause it)', () => {
    assert.doesNotThrow(() => injectSidecars(podWithResources({ requests: { memory: '10Mi' } }), agent, 'ns'));
  });

  it('never throws on quantities of the wrong type (another client than the apiserver): they refuse nothing', () => {
    for (const odd of [{ toString: 'x' }, null, [], true, { memory: '1Gi' }, 'lots']) {
      const pod = podWithResources({ requests: { memory: odd, cpu: '1' }, limits: { memory: odd } }, [{ name: 'app', image: 'nginx', resources: { requests: { memory: odd }, limits: odd } }]);
      assert.doesNotThrow(() => injectSidecars(pod, both, 'ns'), JSON.stringify(odd));
    }
  });

  it('is denied by the mutating handler with reason pod-resources-exceeded', () => {
    const verdict = mutate(podReview(podWithResources({ requests: { memory: '100Mi' } })).request, templates);
    assert.equal(verdict.response.allowed, false);
    assert.equal(verdict.reason, 'pod-resources-exceeded');
    assert.equal(verdict.response.status?.code, 400);
  });
});
