import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { InjectorError, TemplateSetError } from '../../src/errors.js';
import { applyInjection, planInjection } from '../../src/inject/mutate.js';
import type { Pod } from '../../src/kube/types.js';
import { diff } from '../../src/patch/diff.js';
import { compileTemplateSet, type TemplateSet } from '../../src/templates/load.js';
import { applyPatchV4 } from '../helpers/jsonpatch-v4.js';

/**
 * The mutating handler's patch is diff(pod, applyInjection(pod, injection)). Over generated pods
 * (keys in any order, lists and maps absent or present, a status annotation of the same or another
 * value, keys that are array indices or need escaping, duplicate names), the patch must give the
 * injected pod under the apiserver's json-patch v4, add only what the injection adds (no pod
 * entry re-emitted) and change nothing on a second pass.
 */

const RUNS = Number(process.env['PROPERTY_RUNS'] ?? 400);

const containerNames = ['web', 'app', 'proxy', 'side-a', 'worker', 'api'];
const volumeNames = ['data', 'config', 'app-logs'];
const mountPaths = ['/data', '/etc/config', '/var/log/app'];
const envNames = ['LOG_DIR', 'POD_NAME', 'MODE'];
/** Keys a template may set (array indices among them), and more a pod may carry. */
const templateKeys = ['example.com/a', 'team', '7', '42', 'sidecar-injector.io/status'];
const podKeys = [...templateKeys, '4294967294', '4294967295', '007', 'a~b', '__proto__'];
const images = ['nginx:1.27', 'busybox:1.36'];

const optional = <T>(arb: fc.Arbitrary<T>): fc.Arbitrary<T | undefined> => fc.option(arb, { nil: undefined, freq: 2 });
const env = fc.uniqueArray(fc.record({ name: fc.constantFrom(...envNames), value: fc.constant('x') }), { selector: (e) => e.name, maxLength: 2 });
const mounts = fc.array(fc.record({ name: fc.constantFrom(...volumeNames), mountPath: fc.constantFrom(...mountPaths) }), { maxLength: 2 });
const volumes = fc.uniqueArray(fc.record({ name: fc.constantFrom(...volumeNames), emptyDir: fc.constant({}) }), { selector: (v) => v.name, maxLength: 2 });
const map = (keys: readonly string[]): fc.Arbitrary<Record<string, string>> =>
  fc.dictionary(fc.constantFrom(...keys), fc.constantFrom('true', 'v1'), { maxKeys: 3 });

/** Duplicate names on purpose: the apiserver refuses such a pod after admission, but the patch must still be the diff's. */
const container = fc.record({
  name: fc.constantFrom(...containerNames),
  image: fc.constantFrom(...images),
  env: optional(env),
  volumeMounts: optional(mounts),
  ports: optional(fc.constant([{ containerPort: 8080 }])),
});

const podArb = fc
  .record({
    metadata: optional(
      fc.record({
        name: fc.constantFrom('web-0'),
        labels: optional(map(podKeys)),
        annotations: optional(map(podKeys)),
        status: fc.constantFrom('none', 'other', 'same'),
      }),
    ),
    spec: optional(
      fc.record({
        containers: optional(fc.array(container, { maxLength: 6 })),
        initContainers: optional(
          fc.array(
            fc.tuple(container, fc.boolean()).map(([c, native]) => (native ? { ...c, restartPolicy: 'Always' } : c)),
            { maxLength: 2 },
          ),
        ),
        volumes: optional(volumes),
        // core/v1 allows an entry without a name (`{}`).
        imagePullSecrets: optional(fc.constantFrom([{ name: 'regcred' }], [{}], [{}, { name: 'mirror' }])),
        restartPolicy: fc.constant('Always'),
      }),
    ),
    seed: fc.integer(),
  })
  .map(({ metadata, spec, seed }) => ({ pod: shuffled({ apiVersion: 'v1', kind: 'Pod', metadata, spec }, seed), status: metadata?.status ?? 'none' }));

