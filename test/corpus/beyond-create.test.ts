/**
 * The corpus beyond a plain CREATE (docs/development.md, "Real-world corpus"): what the apiserver sends the two
 * handlers after other mutating webhooks ran after ours (reinvocationPolicy IfNeeded), for the other
 * operations and subresources of a pod, and for hostile variants of the corpus pods that only a
 * client other than the apiserver sends. In process (the handlers over the corpus templates), so
 * thousands of reviews take seconds; the HTTPS path is corpus.test.ts's.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { InjectorError } from '../../src/errors.js';
import { compileTemplateSet } from '../../src/templates/load.js';
import { applyPatchV4 } from '../helpers/jsonpatch-v4.js';
import { decodePatch, mutate, podReview, validate } from '../helpers/review.js';
import { admissionView, defaultPod } from './admission-view.js';
import { corpusManifests, DefaultNamespace, pinDigests, SidecarsDir } from './corpus.js';
import { podValidationErrors } from './pod-validation.js';

const set = compileTemplateSet(
  readdirSync(SidecarsDir).map((file) => ({ file: join(SidecarsDir, file), text: readFileSync(join(SidecarsDir, file), 'utf8') })),
  'corpus',
);
const names = [...set.templates.keys()].sort();
const manifests = corpusManifests();

interface Admitted {
  readonly key: string;
  readonly namespace: string;
  /** The pod as stored after our patch and the apiserver's defaults. */
  readonly stored: any;
}

/** Every corpus pod × template that /mutate and /validate admit as a plain CREATE (corpus.test.ts holds the rest to its tables). */
function admittedPods(): Admitted[] {
  const out: Admitted[] = [];
  for (const m of manifests) {
    for (const t of names) {
      const { pod, namespace } = admissionView(m.object, [t], DefaultNamespace);
      const verdict = mutate(podReview(pod, { namespace }).request, set);
      if (verdict.response.allowed !== true) continue;
      const stored = defaultPod(applyPatchV4(pod, decodePatch(verdict.response)));
      if (validate(podReview(stored, { namespace }).request, set).response.allowed !== true) continue;
      out.push({ key: `${m.file} × ${t}`, namespace, stored });
    }
  }
  return out;
}

const admitted = admittedPods();

/** What mutating webhooks that run after ours do to the pod, as the apiserver then hands it on. */
const LaterWebhooks: Readonly<Record<string, (pod: any) => void>> = {
  // Vault's agent injector: an init container, a sidecar, a memory volume mounted into every container.
  'a Vault agent injected after ours': (pod) => {
    const s = pod.spec;
    s.volumes = [...(s.volumes ?? []), { name: 'later-vault-secrets', emptyDir: { medium: 'Memory' } }];
    s.initContainers = [
      ...(s.initContainers ?? []),
      { name: 'later-vault-init', image: 'hashicorp/vault:1.15.2', volumeMounts: [{ name: 'later-vault-secrets', mountPath: '/vault/later' }] },
    ];
    for (const c of s.containers) c.volumeMounts = [...(c.volumeMounts ?? []), { name: 'later-vault-secrets', mountPath: '/vault/later' }];
    s.containers = [...s.containers, { name: 'later-vault-agent', image: 'hashicorp/vault:1.15.2' }];
  },
  // Istio's injector: its init container and proxy at the front of the lists, labels and annotations.
  'an Istio proxy injected in front of everything': (pod) => {
    const s = pod.spec;
    s.initContainers = [{ name: 'later-istio-init', image: 'docker.io/istio/proxyv2:1.22.0' }, ...(s.initContainers ?? [])];
    s.containers = [{ name: 'later-istio-proxy', image: 'docker.io/istio/proxyv2:1.22.0' }, ...s.containers];
    pod.metadata.labels = { ...pod.metadata.labels, 'security.istio.io/tlsMode': 'istio' };
    pod.metadata.annotations = { ...pod.metadata.annotations, 'sidecar.istio.io/status': '{"containers":["istio-proxy"]}' };
  },
  // A policy engine (Kyverno, Gatekeeper mutation): securityContext on every container and the pod, a label.
  'a policy engine that sets securityContext': (pod) => {
    for (const c of [...(pod.spec.initContainers ?? []), ...pod.spec.containers])
      c.securityContext = {
        ...c.securityContext,
        allowPrivilegeEscalation: c.securityContext?.privileged === true ? undefined : false,
        seccompProfile: { type: 'RuntimeDefault' },
      };
    pod.spec.securityContext = { ...pod.spec.securityContext, seccompProfile: { type: 'RuntimeDefault' } };
    pod.metadata.labels = { ...pod.metadata.labels, 'policy.example.com/checked': 'true' };
  },
  // The apiserver itself: a controller's pod gets its name (from generateName), uid and timestamp
  // after mutating admission and before the validating webhooks; a later webhook pins digests.
  'the apiserver naming the pod, and a webhook pinning digests': (pod) => {
    if (pod.metadata.name === undefined) pod.metadata.name = `${pod.metadata.generateName}x7k2p`;
    pod.metadata.uid = '6b2f1c9e-2b7d-4a1e-9d0f-1c2b3a4d5e6f';
    pod.metadata.creationTimestamp = '2026-11-23T10:00:00Z';
    Object.assign(pod, pinDigests(pod));
  },
};

