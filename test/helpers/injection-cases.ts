import fc from 'fast-check';
import { TemplateSetError } from '../../src/errors.js';
import type { Pod } from '../../src/kube/types.js';
import { compileTemplateSet, type TemplateSet } from '../../src/templates/load.js';

/**
 * Generated pods and SidecarTemplates for the injection's property tests (test/inject/property.test.ts,
 * test/inject/mutate.model.test.ts). Small name pools make templates and pods collide on names,
 * paths and ports on purpose. Besides the plain cases, the generator reaches every branch the
 * injection takes on its input (planInjection, renderForPod, makePlan):
 *
 * - pods of 1 to 6 containers, init containers of their own (run-to-completion, and native sidecars
 *   with `restartPolicy: Always`), `imagePullSecrets` entries without a name (`{}` is valid core/v1),
 *   a service account given by `serviceAccountName` or by the deprecated `serviceAccount` only,
 *   labels of empty value (a placeholder's `default` applies), Job owners;
 * - templates whose `initContainers` run to completion or are native sidecars written out, whose
 *   containers become native (`nativeSidecar: true`, or `jobs` in a Job's pod), placed first, last,
 *   before or after a pod's container or another template's sidecar;
 * - every override field (image, cpu, memory), valid and invalid values, a limit below the
 *   requested value, override annotations a template adds itself, an unknown field under a prefix;
 * - template labels whose values are placeholders reading another template's annotation (the
 *   rendering settles in more than one round), env values reading labels the templates add;
 * - mounts (for the applications and in sidecars) of a volume the template does not define, which
 *   the pod may or may not bring (TEMPLATE_VOLUME_MISSING), and mounts that clash by path only;
 * - required templates (everywhere, or in one of the two namespaces), which join every selection;
 * - placeholders with text after them, and values over 2 KiB that no render cache keeps (so the
 *   renderings and the plan are not the shared, frozen ones).
 */

export const ContainerNames = ['web', 'app', 'worker', 'proxy', 'agent', 'log-shipper', 'api', 'batch'] as const;
const volumeNames = ['data', 'config', 'cache', 'app-logs', 'tmp'];
/** A volume a template may mount without defining it: the pod is expected to bring it. */
const podVolume = 'data';
const mountPaths = ['/data', '/etc/config', '/var/log/app', '/tmp', '/cache'];
const envNames = ['LOG_DIR', 'POD_NAME', 'MODE', 'TEAM'];
const portNames = ['http', 'metrics', 'admin'];
export const TemplateNames = ['t0', 't1', 't2'] as const;
/** Keys a template may set, override keys among them (a template may set another's override). */
const templateKeys = ['example.com/a', 'example.com/b', 'team', 'sidecar-injector.io/extra', 't0.sidecar-injector.io/cpu', 't1.sidecar-injector.io/image'];
const podKeys = ['example.com/a', 'example.com/b', 'team', 'sidecar-injector.io/extra', 'a~b', 'x/y/z', 'app', 'tier', '__proto__', 'constructor'];
/** Override values by field: mostly valid (applied, a limit below raised), some refused; `memroy` is no field. */
const overrideValues: Readonly<Record<string, { readonly valid: readonly string[]; readonly invalid: readonly string[] }>> = {
  image: { valid: ['nginx:1.28', 'registry.example.com/agent:2', 'x'], invalid: ['a/b~c', ''] },
  cpu: { valid: ['250m', ' 2 ', '1', '5m'], invalid: ['lots', '0'] },
  memory: { valid: ['1Gi', '64Mi', '8Mi'], invalid: ['-1Mi', '0'] },
  memroy: { valid: ['1Gi'], invalid: [] },
};
const overrideArb = fc
  .uniqueArray(
    fc.record({
      template: fc.constantFrom('t0', 't1', 't2'),
      field: fc.constantFrom('image', 'cpu', 'memory', 'memory', 'cpu', 'memroy'),
      valid: fc.constantFrom(true, true, true, true, false),
      pick: fc.nat(),
    }),
    { selector: (o) => `${o.template}/${o.field}`, maxLength: 4 },
  )
  .map((list) =>
    Object.fromEntries(
      list.map(({ template, field, valid, pick }) => {
        const { valid: good, invalid: bad } = overrideValues[field]!;
        const pool = valid || bad.length === 0 ? good : bad;
        return [`${template}.sidecar-injector.io/${field}`, pool[pick % pool.length]!];
      }),
    ),
  );
const envValues = [
  'plain',
  'pod-{{ pod.name }}.svc',
  '{{ pod.name }}',
  '{{ namespace }}',
  "{{ pod.labels['team'] | default 'none' }}",
  "{{ pod.annotations['example.com/a'] | default 'unset' }}",
  '{{ serviceAccountName }}',
];
const images = ['nginx:1.27', 'docker.io/library/busybox:1.36', 'registry.example.com/agent@sha256:' + 'a'.repeat(64)];

