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
  template(
    'agent',
    `  default: true
  containers:
    - name: agent
      image: registry.example.com/agent:1.0
      resources:
        requests: { cpu: 100m, memory: 64Mi }
        limits: { memory: 128Mi }
`,
  ),
  template(
    'proxy',
    `  nativeSidecar: true
  containers:
    - name: proxy
      image: registry.example.com/proxy:1.0
      resources:
        requests: { cpu: 50m, memory: 32Mi }
`,
  ),
);
const agent = [templates.templates.get('agent')!];
const both = [templates.templates.get('agent')!, templates.templates.get('proxy')!];

/** The Kubernetes docs' pod-level-resources.yaml, reduced: the pod requests 1 cpu / 100Mi, its container 500m / 50Mi. */
function podWithResources(
  resources: object,
  containers: object[] = [{ name: 'app', image: 'nginx', resources: { requests: { cpu: '500m', memory: '50Mi' }, limits: { cpu: '500m', memory: '100Mi' } } }],
  initContainers?: object[],
): any {
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
    const proxy = (placement: string) =>
      set(
        template(
          'proxy',
          `  nativeSidecar: true
  placement: ${placement}
  containers:
    - name: proxy
      image: registry.example.com/proxy:1.0
      resources:
        requests: { memory: 32Mi }
`,
        ),
      ).templates.get('proxy')!;
    assert.match(
      refusal(() => injectSidecars(pod, [proxy('first')], 'ns')).message,
      /requests\.memory is 120Mi, the containers with the sidecars request 122Mi/,
    );
    // Placed after the init container, the proxy starts after it: max(90, 50 + 32) = 90Mi fits.
    assert.doesNotThrow(() => injectSidecars(pod, [proxy('last')], 'ns'));
  });

  it('leaves to the apiserver a pod that did not fit before injection (the sidecars did not cause it)', () => {
    assert.doesNotThrow(() => injectSidecars(podWithResources({ requests: { memory: '10Mi' } }), agent, 'ns'));
  });

  it('never throws on quantities of the wrong type (another client than the apiserver): they refuse nothing', () => {
    for (const odd of [{ toString: 'x' }, null, [], true, { memory: '1Gi' }, 'lots']) {
      const pod = podWithResources({ requests: { memory: odd, cpu: '1' }, limits: { memory: odd } }, [
        { name: 'app', image: 'nginx', resources: { requests: { memory: odd }, limits: odd } },
      ]);
      assert.doesNotThrow(() => injectSidecars(pod, both, 'ns'), JSON.stringify(odd));
    }
  });

  it('never throws on quantity text the apiserver would not read: it refuses nothing', () => {
    for (const odd of ['lots', '1.5.5', '1 Gi', '1KiB', '1e', '', '1'.repeat(200)]) {
      const pod = podWithResources({ requests: { memory: odd, cpu: odd }, limits: { memory: odd, cpu: odd } }, [
        { name: 'app', image: 'nginx', resources: { requests: { memory: odd, cpu: odd } } },
      ]);
      assert.doesNotThrow(() => injectSidecars(pod, both, 'ns'), odd);
    }
  });

  it('tells a limits-only pod that the apiserver filled in its requests, and the amount to set instead (defaultPodRequests)', () => {
    // The pod wrote only limits; the apiserver set requests to its container's 500m / 50Mi before our webhook.
    const err = refusal(() =>
      injectSidecars(podWithResources({ requests: { cpu: '500m', memory: '50Mi' }, limits: { cpu: '1', memory: '1Gi' } }), agent, 'ns'),
    );
    assert.equal(err.code, 'POD_RESOURCES_EXCEEDED');
    assert.match(
      err.message,
      /requests\.cpu is 500m, which the apiserver filled in from the containers' total because the pod sets only spec\.resources\.limits, and not recomputed after injection: set spec\.resources\.requests\.cpu explicitly to at least 600m \(the sidecars add 100m\)/,
    );
    assert.match(err.message, /requests\.memory is 50Mi, which the apiserver filled in .* to at least 114Mi \(the sidecars add 64Mi\)/);
    assert.ok(!err.message.includes('\n'), 'one line');
    // Without pod limits, or with a request the containers do not add up to, the figure is the user's own.
    assert.doesNotMatch(refusal(() => injectSidecars(podWithResources({ requests: { cpu: '500m' } }), agent, 'ns')).message, /filled in/);
    assert.doesNotMatch(refusal(() => injectSidecars(podWithResources({ requests: { cpu: '550m' }, limits: { cpu: '1' } }), agent, 'ns')).message, /filled in/);
  });

  it('is denied by the mutating handler with reason pod-resources-exceeded', () => {
    const verdict = mutate(podReview(podWithResources({ requests: { memory: '100Mi' } })).request, templates);
    assert.equal(verdict.response.allowed, false);
    assert.equal(verdict.reason, 'pod-resources-exceeded');
    assert.equal(verdict.response.status?.code, 400);
  });
});

