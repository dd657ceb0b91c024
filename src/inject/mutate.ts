import { MetadataLimits } from '../kube/types.js';
import { InjectorError } from '../errors.js';
import type { Container, NamedItem, Pod, PodSpec, VolumeMount } from '../kube/types.js';
import { isSubset } from '../templates/conflicts.js';
import { insertPlaced, type Placement } from '../templates/placement.js';
import type { CompiledTemplate } from '../templates/template.js';
import { Keys } from './keys.js';
import type { InjectionPlan, Owned, Sidecar } from './plan.js';
import { renderForPod, withTemplateKeys, type InjectionContext } from './render.js';
import type { InjectionStatus } from './status.js';

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
  const { plan, warnings: renderWarnings } = renderForPod(pod, templates, namespace, context);
  const warnings: string[] = [...renderWarnings];
  const spec: PodSpec = pod.spec ?? {};
  const meta = pod.metadata ?? {};

  const placed = placeSidecars(spec, plan.sidecars, warnings);
  const ownContainers = extendContainers(spec.containers ?? [], plan, warnings);
  const newSpec: PodSpec = { ...spec, containers: insertPlaced(ownContainers, placed.containers) ?? ownContainers };
  setList(newSpec, 'initContainers', insertPlaced(spec.initContainers, placed.initContainers));
  setList(newSpec, 'volumes', mergeNamed(spec.volumes, plan.volumes, plan.wanted.volumes, (n) => `volume "${n}"`, warnings));
  setList(newSpec, 'imagePullSecrets', mergeNamed(spec.imagePullSecrets, plan.imagePullSecrets, plan.wanted.imagePullSecrets, (n) => `imagePullSecret "${n}"`, warnings));

  if (context.lenientMounts !== true) checkMounts(newSpec, placed.sidecars, plan, ownContainers.length > 0);

  // The pod's own maps are copied only when something is added to them (annotations always: the
  // status), never walked: a pod may carry tens of thousands of keys (issue 11).
  const ownAnnotations = meta.annotations ?? NONE;
  const merged = mergeMap(ownAnnotations, plan.annotations, 'annotation', warnings);
  const annotations: Record<string, string> = merged === ownAnnotations ? { ...ownAnnotations } : (merged as Record<string, string>);
  annotations[Keys.status] = plan.statusText;
  checkAnnotationBytes(annotations);
  const ownLabels = meta.labels ?? NONE;
  const labels = mergeMap(ownLabels, plan.labels, 'label', warnings);
  const newMeta = { ...meta, annotations };
  if (labels !== ownLabels) newMeta.labels = labels as Record<string, string>;
  return { pod: { ...pod, metadata: newMeta, spec: newSpec }, status: plan.status, warnings };
}

/**
 * The apiserver refuses a pod whose annotations take more than 256 KiB (ValidateAnnotationsSize,
 * keys plus values), after admission, with a message that does not name the injector: a pod just
 * under the limit goes over it with the status annotation. Refused here instead, saying why. The
 * pod's own annotations are within the limit (podObject), so only a map that could be over it, by
 * its UTF-16 length (a unit is at most 3 bytes of UTF-8), is measured byte by byte.
 */
function checkAnnotationBytes(annotations: Readonly<Record<string, string>>): void {
  let units = 0;
  for (const key in annotations) units += key.length + annotations[key]!.length;
  if (units * 3 <= MetadataLimits.annotationBytes) return;
  let bytes = 0;
  // Bytes of UTF-8, as Go's len() counts a string; only a map of some 87,000 characters or more gets here.
  for (const key in annotations) bytes += Buffer.byteLength(key) + Buffer.byteLength(annotations[key]!);
  if (bytes <= MetadataLimits.annotationBytes) return;
  const status = Buffer.byteLength(Keys.status) + Buffer.byteLength(annotations[Keys.status] ?? '');
  throw new InjectorError('ANNOTATIONS_TOO_LARGE', [bytes, Keys.status, status, MetadataLimits.annotationBytes]);
}

/**
 * Every mount the injection adds must name a volume of the finished pod, or the apiserver rejects the
 * pod after the patch (422, whatever the failurePolicy). A template may mount a volume the pod is
 * expected to bring; when the pod does not, the answer is a denial that names the template.
 */
