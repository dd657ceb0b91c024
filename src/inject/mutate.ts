import { InjectorError } from '../errors.js';
import type { Container, NamedItem, Pod, PodSpec, VolumeMount } from '../kube/types.js';
import { insertPlaced, placementsOf } from '../templates/placement.js';
import type { CompiledTemplate, RenderedTemplate } from '../templates/template.js';
import { Keys } from './keys.js';
import { renderForPod, withTemplateKeys, type InjectionContext } from './render.js';
import { encodeStatus, statusOf, type InjectionStatus } from './status.js';

export type { InjectionStatus } from './status.js';

export interface InjectionResult {
  /** The mutated pod. Unchanged branches are the input's own objects (copy-on-write). */
  readonly pod: Pod;
  readonly status: InjectionStatus;
  /**
   * Sent back as AdmissionResponse warnings: where the pod's own definition won over a template's,
   * annotations under a template's prefix that were ignored, regular sidecars in a Job's pod.
   */
  readonly warnings: readonly string[];
}

/**
 * Injects the rendered templates into a pod. Pure: the input is never modified, and injecting the
 * result again changes nothing, because every item is keyed by name and an item the pod already
 * has under that name is left as the pod has it. Throws OVERRIDE_REFUSED or TEMPLATE_CONFLICT
 * (see renderForPod); sidecars go where each template's `placement` says.
 */
export function injectSidecars(pod: Pod, templates: readonly CompiledTemplate[], namespace: string, context: InjectionContext = {}): InjectionResult {
  const { templates: rendered, warnings: renderWarnings } = renderForPod(pod, templates, namespace, context);
  const warnings: string[] = [...renderWarnings];
  const spec: PodSpec = pod.spec ?? {};
  const meta = pod.metadata ?? {};

  const sidecars = placeSidecars(spec, rendered, warnings);
  const sidecarNames = new Set(rendered.flatMap((r) => r.containers.map((c) => c.name)));
  const appEnv = rendered.flatMap((r) => r.env.map((e) => [e, r.name] as const));
  const appMounts = rendered.flatMap((r) => r.volumeMounts.map((m) => [m, r.name] as const));
  const ownContainers = (spec.containers ?? []).map((c) =>
    sidecarNames.has(c.name) ? c : extendContainer(c, appEnv, appMounts, warnings),
  );

  const status: InjectionStatus = statusOf(rendered);
  const newSpec: PodSpec = { ...spec, containers: insertPlaced(ownContainers, placementsOf(sidecars.containers, rendered, false)) ?? ownContainers };
  setList(newSpec, 'initContainers', insertPlaced(spec.initContainers, placementsOf(sidecars.initContainers, rendered, true)));
  setList(newSpec, 'volumes', mergeNamed(spec.volumes, rendered.flatMap((r) => r.volumes.map((v) => [v, r.name] as const)), (n) => `volume "${n}"`, warnings));
  setList(newSpec, 'imagePullSecrets', mergeNamed(spec.imagePullSecrets, rendered.flatMap((r) => r.imagePullSecrets.map((v) => [v, r.name] as const)), (n) => `imagePullSecret "${n}"`, warnings));

  if (context.lenientMounts !== true) checkMounts(newSpec, [...sidecars.containers, ...sidecars.initContainers], rendered, ownContainers.length > 0);

  // The pod's own maps are copied only when something is added to them (annotations always: the
  // status), never walked: a pod may carry tens of thousands of keys (issue 11).
  const ownAnnotations = meta.annotations ?? NONE;
  const merged = mergeMap(ownAnnotations, rendered, 'annotations', warnings);
  const annotations: Record<string, string> = merged === ownAnnotations ? { ...ownAnnotations } : (merged as Record<string, string>);
  annotations[Keys.status] = encodeStatus(status);
  const ownLabels = meta.labels ?? NONE;
  const labels = mergeMap(ownLabels, rendered, 'labels', warnings);
  const newMeta = { ...meta, annotations };
  if (labels !== ownLabels) newMeta.labels = labels as Record<string, string>;
  return { pod: { ...pod, metadata: newMeta, spec: newSpec }, status, warnings };
}

/**
 * Every mount the injection adds must name a volume of the finished pod, or the apiserver rejects the
 * pod after the patch (422, whatever the failurePolicy). A template may mount a volume the pod is
 * expected to bring; when the pod does not, the answer is a denial that names the template.
 */
function checkMounts(spec: PodSpec, placed: readonly Container[], rendered: readonly RenderedTemplate[], hasApps: boolean): void {
  const volumes = new Set((spec.volumes ?? []).map((v) => v.name));
  const owner = new Map(rendered.flatMap((r) => [...r.containers, ...r.initContainers].map((c) => [c, r.name] as const)));
  const missing: string[] = [];
  for (const c of placed) {
    for (const m of c.volumeMounts ?? []) {
      if (!volumes.has(m.name)) missing.push(`"${m.name}" (container "${c.name}" of template "${owner.get(c) ?? '?'}")`);
    }
  }
  for (const r of hasApps ? rendered : []) {
    for (const m of r.volumeMounts) {
      if (!volumes.has(m.name)) missing.push(`"${m.name}" (application mounts of template "${r.name}")`);
    }
  }
  if (missing.length > 0) throw new InjectorError('TEMPLATE_VOLUME_MISSING', [missing.join(', ')]);
}

