import { MetadataLimits } from '../kube/types.js';
import { InjectorError } from '../errors.js';
import { NO_ITEMS, NO_KEYS, type Container, type NamedItem, type Pod, type PodSpec, type VolumeMount } from '../kube/types.js';
import { isSubset } from '../templates/conflicts.js';
import { placeItems, type Placement } from '../templates/placement.js';
import { SERVICE_ACCOUNT_TOKEN_PATH, tokenMount, withTokenMount, type AppContainers, type CompiledTemplate } from '../templates/template.js';
import { Keys } from './keys.js';
import { parseNames } from './policy.js';
import type { InjectionPlan, Owned, Sidecar } from './plan.js';
import { copyWithKeys, renderForPod, templateKeys, type InjectionContext } from './render.js';
import { checkPodResources } from './resources.js';
import type { InjectionStatus } from './status-annotation.js';

export type { InjectionStatus } from './status-annotation.js';

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

/** What an application container of the pod gains: the templates' env vars and mounts it lacks. */
export interface Extension {
  readonly env: readonly NamedItem[];
  readonly volumeMounts: readonly VolumeMount[];
}

/**
 * What an injection changes in one pod, decided without copying any of it: applyInjection makes
 * the mutated pod from these decisions, and the JSON patch is the difference between the two
 * pods (src/patch/diff.ts).
 */
export interface Injection {
  readonly plan: InjectionPlan;
  readonly warnings: readonly string[];
  /** `spec.containers` once injected: the pod's own items by their index, the sidecars by value; undefined when no sidecar goes there. */
  readonly containers: readonly (number | Container)[] | undefined;
  /** Likewise for `spec.initContainers`. */
  readonly initContainers: readonly (number | Container)[] | undefined;
  /** By index in `spec.containers`, what each application container gains (absent: nothing). */
  readonly extensions: readonly (Extension | undefined)[];
  /** Appended to `spec.volumes` and `spec.imagePullSecrets`. */
  readonly volumes: readonly NamedItem[];
  readonly imagePullSecrets: readonly NamedItem[];
  /** Keys the templates add to the pod's annotations (besides the status) and labels; undefined: none. */
  readonly annotations: Readonly<Record<string, string>> | undefined;
  readonly labels: Readonly<Record<string, string>> | undefined;
}

/**
 * Injects the rendered templates into a pod. Pure: the input is never modified, and injecting the
 * result again changes nothing, because every item is keyed by name and an item the pod already
 * has under that name is left as the pod has it. Throws OVERRIDE_REFUSED or TEMPLATE_CONFLICT
 * (see renderForPod); sidecars go where each template's `placement` says.
 */
export function injectSidecars(pod: Pod, templates: readonly CompiledTemplate[], namespace: string, context: InjectionContext = {}): InjectionResult {
  const injection = planInjection(pod, templates, namespace, context);
  return { pod: applyInjection(pod, injection), status: injection.plan.status, warnings: injection.warnings };
}

