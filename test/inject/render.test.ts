import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { mutate, validate } from '../../src/admission/handlers.js';
import { injectSidecars } from '../../src/inject/mutate.js';
import { isOwnedByJob, renderTemplates } from '../../src/inject/render.js';
import { diff } from '../../src/patch/diff.js';
import { compileTemplateSet, type TemplateSet } from '../../src/templates/load.js';
import { decodePatch, optedInPod, podReview } from '../helpers/review.js';

function set(...docs: string[]): TemplateSet {
  return compileTemplateSet(docs.map((text, i) => ({ file: `t${i}.yaml`, text })), 'test');
}

function template(name: string, spec: string): string {
  return `apiVersion: sidecar-injector.io/v1alpha1\nkind: SidecarTemplate\nmetadata:\n  name: ${name}\nspec:\n${spec}`;
}

const agent = template('agent', `  nativeSidecar: jobs
  overrides: [image, cpu, memory]
  containers:
    - name: agent
      image: registry.example.com/agent:1.0
      resources:
        requests: { cpu: 100m, memory: 64Mi }
        limits: { cpu: 200m, memory: 128Mi }
    - name: agent-helper
      image: registry.example.com/helper:1.0
`);
const locked = template('locked', `  containers:
    - name: locked
      image: registry.example.com/locked:1.0
      env:
        - name: LEVEL
          value: "{{ pod.annotations['locked.sidecar-injector.io/level'] | default 'info' }}"
`);
const templates = set(agent, locked);
const jobOwner = [{ apiVersion: 'batch/v1', kind: 'Job', name: 'nightly-28811520', uid: 'u', controller: true }];

function podWith(annotations: Record<string, string>, extra: object = {}): any {
  const pod = optedInPod({ annotations: { 'sidecar-injector.io/templates': 'agent,locked', ...annotations } });
  return { ...pod, metadata: { ...pod.metadata, ...extra } };
}

function agentOf(pod: any, set = templates): any {
  return renderTemplates(pod, [set.templates.get('agent')!], 'default')[0]!.containers;
}