/** Sidecar containers to add: native ones (and template init containers) go ahead of the pod's init containers. */
function placeSidecars(spec: PodSpec, rendered: readonly RenderedTemplate[], warnings: string[]): { containers: Container[]; initContainers: Container[] } {
  // Container names are unique across containers and init containers (core/v1 pod validation).
  const taken = new Map<string, Container>();
  for (const c of spec.initContainers ?? []) taken.set(c.name, c);
  for (const c of spec.containers ?? []) taken.set(c.name, c);
  const out = { containers: [] as Container[], initContainers: [] as Container[] };
  const place = (c: Container, list: Container[], template: string): void => {
    const existing = taken.get(c.name);
    if (existing === undefined) {
      taken.set(c.name, c);
      list.push(c);
    } else if (!isSubset(c, existing)) {
      warnings.push(`container "${c.name}" of template "${template}" already exists in the pod and differs; the pod's definition was kept`);
    }
  };
  for (const r of rendered) {
    for (const c of r.initContainers) place(c, out.initContainers, r.name);
    for (const c of r.containers) place(c, r.nativeSidecar ? out.initContainers : out.containers, r.name);
  }
  return out;
}

/** Adds the template env vars and mounts to one application container, keeping what it already has. */
function extendContainer(c: Container, env: readonly (readonly [NamedItem, string])[], mounts: readonly (readonly [VolumeMount, string])[], warnings: string[]): Container {
  const newEnv = mergeNamed(c.env, env, (n) => `env var "${n}" in container "${c.name}"`, warnings);
  const newMounts = mergeMounts(c, mounts, warnings);
  if (newEnv === c.env && newMounts === c.volumeMounts) return c;
  const out: Container = { ...c };
  if (newEnv !== undefined) out.env = newEnv;
  if (newMounts !== undefined) out.volumeMounts = newMounts;
  return out;
}

/** A mount is skipped when the container already mounts that volume or already uses that path. */
function mergeMounts(c: Container, mounts: readonly (readonly [VolumeMount, string])[], warnings: string[]): VolumeMount[] | undefined {
  const own = c.volumeMounts;
  if (mounts.length === 0) return own;
  // Only the pod's mounts that the templates' could clash with are indexed: a container may hold a
  // thousand mounts, and this runs for every application container (issue 11).
  const wantedNames = new Set(mounts.map(([m]) => m.name));
  const wantedPaths = new Set(mounts.map(([m]) => m.mountPath));
  const names = new Map<string, VolumeMount>();
  const paths = new Map<string, VolumeMount>();
  for (const m of own ?? []) {
    if (wantedNames.has(m.name)) names.set(m.name, m);
    if (wantedPaths.has(m.mountPath)) paths.set(m.mountPath, m);
  }
  const added: VolumeMount[] = [];
  for (const [m, template] of mounts) {
    const existing = names.get(m.name) ?? paths.get(m.mountPath);
    if (existing === undefined) {
      added.push(m);
      names.set(m.name, m);
      paths.set(m.mountPath, m);
    } else if (!isSubset(m, existing)) {
      warnings.push(`volume mount "${m.name}" at ${m.mountPath} of template "${template}" conflicts with the mount "${existing.name}" at ${existing.mountPath} in container "${c.name}"; the pod's was kept`);
    }
  }
  return added.length === 0 ? own : [...(own ?? []), ...added];
}

/** Appends the template's items that the pod does not have by name; returns `own` itself when nothing is new. */
function mergeNamed<T extends NamedItem>(own: T[] | undefined, items: readonly (readonly [T, string])[], what: (name: string) => string, warnings: string[]): T[] | undefined {
  if (items.length === 0) return own;
  // Only the pod's items with a name the templates use are indexed: a container may hold a thousand
  // env vars, and this runs for every application container (issue 11).
  const wanted = new Set(items.map(([item]) => item.name));
  const byName = new Map<string, T>();
  for (const i of own ?? []) if (wanted.has(i.name)) byName.set(i.name, i);
  const added: T[] = [];
  for (const [item, template] of items) {
    const existing = byName.get(item.name);
    if (existing === undefined) {
      added.push(item);
      byName.set(item.name, item);
    } else if (!isSubset(item, existing)) {
      warnings.push(`${what(item.name)} of template "${template}" already exists in the pod and differs; the pod's value was kept`);
    }
  }
  return added.length === 0 ? own : [...(own ?? []), ...added];
}

const NONE: Readonly<Record<string, string>> = Object.freeze({});

/**
 * Adds the templates' annotations or labels that the pod does not set, warning of each template
 * value the pod's overrode. Returns `own` itself when nothing is added, else a new map.
 */
function mergeMap(own: Readonly<Record<string, string>>, rendered: readonly RenderedTemplate[], field: 'annotations' | 'labels', warnings: string[]): Readonly<Record<string, string>> {
  const what = field === 'labels' ? 'label' : 'annotation';
  const kept = (key: string, template: string): void => void warnings.push(`${what} "${key}" of template "${template}" is already set on the pod; the pod's value was kept`);
  return withTemplateKeys(own, rendered, field, kept);
}

function setList<K extends 'initContainers' | 'volumes' | 'imagePullSecrets'>(spec: PodSpec, key: K, value: PodSpec[K] | undefined): void {
  if (value !== undefined) spec[key] = value;
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