/** The decisions of injectSidecars, and its refusals (it throws what injectSidecars throws), without the mutated pod. */
export function planInjection(pod: Pod, templates: readonly CompiledTemplate[], namespace: string, context: InjectionContext = {}): Injection {
  const { plan, warnings: renderWarnings } = renderForPod(pod, templates, namespace, context);
  const warnings: string[] = [...renderWarnings];
  const spec: PodSpec = pod.spec ?? {};
  const meta = pod.metadata ?? {};

  const placed = placeSidecars(spec, withPodToken(spec, plan), warnings);
  portWarnings(spec, placed.sidecars, warnings);
  const own = spec.containers ?? [];
  const extensions = extensionsOf(own, plan, appTargets(own, plan, meta.annotations, warnings), warnings);
  const containers = placed.containers.length > 0 ? placeItems(own, placed.containers) : undefined;
  const initContainers = placed.initContainers.length > 0 ? placeItems(spec.initContainers ?? [], placed.initContainers) : undefined;
  const volumes = addedNamed(spec.volumes, plan.volumes, plan.volumeItems, plan.wanted.volumes, (n) => `volume "${n}"`, warnings);
  const imagePullSecrets = addedNamed(
    spec.imagePullSecrets,
    plan.imagePullSecrets,
    plan.imagePullSecretItems,
    plan.wanted.imagePullSecrets,
    (n) => `imagePullSecret "${n}"`,
    warnings,
  );

  if (context.lenientMounts !== true) checkMounts(spec.volumes, volumes, placed.sidecars, plan, extensions);
  // Only a pod with pod-level resources (rare) pays for the lists once injected.
  if (spec['resources'] !== undefined && placed.sidecars.length > 0) {
    const ownInits = spec.initContainers ?? [];
    checkPodResources(
      spec,
      { containers: own, initContainers: ownInits },
      {
        containers: containers === undefined ? own : fromPlaced(containers, own),
        initContainers: initContainers === undefined ? ownInits : fromPlaced(initContainers, ownInits),
      },
    );
  }

  // The pod's own maps are never copied nor walked here, only looked up: a pod may carry tens of
  // thousands of keys.
  const ownAnnotations = meta.annotations ?? NO_KEYS;
  const annotations = addedKeys(ownAnnotations, plan.annotations, plan.annotationMap, 'annotation', warnings);
  checkAnnotationBytes(ownAnnotations, annotations, plan.statusText);
  const labels = addedKeys(meta.labels ?? NO_KEYS, plan.labels, plan.labelMap, 'label', warnings);
  return { plan, warnings, containers, initContainers, extensions, volumes, imagePullSecrets, annotations, labels };
}

/** The pod an injection makes: a new object wherever something is added, the input's own objects everywhere else (copy-on-write). */
export function applyInjection(pod: Pod, injection: Injection): Pod {
  return { ...pod, metadata: injectedMetadata(pod.metadata, injection), spec: injectedSpec(pod.spec, injection) };
}

/** `metadata` once injected (a new object: the status annotation is always set). */
function injectedMetadata(metadata: Pod['metadata'], injection: Injection): NonNullable<Pod['metadata']> {
  const meta = metadata ?? {};
  const newMeta = { ...meta, annotations: injectedAnnotations(meta.annotations ?? NO_KEYS, injection) };
  if (injection.labels !== undefined) newMeta.labels = copyWithKeys(meta.labels ?? NO_KEYS, injection.labels);
  return newMeta;
}

/** The pod's annotations plus the templates' and the status, as a new map. */
function injectedAnnotations(own: Readonly<Record<string, string>>, injection: Injection): Record<string, string> {
  const annotations = copyWithKeys(own, injection.annotations);
  annotations[Keys.status] = injection.plan.statusText;
  return annotations;
}

/** `spec` once injected (a new object: `containers` is always set). */
function injectedSpec(podSpec: PodSpec | undefined, injection: Injection): PodSpec {
  const spec = podSpec ?? {};
  const own = spec.containers ?? [];
  const extended = injection.extensions.length === 0 ? own : own.map((c, i) => extend(c, injection.extensions[i]));
  const newSpec: PodSpec = { ...spec, containers: injection.containers === undefined ? extended : fromPlaced(injection.containers, extended) };
  if (injection.initContainers !== undefined) newSpec.initContainers = fromPlaced(injection.initContainers, spec.initContainers ?? []);
  if (injection.volumes.length > 0) newSpec.volumes = [...(spec.volumes ?? []), ...injection.volumes];
  if (injection.imagePullSecrets.length > 0) newSpec.imagePullSecrets = [...(spec.imagePullSecrets ?? []), ...injection.imagePullSecrets];
  return newSpec;
}

function fromPlaced<T>(placed: readonly (number | T)[], own: readonly T[]): T[] {
  return placed.map((e) => (typeof e === 'number' ? own[e]! : e));
}

/** An application container with what it gains. */
export function extend(c: Container, extension: Extension | undefined): Container {
  if (extension === undefined) return c;
  const out: Container = { ...c };
  if (extension.env.length > 0) out.env = [...(c.env ?? []), ...extension.env];
  if (extension.volumeMounts.length > 0) out.volumeMounts = [...(c.volumeMounts ?? []), ...extension.volumeMounts];
  return out;
}

