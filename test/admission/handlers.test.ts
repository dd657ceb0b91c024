import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import fjp from 'fast-json-patch';
import { type AdmissionRequest } from '../../src/admission/codec.js';
import { createHandlers, DefaultReviewLimits, mutating, validating } from '../../src/admission/handlers.js';
import { parseImage, parseImageMirrors, type ImageMirrors } from '../../src/kube-values/image.js';
import { injectSidecars } from '../../src/inject/mutate.js';
import { admissionView, defaultPod } from '../corpus/admission-view.js';
import { diff } from '../../src/patch/diff.js';
import { applyPatchV4 } from '../helpers/jsonpatch-v4.js';
import { loadTemplateSet, type TemplateSet } from '../../src/templates/load.js';
import { decodePatch, mutate, optedInPod, podReview, validate } from '../helpers/review.js';
import { jobOwner, podWith, set, template, templates } from '../helpers/templates.js';

// The handlers answer a review with an AdmissionResponse: allowed or a denial with a status a person
// can act on, the patch, and warnings. Golden responses are in golden.test.ts; the audit
// annotations in audit.test.ts.

const requestOf = (pod: object, opts: Parameters<typeof podReview>[1] = {}): AdmissionRequest => podReview(pod, opts).request;

/** One default template whose `nativeSidecar` line is given. */
function agentSet(nativeSidecar: string): TemplateSet {
  return set(
    template(
      'agent',
      `  default: true
${nativeSidecar}  containers:
    - name: agent
      image: registry.example.com/agent:1.0
`,
    ),
  );
}

function jobPod(): any {
  const pod = optedInPod();
  pod.metadata.ownerReferences = jobOwner;
  pod.spec.restartPolicy = 'Never';
  return pod;
}

const usesPodVolume = set(
  template(
    'uses-pod-volume',
    `  default: true
  containers:
    - name: reader
      image: busybox:1.36
      volumeMounts:
        - { name: shared-data, mountPath: /data, readOnly: true }
`,
  ),
);