function checkMounts(spec: PodSpec, placed: readonly Sidecar[], plan: InjectionPlan, hasApps: boolean): void {
  const volumes = new Set<string>();
  for (const v of spec.volumes ?? []) volumes.add(v.name);
  const missing: string[] = [];
  for (const { container: c, template } of placed) {
    for (const m of c.volumeMounts ?? []) {
      if (!volumes.has(m.name)) missing.push(`"${m.name}" (container "${c.name}" of template "${template}")`);
    }
  }
  for (const [m, template] of hasApps ? plan.volumeMounts : []) {
    if (!volumes.has(m.name)) missing.push(`"${m.name}" (application mounts of template "${template}")`);
  }
  if (missing.length > 0) throw new InjectorError('TEMPLATE_VOLUME_MISSING', [missing.join(', ')]);
}

interface Placed {
  /** The sidecars added, in the plan's order. */
  readonly sidecars: Sidecar[];
  readonly containers: [Container, Placement][];
  readonly initContainers: [Container, Placement][];
}

/** The sidecars the pod does not have yet; one it has under that name is kept as the pod has it. */
function placeSidecars(spec: PodSpec, sidecars: readonly Sidecar[], warnings: string[]): Placed {
  const out: Placed = { sidecars: [], containers: [], initContainers: [] };
  if (sidecars.length === 0) return out;
  // Container names are unique across containers and init containers (core/v1 pod validation).
  const taken = new Map<string, Container>();
  for (const c of spec.initContainers ?? []) taken.set(c.name, c);
  for (const c of spec.containers ?? []) taken.set(c.name, c);
  for (const s of sidecars) {
    const c = s.container;
    const existing = taken.get(c.name);
    if (existing === undefined) {
      taken.set(c.name, c);
      out.sidecars.push(s);
      (s.init ? out.initContainers : out.containers).push([c, s.placement]);
    } else if (!isSubset(c, existing)) {
      warnings.push(`container "${c.name}" of template "${s.template}" already exists in the pod and differs; the pod's definition was kept`);
    }
  }
  return out;
}

/** The pod's containers given the templates' env and mounts (sidecars of the same name excepted); `own` itself when none changes. */
function extendContainers(own: Container[], plan: InjectionPlan, warnings: string[]): Container[] {
  if (plan.env.length === 0 && plan.volumeMounts.length === 0) return own;
  let out: Container[] | undefined;
  for (let i = 0; i < own.length; i++) {
    const c = own[i]!;
    const extended = plan.sidecarNames.has(c.name) ? c : extendContainer(c, plan, warnings);
    if (extended === c) continue;
    out ??= own.slice();
    out[i] = extended;
  }
  return out ?? own;
}

/** Adds the template env vars and mounts to one application container, keeping what it already has. */
function extendContainer(c: Container, plan: InjectionPlan, warnings: string[]): Container {
  const newEnv = mergeNamed(c.env, plan.env, plan.wanted.env, (n) => `env var "${n}" in container "${c.name}"`, warnings);
  const newMounts = mergeMounts(c, plan, warnings);
  if (newEnv === c.env && newMounts === c.volumeMounts) return c;
  const out: Container = { ...c };
  if (newEnv !== undefined) out.env = newEnv;
  if (newMounts !== undefined) out.volumeMounts = newMounts;
  return out;
}

/** A mount is skipped when the container already mounts that volume or already uses that path. */
function mergeMounts(c: Container, plan: InjectionPlan, warnings: string[]): VolumeMount[] | undefined {
  const own = c.volumeMounts;
  const mounts = plan.volumeMounts;
  if (mounts.length === 0) return own;
  // Only the pod's mounts that the templates' could clash with are indexed: a container may hold a
  // thousand mounts, and this runs for every application container (issue 11).
  const { mountNames: wantedNames, mountPaths: wantedPaths } = plan.wanted;
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
function mergeNamed<T extends NamedItem>(own: T[] | undefined, items: readonly Owned<T>[], wanted: ReadonlySet<string>, what: (name: string) => string, warnings: string[]): T[] | undefined {
  if (items.length === 0) return own;
  // Only the pod's items with a name the templates use are indexed: a container may hold a thousand
  // env vars, and this runs for every application container (issue 11).
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
function mergeMap(own: Readonly<Record<string, string>>, entries: InjectionPlan['labels'], what: 'annotation' | 'label', warnings: string[]): Readonly<Record<string, string>> {
  return withTemplateKeys(own, entries, (key, template) => void warnings.push(`${what} "${key}" of template "${template}" is already set on the pod; the pod's value was kept`));
}

function setList<K extends 'initContainers' | 'volumes' | 'imagePullSecrets'>(spec: PodSpec, key: K, value: PodSpec[K] | undefined): void {
  if (value !== undefined) spec[key] = value;
}