describe('per-pod overrides', () => {
  it('overrides the image of the first container only', () => {
    const [first, helper] = agentOf(podWith({ 'agent.sidecar-injector.io/image': 'registry.example.com/agent:1.1@sha256:' + 'a'.repeat(64) }));
    assert.equal(first.image, 'registry.example.com/agent:1.1@sha256:' + 'a'.repeat(64));
    assert.equal(helper.image, 'registry.example.com/helper:1.0');
  });

  it('sets the request and raises a limit that would fall below it', () => {
    const [c] = agentOf(podWith({ 'agent.sidecar-injector.io/cpu': '150m', 'agent.sidecar-injector.io/memory': '256Mi' }));
    assert.deepEqual(c.resources, { requests: { cpu: '150m', memory: '256Mi' }, limits: { cpu: '200m', memory: '256Mi' } });
  });

  it('leaves the template untouched when the pod overrides nothing (same rendered object)', () => {
    const pod = podWith({});
    assert.equal(renderTemplates(pod, [templates.templates.get('agent')!], 'default')[0], templates.templates.get('agent')!.render({ namespace: 'default', podName: '', serviceAccountName: 'default', labels: {}, annotations: {} }));
  });

  const ignored: [string, Record<string, string>, RegExp][] = [
    ['a field the template does not allow', { 'locked.sidecar-injector.io/image': 'evil.example.com/x:1' }, /template "locked" does not allow overriding image \(it allows none\); ignored/],
    ['a field outside the vocabulary', { 'agent.sidecar-injector.io/replicas': '3' }, /"replicas" is not an override field \(image, cpu, memory\) and template "agent" does not read it; ignored/],
    ['an invalid value of a field the template does not allow', { 'locked.sidecar-injector.io/cpu': 'lots' }, /template "locked" does not allow overriding cpu/],
  ];
  for (const [title, annotations, message] of ignored) {
    it(`admits with a warning ${title}, in both handlers, and applies nothing`, () => {
      const pod = podWith(annotations);
      const r = mutate(podReview(pod).request, templates);
      assert.equal(r.response.allowed, true, r.response.status?.message);
      assert.equal(r.response.warnings?.length, 1);
      assert.match(r.response.warnings?.[0] ?? '', message);
      const injected = injectSidecars(pod, [templates.templates.get('agent')!, templates.templates.get('locked')!], 'default');
      assert.equal(injected.pod.spec?.containers?.find((c) => c.name === 'locked')?.image, 'registry.example.com/locked:1.0');
      assert.equal(validate(podReview(injected.pod).request, templates).response.allowed, true);
    });
  }

  it('never warns of an annotation a selected template sets under its own prefix, and injects it', () => {
    const versioned = set(template('log-shipper', `  default: true
  containers:
    - name: log-shipper
      image: registry.example.com/fluent-bit:3.1
  annotations:
    log-shipper.sidecar-injector.io/version: "3.1"
`));
    const r = mutate(podReview(optedInPod()).request, versioned);
    assert.equal(r.response.allowed, true, r.response.status?.message);
    assert.equal(r.response.warnings, undefined);
    const injected = injectSidecars(optedInPod(), versioned.defaults, 'default').pod;
    assert.equal(injected.metadata?.annotations?.['log-shipper.sidecar-injector.io/version'], '3.1');
    assert.equal(validate(podReview(injected).request, versioned).response.allowed, true);
    assert.equal(mutate(podReview(injected).request, versioned).response.warnings, undefined, 'nor on reinvocation');
  });

  it('bounds the warnings about ignored annotations', () => {
    const many = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`agent.sidecar-injector.io/x${i}`, 'v']));
    const warnings = mutate(podReview(podWith(many)).request, templates).response.warnings ?? [];
    assert.equal(warnings.length, 6);
    assert.match(warnings[5] ?? '', /^35 more annotations ignored likewise$/);
  });

  const refused: [string, Record<string, string>, RegExp][] = [
    ['a value that is not a quantity', { 'agent.sidecar-injector.io/memory': '1 GB' }, /"1 GB" is not a Kubernetes quantity \(for example 128Mi or 1Gi\)/],
    ['a negative quantity', { 'agent.sidecar-injector.io/cpu': '-1' }, /"-1" is not a Kubernetes quantity/],
    ['a zero quantity', { 'agent.sidecar-injector.io/cpu': '0' }, /cpu must be greater than zero/],
    ['an image reference with spaces', { 'agent.sidecar-injector.io/image': 'agent latest' }, /"agent latest" is not a valid image reference/],
  ];
  for (const [title, annotations, message] of refused) {
    it(`denies at admission ${title}, in both handlers`, () => {
      const review = podReview(podWith(annotations));
      for (const handler of [mutate, validate]) {
        const r = handler(review.request, templates);
        assert.equal(r.response.allowed, false);
        assert.equal(r.response.status?.code, 400);
        assert.match(r.response.status?.message ?? '', message);
        assert.equal(r.reason, 'override-refused');
      }
    });
  }

  it('lets a template read its own annotations through placeholders', () => {
    const r = mutate(podReview(podWith({ 'locked.sidecar-injector.io/level': 'debug' })).request, templates);
    assert.equal(r.response.allowed, true);
    const locked = decodePatch(r.response).find((op) => op.value?.name === 'locked');
    assert.deepEqual(locked.value.env, [{ name: 'LEVEL', value: 'debug' }]);
  });

  it('lets a template read its own annotations through a double-quoted placeholder key', () => {
    const quoted = set(template('quoted', `  containers:
    - name: quoted
      image: registry.example.com/quoted:1.0
      args: ['--level={{ pod.annotations["quoted.sidecar-injector.io/level"] }}']
`));
    const pod = optedInPod({ annotations: { 'sidecar-injector.io/templates': 'quoted', 'quoted.sidecar-injector.io/level': 'debug' } });
    const r = mutate(podReview(pod).request, quoted);
    assert.equal(r.response.allowed, true, r.response.status?.message);
    assert.deepEqual(decodePatch(r.response).find((op) => op.value?.name === 'quoted').value.args, ['--level=debug']);
  });

  it('ignores override annotations of templates the pod does not select', () => {
    const pod = optedInPod({ annotations: { 'sidecar-injector.io/templates': 'locked', 'agent.sidecar-injector.io/image': 'x y' } });
    assert.equal(mutate(podReview(pod).request, templates).response.allowed, true);
  });

  it('keeps /validate agreeing with /mutate: the overridden image is the one expected', () => {
    const pod = podWith({ 'agent.sidecar-injector.io/image': 'mirror.example.com/agent:1.0' });
    const injected = injectSidecars(pod, [templates.templates.get('agent')!, templates.templates.get('locked')!], 'default').pod;
    assert.equal(validate(podReview(injected).request, templates).response.allowed, true);
    const withTemplateImage = injectSidecars(podWith({}), [templates.templates.get('agent')!, templates.templates.get('locked')!], 'default').pod;
    const r = validate(podReview({ ...withTemplateImage, metadata: pod.metadata }).request, templates);
    assert.equal(r.response.allowed, false);
    assert.match(r.response.status?.message ?? '', /container "agent" with image repository mirror\.example\.com\/agent \(it runs registry\.example\.com\/agent:1\.0\)/);
  });
});