function templateArb(name: string): fc.Arbitrary<object> {
  return fc
    .record({
      default: fc.constant(true),
      nativeSidecar: optional(fc.constantFrom(true, false)),
      placement: optional(fc.constantFrom('first', 'last', { before: 'app' }, { after: 'web' })),
      containers: optional(fc.constant([{ name: `${name}-side`, image: 'busybox:1.36', volumeMounts: [{ name: `${name}-vol`, mountPath: '/shared' }] }])),
      // Init containers that run to completion, and native sidecars written out.
      initContainers: optional(
        fc.subarray(
          [
            { name: `${name}-init`, image: 'busybox:1.36' },
            { name: `${name}-native`, image: 'busybox:1.36', restartPolicy: 'Always' },
          ],
          { minLength: 1 },
        ),
      ),
      volumes: fc.constant([{ name: `${name}-vol`, emptyDir: {} }]),
      volumeMounts: optional(mounts.map((ms) => ms.filter((m) => m.name === 'app-logs'))),
      env: optional(env),
      annotations: optional(map(templateKeys)),
      labels: optional(map(templateKeys)),
      imagePullSecrets: optional(fc.constantFrom([{ name: 'mirror' }], [{ name: 'regcred' }])),
    })
    .map((g) => {
      const spec = Object.fromEntries(Object.entries(g).filter(([, v]) => v !== undefined)) as Record<string, unknown>;
      // A template's mounts for the applications name a volume it defines or none at all.
      if (Array.isArray(spec['volumeMounts']))
        spec['volumes'] = [{ name: `${name}-vol`, emptyDir: {} }, ...(spec['volumeMounts'].length > 0 ? [{ name: 'app-logs', emptyDir: {} }] : [])];
      spec['annotations'] = { [`${name}.example.com/injected`]: 'true', ...(g.annotations ?? {}) };
      return { apiVersion: 'sidecar-injector.io/v1alpha1', kind: 'SidecarTemplate', metadata: { name }, spec };
    });
}

function loadSet(docs: readonly object[]): TemplateSet | undefined {
  try {
    return compileTemplateSet(
      docs.map((d, i) => ({ file: `t${i}.yaml`, text: JSON.stringify(d) })),
      'generated',
    );
  } catch (err) {
    if (err instanceof TemplateSetError) return undefined;
    throw err;
  }
}