describe('the corpus after other mutating webhooks ran after ours', () => {
  it('admits at least 300 corpus pod × template combinations to begin with', () => {
    assert.ok(admitted.length >= 300, `${admitted.length}`);
  });

  for (const [what, apply] of Object.entries(LaterWebhooks)) {
    it(`keeps admitting every corpus pod after ${what}; a re-invoked /mutate patch applies and leaves a valid pod`, () => {
      const wrong: string[] = [];
      for (const a of admitted) {
        const pod = structuredClone(a.stored);
        apply(pod);
        const again = mutate(podReview(pod, { namespace: a.namespace }).request, set);
        if (again.response.allowed !== true) {
          wrong.push(`${a.key}: re-invoked /mutate refuses: ${again.response.status?.message}`);
          continue;
        }
        let final: any;
        try {
          final = defaultPod(applyPatchV4(pod, decodePatch(again.response)));
        } catch (err) {
          wrong.push(`${a.key}: the re-invocation's patch does not apply: ${(err as Error).message}`);
          continue;
        }
        const invalid = podValidationErrors(final);
        if (invalid.length > 0) wrong.push(`${a.key}: invalid after re-invocation: ${invalid.join('; ')}`);
        const verdict = validate(podReview(final, { namespace: a.namespace }).request, set);
        if (verdict.response.allowed !== true) wrong.push(`${a.key}: /validate refuses: ${verdict.response.status?.message}`);
      }
      assert.deepEqual(wrong, [], `\n${wrong.join('\n')}`);
    });
  }
});

/** Reviews of an existing pod: the operation, the subresource and the request's kind, as the apiserver sends them. */
const OtherReviews: readonly {
  readonly what: string;
  readonly operation: string;
  readonly subResource?: string;
  readonly kind?: string;
  readonly object: 'pod' | 'none';
}[] = [
  { what: 'a label or annotation edit (UPDATE)', operation: 'UPDATE', object: 'pod' },
  { what: 'kubectl debug (UPDATE of pods/ephemeralcontainers)', operation: 'UPDATE', subResource: 'ephemeralcontainers', object: 'pod' },
  { what: 'an in-place resize (UPDATE of pods/resize)', operation: 'UPDATE', subResource: 'resize', object: 'pod' },
  { what: 'a status update (UPDATE of pods/status)', operation: 'UPDATE', subResource: 'status', object: 'pod' },
  { what: 'a DELETE (no object, oldObject set)', operation: 'DELETE', object: 'none' },
  { what: 'kubectl exec (CONNECT of pods/exec)', operation: 'CONNECT', subResource: 'exec', kind: 'PodExecOptions', object: 'none' },
  { what: 'a binding (CREATE of pods/binding)', operation: 'CREATE', subResource: 'binding', kind: 'Binding', object: 'none' },
  { what: 'an eviction (CREATE of pods/eviction)', operation: 'CREATE', subResource: 'eviction', kind: 'Eviction', object: 'none' },
];