describe('denials', () => {
  it('answer a volume the pod lacks with a denial, not with a patch the apiserver would reject', () => {
    const review = podReview(optedInPod());
    const result = mutate(review.request, usesPodVolume);
    assert.equal(result.response.allowed, false);
    assert.equal(result.response.status?.code, 400);
    assert.equal(result.response.patch, undefined);
    assert.equal(result.reason, 'volume-missing');
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

  it('denies a pod whose value a template reads so often that the rendering would pass the patch limit, in both handlers, at the configured limit', () => {
    const amp = set(
      template(
        'amp',
        `  default: true
  containers:
    - name: amp
      image: registry.example.com/amp:1.0
      args: [${Array.from({ length: 400 }, () => `"{{ pod.annotations['b'] }}"`).join(', ')}]
`,
      ),
    );
    const review = podReview(optedInPod({ annotations: { b: 'x'.repeat(10_000) } }));
    for (const factory of [mutating, validating]) {
      const r = factory({ templates: () => amp, limits: { ...DefaultReviewLimits, patchBytes: 1_000_000 } })(review.request);
      assert.equal(r.response.allowed, false);
      assert.equal(r.response.status?.code, 400);
      assert.equal(
        r.response.status?.message,
        `template "amp" would add more than 1000000 bytes to the pod (--max-patch-kib): {{ pod.annotations['b'] }} expands to 10000 bytes for this pod, 400 times in the template; shorten that value of the pod, or ask the template's owner to read it fewer times`,
      );
      assert.equal(r.reason, 'rendering-too-large');
    }
    // The same pod with a short value is injected.
    const fine = mutate(podReview(optedInPod({ annotations: { b: 'x' } })).request, amp);
    assert.equal(fine.response.allowed, true);
  });
});

describe('templates that conflict', () => {
  const a = template(
    'a',
    `  containers:
    - name: shared
      image: registry.example.com/a:1
      ports: [{ name: metrics, containerPort: 9090 }]
  volumes:
    - name: cache
      emptyDir: {}
`,
  );
  const b = template(
    'b',
    `  containers:
    - name: b
      image: registry.example.com/b:1
      ports: [{ name: metrics, containerPort: 9091 }, { containerPort: 9090 }]
  volumes:
    - name: cache
      emptyDir: {}
`,
  );
  const c = template(
    'c',
    `  containers:
    - name: shared
      image: registry.example.com/c:1
  volumes:
    - name: cache
      emptyDir: { medium: Memory }
`,
  );
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

describe('warnings about overrides and Jobs', () => {
  const ignored: [string, Record<string, string>, RegExp][] = [
    [
      'a field the template does not allow',
      { 'locked.sidecar-injector.io/image': 'evil.example.com/x:1' },
      /template "locked" does not allow overriding image \(it allows none\); ignored/,
    ],
    [
      'a field outside the vocabulary',
      { 'agent.sidecar-injector.io/replicas': '3' },
      /"replicas" is not an override field \(image, cpu, memory\) and template "agent" does not read it; ignored/,
    ],
    [
      'an invalid value of a field the template does not allow',
      { 'locked.sidecar-injector.io/cpu': 'lots' },
      /template "locked" does not allow overriding cpu/,
    ],
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
    const versioned = set(
      template(
        'log-shipper',
        `  default: true
  containers:
    - name: log-shipper
      image: registry.example.com/fluent-bit:3.1
  annotations:
    log-shipper.sidecar-injector.io/version: "3.1"
`,
      ),
    );
    const r = mutate(podReview(optedInPod()).request, versioned);
    assert.equal(r.response.allowed, true, r.response.status?.message);
    assert.equal(r.response.warnings, undefined);
    const injected = injectSidecars(optedInPod(), versioned.defaults, 'default').pod;
    assert.equal(injected.metadata?.annotations?.['log-shipper.sidecar-injector.io/version'], '3.1');
    assert.equal(validate(podReview(injected).request, versioned).response.allowed, true);
    assert.equal(mutate(podReview(injected).request, versioned).response.warnings, undefined, 'nor on reinvocation');
  });

  it('never warns of an annotation under its prefix that its placeholders read, but does of one only written in its text', () => {
    const reader = set(
      template(
        'reader',
        `  default: true
  containers:
    - name: reader
      image: registry.example.com/reader:1.0
      args: ["--level={{ pod.annotations['reader.sidecar-injector.io/level'] | default 'info' }}", "see pod.annotations['reader.sidecar-injector.io/note']"]
`,
      ),
    );
    const pod = optedInPod({ annotations: { 'reader.sidecar-injector.io/level': 'debug', 'reader.sidecar-injector.io/note': 'x' } });
    const r = mutate(podReview(pod).request, reader);
    assert.equal(r.response.allowed, true, r.response.status?.message);
    assert.deepEqual(r.response.warnings, [
      'annotation reader.sidecar-injector.io/note: "note" is not an override field (image, cpu, memory) and template "reader" does not read it; ignored',
    ]);
  });

  it('bounds the warnings about ignored annotations', () => {
    const many = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`agent.sidecar-injector.io/x${i}`, 'v']));
    const warnings = mutate(podReview(podWith(many)).request, templates).response.warnings ?? [];
    assert.equal(warnings.length, 6);
    assert.match(warnings[5] ?? '', /^35 more annotations ignored likewise$/);
  });

  it('ignores override annotations of templates the pod does not select', () => {
    const pod = optedInPod({ annotations: { 'sidecar-injector.io/templates': 'locked', 'agent.sidecar-injector.io/image': 'x y' } });
    assert.equal(mutate(podReview(pod).request, templates).response.allowed, true);
  });

  it("warns in the AdmissionResponse when a regular sidecar goes into a Job's pod", () => {
    const r = mutate(podReview(jobPod()).request, agentSet(''));
    assert.equal(r.response.allowed, true);
    assert.deepEqual(r.response.warnings, [
      'template "agent" adds "agent" as a regular container to a Job\'s pod, which then never completes; set nativeSidecar: jobs (or true) in the template',
    ]);
  });

  it("does not warn for a native sidecar in a Job's pod, nor for a regular one elsewhere", () => {
    for (const native of ['  nativeSidecar: jobs\n', '  nativeSidecar: true\n']) {
      assert.equal(mutate(podReview(jobPod()).request, agentSet(native)).response.warnings, undefined, native);
    }
    assert.equal(mutate(podReview(optedInPod()).request, agentSet('')).response.warnings, undefined);
  });
});

