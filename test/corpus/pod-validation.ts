/**
 * The core/v1 Pod validation a patched pod must pass before it is stored (kubernetes/kubernetes
 * pkg/apis/core/validation/validation.go ValidatePodCreate), for the rules an injected sidecar can
 * break. Stricter than test/helpers/pod.ts (which it includes): field types, value ranges, one source
 * per volume and handler, probes and lifecycle where Kubernetes allows them, host ports. Each problem
 * reads like the apiserver's own field error.
 */
import { podProblems } from '../helpers/pod.js';

type Obj = Record<string, any>;

const Dns1123Label = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
// IsValidPortName: an IANA_SVC_NAME, at most 15 characters, letters and digits and '-', at least one letter.
const PortName = /^(?=.*[a-z])[a-z0-9]([a-z0-9-]*[a-z0-9])?$/;
/** Every source a core/v1 Volume can have (VolumeSource's fields); a volume has exactly one. */
export const VolumeSources: readonly string[] = [
  'hostPath',
  'emptyDir',
  'gcePersistentDisk',
  'awsElasticBlockStore',
  'gitRepo',
  'secret',
  'nfs',
  'iscsi',
  'glusterfs',
  'persistentVolumeClaim',
  'rbd',
  'flexVolume',
  'cinder',
  'cephfs',
  'flocker',
  'downwardAPI',
  'fc',
  'azureFile',
  'configMap',
  'vsphereVolume',
  'quobyte',
  'azureDisk',
  'photonPersistentDisk',
  'projected',
  'portworxVolume',
  'scaleIO',
  'storageos',
  'csi',
  'ephemeral',
  'image',
];
const Handlers = ['exec', 'httpGet', 'tcpSocket', 'grpc', 'sleep'];
/** A container's probes. */
export const Probes: readonly string[] = ['livenessProbe', 'readinessProbe', 'startupProbe'];

/** Every reason the apiserver would refuse `pod`; [] when it would store it. */
export function podValidationErrors(pod: Obj): string[] {
  const errs = [...podProblems(pod)];
  const spec = pod?.spec ?? {};
  const inits: Obj[] = spec.initContainers ?? [];
  const containers: Obj[] = spec.containers ?? [];
  inits.forEach((c, i) => container(c, `spec.initContainers[${i}]`, c.restartPolicy === 'Always' ? 'sidecar' : 'init', errs));
  containers.forEach((c, i) => container(c, `spec.containers[${i}]`, 'regular', errs));
  (spec.volumes ?? []).forEach((v: Obj, i: number) => volume(v, `spec.volumes[${i}]`, errs));
  // AccumulateUniqueHostPorts: a hostPort/protocol pair may be used once across the pod's containers.
  const hostPorts = new Set<string>();
  for (const c of [...inits, ...containers]) {
    for (const p of c.ports ?? []) {
      if (!p.hostPort) continue;
      const key = `${p.hostPort}/${p.protocol ?? 'TCP'}/${p.hostIP ?? ''}`;
      if (hostPorts.has(key)) errs.push(`container ${c.name}: hostPort ${key}: Duplicate value`);
      hostPorts.add(key);
    }
  }
  for (const s of spec.imagePullSecrets ?? []) if (typeof s?.name !== 'string') errs.push('spec.imagePullSecrets: name must be a string');
  if (spec.resources != null) podResources(spec, errs);
  return errs;
}

/**
 * validatePodResourceConsistency (pod-level resources, beta and on by default since 1.34): each
 * pod-level request covers what the containers request together (resourcehelper.PodRequests: the
 * regular containers and native sidecars, or an init container with the sidecars started before
 * it, whichever is more), and no regular container's limit is above the pod-level one. A container
 * without a request of a resource it limits requests its limit (SetDefaults_Container... defaulting).
 */