describe('the injection patch (diff of the pod and the injected pod)', () => {
  it('gives the injected pod, removes nothing, and is empty on a second pass', (t) => {
    const seen = { written: 0, refused: 0, ops: 0, codes: {} as Record<string, number> };
    fc.assert(
      fc.property(
        podArb,
        fc.tuple(templateArb('t0'), templateArb('t1')),
        fc.shuffledSubarray(['t0', 't1'], { minLength: 1 }),
        ({ pod: generated, status }, docs, selected) => {
          const set = loadSet(docs);
          if (set === undefined) {
            seen.codes['set'] = (seen.codes['set'] ?? 0) + 1;
            return void seen.refused++;
          }
          const templates = selected.map((n) => set.templates.get(n)!);
          let pod = wire(generated) as Pod;
          let injection;
          try {
            injection = planInjection(pod, templates, 'ns');
            // A status annotation the pod brings: the one this injection writes (a re-invocation), or another.
            if (status !== 'none' && pod.metadata !== undefined) {
              const value = status === 'same' ? injection.plan.statusText : '{"templates":["old"]}';
              pod = wire({ ...pod, metadata: { ...pod.metadata, annotations: { ...pod.metadata.annotations, 'sidecar-injector.io/status': value } } }) as Pod;
              injection = planInjection(pod, templates, 'ns');
            }
          } catch (err) {
            if (err instanceof InjectorError) {
              seen.codes[err.code] = (seen.codes[err.code] ?? 0) + 1;
              return void seen.refused++;
            }
            throw err;
          }
          const after = applyInjection(pod, injection);
          const ops = diff(pod, after);
          const patched = applyPatchV4(pod, JSON.parse(JSON.stringify(ops)));
          assert.deepEqual(patched, wire(after));
          // Minimal: no op replaces a list or a whole map the pod had, and no op targets an item of the pod's own.
          for (const op of ops) assert.ok(op.op !== 'remove', `${op.op} ${op.path}`);
          assert.deepEqual(diff(after, applyInjection(after, planInjection(after, templates, 'ns'))), [], 'injecting again changes nothing');
          seen.written++;
          seen.ops += ops.length;
        },
      ),
      { numRuns: RUNS },
    );
    t.diagnostic(`${RUNS} cases: ${seen.written} written (${seen.ops} ops), ${seen.refused} refused ${JSON.stringify(seen.codes)}`);
    assert.ok(seen.written > RUNS / 2, `written ${seen.written}, refused ${seen.refused}`);
  });

  it('orders the ops of two changed keys as the pod orders them', () => {
    const set = loadSet([
      {
        apiVersion: 'sidecar-injector.io/v1alpha1',
        kind: 'SidecarTemplate',
        metadata: { name: 'a' },
        spec: {
          default: true,
          volumes: [{ name: 'v', emptyDir: {} }],
          volumeMounts: [{ name: 'v', mountPath: '/v' }],
          env: [{ name: 'E', value: '1' }],
          labels: { l: '1' },
        },
      },
    ])!;
    const templates = [...set.templates.values()];
    const paths = (pod: object): string[] => patchOf(pod as Pod, templates).map((op: { path: string }) => op.path);
    const container = { name: 'app', volumeMounts: [], env: [] };
    const pod = { spec: { volumes: [], containers: [container] }, metadata: { labels: {}, annotations: {} } };
    assert.deepEqual(paths(pod), [
      '/spec/volumes/0',
      '/spec/containers/0/volumeMounts/0',
      '/spec/containers/0/env/0',
      '/metadata/labels/l',
      '/metadata/annotations/sidecar-injector.io~1status',
    ]);
    const reordered = { metadata: { annotations: {}, labels: {} }, spec: { containers: [{ name: 'app', env: [], volumeMounts: [] }], volumes: [] } };
    assert.deepEqual(paths(reordered), [
      '/metadata/annotations/sidecar-injector.io~1status',
      '/metadata/labels/l',
      '/spec/containers/0/env/0',
      '/spec/containers/0/volumeMounts/0',
      '/spec/volumes/0',
    ]);
  });

  it('adds the template keys that are array indices before the status is replaced, as the map enumerates them', () => {
    const set = loadSet([
      {
        apiVersion: 'sidecar-injector.io/v1alpha1',
        kind: 'SidecarTemplate',
        metadata: { name: 'a' },
        spec: { default: true, annotations: { z: '1', '5': '2' } },
      },
    ])!;
    const templates = [...set.templates.values()];
    const pod = { metadata: { annotations: { 'sidecar-injector.io/status': 'old' } }, spec: { containers: [] } } as Pod;
    const ops = patchOf(pod, templates);
    assert.deepEqual(
      ops.map((op: { op: string; path: string }) => `${op.op} ${op.path}`),
      ['add /metadata/annotations/5', 'replace /metadata/annotations/sidecar-injector.io~1status', 'add /metadata/annotations/z'],
    );
  });
});

/** The mutating handler's patch for `pod`. */
function patchOf(pod: Pod, templates: Parameters<typeof planInjection>[1]): { op: string; path: string }[] {
  return JSON.parse(JSON.stringify(diff(pod, applyInjection(pod, planInjection(pod, templates, 'ns')))));
}

/** What the apiserver sends: the value after JSON encoding and decoding (keys as own data properties). */
function wire<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

/** The object with its keys, and those of its objects, in an order drawn from `seed`; undefined values dropped. */
function shuffled(value: unknown, seed: number): unknown {
  if (Array.isArray(value)) return value.map((v, i) => shuffled(v, seed + i));
  if (typeof value !== 'object' || value === null) return value;
  const entries = Object.entries(value).filter(([k, v]) => v !== undefined && k !== 'status');
  let s = seed >>> 0;
  for (let i = entries.length - 1; i > 0; i--) {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    const j = s % (i + 1);
    [entries[i], entries[j]] = [entries[j]!, entries[i]!];
  }
  // Built as JSON text so that "__proto__" stays a key.
  return JSON.parse(`{${entries.map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(shuffled(v, s + k.length))}`).join(',')}}`);
}