/**
 * The keys the templates add to the pod's labels or annotations (templateKeys); the plan's own map
 * (`all`) when the pod has none of its keys, as most pods have none.
 */
function addedKeys(
  own: Readonly<Record<string, string>>,
  entries: InjectionPlan['labels'],
  all: Readonly<Record<string, string>> | undefined,
  what: 'annotation' | 'label',
  warnings: string[],
): Readonly<Record<string, string>> | undefined {
  if (entries.length === 0) return undefined;
  if (all !== undefined && !entries.some(([[key]]) => Object.hasOwn(own, key))) return all;
  return templateKeys(own, entries, (key, template) => void warnings.push(keptWarning(what, key, template)));
}

function keptWarning(what: 'annotation' | 'label', key: string, template: string): string {
  return `${what} "${key}" of template "${template}" is already set on the pod; the pod's value was kept`;
}

/**
 * The apiserver refuses a pod whose annotations take more than 256 KiB (ValidateAnnotationsSize,
 * keys plus values), after admission, with a message that does not name the injector: a pod just
 * under the limit goes over it with the status annotation. Refused here instead, saying why. The
 * pod's own annotations are within the limit (podObject), so only a map that could be over it, by
 * its UTF-16 length (a unit is at most 3 bytes of UTF-8), is measured byte by byte. The map is the
 * pod's, the templates' (`added`, keys the pod lacks) and the status, whichever value it had.
 */
function checkAnnotationBytes(own: Readonly<Record<string, string>>, added: Readonly<Record<string, string>> | undefined, statusText: string): void {
  const status = Keys.status.length + statusText.length;
  if ((mapSize(own, Keys.status, lengthOf) + mapSize(added, Keys.status, lengthOf) + status) * 3 <= MetadataLimits.annotationBytes) return;
  // Bytes of UTF-8, as Go's len() counts a string; only a map of some 87,000 characters or more gets here.
  const statusBytes = Buffer.byteLength(Keys.status) + Buffer.byteLength(statusText);
  const bytes = mapSize(own, Keys.status, Buffer.byteLength) + mapSize(added, Keys.status, Buffer.byteLength) + statusBytes;
  if (bytes <= MetadataLimits.annotationBytes) return;
  throw new InjectorError('ANNOTATIONS_TOO_LARGE', [bytes, Keys.status, statusBytes, MetadataLimits.annotationBytes]);
}

const lengthOf = (text: string): number => text.length;

/** The size of a map's keys and values by `size`, leaving out the key `except`. */
function mapSize(map: Readonly<Record<string, string>> | undefined, except: string, size: (text: string) => number): number {
  let total = 0;
  for (const key in map) if (key !== except) total += size(key) + size(map[key]!);
  return total;
}

/**
 * Every mount the injection adds must name a volume of the finished pod, or the apiserver rejects the
 * pod after the patch (422, whatever the failurePolicy). A template may mount a volume the pod is
 * expected to bring; when the pod does not, the answer is a denial that names the template. The
 * mounts of a volume the selected templates define are there by construction (the volume is
 * added, or the pod has one of that name): only the others (InjectionPlan.podVolumeMounts) are
 * looked up among the pod's volumes. A template's application mount is checked only when some
 * application container gets it: a pod whose containers are all sidecars, or whose containers
 * already use that mount's path, gets none, and is valid without the volume (it was denied).
 */
function checkMounts(
  ownVolumes: readonly NamedItem[] | undefined,
  added: readonly NamedItem[],
  placed: readonly Sidecar[],
  plan: InjectionPlan,
  extensions: readonly (Extension | undefined)[],
): void {
  let volumes: Set<string> | undefined;
  const has = (name: string): boolean => {
    if (volumes === undefined) {
      volumes = new Set<string>();
      for (const v of ownVolumes ?? []) volumes.add(v.name);
      for (const v of added) volumes.add(v.name);
    }
    return volumes.has(name);
  };
  const missing: string[] = [];
  for (const { container: c, template, podVolumeMounts } of placed) {
    for (const m of podVolumeMounts) {
      if (!has(m.name)) missing.push(`"${m.name}" (container "${c.name}" of template "${template}")`);
    }
  }
  for (const [m, template] of plan.podVolumeMounts) {
    // An extension's mounts are the plan's own objects (addedMounts), so looked up by identity.
    if (!has(m.name) && extensions.some((e) => e !== undefined && e.volumeMounts.includes(m)))
      missing.push(`"${m.name}" (application mounts of template "${template}")`);
  }
  if (missing.length > 0) throw new InjectorError('TEMPLATE_VOLUME_MISSING', [missing.join(', ')]);
}