describe('warnings about keys that look meant for the injector (issue 21)', () => {
  it('warns of a typo of the templates annotation, naming the key it meant, while the default templates are injected', () => {
    const pod = optedInPod({ annotations: { 'sidecar-injector.io/template': 'locked' } });
    const r = mutate(podReview(pod).request, templates);
    assert.equal(r.response.allowed, true);
    assert.deepEqual(
      r.templates,
      templates.defaults.map((t) => t.name),
      'the defaults, as before',
    );
    assert.deepEqual(r.response.warnings, [
      'annotation "sidecar-injector.io/template" is not read by the injector; did you mean "sidecar-injector.io/templates"?',
    ]);
    assert.equal(
      validate(podReview(injectSidecars(pod, templates.defaults, 'default').pod).request, templates).response.warnings,
      undefined,
      '/validate does not say it twice',
    );
  });

  it('warns of a pod it leaves alone too: the inject label written as an annotation, in an opted-in namespace', () => {
    const pod = optedInPod({ labels: { 'sidecar-injector.io/inject': 'no' }, annotations: { 'sidecar-injector.io/inject': 'true' } });
    const r = mutate(podReview(pod).request, templates, 'namespace');
    assert.equal(r.decision, 'skipped');
    assert.equal(r.response.patch, undefined);
    assert.deepEqual(r.response.warnings, [
      'label sidecar-injector.io/inject="no" leaves the pod alone: only "true" opts it in',
      'annotation "sidecar-injector.io/inject" is not read by the injector; did you mean the label "sidecar-injector.io/inject"?',
    ]);
  });

  it('warns of an override of a template the pod does not select, besides the overrides of those it does', () => {
    const pod = optedInPod({ annotations: { 'sidecar-injector.io/templates': 'locked', 'agent.sidecar-injector.io/image': 'x y' } });
    assert.deepEqual(mutate(podReview(pod).request, templates).response.warnings, [
      'annotation "agent.sidecar-injector.io/image" is not read by the injector: template "agent" is not selected for this pod',
    ]);
  });

  it('bounds them on a pod of eight thousand such keys: five, and one line that says there are more', () => {
    const annotations = Object.fromEntries(Array.from({ length: 8000 }, (_, i) => [`sidecar-injector.com/k${i}`, '']));
    const warnings = mutate(podReview(optedInPod({ annotations })).request, templates).response.warnings ?? [];
    assert.equal(warnings.length, 6);
    assert.equal(warnings.at(-1), 'more keys of the pod look meant for the injector; only the first 5 are named');
  });
});

describe('/validate agreeing with /mutate', () => {
  it('keeps /validate agreeing with /mutate: the overridden image is the one expected', () => {
    const pod = podWith({ 'agent.sidecar-injector.io/image': 'mirror.example.com/agent:1.0' });
    const injected = injectSidecars(pod, [templates.templates.get('agent')!, templates.templates.get('locked')!], 'default').pod;
    assert.equal(validate(podReview(injected).request, templates).response.allowed, true);
    const withTemplateImage = injectSidecars(podWith({}), [templates.templates.get('agent')!, templates.templates.get('locked')!], 'default').pod;
    const r = validate(podReview({ ...withTemplateImage, metadata: pod.metadata }).request, templates);
    assert.equal(r.response.allowed, false);
    assert.match(
      r.response.status?.message ?? '',
      /container "agent" with image repository mirror\.example\.com\/agent \(it runs registry\.example\.com\/agent:1\.0\)/,
    );
  });

  it('validates a Job pod by its native sidecars and is idempotent on reinvocation', () => {
    const pod = podWith({}, { ownerReferences: jobOwner });
    const once = injectSidecars(pod, [...templates.templates.values()], 'default').pod;
    assert.equal(validate(podReview(once).request, templates).response.allowed, true);
    const twice = injectSidecars(once, [...templates.templates.values()], 'default').pod;
    assert.deepEqual(diff(once, twice), []);
  });
});