const named = <T extends { name: string }>(arb: fc.Arbitrary<T>, maxLength: number, minLength = 0): fc.Arbitrary<T[]> =>
  fc.uniqueArray(arb, { selector: (x) => x.name, minLength, maxLength });
const optional = <T>(arb: fc.Arbitrary<T>): fc.Arbitrary<T | undefined> => fc.option(arb, { nil: undefined, freq: 3 });

const envVar = fc.record({ name: fc.constantFrom(...envNames), value: fc.constantFrom(...envValues) });
const volume = fc.record({ name: fc.constantFrom(...volumeNames), emptyDir: fc.constantFrom({}, { medium: 'Memory' }) });
const mount = fc
  .record({ name: fc.constantFrom(...volumeNames), mountPath: fc.constantFrom(...mountPaths), readOnly: fc.option(fc.boolean(), { nil: undefined }) })
  .map(dropUndefined);
const port = fc.record({ name: fc.constantFrom(...portNames), containerPort: fc.constantFrom(8080, 9090, 9901, 15006) });
const pullSecrets = fc.uniqueArray(fc.oneof(fc.record({ name: fc.constantFrom('regcred', 'mirror') }), fc.constant({})), {
  selector: (s) => ('name' in s ? s.name : undefined),
  maxLength: 3,
});

const container = fc
  .record({
    name: fc.constantFrom(...ContainerNames),
    image: fc.constantFrom(...images),
    env: optional(named(envVar, 3)),
    volumeMounts: optional(fc.uniqueArray(mount, { selector: (m) => m.mountPath, maxLength: 3 })),
    ports: optional(named(port, 2)),
    securityContext: optional(fc.constant({ runAsUser: 1000, runAsNonRoot: true })),
  })
  .map(dropUndefined);

/** A pod's init container: run to completion, or a native sidecar of its own. */
const initContainer = fc.tuple(container, fc.boolean()).map(([c, native]) => (native ? { ...c, restartPolicy: 'Always' } : c));

/** A pod as the apiserver sends it: valid, with omitempty fields absent rather than empty. Not opted in: callers add what they need. */
export const podArb: fc.Arbitrary<Pod> = fc
  .record({
    name: optional(fc.constantFrom('web-0', 'api')),
    labels: optional(fc.dictionary(fc.constantFrom(...podKeys), fc.constantFrom('true', 'web', 'x', ''), { maxKeys: 3 })),
    // A value over 2 KiB is rendered afresh for every pod (not kept by the template's render cache, nor its plan).
    annotations: optional(fc.dictionary(fc.constantFrom(...podKeys), fc.constantFrom('x', 'nginx:1.28', 'a/b~c', 'long'.repeat(600)), { maxKeys: 3 })),
    overrides: optional(overrideArb),
    job: fc.boolean(),
    containers: named(container, 6, 1),
    initContainers: optional(named(initContainer, 2)),
    volumes: optional(named(volume, 3)),
    imagePullSecrets: optional(pullSecrets),
    serviceAccount: optional(fc.constantFrom({ serviceAccountName: 'default' }, { serviceAccountName: 'builder' }, { serviceAccount: 'legacy' })),
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
    const annotations = { ...g.annotations, ...g.overrides };
    if (g.annotations !== undefined || g.overrides !== undefined) metadata['annotations'] = ownCopy(annotations);
    if (g.job) metadata['ownerReferences'] = [{ apiVersion: 'batch/v1', kind: 'Job', name: 'nightly', uid: 'u1', controller: true }];
    const spec: Record<string, unknown> = { containers: g.containers.map(fix) };
    if (inits.length > 0) spec['initContainers'] = inits;
    if (g.volumes !== undefined && g.volumes.length > 0) spec['volumes'] = g.volumes;
    if (g.imagePullSecrets !== undefined && g.imagePullSecrets.length > 0) spec['imagePullSecrets'] = g.imagePullSecrets;
    Object.assign(spec, g.serviceAccount);
    // Plain objects as JSON.parse makes them (fast-check's records have no prototype).
    return wire({ apiVersion: 'v1', kind: 'Pod', metadata, spec }) as Pod;
  });

