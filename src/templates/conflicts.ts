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

/** One name (or port) a template wants in the pod, keyed so that two wants of the same thing meet. */
interface Claim {
  /** `container:NAME`, `volume:NAME`, `env:NAME`, `mount:PATH`, `port:N/PROTOCOL`. */
  readonly key: string;
  /** How a conflict names it: `container "mesh"`. */
  readonly what: string;
  readonly template: string;
  readonly path: string;
  readonly value: unknown;
  /** Two identical definitions are shared, not a conflict (volumes, env vars, mounts). */
  readonly sameIsFine: boolean;
}

/**
 * The claims of the templates taken so far in one scope (a pod's selection, a namespace's
 * defaults), in one map: checking a template costs time linear in its own size, whatever the number
 * taken before it, so taking n templates is linear in their total size
 * (test/templates/conflicts.test.ts, "linear"). `check` does not add: a caller that refuses a
 * template (a default that clashes) leaves its claims out.
 */
export class Claims {
  readonly #claims = new Map<string, Claim>();

  /** How `r` clashes with the templates added so far: one conflict per claim an earlier template holds differently. */
  check(r: RenderedTemplate): Conflict[] {
    const out: Conflict[] = [];
    for (const c of claimsOf(r)) {
      const prior = this.#claims.get(c.key);
      if (prior === undefined || prior.template === c.template) continue;
      if (c.sameIsFine && isSubset(c.value, prior.value) && isSubset(prior.value, c.value)) continue;
      out.push({ template: c.template, with: prior.template, path: c.path, message: `${c.what} is defined by both template "${prior.template}" and template "${c.template}"` });
    }
    return out;
  }

  /** Takes `r`'s claims; a key already held keeps its first holder. */
  add(r: RenderedTemplate): void {
    for (const c of claimsOf(r)) if (!this.#claims.has(c.key)) this.#claims.set(c.key, c);
  }
}

/**
 * Finds what the selected templates cannot all have in one pod: a container name used twice (across
 * containers and init containers), a volume, env var or mount path defined differently, a port
 * number used by two sidecars (all containers share the pod's network namespace). The same
 * volume defined identically by two templates is shared, not a conflict.
 */
export function findConflicts(rendered: readonly RenderedTemplate[]): Conflict[] {
  if (rendered.length < 2) return [];
  const claims = new Claims();
  const out: Conflict[] = [];
  for (const r of rendered) {
    out.push(...claims.check(r));
    claims.add(r);
  }
  return out;
}

/** Every claim of one rendered template, in the order of its fields. */
function claimsOf(r: RenderedTemplate): Claim[] {
  const template = r.name;
  const out: Claim[] = [];
  const lists: [readonly Container[], string][] = [[r.containers, '/spec/containers'], [r.initContainers, '/spec/initContainers']];
  for (const [list, base] of lists) {
    list.forEach((c, i) => {
      out.push({ key: `container:${c.name}`, what: `container "${c.name}"`, template, path: `${base}/${i}/name`, value: c, sameIsFine: false });
      (c.ports ?? []).forEach((p, j) => out.push(portClaim(p, `${base}/${i}/ports/${j}`, template)));
    });
  }
  r.volumes.forEach((v, i) => out.push({ key: `volume:${v.name}`, what: `volume "${v.name}"`, template, path: `/spec/volumes/${i}/name`, value: v, sameIsFine: true }));
  r.env.forEach((e, i) => out.push({ key: `env:${e.name}`, what: `env var "${e.name}" for the application containers`, template, path: `/spec/env/${i}/name`, value: e, sameIsFine: true }));
  r.volumeMounts.forEach((m, i) => out.push({ key: `mount:${m.mountPath}`, what: `mount path ${m.mountPath} in the application containers`, template, path: `/spec/volumeMounts/${i}/mountPath`, value: m, sameIsFine: true }));
  return out;
}

function portClaim(p: JsonObject, path: string, template: string): Claim {
  // A port name shared by two containers is not a conflict: Kubernetes only warns of it
  // (pkg/api/pod/warnings.go), each probe resolves a named port in its own container, and the
  // apiserver's warning already reaches the user. Two sidecars binding one port number cannot work.
  const protocol = typeof p['protocol'] === 'string' ? p['protocol'] : 'TCP';
  const port = `${String(p['containerPort'])}/${protocol}`;
  return { key: `port:${port}`, what: `port ${port}`, template, path: `${path}/containerPort`, value: p, sameIsFine: false };
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
