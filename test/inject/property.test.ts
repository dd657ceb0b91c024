import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { InjectorError, TemplateSetError } from '../../src/errors.js';
import { injectSidecars } from '../../src/inject/mutate.js';
import type { Pod } from '../../src/kube/types.js';
import { diff } from '../../src/patch/diff.js';
import { compileTemplateSet, type TemplateSet } from '../../src/templates/load.js';
import { applyPatchV4, PatchError } from '../helpers/jsonpatch-v4.js';
import { podProblems } from '../helpers/pod.js';

/**
 * Property-based proof of the injection engine over generated pods and templates: injection never
 * throws anything but a user error (TEMPLATE_CONFLICT, OVERRIDE_REFUSED), the patch applies to the
 * pod it was made for under evanphx/json-patch v4 rules and yields exactly the injected pod, that pod
 * passes the core/v1 checks a wrong injection would trip, and injecting it again yields no patch.
 * Small name pools make templates and pods collide on names, paths and ports on purpose.
 */

const RUNS = Number(process.env['PROPERTY_RUNS'] ?? 400);

const containerNames = ['web', 'app', 'worker', 'proxy', 'agent', 'log-shipper'];
const volumeNames = ['data', 'config', 'cache', 'app-logs', 'tmp'];
const mountPaths = ['/data', '/etc/config', '/var/log/app', '/tmp', '/cache'];
const envNames = ['LOG_DIR', 'POD_NAME', 'MODE', 'TEAM'];
const portNames = ['http', 'metrics', 'admin'];
const templateKeys = ['example.com/a', 'example.com/b', 'team', 'sidecar-injector.io/extra'];
const podKeys = [...templateKeys, 'a~b', 'x/y/z', 'app', 'tier', '__proto__', 'constructor'];
const envValues = ['plain', '{{ pod.name }}', '{{ namespace }}', "{{ pod.labels['team'] | default 'none' }}", "{{ pod.annotations['example.com/a'] | default 'unset' }}", '{{ serviceAccountName }}'];
const images = ['nginx:1.27', 'docker.io/library/busybox:1.36', 'registry.example.com/agent@sha256:' + 'a'.repeat(64)];

const named = <T extends { name: string }>(arb: fc.Arbitrary<T>, maxLength: number, minLength = 0): fc.Arbitrary<T[]> =>
  fc.uniqueArray(arb, { selector: (x) => x.name, minLength, maxLength });
const optional = <T>(arb: fc.Arbitrary<T>): fc.Arbitrary<T | undefined> => fc.option(arb, { nil: undefined, freq: 3 });

const envVar = fc.record({ name: fc.constantFrom(...envNames), value: fc.constantFrom(...envValues) });
const volume = fc.record({ name: fc.constantFrom(...volumeNames), emptyDir: fc.constantFrom({}, { medium: 'Memory' }) });
const mount = fc.record({ name: fc.constantFrom(...volumeNames), mountPath: fc.constantFrom(...mountPaths), readOnly: fc.option(fc.boolean(), { nil: undefined }) }).map(dropUndefined);
const port = fc.record({ name: fc.constantFrom(...portNames), containerPort: fc.constantFrom(8080, 9090, 9901, 15006) });

const container = fc
  .record({
    name: fc.constantFrom(...containerNames),
    image: fc.constantFrom(...images),
    env: optional(named(envVar, 3)),
    volumeMounts: optional(fc.uniqueArray(mount, { selector: (m) => m.mountPath, maxLength: 3 })),
    ports: optional(named(port, 2)),
    securityContext: optional(fc.constant({ runAsUser: 1000, runAsNonRoot: true })),
  })
  .map(dropUndefined);

