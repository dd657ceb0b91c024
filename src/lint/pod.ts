import type { Container, JsonObject, Pod } from '../kube/types.js';
import { volumeSources } from '../templates/schema.js';

/**
 * Checks a pod the way the apiserver would after the patch (the parts of pkg/apis/core/validation an
 * injection can break) and against a Pod Security Standards level (k8s.io/pod-security-admission,
 * policy/check_*.go, version "latest"). Used by `lint` on sample pods with the templates injected.
 */

/** Pod Security Standards levels lint checks against (`none`: privileged, nothing checked), strictest last. */
export const PodSecurityLevel = { None: 'none', Baseline: 'baseline', Restricted: 'restricted' } as const;
export type PodSecurityLevel = (typeof PodSecurityLevel)[keyof typeof PodSecurityLevel];

/** One problem, tied to a container or a volume of the pod when it has one. */
export interface PodFault {
  readonly message: string;
  /** The container at fault, and the JSON pointer inside it (e.g. `/securityContext/runAsNonRoot`). */
  readonly container?: string;
  readonly volume?: string;
  /** For a dangling mount: the volume it names. */
  readonly mount?: string;
  readonly path: string;
  /** For a fault between two containers (a port both declare): the other one, and the pointer inside it. */
  readonly other?: { readonly container: string; readonly path: string };
}

const BASELINE_CAPABILITIES = new Set([
  'AUDIT_WRITE',
  'CHOWN',
  'DAC_OVERRIDE',
  'FOWNER',
  'FSETID',
  'KILL',
  'MKNOD',
  'NET_BIND_SERVICE',
  'SETFCAP',
  'SETGID',
  'SETPCAP',
  'SETUID',
  'SYS_CHROOT',
]);
const RESTRICTED_VOLUMES = new Set(['configMap', 'csi', 'downwardAPI', 'emptyDir', 'ephemeral', 'persistentVolumeClaim', 'projected', 'secret']);
const SELINUX_TYPES = new Set(['', 'container_t', 'container_init_t', 'container_kvm_t', 'container_engine_t']);

/** Every problem of the pod: validity first, then the Pod Security level. */
export function podFaults(pod: Pod, level: PodSecurityLevel): PodFault[] {
  const faults = validity(pod);
  if (level !== PodSecurityLevel.None) faults.push(...baseline(pod));
  if (level === PodSecurityLevel.Restricted) faults.push(...restricted(pod));
  return faults;
}

function allContainers(pod: Pod): { c: Container; init: boolean }[] {
  const spec = pod.spec ?? {};
  return [...(spec.initContainers ?? []).map((c) => ({ c, init: true })), ...(spec.containers ?? []).map((c) => ({ c, init: false }))];
}

function validity(pod: Pod): PodFault[] {
  const out: PodFault[] = [];
  const volumes = new Set<string>();
  for (const v of pod.spec?.volumes ?? []) {
    if (volumes.has(v.name)) out.push({ volume: v.name, path: '/name', message: `duplicate volume name "${v.name}" in the pod` });
    volumes.add(v.name);
  }
  const names = new Set<string>();
  const portNames = new Map<string, string>();
  const portNumbers = new Map<string, { readonly container: string; readonly path: string }>();
  for (const { c, init } of allContainers(pod)) {
    const at = { container: c.name };
    if (names.has(c.name)) out.push({ ...at, path: '/name', message: `duplicate container name "${c.name}" in the pod` });
    names.add(c.name);
    if (!init && c.restartPolicy !== undefined)
      out.push({ ...at, path: '/restartPolicy', message: 'restartPolicy is only allowed on init containers (native sidecars)' });
    const paths = new Set<string>();
    (c.volumeMounts ?? []).forEach((m, i) => {
      if (!volumes.has(m.name))
        out.push({
          ...at,
          mount: m.name,
          path: `/volumeMounts/${i}/name`,
          message: `container "${c.name}" mounts volume "${m.name}", which the pod does not have`,
        });
      if (paths.has(m.mountPath))
        out.push({ ...at, mount: m.name, path: `/volumeMounts/${i}/mountPath`, message: `container "${c.name}" mounts ${m.mountPath} twice` });
      paths.add(m.mountPath);
    });
    // A run-to-completion init container has exited before the others start: its ports bind nothing then.
    if (!init || c.restartPolicy === 'Always') (c.ports ?? []).forEach((p, i) => portFaults(p, `/ports/${i}`, c.name, portNames, portNumbers, out));
  }
  return out;
}

// Services and probes select ports by name, and all containers share one network namespace.
function portFaults(
  p: JsonObject,
  path: string,
  container: string,
  names: Map<string, string>,
  numbers: Map<string, { readonly container: string; readonly path: string }>,
  out: PodFault[],
): void {
  const name = p['name'];
  if (typeof name === 'string') {
    const other = names.get(name);
    // pkg/api/pod/warnings.go: only a warning; Services and probes selecting the name use the first.
    if (other !== undefined)
      out.push({
        container,
        path: `${path}/name`,
        message: `port name "${name}" is also used by container "${other}"; a Service whose targetPort names it reaches the first container that declares it, while probes use their own container's port (Kubernetes only warns)`,
      });
    else names.set(name, container);
  }
  const key = `${String(p['containerPort'])}/${typeof p['protocol'] === 'string' ? p['protocol'] : 'TCP'}`;
  // Only a warning too ("duplicate port definition"), though one of the two processes cannot bind it.
  const first = numbers.get(key);
  if (first !== undefined)
    out.push({
      container,
      path: `${path}/containerPort`,
      other: first,
      message: `port ${key} is declared by both container "${first.container}" and container "${container}"; one of them will fail to bind`,
    });
  else numbers.set(key, { container, path: `${path}/containerPort` });
}