function podResources(spec: Obj, errs: string[]): void {
  const requested = (c: Obj, r: string): bigint => quantity(c.resources?.requests?.[r] ?? c.resources?.limits?.[r]);
  const max = (a: bigint, b: bigint): bigint => (a > b ? a : b);
  for (const r of Object.keys(spec.resources.requests ?? {})) {
    let sidecars = 0n;
    let inits = 0n;
    for (const c of spec.initContainers ?? []) {
      if (c.restartPolicy === 'Always') sidecars += requested(c, r);
      else inits = max(inits, sidecars + requested(c, r));
    }
    const aggregate = max(inits, sidecars + (spec.containers ?? []).reduce((n: bigint, c: Obj) => n + requested(c, r), 0n));
    if (aggregate > quantity(spec.resources.requests[r]))
      errs.push(
        `spec.resources.requests[${r}]: Invalid value: ${JSON.stringify(spec.resources.requests[r])}: must be greater than or equal to aggregate container requests of ${aggregate}n`,
      );
  }
  for (const [r, limit] of Object.entries(spec.resources.limits ?? {})) {
    (spec.containers ?? []).forEach((c: Obj, i: number) => {
      const own = c.resources?.limits?.[r];
      if (own !== undefined && quantity(own) > quantity(limit))
        errs.push(
          `spec.resources.containers[${i}][${r}].limits: Invalid value: ${JSON.stringify(own)}: must be less than or equal to pod limits of ${JSON.stringify(limit)}`,
        );
    });
  }
}

/** Each suffix as a fraction [numerator, denominator] of one unit (resource/suffix.go). */
const Suffixes: Readonly<Record<string, readonly [bigint, bigint]>> = {
  n: [1n, 10n ** 9n],
  u: [1n, 10n ** 6n],
  m: [1n, 1000n],
  '': [1n, 1n],
  k: [10n ** 3n, 1n],
  M: [10n ** 6n, 1n],
  G: [10n ** 9n, 1n],
  T: [10n ** 12n, 1n],
  P: [10n ** 15n, 1n],
  E: [10n ** 18n, 1n],
  Ki: [1n << 10n, 1n],
  Mi: [1n << 20n, 1n],
  Gi: [1n << 30n, 1n],
  Ti: [1n << 40n, 1n],
  Pi: [1n << 50n, 1n],
  Ei: [1n << 60n, 1n],
};
const BINARY_CAP = (2n ** 63n - 1n) * 10n ** 9n;

/**
 * A resource.Quantity in nano-units (0 when absent), exactly as the apiserver compares them: the
 * value as a fraction, rounded away from zero to a whole nano-unit (ParseQuantity), a binary value
 * capped at 2^63-1. The harness' own reading, independent of src; its pods hold ordinary quantities.
 */