/** A pod as the apiserver sends it: valid, with omitempty fields absent rather than empty. */
const podArb: fc.Arbitrary<Pod> = fc
  .record({
    name: optional(fc.constantFrom('web-0', 'api')),
    labels: optional(fc.dictionary(fc.constantFrom(...podKeys), fc.constantFrom('true', 'web', 'x'), { maxKeys: 3 })),
    annotations: optional(fc.dictionary(fc.constantFrom(...podKeys, 't0.sidecar-injector.io/image'), fc.constantFrom('x', 'nginx:1.28', 'a/b~c'), { maxKeys: 3 })),
    job: fc.boolean(),
    containers: named(container, 3, 1),
    initContainers: optional(named(container, 2)),
    volumes: optional(named(volume, 3)),
    imagePullSecrets: optional(named(fc.record({ name: fc.constantFrom('regcred', 'mirror') }), 2)),
    serviceAccountName: optional(fc.constantFrom('default', 'builder')),
  })
  .map((g) => {
    const volumes = new Set((g.volumes ?? []).map((v) => v.name));
    const taken = new Set(g.containers.map((c) => c.name));
    const fix = (c: Record<string, any>): Record<string, any> => {
      const mounts = (c['volumeMounts'] ?? []).filter((m: { name: string }) => volumes.has(m.name));
      const out = { ...c };
      if (mounts.length > 0) out['volumeMounts'] = mounts;
      else delete out['volumeMounts'];
      return out;
    };
    const inits = (g.initContainers ?? []).filter((c) => !taken.has(c.name)).map(fix);
    const metadata: Record<string, unknown> = g.name === undefined ? { generateName: 'web-7c9f-' } : { name: g.name };
    if (g.labels !== undefined) metadata['labels'] = ownCopy(g.labels);
    if (g.annotations !== undefined) metadata['annotations'] = ownCopy(g.annotations);
    if (g.job) metadata['ownerReferences'] = [{ apiVersion: 'batch/v1', kind: 'Job', name: 'nightly', uid: 'u1', controller: true }];
    const spec: Record<string, unknown> = { containers: g.containers.map(fix) };
    if (inits.length > 0) spec['initContainers'] = inits;
    if (g.volumes !== undefined && g.volumes.length > 0) spec['volumes'] = g.volumes;
    if (g.imagePullSecrets !== undefined && g.imagePullSecrets.length > 0) spec['imagePullSecrets'] = g.imagePullSecrets;
    if (g.serviceAccountName !== undefined) spec['serviceAccountName'] = g.serviceAccountName;
    // Plain objects as JSON.parse makes them (fast-check's records have no prototype).
    return wire({ apiVersion: 'v1', kind: 'Pod', metadata, spec }) as Pod;
  });

/** A SidecarTemplate document that loads: its mounts name its own volumes, its names are unique. */
function templateArb(name: string): fc.Arbitrary<object> {
  const sidecar = fc
    .record({
      name: fc.constantFrom(`${name}-a`, `${name}-b`, 'proxy', 'log-shipper', 'web'),
      image: fc.constantFrom(...images),
      args: optional(fc.constant(['--pod', '{{ pod.name }}', '--ns', '{{ namespace }}'])),
      env: optional(named(envVar, 2)),
      volumeMounts: optional(fc.uniqueArray(mount, { selector: (m) => m.mountPath, maxLength: 2 })),
      ports: optional(named(port, 2)),
      resources: optional(fc.constant({ requests: { cpu: '10m', memory: '16Mi' } })),
    })
    .map(dropUndefined);
  return fc
    .record({
      default: fc.boolean(),
      nativeSidecar: optional(fc.constantFrom(true, false, 'jobs')),
      placement: optional(fc.constantFrom('first', 'last', { before: 'web' }, { after: 'app' }, { after: 'proxy' })),
      overrides: optional(fc.constant(['image'])),
      containers: optional(named(sidecar, 2)),
      initContainers: optional(named(sidecar, 1)),
      volumes: optional(named(volume, 2)),
      volumeMounts: optional(fc.uniqueArray(mount, { selector: (m) => m.mountPath, maxLength: 2 })),
      env: optional(named(envVar, 2)),
      annotations: optional(fc.dictionary(fc.constantFrom(...templateKeys), fc.constantFrom('true', 'v1', '{{ pod.name }}'), { maxKeys: 2 })),
      labels: optional(fc.dictionary(fc.constantFrom(...templateKeys), fc.constantFrom('true', 'v1'), { maxKeys: 2 })),
      imagePullSecrets: optional(named(fc.record({ name: fc.constantFrom('regcred', 'mirror') }), 1)),
    })
    .map((g) => {
      const volumes = new Set((g.volumes ?? []).map((v) => v.name));
      const ownMounts = (c: Record<string, any>): Record<string, any> => {
        const mounts = (c['volumeMounts'] ?? []).filter((m: { name: string }) => volumes.has(m.name));
        const out = { ...c };
        if (mounts.length > 0) out['volumeMounts'] = mounts;
        else delete out['volumeMounts'];
        return out;
      };
      const containers = (g.containers ?? []).map(ownMounts);
      const names = new Set(containers.map((c) => c['name']));
      const initContainers = (g.initContainers ?? []).filter((c) => !names.has(c.name)).map(ownMounts);
      const spec: Record<string, unknown> = dropUndefined({
        ...g,
        containers: containers.length > 0 ? containers : undefined,
        initContainers: initContainers.length > 0 ? initContainers : undefined,
        volumeMounts: (g.volumeMounts ?? []).filter((m) => volumes.has(m.name)),
        overrides: containers.length > 0 ? g.overrides : undefined,
      });
      if ((spec['volumeMounts'] as unknown[]).length === 0) delete spec['volumeMounts'];
      // A template must inject something; an annotation is the least it can add.
      spec['annotations'] = { [`${name}.example.com/injected`]: 'true', ...(g.annotations ?? {}) };
      return { apiVersion: 'sidecar-injector.io/v1alpha1', kind: 'SidecarTemplate', metadata: { name }, spec };
    });
}

const caseArb = fc.record({
  pod: podArb,
  templates: fc.tuple(templateArb('t0'), templateArb('t1'), templateArb('t2')),
  selected: fc.shuffledSubarray(['t0', 't1', 't2'], { minLength: 1 }),
  namespace: fc.constantFrom('default', 'team-a'),
});