/**
 * The plan's sidecars, those of a `serviceAccountToken: true` template mounting the pod's token.
 * The ServiceAccount admission plugin mounts the token into the containers that exist when it runs,
 * before the webhooks, so a sidecar added here has none (vault-k8s #78). Its volume is found by its
 * mount in the pod's own containers, not by its name (kube-api-access-<random>). A pod without one
 * (automountServiceAccountToken: false, as Bitnami's charts set it, a ServiceAccount that mounts
 * none, a manifest before admission) gets no mount and no warning: `true` shares a token where the
 * pod has one, and a template that requires a token takes one of its own (the object form), so
 * nothing is wrong with such a pod (test/inject/warnings.test.ts holds the corpus to it).
 */
function withPodToken(spec: PodSpec, plan: InjectionPlan): readonly Sidecar[] {
  // Most selections ask for no token: nothing is allocated for them.
  if (!plan.rendered.some((r) => r.podToken === true)) return plan.sidecars;
  const wanting = plan.rendered.filter((r) => r.podToken === true);
  const volume = podTokenVolume(spec, new Set(plan.sidecars.map((s) => s.container.name)));
  if (volume === undefined) return plan.sidecars;
  const mount = tokenMount(volume);
  const names = new Set(wanting.map((r) => r.name));
  return plan.sidecars.map((s) => (names.has(s.template) ? { ...s, container: withTokenMount(s.container, mount) } : s));
}

/** The volume mounted at the token's path in the pod's own containers (sidecars left out: one may mount a template's own token). */
function podTokenVolume(spec: PodSpec, sidecars: ReadonlySet<string>): string | undefined {
  for (const c of [...(spec.containers ?? []), ...(spec.initContainers ?? [])]) {
    if (sidecars.has(c.name)) continue;
    const m = c.volumeMounts?.find((m) => m.mountPath === SERVICE_ACCOUNT_TOKEN_PATH);
    if (m !== undefined) return m.name;
  }
  return undefined;
}

/** Whether a template's env and volumeMounts go into the pod's container of that name. */
type Touches = (template: string, container: string) => boolean;

/**
 * Which application containers each template touches, by its `appContainers` and the pod's
 * app-containers annotation (which can only narrow it); undefined when every template touches
 * every container, as in most pods. A name in `include` or the annotation that is no container of
 * the pod is a warning: a typo there would silently leave the container without what it needs. An
 * `exclude` name the pod lacks is not: a template excludes proxies and exporters most pods do not
 * run (test/inject/warnings.test.ts).
 */
function appTargets(
  own: readonly Container[],
  plan: InjectionPlan,
  annotations: Readonly<Record<string, string>> | undefined,
  warnings: string[],
): Touches | undefined {
  if (plan.env.length === 0 && plan.volumeMounts.length === 0) return undefined;
  const value = annotations !== undefined && Object.hasOwn(annotations, Keys.appContainers) ? annotations[Keys.appContainers] : undefined;
  // Most pods and templates narrow nothing: nothing is allocated for them.
  if (value === undefined && !plan.rendered.some((r) => r.appContainers !== undefined)) return undefined;
  const byTemplate = new Map<string, AppContainers>();
  for (const r of plan.rendered) if (r.appContainers !== undefined) byTemplate.set(r.name, r.appContainers);
  const apps = new Set(own.map((c) => c.name).filter((n) => !plan.sidecarNames.has(n)));
  const unknown = (names: readonly string[]): string[] => names.filter((n) => !apps.has(n));
  const pod = value === undefined ? undefined : new Set(parseNames(value));
  const podUnknown = unknown([...(pod ?? [])]);
  if (podUnknown.length > 0) warnings.push(`annotation ${Keys.appContainers} names ${quoted(podUnknown)}, not containers of the pod`);
  for (const [template, { include = [] }] of byTemplate) {
    const names = unknown(include);
    if (names.length > 0) warnings.push(`appContainers of template "${template}" names ${quoted(names)}, not containers of the pod`);
  }
  return (template, container) => {
    if (pod !== undefined && !pod.has(container)) return false;
    const t = byTemplate.get(template);
    if (t === undefined) return true;
    return (t.include === undefined || t.include.includes(container)) && !(t.exclude?.includes(container) ?? false);
  };
}