describe("warnings about the pod's own values (shipped templates)", () => {
  let set: TemplateSet;
  before(async () => {
    set = await loadTemplateSet('templates');
  });

  it('are absent when every template value was applied', () => {
    const r = mutate(requestOf(optedInPod()), set);
    assert.equal(r.response.warnings, undefined);
  });

  it('name each place where the pod kept its own value over a template', () => {
    const pod = optedInPod({
      annotations: { 'fluentbit.io/exclude': 'false' },
      spec: { containers: [{ name: 'web', image: 'nginx:1.27', env: [{ name: 'LOG_DIR', value: '/srv/logs' }] }] },
    });
    const r = mutate(requestOf(pod), set);
    const warnings = r.response.warnings ?? [];
    assert.equal(warnings.length, 2, warnings.join('\n'));
    assert.ok(
      warnings.some((w) => w.includes('"LOG_DIR"') && w.includes('"log-shipper"')),
      warnings.join('\n'),
    );
    assert.ok(
      warnings.some((w) => w.includes('"fluentbit.io/exclude"') && w.includes('"log-shipper"')),
      warnings.join('\n'),
    );
    // The pod still gets its sidecar, and the audit trail still says so.
    assert.equal(r.response.auditAnnotations?.['decision'], 'injected');
    const after = fjp.applyPatch(pod, decodePatch(r.response), false, false).newDocument as any;
    assert.equal(after.spec.containers[0].env[0].value, '/srv/logs');
  });

  it('are not raised for a pod that set the same value as the template', () => {
    const pod = optedInPod({ annotations: { 'fluentbit.io/exclude': 'true' } });
    assert.equal(mutate(requestOf(pod), set).response.warnings, undefined);
  });
});

describe('a template reload', () => {
  // Everything worked out once per template set (the plan's shared lists and mounts, the renderings,
  // the audit annotations, the names of the defaults) belongs to that set's compiled templates: the
  // next set, even with the same names, must be answered from its own.
  const version = (n: number): TemplateSet =>
    set(
      template(
        'agent',
        `  default: true
  containers:
    - name: agent
      image: registry.example.com/agent:${n}.0
      env: [{ name: POD, value: "{{ pod.name }}" }]
      volumeMounts: [{ name: cache-${n}, mountPath: /cache }]
  volumes: [{ name: cache-${n}, emptyDir: {} }]
  volumeMounts: [{ name: cache-${n}, mountPath: /cache-${n} }]
  env: [{ name: AGENT_VERSION, value: "${n}" }]
  annotations: { example.com/agent: "v${n}" }
`,
      ),
    );

  it("is answered from the new set's templates only, by both handlers", () => {
    let current = version(1);
    const source = { templates: () => current };
    const mutating = createHandlers(source).byPath.get('/mutate')!;
    const validating = createHandlers(source).byPath.get('/validate')!;
    const pod = (): any => optedInPod({ spec: { containers: [{ name: 'app', image: 'app:1' }] } });
    const injectedBy = (n: number): any => {
      const verdict = mutating(requestOf(pod()));
      assert.equal(verdict.decision, 'injected');
      const patch = decodePatch(verdict.response);
      const text = JSON.stringify(patch);
      assert.ok(text.includes(`agent:${n}.0`) && text.includes(`cache-${n}`) && text.includes(`"v${n}"`), text);
      assert.ok(!text.includes(`agent:${3 - n}.0`) && !text.includes(`cache-${3 - n}`), text);
      assert.match(verdict.response.auditAnnotations?.['templates'] ?? '', /^agent$/);
      // What the application container gains: the plan's shared lists, of this set's template.
      const app = (path: string): unknown => patch.find((op: { path: string }) => op.path === path)?.value;
      assert.deepEqual(app('/spec/containers/0/env'), [{ name: 'AGENT_VERSION', value: `${n}` }]);
      assert.deepEqual(app('/spec/containers/0/volumeMounts'), [{ name: `cache-${n}`, mountPath: `/cache-${n}` }]);
      return fjp.applyPatch(structuredClone(pod()), patch).newDocument;
    };
    const first = injectedBy(1);
    assert.equal(validating(requestOf(first)).decision, 'allowed');
    current = version(2);
    const second = injectedBy(2);
    assert.equal(validating(requestOf(second)).decision, 'allowed');
    // The pod injected under the first set lacks the second's volume: the set in force does not
    // admit it; only its status, of a version this source no longer serves, vouches for it.
    assert.equal(validating(requestOf(first)).reason, 'recorded-templates');
    assert.equal(validating(requestOf(second)).reason, 'sidecars-present');
  });
});