describe('native sidecars for Job pods only', () => {
  it('recognizes a pod owned by a Job (a CronJob\'s pods are too)', () => {
    assert.equal(isOwnedByJob({ metadata: { ownerReferences: jobOwner } }), true);
    assert.equal(isOwnedByJob({ metadata: { ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'x' }] } }), false);
    assert.equal(isOwnedByJob({}), false);
  });

  it('injects init containers with restartPolicy Always into a Job pod, and ordinary containers elsewhere', () => {
    const job = injectSidecars(podWith({}, { ownerReferences: jobOwner }), [templates.templates.get('agent')!], 'default').pod;
    assert.deepEqual(job.spec?.initContainers?.map((c) => [c.name, c.restartPolicy]), [['agent', 'Always'], ['agent-helper', 'Always']]);
    assert.deepEqual(job.spec?.containers?.map((c) => c.name), ['web']);
    const plain = injectSidecars(podWith({}), [templates.templates.get('agent')!], 'default').pod;
    assert.deepEqual(plain.spec?.containers?.map((c) => [c.name, c.restartPolicy]), [['web', undefined], ['agent', undefined], ['agent-helper', undefined]]);
    assert.equal(plain.spec?.initContainers, undefined);
  });

  it('validates a Job pod by its native sidecars and is idempotent on reinvocation', () => {
    const pod = podWith({}, { ownerReferences: jobOwner });
    const once = injectSidecars(pod, [...templates.templates.values()], 'default').pod;
    assert.equal(validate(podReview(once).request, templates).response.allowed, true);
    const twice = injectSidecars(once, [...templates.templates.values()], 'default').pod;
    assert.deepEqual(diff(once, twice), []);
  });
});

describe('conflicts between selected templates', () => {
  const a = template('a', `  containers:
    - name: shared
      image: registry.example.com/a:1
      ports: [{ name: metrics, containerPort: 9090 }]
  volumes:
    - name: cache
      emptyDir: {}
`);
  const b = template('b', `  containers:
    - name: b
      image: registry.example.com/b:1
      ports: [{ name: metrics, containerPort: 9091 }, { containerPort: 9090 }]
  volumes:
    - name: cache
      emptyDir: {}
`);
  const c = template('c', `  containers:
    - name: shared
      image: registry.example.com/c:1
  volumes:
    - name: cache
      emptyDir: { medium: Memory }
`);
  const three = set(a, b, c);

  it('denies the pod with every conflict named, and validate agrees', () => {
    const review = podReview(optedInPod({ annotations: { 'sidecar-injector.io/templates': 'a,b,c' } }));
    for (const handler of [mutate, validate]) {
      const r = handler(review.request, three);
      assert.equal(r.response.allowed, false);
      assert.equal(r.reason, 'template-conflict');
      const message = r.response.status?.message ?? '';
      assert.match(message, /^the selected templates conflict: /);
      assert.doesNotMatch(message, /port name/, 'a port name shared across containers is only a warning in Kubernetes');
      assert.match(message, /port 9090\/TCP is defined by both template "a" and template "b"/);
      assert.match(message, /container "shared" is defined by both template "a" and template "c"/);
      assert.match(message, /volume "cache" is defined by both template "a" and template "c"/);
      assert.doesNotMatch(message, /volume "cache" is defined by both template "a" and template "b"/, 'an identical volume is shared');
    }
  });

  it('allows each template alone', () => {
    for (const name of ['a', 'b', 'c']) {
      const r = mutate(podReview(optedInPod({ annotations: { 'sidecar-injector.io/templates': name } })).request, three);
      assert.equal(r.response.allowed, true, name);
    }
  });
});

describe('rendering against the pod as it will be stored', () => {
  const reader = template('reader', `  annotations:
    reader.example.com/mode: sidecar
  containers:
    - name: reader
      image: registry.example.com/reader:1
      env:
        - name: MODE
          value: "{{ pod.annotations['reader.example.com/mode'] | default 'none' }}"
`);
  const readers = set(reader);

  it('sees the annotations its own template adds, so a re-invoked review patches nothing and warns of nothing', () => {
    const pod = optedInPod({ annotations: { 'sidecar-injector.io/templates': 'reader' } });
    const once = injectSidecars(pod, [readers.templates.get('reader')!], 'default');
    assert.deepEqual(once.pod.spec?.containers?.[1]?.env, [{ name: 'MODE', value: 'sidecar' }]);
    const twice = injectSidecars(once.pod, [readers.templates.get('reader')!], 'default');
    assert.deepEqual(diff(once.pod, twice.pod), []);
    assert.deepEqual(twice.warnings, []);
  });

  it('lets the pod\'s own value win over the template\'s', () => {
    const pod = optedInPod({ annotations: { 'sidecar-injector.io/templates': 'reader', 'reader.example.com/mode': 'debug' } });
    const once = injectSidecars(pod, [readers.templates.get('reader')!], 'default');
    assert.deepEqual(once.pod.spec?.containers?.[1]?.env, [{ name: 'MODE', value: 'debug' }]);
  });
});