/** The first few names, each cut short, and how many more: a pod's annotation may list thousands. */
function quoted(names: readonly string[]): string {
  const shown = names
    .slice(0, QUOTED_NAMES)
    .map((n) => `"${n.length <= 64 ? n : `${n.slice(0, 61)}...`}"`)
    .join(', ');
  return names.length <= QUOTED_NAMES ? shown : `${shown} and ${names.length - QUOTED_NAMES} more`;
}

const QUOTED_NAMES = 5;

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

/**
 * A port of an added sidecar that a running container of the pod also declares, same number and
 * protocol: the containers of a pod share one network namespace, so one of the two processes
 * cannot bind it (daprd's 9090 and Tekton's controller). Kubernetes itself only warns of
 * it ("duplicate port definition", pkg/api/pod/warnings.go), so this is a warning, one per sidecar
 * port, naming the first container of the pod that declares it. A run-to-completion init
 * container (of the pod or a template) has exited before the others start: it never counts.
 */
function portWarnings(spec: PodSpec, sidecars: readonly Sidecar[], warnings: string[]): void {
  // The sidecars' ports by number; the pod's ports are only looked up, never indexed.
  let wanted: Map<number, SidecarPort[]> | undefined;
  for (const { container: c, template, init } of sidecars) {
    if (init && c.restartPolicy !== 'Always') continue;
    for (const p of c.ports ?? []) {
      const number = p['containerPort'];
      if (typeof number !== 'number') continue;
      wanted ??= new Map();
      const list = wanted.get(number) ?? [];
      list.push({ key: `${number}/${protocolOf(p)}`, sidecar: c.name, template, declaredBy: [] });
      wanted.set(number, list);
    }
  }
  if (wanted === undefined) return;
  const look = (c: Container): void => {
    for (const p of c.ports ?? []) {
      // The pod's own lists are as the review gave them: an item may be null (podObject checks no more).
      const hits = typeof p?.['containerPort'] === 'number' ? wanted.get(p['containerPort']) : undefined;
      for (const hit of hits ?? []) if (hit.key === `${p['containerPort']}/${protocolOf(p)}` && !hit.declaredBy.includes(c.name)) hit.declaredBy.push(c.name);
    }
  };
  for (const c of spec.initContainers ?? []) if (c.restartPolicy === 'Always') look(c);
  for (const c of spec.containers ?? []) look(c);
  for (const hits of wanted.values()) {
    for (const { key, sidecar, template, declaredBy } of hits) {
      if (declaredBy.length === 0) continue;
      const more = declaredBy.length > 1 ? ` (and ${declaredBy.length - 1} more)` : '';
      warnings.push(
        `port ${key} of sidecar "${sidecar}" (template ${template}) is also declared by container "${declaredBy[0]}"${more}; one of them will fail to bind`,
      );
    }
  }
}

interface SidecarPort {
  /** `9090/TCP`. */
  readonly key: string;
  readonly sidecar: string;
  readonly template: string;
  /** The pod's running containers that declare it too. */
  readonly declaredBy: string[];
}

// The API's default protocol (core/v1 ContainerPort).
const protocolOf = (p: Readonly<Record<string, unknown>>): string => (typeof p['protocol'] === 'string' ? p['protocol'] : 'TCP');

/**
 * What each application container gains (sidecars of the same name excepted, and containers a
 * template's appContainers leaves out of its items); empty when none gains anything. Most pods lack
 * every item the templates add, so most containers get the plan's shared lists (envItems, volumeMountItems).
 */
