import type { Container, JsonObject } from '../kube/types.js';
import type { RenderedTemplate } from './template.js';

/** Two selected templates that want the same name (or port) for different things. */
export interface Conflict {
  /** The later template in the selection, which would lose. */
  readonly template: string;
  /** The earlier template it clashes with. */
  readonly with: string;
  /** JSON pointer inside the later template, e.g. `/spec/volumes/0/name`. */
  readonly path: string;
  readonly message: string;
}

interface Claim {
  readonly template: string;
  readonly path: string;
  readonly value: unknown;
}

/**
 * Finds what the selected templates cannot all have in one pod: a container name used twice (across
 * containers and init containers), a volume, env var or mount path defined differently, a port
 * number used by two sidecars (all containers share the pod's network namespace). The same
 * volume defined identically by two templates is shared, not a conflict.
 */
export function findConflicts(rendered: readonly RenderedTemplate[]): Conflict[] {
  if (rendered.length < 2) return [];
  const out: Conflict[] = [];
  const claims = new Map<string, Claim>();
  const claim = (key: string, what: string, c: Claim, sameIsFine: boolean): void => {
    const prior = claims.get(key);
    if (prior === undefined) return void claims.set(key, c);
    if (prior.template === c.template) return;
    if (sameIsFine && isSubset(c.value, prior.value) && isSubset(prior.value, c.value)) return;
    out.push({ template: c.template, with: prior.template, path: c.path, message: `${what} is defined by both template "${prior.template}" and template "${c.template}"` });
  };
  for (const r of rendered) {
    const t = r.name;
    const lists: [readonly Container[], string][] = [[r.containers, '/spec/containers'], [r.initContainers, '/spec/initContainers']];
    for (const [list, base] of lists) {
      list.forEach((c, i) => {
        claim(`container:${c.name}`, `container "${c.name}"`, { template: t, path: `${base}/${i}/name`, value: c }, false);
        (c.ports ?? []).forEach((p, j) => portClaims(p, `${base}/${i}/ports/${j}`, t, claim));
      });
    }
    r.volumes.forEach((v, i) => claim(`volume:${v.name}`, `volume "${v.name}"`, { template: t, path: `/spec/volumes/${i}/name`, value: v }, true));
    r.env.forEach((e, i) => claim(`env:${e.name}`, `env var "${e.name}" for the application containers`, { template: t, path: `/spec/env/${i}/name`, value: e }, true));
    r.volumeMounts.forEach((m, i) => claim(`mount:${m.mountPath}`, `mount path ${m.mountPath} in the application containers`, { template: t, path: `/spec/volumeMounts/${i}/mountPath`, value: m }, true));
  }
  return out;
}

function portClaims(p: JsonObject, path: string, template: string, claim: (key: string, what: string, c: Claim, sameIsFine: boolean) => void): void {
  // A port name shared by two containers is not a conflict: Kubernetes only warns of it
  // (pkg/api/pod/warnings.go), each probe resolves a named port in its own container, and the
  // apiserver's warning already reaches the user. Two sidecars binding one port number cannot work.
  const protocol = typeof p['protocol'] === 'string' ? p['protocol'] : 'TCP';
  claim(`port:${String(p['containerPort'])}/${protocol}`, `port ${String(p['containerPort'])}/${protocol}`, { template, path: `${path}/containerPort`, value: p }, false);
}

/**
 * True when every field the template sets has the same value in the pod's item. The apiserver adds
 * defaults (imagePullPolicy, terminationMessagePath, protocol) after a patch, so a re-invoked review
 * sees more fields than the template wrote; those extra fields are not a difference.
 */
export function isSubset(template: unknown, actual: unknown): boolean {
  if (template === actual) return true;
  // Go's encoder omits zero values (omitempty), so `readOnly: false` comes back absent.
  if (actual === undefined || actual === null) return isZero(template);
  if (Array.isArray(template)) {
    return Array.isArray(actual) && template.length === actual.length && template.every((t, i) => isSubset(t, actual[i]));
  }
  if (typeof template === 'object' && template !== null) {
    if (typeof actual !== 'object' || actual === null || Array.isArray(actual)) return false;
    const a = actual as Record<string, unknown>;
    return Object.entries(template).every(([k, v]) => isSubset(v, a[k]));
  }
  // A list or object where the template has a value differs; String() of it could throw (a key
  // named toString) or walk it.
  if (typeof actual === 'object') return false;
  // Quantities written as numbers in YAML come back from the apiserver as strings.
  return String(template) === String(actual);
}

function isZero(v: unknown): boolean {
  if (Array.isArray(v)) return v.length === 0;
  if (typeof v === 'object' && v !== null) return Object.keys(v).length === 0;
  return v === false || v === 0 || v === '' || v === null || v === undefined;
}