describe("the patch's bytes", () => {
  it("are the diff's, byte for byte, for patches small and large, one review after another", async () => {
    const shipped = await loadTemplateSet('templates');
    const pods = [1, 30, 240, 2].map((n) =>
      optedInPod({
        labels: { 'app.kubernetes.io/name': 'café€😀' },
        annotations: { 'sidecar-injector.io/templates': 'log-shipper,proxy' },
        spec: { containers: Array.from({ length: n }, (_, i) => ({ name: `app-${i}`, image: 'nginx:1.27' })) },
      }),
    );
    const answers = pods.map((pod) => mutate(requestOf(pod), shipped).response.patch);
    pods.forEach((pod, i) => {
      const selected = ['log-shipper', 'proxy'].map((name) => shipped.templates.get(name)!);
      const expected = JSON.stringify(diff(pod, injectSidecars(pod, selected, 'default').pod));
      assert.equal(Buffer.from(answers[i]!, 'base64').toString('utf8'), expected);
    });
  });
});

describe('registry mirrors (--image-mirror)', () => {
  // A log shipper from Docker Hub and a native-sidecar proxy from Docker Hub's library.
  const hub = set(
    template(
      'shipper',
      `  default: true
  containers:
    - name: shipper
      image: docker.io/fluent/fluent-bit:3.2
`,
    ),
    template(
      'proxy',
      `  default: true
  nativeSidecar: true
  containers:
    - name: proxy
      image: envoy:1.31
`,
    ),
  );
  const mirrorsOf = (...entries: string[]) => {
    const parsed = parseImageMirrors(entries);
    assert.ok(!('problem' in parsed));
    return parsed;
  };
  const handlers = (imageMirrors?: ImageMirrors) => createHandlers({ templates: () => hub, ...(imageMirrors && { imageMirrors }) }).byPath;
  const withMirror = handlers(mirrorsOf('docker.io=mirror.example.com/dockerhub'));
  const without = handlers();

  /** What a policy engine after the injector does: every image from Docker Hub to the mirror, its tag or digest kept (Kyverno's replace-image-registry). */
  const rewrite = (pod: any): any => {
    const out = structuredClone(pod);
    for (const c of [...(out.spec.initContainers ?? []), ...out.spec.containers]) {
      const ref = parseImage(c.image);
      assert.ok(!('problem' in ref));
      if (ref.domain === 'docker.io') c.image = `mirror.example.com/dockerhub/${ref.path}${ref.digest ? `@${ref.digest}` : `:${ref.tag}`}`;
    }
    return out;
  };

  /** The pod as /mutate made it, then as the policy engine rewrote it. */
  const mirroredPod = (): any => {
    const pod = optedInPod();
    const first = withMirror.get('/mutate')!(requestOf(pod));
    const injected = fjp.applyPatch(structuredClone(pod), decodePatch(first.response)).newDocument;
    return rewrite(injected);
  };

  it('admits a pod whose sidecars a later webhook moved to the mirror, and says so in the audit annotation', () => {
    const pod = mirroredPod();
    assert.equal(pod.spec.containers.find((c: any) => c.name === 'shipper').image, 'mirror.example.com/dockerhub/fluent/fluent-bit:3.2');
    assert.equal(pod.spec.initContainers.find((c: any) => c.name === 'proxy').image, 'mirror.example.com/dockerhub/library/envoy:1.31');
    const r = withMirror.get('/validate')!(requestOf(pod));
    assert.equal(r.response.allowed, true, r.response.status?.message);
    assert.equal(r.reason, 'sidecars-mirrored');
    assert.equal(r.response.auditAnnotations?.['reason'], 'sidecars-mirrored');
    // The pod as /mutate left it still says sidecars-present.
    assert.equal(
      withMirror.get('/validate')!(
        requestOf(fjp.applyPatch(optedInPod(), decodePatch(withMirror.get('/mutate')!(requestOf(optedInPod())).response)).newDocument),
      ).reason,
      'sidecars-present',
    );
  });

  it('refuses the mirrored pod without the flag, with a message that names the flag and the entry', () => {
    const r = without.get('/validate')!(requestOf(mirroredPod()));
    assert.equal(r.response.allowed, false);
    assert.equal(r.response.status?.code, 403);
    const message = r.response.status?.message ?? '';
    assert.match(
      message,
      /container "shipper" with image repository docker\.io\/fluent\/fluent-bit \(it runs mirror\.example\.com\/dockerhub\/fluent\/fluent-bit:3\.2\)/,
    );
    assert.match(message, /start the injector with --image-mirror docker\.io=mirror\.example\.com\/dockerhub$/);
    assert.doesNotMatch(message, /\n/);
  });

  it('still refuses, with the flag, a sidecar that runs another repository from the mirror or another registry', () => {
    for (const image of [
      'mirror.example.com/dockerhub/fluent/fluentd:1.17',
      'mirror.example.com/quay/fluent/fluent-bit:3.2',
      'evil.example.com/fluent-bit:3.2',
    ]) {
      const pod = mirroredPod();
      pod.spec.containers.find((c: any) => c.name === 'shipper').image = image;
      const r = withMirror.get('/validate')!(requestOf(pod));
      assert.equal(r.response.allowed, false, image);
      assert.match(r.response.status?.message ?? '', /container "shipper" with image repository docker\.io\/fluent\/fluent-bit/);
    }
  });

  it('answers the re-invoked /mutate on the mirrored pod without a second copy, and a patch that applies', () => {
    for (const byPath of [withMirror, without]) {
      const pod = mirroredPod();
      const again = byPath.get('/mutate')!(requestOf(pod));
      assert.equal(again.response.allowed, true);
      const ops = decodePatch(again.response);
      assert.deepEqual(ops, [], 'the status annotation already says what was injected');
      const after = fjp.applyPatch(structuredClone(pod), ops, true).newDocument as any;
      assert.deepEqual(
        after.spec.containers.map((c: any) => c.name),
        pod.spec.containers.map((c: any) => c.name),
      );
      assert.deepEqual(
        after.spec.initContainers.map((c: any) => c.name),
        pod.spec.initContainers.map((c: any) => c.name),
      );
      // The mirror's image is kept; nothing is rewritten back.
      assert.deepEqual(after.spec, pod.spec);
      assert.equal(withMirror.get('/validate')!(requestOf(after)).response.allowed, true);
    }
  });
});