/** One sidecar template with the given container resources (quoted, so YAML reads every quantity as written). */
function sidecarWith(resources: { requests?: Record<string, string>; limits?: Record<string, string> }) {
  const map = (m: Record<string, string> | undefined): string =>
    `{ ${Object.entries(m ?? {})
      .map(([k, v]) => `${k}: "${v}"`)
      .join(', ')} }`;
  return [
    set(
      template(
        'side',
        `  containers:
    - name: side
      image: registry.example.com/side:1.0
      resources:
        requests: ${map(resources.requests)}
        limits: ${map(resources.limits)}
`,
      ),
    ).templates.get('side')!,
  ];
}

/** A pod whose one container requests `app` of `resource`, with pod-level `resources`. */
function podRequesting(resource: string, app: string, resources: object): any {
  return podWithResources(resources, [{ name: 'app', image: 'nginx', resources: { requests: { [resource]: app } } }]);
}

describe('pod-level resources are compared as exact quantities, as the apiserver compares them', () => {
  for (const [resource, pod, app, sidecar] of [
    ['cpu', '300m', '100m', '200m'],
    ['cpu', '0.3', '0.1', '0.2'],
    ['memory', '1Gi', '512Mi', '512Mi'],
    ['memory', '1G', '500M', '500M'],
    ['cpu', '1e3', '1k', '0'],
    ['cpu', '1e3', '999', '1'],
  ] as const) {
    it(`admits an exact fit: ${pod} = ${app} + ${sidecar}, into a pod the apiserver stores`, () => {
      const before = podRequesting(resource, app, { requests: { [resource]: pod } });
      const { pod: after } = injectSidecars(before, sidecarWith({ requests: { [resource]: sidecar } }), 'ns');
      assert.deepEqual(podValidationErrors(after), []);
    });
  }

  it('admits a sidecar limit of 9m under a pod limit of 0.009 (the same amount)', () => {
    const before = podWithResources({ limits: { cpu: '0.009' } }, [{ name: 'app', image: 'nginx' }]);
    const { pod: after } = injectSidecars(before, sidecarWith({ limits: { cpu: '9m' } }), 'ns');
    assert.deepEqual(podValidationErrors(after), []);
  });

  it('still refuses a true excess, however small, with the figures as Kubernetes prints them', () => {
    const over = refusal(() => injectSidecars(podRequesting('cpu', '100m', { requests: { cpu: '300m' } }), sidecarWith({ requests: { cpu: '201m' } }), 'ns'));
    assert.match(over.message, /requests\.cpu is 300m, the containers with the sidecars request 301m together \(the sidecars add 201m\)/);
    const nano = refusal(() =>
      injectSidecars(podRequesting('cpu', '0.1', { requests: { cpu: '0.3' } }), sidecarWith({ requests: { cpu: '200000001n' } }), 'ns'),
    );
    assert.match(nano.message, /requests\.cpu is 0\.3, the containers with the sidecars request 300000001n together/);
    const limit = refusal(() =>
      injectSidecars(
        podWithResources({ limits: { memory: '1Gi' } }, [{ name: 'app', image: 'nginx' }]),
        sidecarWith({ limits: { memory: '1073741825' } }),
        'ns',
      ),
    );
    assert.match(limit.message, /limits\.memory is 1Gi, sidecar "side" limits it to 1073741825/);
  });

  it('rounds a request finer than a nano-unit up, as the apiserver does, so it can tip a pod over', () => {
    const pod = () => podRequesting('cpu', '300m', { requests: { cpu: '300m' } });
    assert.match(refusal(() => injectSidecars(pod(), sidecarWith({ requests: { cpu: '0.0000000001' } }), 'ns')).message, /request 300000001n together/);
    assert.doesNotThrow(() =>
      injectSidecars(podRequesting('cpu', '300m', { requests: { cpu: '300000001n' } }), sidecarWith({ requests: { cpu: '0.0000000001' } }), 'ns'),
    );
  });
});