export function quantity(q: unknown): bigint {
  if (q === undefined || q === null) return 0n;
  const m = /^([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?$/.exec(String(q).trim());
  if (m === null || String(q).trim() === '') throw new Error(`not a quantity: ${JSON.stringify(q)}`);
  const [, sign, whole = '', fraction = '', exponent, suffix = ''] = m;
  let numerator = BigInt(`0${whole}${fraction}`);
  let denominator = 10n ** BigInt(fraction.length);
  if (exponent !== undefined) {
    const e = BigInt(exponent);
    if (e >= 0n) numerator *= 10n ** e;
    else denominator *= 10n ** -e;
  } else {
    const [times, per] = Suffixes[suffix]!;
    numerator *= times;
    denominator *= per;
  }
  const scaled = numerator * 10n ** 9n;
  let nanos = scaled / denominator + (scaled % denominator === 0n ? 0n : 1n);
  if (suffix.endsWith('i') && nanos > BINARY_CAP) nanos = BINARY_CAP;
  return sign === '-' ? -nanos : nanos;
}

function container(c: Obj, at: string, role: 'init' | 'sidecar' | 'regular', errs: string[]): void {
  if (typeof c.name !== 'string' || !Dns1123Label.test(c.name) || c.name.length > 63) errs.push(`${at}.name: Invalid value: ${JSON.stringify(c.name)}`);
  if (typeof c.image !== 'string' || c.image.trim() === '') errs.push(`${at}.image: Required value`);
  if (c.restartPolicy !== undefined && !(role !== 'regular' && c.restartPolicy === 'Always')) errs.push(`${at}.restartPolicy: Forbidden`);
  for (const key of ['command', 'args']) {
    if (c[key] !== undefined && !(Array.isArray(c[key]) && c[key].every((s: unknown) => typeof s === 'string')))
      errs.push(`${at}.${key}: must be a list of strings`);
  }
  const ports = c.ports ?? [];
  ports.forEach((p: Obj, i: number) => {
    if (!isPort(p.containerPort)) errs.push(`${at}.ports[${i}].containerPort: Invalid value: ${JSON.stringify(p.containerPort)}: must be between 1 and 65535`);
    if (p.hostPort !== undefined && !isPort(p.hostPort)) errs.push(`${at}.ports[${i}].hostPort: Invalid value: ${JSON.stringify(p.hostPort)}`);
    if (p.name !== undefined && !(typeof p.name === 'string' && p.name.length <= 15 && PortName.test(p.name)))
      errs.push(`${at}.ports[${i}].name: Invalid value: ${JSON.stringify(p.name)}`);
    if (p.protocol !== undefined && !['TCP', 'UDP', 'SCTP'].includes(p.protocol))
      errs.push(`${at}.ports[${i}].protocol: Unsupported value: ${JSON.stringify(p.protocol)}`);
  });
  (c.env ?? []).forEach((e: Obj, i: number) => {
    if (typeof e.name !== 'string' || e.name === '' || e.name.includes('=')) errs.push(`${at}.env[${i}].name: Invalid value: ${JSON.stringify(e.name)}`);
    if (e.value !== undefined && typeof e.value !== 'string') errs.push(`${at}.env[${i}].value: must be a string, got ${JSON.stringify(e.value)}`);
    if (e.valueFrom !== undefined) {
      const n = ['fieldRef', 'resourceFieldRef', 'configMapKeyRef', 'secretKeyRef', 'fileKeyRef'].filter((k) => e.valueFrom[k] != null).length;
      if (n !== 1) errs.push(`${at}.env[${i}].valueFrom: Invalid value: may not have more than one field specified at a time`);
      if (e.value !== undefined && e.value !== '') errs.push(`${at}.env[${i}].valueFrom: Invalid value: may not be specified when \`value\` is not empty`);
    }
  });
  (c.volumeMounts ?? []).forEach((m: Obj, i: number) => {
    if (typeof m.mountPath !== 'string' || m.mountPath === '') errs.push(`${at}.volumeMounts[${i}].mountPath: Required value`);
  });
  for (const probe of Probes) {
    const p = c[probe];
    if (p == null) continue;
    // validateInitContainers: probes only on restartable init containers (native sidecars).
    if (role === 'init') errs.push(`${at}.${probe}: Forbidden: may not be set for init containers without restartPolicy=Always`);
    handler(p, `${at}.${probe}`, errs);
    for (const k of ['initialDelaySeconds', 'timeoutSeconds', 'periodSeconds', 'successThreshold', 'failureThreshold']) {
      if (p[k] !== undefined && !(Number.isInteger(p[k]) && p[k] >= 0)) errs.push(`${at}.${probe}.${k}: Invalid value: ${JSON.stringify(p[k])}`);
    }
    if ((probe === 'livenessProbe' || probe === 'startupProbe') && p.successThreshold !== undefined && p.successThreshold !== 1)
      errs.push(`${at}.${probe}.successThreshold: must be 1`);
  }
  if (c.lifecycle != null) {
    if (role === 'init') errs.push(`${at}.lifecycle: Forbidden: may not be set for init containers without restartPolicy=Always`);
    for (const hook of ['postStart', 'preStop']) if (c.lifecycle[hook] != null) handler(c.lifecycle[hook], `${at}.lifecycle.${hook}`, errs);
    for (const k of Object.keys(c.lifecycle)) if (!['postStart', 'preStop', 'stopSignal'].includes(k)) errs.push(`${at}.lifecycle.${k}: unknown field`);
  }
  const sc = c.securityContext;
  if (sc != null) {
    for (const k of ['runAsUser', 'runAsGroup'])
      if (sc[k] !== undefined && !(Number.isInteger(sc[k]) && sc[k] >= 0)) errs.push(`${at}.securityContext.${k}: Invalid value: ${JSON.stringify(sc[k])}`);
    for (const k of ['runAsNonRoot', 'privileged', 'readOnlyRootFilesystem', 'allowPrivilegeEscalation'])
      if (sc[k] !== undefined && typeof sc[k] !== 'boolean') errs.push(`${at}.securityContext.${k}: must be a boolean, got ${JSON.stringify(sc[k])}`);
    if (sc.runAsNonRoot === true && sc.runAsUser === 0)
      errs.push(`${at}.securityContext.runAsNonRoot: Invalid value: true: runAsUser 0 cannot run as non-root`);
    if (sc.allowPrivilegeEscalation === false && sc.privileged === true)
      errs.push(`${at}.securityContext: Invalid value: cannot set allowPrivilegeEscalation to false and privileged to true`);
  }
}

function handler(h: Obj, at: string, errs: string[]): void {
  const set = Handlers.filter((k) => h[k] != null);
  if (set.length !== 1) errs.push(`${at}: Invalid value: must specify exactly one handler, got ${set.length}`);
  for (const kind of ['httpGet', 'tcpSocket', 'grpc']) {
    const action = h[kind];
    if (action == null) continue;
    const port = action.port;
    if (typeof port === 'number') {
      if (!isPort(port)) errs.push(`${at}.${kind}.port: Invalid value: ${port}: must be between 1 and 65535`);
    } else if (typeof port === 'string' && kind !== 'grpc') {
      if (!(port.length <= 15 && PortName.test(port))) errs.push(`${at}.${kind}.port: Invalid value: ${JSON.stringify(port)}`);
    } else {
      errs.push(`${at}.${kind}.port: Required value`);
    }
  }
  if (h.exec != null && !(Array.isArray(h.exec.command) && h.exec.command.length > 0)) errs.push(`${at}.exec.command: Required value`);
}

function volume(v: Obj, at: string, errs: string[]): void {
  if (typeof v.name !== 'string' || !Dns1123Label.test(v.name) || v.name.length > 63) errs.push(`${at}.name: Invalid value: ${JSON.stringify(v.name)}`);
  const sources = VolumeSources.filter((s) => v[s] != null);
  if (sources.length !== 1) errs.push(`${at}: Invalid value: must specify exactly one volume source, got ${sources.join(', ') || 'none'}`);
  for (const s of ['secret', 'configMap', 'projected', 'downwardAPI']) if (v[s] != null) fileMode(v[s].defaultMode, `${at}.${s}.defaultMode`, errs);
  for (const s of ['secret', 'configMap']) (v[s]?.items ?? []).forEach((item: Obj, i: number) => fileMode(item.mode, `${at}.${s}.items[${i}].mode`, errs));
  (v.downwardAPI?.items ?? []).forEach((item: Obj, i: number) => fileMode(item.mode, `${at}.downwardAPI.items[${i}].mode`, errs));
  (v.projected?.sources ?? []).forEach((src: Obj, i: number) => {
    for (const s of ['secret', 'configMap', 'downwardAPI'])
      (src[s]?.items ?? []).forEach((item: Obj, j: number) => fileMode(item.mode, `${at}.projected.sources[${i}].${s}.items[${j}].mode`, errs));
    const token = src.serviceAccountToken;
    if (token != null && token.expirationSeconds !== undefined && !(Number.isInteger(token.expirationSeconds) && token.expirationSeconds >= 600)) {
      errs.push(`${at}.projected.sources[${i}].serviceAccountToken.expirationSeconds: Invalid value: may not specify a duration less than 10 minutes`);
    }
  });
  if (
    v.emptyDir != null &&
    v.emptyDir.medium !== undefined &&
    !['', 'Memory', 'HugePages'].includes(v.emptyDir.medium) &&
    !String(v.emptyDir.medium).startsWith('HugePages-')
  ) {
    errs.push(`${at}.emptyDir.medium: Unsupported value: ${JSON.stringify(v.emptyDir.medium)}`);
  }
}

// validation.go validateProjectionSources / validateSecretVolumeSource: "must be a number between 0 and 0777 (octal), both inclusive".
function fileMode(mode: unknown, at: string, errs: string[]): void {
  if (mode === undefined) return;
  if (!(Number.isInteger(mode) && (mode as number) >= 0 && (mode as number) <= 0o777))
    errs.push(`${at}: Invalid value: ${JSON.stringify(mode)}: must be a number between 0 and 0777 (octal), both inclusive`);
}

function isPort(p: unknown): boolean {
  return Number.isInteger(p) && (p as number) >= 1 && (p as number) <= 65535;
}