/** The set, or undefined when the loader refuses it because its default templates conflict (every pod naming none would be denied). */
function loadSet(docs: readonly object[]): TemplateSet | undefined {
  try {
    return compileTemplateSet(docs.map((d, i) => ({ file: `t${i}.yaml`, text: JSON.stringify(d) })), 'generated');
  } catch (err) {
    if (err instanceof TemplateSetError && err.faults.every((f) => /both are default templates/.test(f.message))) return undefined;
    throw err;
  }
}

/** What the apiserver sees on the wire: the ops after JSON encoding and decoding. */
function wire<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

describe('injection over generated pods and templates', () => {
  it('never throws but a user error; the patch applies the v4 way and gives a valid pod; re-injection adds nothing', (t) => {
    const seen = { injected: 0, refused: 0 };
    fc.assert(
      fc.property(caseArb, ({ pod, templates, selected, namespace }) => {
        assert.deepEqual(podProblems(pod), [], 'the generator makes valid pods');
        const set = loadSet(templates);
        if (set === undefined) return void seen.refused++;
        const chosen = selected.map((n) => set.templates.get(n)!);
        const before = structuredClone(pod);
        let result;
        try {
          result = injectSidecars(pod, chosen, namespace);
        } catch (err) {
          if (err instanceof InjectorError && (err.code === 'TEMPLATE_CONFLICT' || err.code === 'OVERRIDE_REFUSED')) {
            seen.refused++;
            return;
          }
          throw err;
        }
        seen.injected++;
        assert.deepEqual(pod, before, 'injection is pure');
        const ops = wire(diff(pod, result.pod));
        const patched = applyPatchV4(pod, ops);
        assert.deepEqual(patched, wire(result.pod), 'the patch yields exactly the injected pod');
        assert.deepEqual(podProblems(patched), []);
        const again = injectSidecars(patched, chosen, namespace);
        assert.deepEqual(diff(patched, again.pod), [], 'injecting the result again yields no patch');
      }),
      { numRuns: RUNS },
    );
    // Guards against a generator that only ever produces conflicts: most cases must inject.
    t.diagnostic(`${RUNS} cases: ${seen.injected} injected, ${seen.refused} refused (template conflict or override)`);
    assert.ok(seen.injected > RUNS / 2, `injected ${seen.injected}, refused ${seen.refused}`);
  });
});

describe('the strict v4 patch applier the property relies on', () => {
  const pod = { metadata: { name: 'p', labels: { a: 'b' } }, spec: { containers: [{ name: 'web' }] } };
  const fails = [
    ['an add under a missing parent', { op: 'add', path: '/metadata/annotations/x', value: 'y' }],
    ['an add under a null parent', { op: 'add', path: '/spec/nodeSelector/x', value: 'y' }],
    ['an index beyond the length', { op: 'add', path: '/spec/containers/2', value: {} }],
    ['a negative index', { op: 'add', path: '/spec/containers/-1', value: {} }],
    ['a replace of a missing key', { op: 'replace', path: '/metadata/namespace', value: 'x' }],
    ['a remove of a missing key', { op: 'remove', path: '/metadata/annotations' }],
    ['the root', { op: 'replace', path: '', value: {} }],
    ['an unknown op', { op: 'merge', path: '/metadata', value: {} }],
    ['an unescaped slash in a key', { op: 'add', path: '/metadata/labels/example.com/x', value: 'y' }],
  ] as const;
  for (const [name, op] of fails) {
    it(`refuses ${name}`, () => {
      assert.throws(() => applyPatchV4({ ...pod, spec: { ...pod.spec, nodeSelector: null } }, [op]), PatchError);
    });
  }

  it('decodes ~1 and ~0 in one pass, appends at the length and at "-"', () => {
    const out = applyPatchV4(pod, [
      { op: 'add', path: '/metadata/labels/example.com~1x', value: '1' },
      { op: 'add', path: '/metadata/labels/a~0b', value: '2' },
      { op: 'add', path: '/metadata/labels/~01', value: '3' },
      { op: 'add', path: '/spec/containers/1', value: { name: 'side' } },
      { op: 'add', path: '/spec/containers/-', value: { name: 'last' } },
      { op: 'add', path: '/spec/containers/0', value: { name: 'first' } },
    ]);
    assert.deepEqual(out.metadata.labels, { a: 'b', 'example.com/x': '1', 'a~b': '2', '~1': '3' });
    assert.deepEqual(out.spec.containers.map((c) => c.name), ['first', 'web', 'side', 'last']);
    assert.deepEqual(pod.spec.containers, [{ name: 'web' }], 'the input is not modified');
  });
});

function dropUndefined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}

/** A copy whose keys are all own data properties, "__proto__" included, as JSON.parse makes them. */
function ownCopy(map: Record<string, string>): Record<string, string> {
  return JSON.parse(`{${Object.entries(map).map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`).join(',')}}`);
}