describe('the ServiceAccount token and the application containers a template touches (issue 22)', () => {
  const tokenPath = '/var/run/secrets/kubernetes.io/serviceaccount';
  const vault = template(
    'vault-agent',
    `  default: true
  serviceAccountToken: true
  containers:
    - name: vault-agent
      image: hashicorp/vault:1.18
  env:
    - { name: VAULT_ADDR, value: "http://127.0.0.1:8200" }
`,
  );
  const projected = template(
    'spire-agent',
    `  default: true
  serviceAccountToken: { audience: spire, expirationSeconds: 7200 }
  containers:
    - name: spire-agent
      image: ghcr.io/spiffe/spire-agent:1.11
  initContainers:
    - name: spire-init
      image: ghcr.io/spiffe/spire-agent:1.11
`,
  );
  const otel = template(
    'otel',
    `  default: true
  appContainers: { exclude: [istio-proxy, exporter] }
  containers:
    - name: otel-collector
      image: otel/opentelemetry-collector:0.115.0
  env:
    - { name: OTEL_EXPORTER_OTLP_ENDPOINT, value: "http://localhost:4317" }
  volumeMounts:
    - { name: otel-conf, mountPath: /etc/otel }
  volumes:
    - { name: otel-conf, emptyDir: {} }
`,
  );

  /** The pod the apiserver sends the webhook: defaulted, with the ServiceAccount plugin's kube-api-access volume. */
  function admitted(spec: object, annotations: Record<string, string> = {}): any {
    const manifest = { apiVersion: 'v1', kind: 'Pod', metadata: { generateName: 'web-7c9f8b6d4-', labels: { app: 'web' }, annotations }, spec };
    const pod = admissionView(manifest, [], 'default').pod;
    delete pod.metadata.annotations['sidecar-injector.io/templates'];
    return pod;
  }

  /** /mutate's answer applied as the apiserver applies it, then defaulted, as a re-invocation and /validate see the pod. */
  function mutated(pod: object, s: TemplateSet): { pod: any; warnings: readonly string[] } {
    const answer = mutate(requestOf(pod), s).response;
    assert.equal(answer.allowed, true, answer.status?.message);
    return { pod: defaultPod(applyPatchV4(pod, decodePatch(answer))), warnings: answer.warnings ?? [] };
  }

  /** Asserts that a re-invocation patches nothing and that /validate admits the pod. */
  function settled(pod: object, s: TemplateSet): void {
    assert.deepEqual(decodePatch(mutate(requestOf(pod), s).response), []);
    assert.equal(validate(requestOf(pod), s).response.allowed, true);
  }

  const mountsAt = (c: any, path: string) => (c.volumeMounts ?? []).filter((m: any) => m.mountPath === path);

  it("mounts the pod's own token volume, read-only, into the sidecars of serviceAccountToken: true", () => {
    const pod = admitted({ containers: [{ name: 'app', image: 'registry.example.com/app:1.0' }] });
    const tokenVolume = pod.spec.volumes.find((v: any) => v.name.startsWith('kube-api-access-')).name;
    const { pod: out, warnings } = mutated(pod, set(vault));
    const sidecar = out.spec.containers.find((c: any) => c.name === 'vault-agent');
    assert.deepEqual(mountsAt(sidecar, tokenPath), [{ name: tokenVolume, mountPath: tokenPath, readOnly: true }]);
    assert.deepEqual(warnings, []);
    assert.equal(out.spec.volumes.length, 1, 'no volume of its own');
    settled(out, set(vault));
  });

  it('leaves a pod with automountServiceAccountToken: false without a token, and without a warning: it has none to share', () => {
    const pod = admitted({ automountServiceAccountToken: false, containers: [{ name: 'app', image: 'registry.example.com/app:1.0' }] });
    const { pod: out, warnings } = mutated(pod, set(vault));
    const sidecar = out.spec.containers.find((c: any) => c.name === 'vault-agent');
    assert.deepEqual(mountsAt(sidecar, tokenPath), []);
    assert.deepEqual(warnings, []);
    settled(out, set(vault));
  });

  it("gives the template's own projected token, with its audience, to each of its containers, automount or not", () => {
    for (const automount of [true, false]) {
      const pod = admitted({ automountServiceAccountToken: automount, containers: [{ name: 'app', image: 'registry.example.com/app:1.0' }] });
      const { pod: out } = mutated(pod, set(projected));
      const own = out.spec.volumes.filter((v: any) => v.projected?.sources?.[0]?.serviceAccountToken?.audience === 'spire');
      assert.equal(own.length, 1);
      assert.match(own[0].name, /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
      assert.deepEqual(own[0].projected.sources, [{ serviceAccountToken: { audience: 'spire', expirationSeconds: 7200, path: 'token' } }]);
      for (const name of ['spire-agent', 'spire-init']) {
        const c = [...out.spec.containers, ...out.spec.initContainers].find((x: any) => x.name === name);
        assert.deepEqual(mountsAt(c, tokenPath), [{ name: own[0].name, mountPath: tokenPath, readOnly: true }], name);
      }
      const app = out.spec.containers.find((c: any) => c.name === 'app');
      assert.equal(mountsAt(app, tokenPath).length, automount ? 1 : 0, 'the app keeps the token it had');
      settled(out, set(projected));
    }
  });

  it("gives the template's env and mounts only to the containers appContainers allows", () => {
    const pod = admitted({
      containers: [
        { name: 'app', image: 'registry.example.com/app:1.0' },
        { name: 'worker', image: 'registry.example.com/app:1.0' },
        { name: 'exporter', image: 'registry.example.com/exporter:1.0' },
      ],
    });
    const { pod: out, warnings } = mutated(pod, set(otel));
    const got = (name: string) => out.spec.containers.find((c: any) => c.name === name);
    for (const name of ['app', 'worker']) {
      assert.deepEqual(got(name).env, [{ name: 'OTEL_EXPORTER_OTLP_ENDPOINT', value: 'http://localhost:4317' }], name);
      assert.equal(mountsAt(got(name), '/etc/otel').length, 1, name);
    }
    assert.equal(got('exporter').env, undefined);
    assert.equal(mountsAt(got('exporter'), '/etc/otel').length, 0);
    assert.deepEqual(warnings, [], 'an excluded istio-proxy the pod does not run is no fault');
    settled(out, set(otel));
  });

  it("narrows them further by the pod's app-containers annotation, and warns of a name the pod lacks", () => {
    const pod = admitted(
      {
        containers: [
          { name: 'app', image: 'registry.example.com/app:1.0' },
          { name: 'worker', image: 'registry.example.com/app:1.0' },
          { name: 'exporter', image: 'registry.example.com/exporter:1.0' },
        ],
      },
      { 'sidecar-injector.io/app-containers': 'app, exporter, wroker' },
    );
    const { pod: out, warnings } = mutated(pod, set(otel, vault));
    const got = (name: string) => out.spec.containers.find((c: any) => c.name === name);
    // otel allows app and worker, the pod app and exporter: only app gets otel's; vault allows all: app and exporter get vault's.
    assert.deepEqual(
      got('app').env.map((e: any) => e.name),
      ['OTEL_EXPORTER_OTLP_ENDPOINT', 'VAULT_ADDR'],
    );
    assert.equal(got('worker').env, undefined);
    assert.deepEqual(
      got('exporter').env.map((e: any) => e.name),
      ['VAULT_ADDR'],
    );
    assert.deepEqual(warnings, ['annotation sidecar-injector.io/app-containers names "wroker", not containers of the pod']);
    settled(out, set(otel, vault));
  });

  it('names a few of thousands of unknown names in the app-containers annotation, in a warning of a few hundred characters', () => {
    const names = Array.from({ length: 10_000 }, (_, i) => `unknown-container-${i}`).join(',');
    assert.ok(names.length > 199_000 && names.length < 250_000);
    const pod = optedInPod({
      annotations: { 'sidecar-injector.io/app-containers': `app,${names}` },
      spec: { containers: [{ name: 'app', image: 'registry.example.com/app:1.0' }] },
    });
    const answer = mutate(requestOf(pod), set(vault)).response;
    assert.equal(answer.allowed, true, answer.status?.message);
    assert.deepEqual(
      answer.warnings?.filter((w) => w.includes('app-containers')),
      [
        'annotation sidecar-injector.io/app-containers names "unknown-container-0", "unknown-container-1", "unknown-container-2", "unknown-container-3", "unknown-container-4" and 9995 more, not containers of the pod',
      ],
    );
  });

  it('suggests the app-containers annotation for a typo of it', () => {
    const pod = admitted({ containers: [{ name: 'app', image: 'registry.example.com/app:1.0' }] }, { 'sidecar-injector.io/app-container': 'app' });
    const { warnings } = mutated(pod, set(otel));
    assert.ok(
      warnings.includes('annotation "sidecar-injector.io/app-container" is not read by the injector; did you mean "sidecar-injector.io/app-containers"?'),
      String(warnings),
    );
  });
});

describe('an install with a revision', () => {
  it('records its revision (--revision) in the status annotation of the pods it injects, and its validating twin admits them', async () => {
    const bundled = await loadTemplateSet('templates');
    const handlers = createHandlers({ templates: () => bundled, revision: 'canary' });
    const pod = optedInPod({ labels: { 'sidecar-injector.io/rev': 'canary' } });
    const verdict = handlers.byPath.get('/mutate')!(podReview(pod).request);
    assert.equal(verdict.decision, 'injected');
    const injected = fjp.applyPatch(structuredClone(pod), decodePatch(verdict.response) as any).newDocument;
    assert.equal(JSON.parse(injected.metadata.annotations['sidecar-injector.io/status']).revision, 'canary');
    assert.equal(handlers.byPath.get('/validate')!(podReview(injected).request).response.allowed, true);
  });
});