function extensionsOf(own: readonly Container[], plan: InjectionPlan, touches: Touches | undefined, warnings: string[]): (Extension | undefined)[] {
  const out: (Extension | undefined)[] = [];
  if (plan.env.length === 0 && plan.volumeMounts.length === 0) return out;
  for (let i = 0; i < own.length; i++) {
    const c = own[i]!;
    if (plan.sidecarNames.has(c.name)) continue;
    const envItems = touches === undefined ? plan.env : plan.env.filter(([, t]) => touches(t, c.name));
    const mountItems = touches === undefined ? plan.volumeMounts : plan.volumeMounts.filter(([, t]) => touches(t, c.name));
    // The plan's shared lists stand for its items only when the container gets every one of them.
    const whole = envItems.length === plan.env.length && mountItems.length === plan.volumeMounts.length;
    const env = addedNamed(c.env, envItems, whole ? plan.envItems : undefined, plan.wanted.env, (n) => `env var "${n}" in container "${c.name}"`, warnings);
    const volumeMounts = addedMounts(c, mountItems, whole ? plan.volumeMountItems : undefined, plan, warnings);
    if (env.length === 0 && volumeMounts.length === 0) continue;
    out.length = i;
    out.push({ env, volumeMounts });
  }
  return out;
}

/**
 * The template mounts (`mounts`, of the plan's) a container lacks: a mount is skipped when the
 * container already mounts that volume or already uses that path. `all` itself when every one is added.
 */
function addedMounts(
  c: Container,
  mounts: readonly Owned<VolumeMount>[],
  all: readonly VolumeMount[] | undefined,
  plan: InjectionPlan,
  warnings: string[],
): readonly VolumeMount[] {
  if (mounts.length === 0) return NO_ITEMS;
  // Only the pod's mounts that the templates' could clash with are indexed: a container may hold a
  // thousand mounts, and this runs for every application container.
  const { mountNames: wantedNames, mountPaths: wantedPaths } = plan.wanted;
  let names: Map<string, VolumeMount> | undefined;
  let paths: Map<string, VolumeMount> | undefined;
  for (const m of c.volumeMounts ?? []) {
    if (wantedNames.has(m.name)) (names ??= new Map()).set(m.name, m);
    if (wantedPaths.has(m.mountPath)) (paths ??= new Map()).set(m.mountPath, m);
  }
  // Nothing of the container's in the way, and no two template mounts share a name or path: all go in.
  if (names === undefined && paths === undefined && all !== undefined) return all;
  names ??= new Map();
  paths ??= new Map();
  const added: VolumeMount[] = [];
  for (const [m, template] of mounts) {
    const existing = names.get(m.name) ?? paths.get(m.mountPath);
    if (existing === undefined) {
      added.push(m);
      names.set(m.name, m);
      paths.set(m.mountPath, m);
    } else if (!isSubset(m, existing)) {
      warnings.push(
        `volume mount "${m.name}" at ${m.mountPath} of template "${template}" conflicts with the mount "${existing.name}" at ${existing.mountPath} in container "${c.name}"; the pod's was kept`,
      );
    }
  }
  return added.length === mounts.length && all !== undefined ? all : added;
}

/**
 * The template items the pod's list lacks by name (to append to it); `all` (the items alone, when
 * their names are distinct) itself when every one is added.
 */
function addedNamed<T extends NamedItem>(
  own: readonly T[] | undefined,
  items: readonly Owned<T>[],
  all: readonly T[] | undefined,
  wanted: ReadonlySet<string>,
  what: (name: string) => string,
  warnings: string[],
): readonly T[] {
  if (items.length === 0) return NO_ITEMS;
  // Only the pod's items with a name the templates use are indexed: a container may hold a thousand
  // env vars, and this runs for every application container.
  let byName: Map<string, T> | undefined;
  for (const i of own ?? []) if (wanted.has(i.name)) (byName ??= new Map()).set(i.name, i);
  if (byName === undefined && all !== undefined) return all;
  byName ??= new Map();
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
  return added.length === items.length && all !== undefined ? all : added;
}