/** A SidecarTemplate document that loads: its mounts name its own volumes or the pod's `data`, its names are unique. */
export function templateArb(name: string): fc.Arbitrary<object> {
  const others = TemplateNames.filter((n) => n !== name);
  const sidecar = fc
    .record({
      name: fc.constantFrom(`${name}-a`, `${name}-b`, 'proxy', 'log-shipper', 'web'),
      image: fc.constantFrom(...images),
      args: optional(fc.constant(['--pod', '{{ pod.name }}', '--ns', '{{ namespace }}'])),
      env: optional(named(envVar, 2)),
      volumeMounts: optional(fc.uniqueArray(mount, { selector: (m) => m.mountPath, maxLength: 2 })),
      ports: optional(named(port, 2)),
      resources: optional(
        fc.constantFrom(
          { requests: { cpu: '10m', memory: '16Mi' } },
          { requests: { cpu: '10m' }, limits: { cpu: '100m', memory: '32Mi' } },
          { limits: { cpu: 1, memory: '2Gi' } },
          { limits: { cpu: '200m', memory: '32Mi' } },
        ),
      ),
    })
    .map(dropUndefined);
  // Init containers run to completion, or are native sidecars written out (restartPolicy: Always).
  const init = fc.tuple(sidecar, fc.boolean()).map(([c, native]) => (native ? { ...c, restartPolicy: 'Always' } : c));
  return fc
    .record({
      default: fc.boolean(),
      nativeSidecar: optional(fc.constantFrom(true, false, 'jobs')),
      placement: optional(
        fc.constantFrom('first', 'last', { before: 'web' }, { after: 'app' }, { after: 'proxy' }, { before: `${others[0]}-a` }, { after: `${others[1]}-b` }),
      ),
      overrides: optional(fc.subarray(['image', 'cpu', 'memory'], { minLength: 1 })),
      containers: optional(named(sidecar, 2)),
      initContainers: optional(named(init, 2)),
      volumes: optional(named(volume, 2)),
      volumeMounts: optional(fc.uniqueArray(mount, { selector: (m) => m.mountPath, maxLength: 2 })),
      env: optional(named(envVar, 2)),
      annotations: optional(
        fc.dictionary(fc.constantFrom(...templateKeys), fc.constantFrom('true', 'v1', '{{ pod.name }}', '250m', 'nginx:1.29'), { maxKeys: 2 }),
      ),
      labels: optional(
        fc.dictionary(fc.constantFrom(...templateKeys.slice(0, 4)), fc.constantFrom('true', 'v1', "{{ pod.annotations['example.com/b'] | default 'none' }}"), {
          maxKeys: 2,
        }),
      ),
      imagePullSecrets: optional(named(fc.record({ name: fc.constantFrom('regcred', 'mirror') }), 1)),
      mountsPodVolume: fc.integer({ min: 0, max: 3 }).map((n) => n === 0),
      // One template in five is required (docs/templates.md, Required templates): everywhere, or in team-a only.
      required: fc.oneof(
        { weight: 4, arbitrary: fc.constant(undefined) },
        {
          weight: 1,
          arbitrary: fc.constantFrom(
            {},
            { namespaceSelector: { matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'In', values: ['team-a'] }] } },
          ),
        },
      ),
    })
    .map(({ mountsPodVolume, ...g }) => {
      // A template mounts its own volumes; one in four also `data`, which the pod may bring.
      const volumes = new Set([...(g.volumes ?? []).map((v) => v.name), ...(mountsPodVolume ? [podVolume] : [])]);
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
      // A required template may not let pods override its image (the loader refuses it).
      if (spec['required'] !== undefined && (spec['overrides'] as string[] | undefined)?.includes('image')) delete spec['required'];
      if ((spec['volumeMounts'] as unknown[]).length === 0) delete spec['volumeMounts'];
      // A template must inject something; an annotation is the least it can add.
      spec['annotations'] = { [`${name}.example.com/injected`]: 'true', ...(g.annotations ?? {}) };
      return { apiVersion: 'sidecar-injector.io/v1alpha1', kind: 'SidecarTemplate', metadata: { name }, spec };
    });
}

/** A pod, three templates (t0, t1, t2, one file each), a selection of them and a namespace. */
export const caseArb = fc.record({
  pod: podArb,
  templates: fc.tuple(...TemplateNames.map(templateArb)),
  selected: fc.shuffledSubarray([...TemplateNames], { minLength: 1 }),
  namespace: fc.constantFrom('default', 'team-a'),
});

/** The set, or undefined when the loader refuses it because its default templates conflict (every pod naming none would be denied). */
export function loadSet(docs: readonly object[]): TemplateSet | undefined {
  try {
    return compileTemplateSet(
      docs.map((d, i) => ({ file: `t${i}.yaml`, text: JSON.stringify(d) })),
      'generated',
    );
  } catch (err) {
    if (err instanceof TemplateSetError && err.faults.every((f) => /both are default templates/.test(f.message))) return undefined;
    throw err;
  }
}

/** What the apiserver sees on the wire: the value after JSON encoding and decoding. */
export function wire<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

function dropUndefined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}

/** A copy whose keys are all own data properties, "__proto__" included, as JSON.parse makes them. */
function ownCopy(map: Record<string, string>): Record<string, string> {
  return JSON.parse(
    `{${Object.entries(map)
      .map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`)
      .join(',')}}`,
  );
}