describe('the corpus pods in reviews other than their CREATE', () => {
  for (const r of OtherReviews) {
    it(`allows ${r.what} of every admitted corpus pod, and of the pod without its sidecars, untouched`, () => {
      const wrong: string[] = [];
      for (const a of admitted) {
        // The pod as stored, and the same pod stripped of its sidecars (created while the injector
        // was down under failurePolicy: Ignore, or before it was installed): neither may be blocked.
        const bare = structuredClone(a.stored);
        bare.spec.initContainers = (bare.spec.initContainers ?? []).filter((c: any) => !set.templates.has(c.name) && c.restartPolicy !== 'Always');
        for (const pod of [a.stored, bare]) {
          const review = podReview(r.object === 'pod' ? pod : null, { namespace: a.namespace, operation: r.operation });
          review.request.oldObject = pod;
          if (r.subResource !== undefined) review.request.subResource = r.subResource;
          if (r.kind !== undefined) review.request.kind = { group: '', version: 'v1', kind: r.kind };
          for (const [name, handler] of [
            ['/mutate', mutate],
            ['/validate', validate],
          ] as const) {
            const { response } = handler(review.request, set);
            if (response.allowed !== true || response.patch !== undefined) wrong.push(`${a.key} ${name}: ${JSON.stringify(response).slice(0, 200)}`);
          }
        }
      }
      assert.deepEqual(wrong, [], `\n${wrong.join('\n')}`);
    });
  }

  it('answers a dry-run CREATE exactly as the CREATE itself', () => {
    for (const m of manifests.slice(0, 20)) {
      const { pod, namespace } = admissionView(m.object, [names[0]!], DefaultNamespace);
      const plain = podReview(pod, { namespace, uid: 'u' });
      const dry = podReview(pod, { namespace, uid: 'u' });
      dry.request.dryRun = true;
      assert.deepEqual(mutate(dry.request, set).response, mutate(plain.request, set).response, m.file);
    }
  });

  it('leaves alone a kube-system pod, or one in a namespace that did not opt in, that carries no opt-in label', () => {
    for (const m of manifests) {
      const { pod } = admissionView(m.object, [names[0]!], DefaultNamespace);
      delete pod.metadata.labels['sidecar-injector.io/inject'];
      for (const namespace of ['kube-system', 'default']) {
        for (const handler of [mutate, validate]) {
          const { response, reason } = handler(podReview(pod, { namespace }).request, set);
          assert.equal(response.allowed, true, `${m.file} in ${namespace}`);
          assert.equal(response.patch, undefined);
          assert.equal(reason, 'not-opted-in');
        }
      }
    }
  });
});

/** Values a pod's fields never hold from the apiserver, which only other clients send. */
const Odd: readonly unknown[] = [
  null,
  0,
  -1,
  1e300,
  '',
  'x'.repeat(300),
  '__proto__',
  [],
  [null],
  {},
  JSON.parse('{"__proto__":{"polluted":1}}'),
  { constructor: { prototype: { polluted: 1 } } },
  true,
  'Always',
  { toString: 'x' },
  '\u0000\ud800',
  '~1/~0',
];

describe('hostile variants of the corpus pods', () => {
  it('are answered by both handlers with a verdict or a 4xx, never a fault; every patch applies; no prototype is touched', () => {
    let seed = 20261123;
    const rnd = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    const wrong = new Map<string, string>();
    for (const m of manifests) {
      const { pod: base, namespace } = admissionView(m.object, [names[rnd(names.length)]!], DefaultNamespace);
      const paths = pathsOf(base).filter((p) => p.length > 0 && p.join('.') !== 'metadata.labels.sidecar-injector.io/inject');
      for (let i = 0; i < 40; i++) {
        const pod = structuredClone(base);
        const done: string[] = [];
        for (let j = 0; j <= rnd(3); j++) {
          const path = paths[rnd(paths.length)]!;
          const parent = path.slice(0, -1).reduce<any>((o, k) => (o !== null && typeof o === 'object' ? o[k] : undefined), pod);
          if (parent === null || typeof parent !== 'object') continue;
          const key =
            rnd(4) === 0 && !Array.isArray(parent) ? ['__proto__', 'constructor', 'name', 'resources', 'restartPolicy'][rnd(5)]! : path[path.length - 1]!;
          const value = Odd[rnd(Odd.length)];
          // JSON text, as it arrives: `__proto__` becomes an own key, as JSON.parse makes it.
          Object.defineProperty(parent, key, { value: structuredClone(value), enumerable: true, writable: true, configurable: true });
          done.push(`${[...path.slice(0, -1), key].join('.')}=${JSON.stringify(value)}`);
        }
        const request = JSON.parse(JSON.stringify(podReview(pod, { namespace }))).request;
        for (const [name, handler] of [
          ['/mutate', mutate],
          ['/validate', validate],
        ] as const) {
          const at = `${m.file} ${name} ${done.join(' & ')}`;
          try {
            const { response } = handler(request, set);
            if (response.allowed !== true && (response.status?.code ?? 500) >= 500) wrong.set(at, `answered ${response.status?.code}`);
            if (response.patch !== undefined) applyPatchV4(structuredClone(request.object), decodePatch(response));
          } catch (err) {
            if (err instanceof InjectorError && err.status < 500) continue;
            wrong.set(at, (err as Error).stack?.split('\n').slice(0, 3).join(' | ') ?? String(err));
          }
        }
      }
    }
    assert.equal(({} as any).polluted, undefined);
    assert.deepEqual(
      [...wrong].map(([k, v]) => `${k}: ${v}`),
      [],
    );
  });
});

function pathsOf(value: unknown, at: (string | number)[] = [], out: (string | number)[][] = []): (string | number)[][] {
  out.push(at);
  if (value !== null && typeof value === 'object' && at.length < 7) {
    for (const k of Object.keys(value)) pathsOf((value as any)[k], [...at, Array.isArray(value) ? Number(k) : k], out);
  }
  return out;
}