type SecurityContext = {
  privileged?: boolean;
  allowPrivilegeEscalation?: boolean;
  runAsNonRoot?: boolean;
  runAsUser?: number;
  procMount?: string;
  capabilities?: { add?: string[]; drop?: string[] };
  seccompProfile?: { type?: string };
  seLinuxOptions?: { type?: string; user?: string; role?: string };
  appArmorProfile?: { type?: string };
  windowsOptions?: { hostProcess?: boolean };
};

function contextOf(c: Container): SecurityContext {
  return (c['securityContext'] ?? {}) as SecurityContext;
}

function podContext(pod: Pod): SecurityContext {
  return (pod.spec?.['securityContext'] ?? {}) as SecurityContext;
}

function baseline(pod: Pod): PodFault[] {
  const out: PodFault[] = [];
  for (const key of ['hostNetwork', 'hostPID', 'hostIPC'] as const) {
    if (pod.spec?.[key] === true) out.push({ path: `/spec/${key}`, message: `${key} is not allowed (Pod Security baseline)` });
  }
  for (const v of pod.spec?.volumes ?? []) {
    if ('hostPath' in v) out.push({ volume: v.name, path: '/hostPath', message: `volume "${v.name}" is a hostPath volume (Pod Security baseline forbids it)` });
  }
  for (const { c } of allContainers(pod)) {
    const sc = contextOf(c);
    const f = (path: string, message: string): void =>
      void out.push({ container: c.name, path: `/securityContext${path}`, message: `container "${c.name}": ${message}` });
    if (sc.privileged === true) f('/privileged', 'privileged containers are not allowed (Pod Security baseline)');
    if (sc.windowsOptions?.hostProcess === true) f('/windowsOptions/hostProcess', 'hostProcess is not allowed (Pod Security baseline)');
    const extra = (sc.capabilities?.add ?? []).filter((cap) => !BASELINE_CAPABILITIES.has(cap));
    if (extra.length > 0) f('/capabilities/add', `capabilities ${extra.join(', ')} are not allowed (Pod Security baseline)`);
    if (sc.procMount !== undefined && sc.procMount !== 'Default') f('/procMount', 'procMount must be Default (Pod Security baseline)');
    if (sc.seccompProfile?.type === 'Unconfined') f('/seccompProfile/type', 'seccompProfile Unconfined is not allowed (Pod Security baseline)');
    if (sc.appArmorProfile?.type === 'Unconfined') f('/appArmorProfile/type', 'appArmorProfile Unconfined is not allowed (Pod Security baseline)');
    if (!SELINUX_TYPES.has(sc.seLinuxOptions?.type ?? '') || sc.seLinuxOptions?.user || sc.seLinuxOptions?.role)
      f('/seLinuxOptions', 'seLinuxOptions may only set an allowed type (Pod Security baseline)');
    (c.ports ?? []).forEach((p, i) => {
      if (typeof p['hostPort'] === 'number' && p['hostPort'] !== 0)
        out.push({ container: c.name, path: `/ports/${i}/hostPort`, message: `container "${c.name}": hostPort is not allowed (Pod Security baseline)` });
    });
  }
  return out;
}

function restricted(pod: Pod): PodFault[] {
  const out: PodFault[] = [];
  const podSc = podContext(pod);
  for (const v of pod.spec?.volumes ?? []) {
    // A volume with no source (or `emptyDir:` left empty) is defaulted to an emptyDir.
    const type = volumeSources(v)[0] ?? 'emptyDir';
    if (!RESTRICTED_VOLUMES.has(type) && type !== 'hostPath')
      out.push({
        volume: v.name,
        path: `/${type}`,
        message: `volume "${v.name}" of type ${type} is not allowed (Pod Security restricted allows ${[...RESTRICTED_VOLUMES].join(', ')})`,
      });
  }
  for (const { c } of allContainers(pod)) {
    const sc = contextOf(c);
    const f = (path: string, message: string): void =>
      void out.push({ container: c.name, path: `/securityContext${path}`, message: `container "${c.name}": ${message} (Pod Security restricted)` });
    if (sc.allowPrivilegeEscalation !== false) f('/allowPrivilegeEscalation', 'allowPrivilegeEscalation must be false');
    const nonRoot = sc.runAsNonRoot ?? podSc.runAsNonRoot;
    if (nonRoot !== true) f('/runAsNonRoot', 'runAsNonRoot must be true');
    if ((sc.runAsUser ?? podSc.runAsUser) === 0) f('/runAsUser', 'runAsUser must not be 0');
    const seccomp = sc.seccompProfile?.type ?? podSc.seccompProfile?.type;
    if (seccomp !== 'RuntimeDefault' && seccomp !== 'Localhost') f('/seccompProfile/type', 'seccompProfile.type must be RuntimeDefault or Localhost');
    if (!(sc.capabilities?.drop ?? []).includes('ALL')) f('/capabilities/drop', 'capabilities.drop must include ALL');
    const added = (sc.capabilities?.add ?? []).filter((cap) => cap !== 'NET_BIND_SERVICE');
    if (added.length > 0) f('/capabilities/add', `only NET_BIND_SERVICE may be added, not ${added.join(', ')}`);
  }
  return out;
}
