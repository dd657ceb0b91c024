import { setKey, type Container, type NamedItem, type VolumeMount } from '../kube/types.js';
import { findConflicts } from '../templates/conflicts.js';
import type { Placement } from '../templates/placement.js';
import type { RenderedTemplate } from '../templates/template.js';
import { encodeStatusAnnotation, statusOf, type InjectionStatus } from './status-annotation.js';

/** An item a template adds, with the template's name (for warnings and errors). */
export type Owned<T> = readonly [item: T, template: string];

/** A sidecar container, the list it goes into and where in it. */
export interface Sidecar {
  readonly container: Container;
  readonly template: string;
  /** In initContainers: a native sidecar, or a template's run-to-completion init container. */
  readonly init: boolean;
  readonly placement: Placement;
  /**
   * The container's mounts of a volume no selected template defines, which the pod must bring
   * (the others are in the injected pod by construction: the volume is added, or the pod has it).
   */
  readonly podVolumeMounts: readonly VolumeMount[];
}

/**
 * What a list of rendered templates puts into any pod, worked out once for that list: the pod's
 * part of an injection (which of these it already has, where they go among its own) is all that is
 * left per review. Renderings are shared by the pods of one workload and by every pod when the
 * templates read nothing from the pod (template.ts memoizes them), so the plan is too.
 */
export interface InjectionPlan {
  readonly rendered: readonly RenderedTemplate[];
  /** Why the templates cannot all go into one pod (TEMPLATE_CONFLICT's detail), or undefined. */
  readonly conflict: string | undefined;
  /** In the order the injection considers them: per template, its init containers, then its containers. */
  readonly sidecars: readonly Sidecar[];
  readonly sidecarNames: ReadonlySet<string>;
  /** For the pod's application containers. */
  readonly env: readonly Owned<NamedItem>[];
  readonly volumeMounts: readonly Owned<VolumeMount>[];
  readonly volumes: readonly Owned<NamedItem>[];
  readonly imagePullSecrets: readonly Owned<NamedItem>[];
  /**
   * The items of those lists alone, when no two share a name (and, for mounts, a mount path):
   * what a pod that has none of them gets, as one shared list; undefined otherwise.
   */
  readonly envItems: readonly NamedItem[] | undefined;
  readonly volumeMountItems: readonly VolumeMount[] | undefined;
  readonly volumeItems: readonly NamedItem[] | undefined;
  readonly imagePullSecretItems: readonly NamedItem[] | undefined;
  /** The application mounts of a volume no selected template defines (see Sidecar.podVolumeMounts). */
  readonly podVolumeMounts: readonly Owned<VolumeMount>[];
  readonly labels: readonly Owned<readonly [key: string, value: string]>[];
  readonly annotations: readonly Owned<readonly [key: string, value: string]>[];
  /**
   * The labels and annotations a pod that has none of their keys gets, as one frozen map; undefined
   * when two templates name one key (the first wins, and the others are warned of per pod).
   */
  readonly labelMap: Readonly<Record<string, string>> | undefined;
  readonly annotationMap: Readonly<Record<string, string>> | undefined;
  /** The names (and mount paths) in those lists: what the pod's own items are looked up by. */
  readonly wanted: {
    readonly env: ReadonlySet<string>;
    readonly mountNames: ReadonlySet<string>;
    readonly mountPaths: ReadonlySet<string>;
    readonly volumes: ReadonlySet<string>;
    readonly imagePullSecrets: ReadonlySet<string>;
  };
  readonly status: InjectionStatus;
  /** The status annotation's value. */
  readonly statusText: string;
}

interface Node {
  plan?: InjectionPlan;
  readonly next: WeakMap<RenderedTemplate, Node>;
}

// Per revision (a process has one; tests make several), then keyed by the rendered templates
// themselves, in order, so an entry lives exactly as long as the renderings it was made of
// (template.ts keeps them in 4 MiB across all templates). Only frozen renderings are shared: a
// rendering made for one pod (a first sighting, or one too large to keep) comes unfrozen, so a pod
// seen once adds no entry. Exists only for speed: making the plan per review
// costs about 9 µs of the typical pod's 29 µs mutate and of its 3 µs validate, 13 of the 63 µs
// whole pipeline without the answer cache (bench/memos.ts, docs/performance.md).
const plansByRevision = new Map<string, WeakMap<RenderedTemplate, Node>>();

/**
 * The plan of an injection of these rendered templates by the install of `revision` ('' for the
 * default install); kept when every one of them is frozen (shared).
 */
export function planFor(rendered: readonly RenderedTemplate[], revision = ''): InjectionPlan {
  if (!rendered.every((r) => Object.isFrozen(r))) return makePlan(rendered, revision);
  let plans = plansByRevision.get(revision);
  if (plans === undefined) {
    plans = new WeakMap();
    plansByRevision.set(revision, plans);
  }
  let level = plans;
  let node: Node | undefined;
  for (const r of rendered) {
    node = level.get(r);
    if (node === undefined) {
      node = { next: new WeakMap() };
      level.set(r, node);
    }
    level = node.next;
  }
  if (node === undefined) return makePlan(rendered, revision);
  node.plan ??= makePlan(rendered, revision);
  return node.plan;
}

function makePlan(rendered: readonly RenderedTemplate[], revision: string): InjectionPlan {
  const conflicts = findConflicts(rendered);
  const status = statusOf(rendered, revision);
  const owned = <T>(pick: (r: RenderedTemplate) => readonly T[]): Owned<T>[] => rendered.flatMap((r) => pick(r).map((item) => [item, r.name] as const));
  const names = (items: readonly Owned<NamedItem>[]): ReadonlySet<string> => new Set(items.map(([item]) => item.name));
  const env = owned((r) => r.env);
  const volumeMounts = owned((r) => r.volumeMounts);
  const volumes = owned((r) => r.volumes);
  const imagePullSecrets = owned((r) => r.imagePullSecrets);
  const volumeNames = names(volumes);
  const labels = owned((r) => Object.entries(r.labels));
  const annotations = owned((r) => Object.entries(r.annotations));
  const sidecars = sidecarsOf(rendered, volumeNames);
  const mountPaths = new Set(volumeMounts.map(([m]) => m.mountPath));
  const distinct = <T extends NamedItem>(items: readonly Owned<T>[], ...sizes: number[]): readonly T[] | undefined =>
    sizes.every((n) => n === items.length) ? Object.freeze(items.map(([item]) => item)) : undefined;
  return Object.freeze({
    rendered: Object.freeze([...rendered]),
    conflict: conflicts.length > 0 ? conflicts.map((c) => c.message).join('; ') : undefined,
    sidecars,
    sidecarNames: new Set(rendered.flatMap((r) => r.containers.map((c) => c.name))),
    env,
    volumeMounts,
    volumes,
    imagePullSecrets,
    envItems: distinct(env, names(env).size),
    volumeMountItems: distinct(volumeMounts, names(volumeMounts).size, mountPaths.size),
    volumeItems: distinct(volumes, volumeNames.size),
    imagePullSecretItems: distinct(imagePullSecrets, names(imagePullSecrets).size),
    podVolumeMounts: volumeMounts.filter(([m]) => !volumeNames.has(m.name)),
    labels,
    annotations,
    labelMap: keyMap(labels),
    annotationMap: keyMap(annotations),
    wanted: {
      env: names(env),
      mountNames: names(volumeMounts),
      mountPaths,
      volumes: volumeNames,
      imagePullSecrets: names(imagePullSecrets),
    },
    status,
    statusText: encodeStatusAnnotation(status),
  });
}

/** The map of `entries` when no two share a key; "__proto__" stays a key (setKey). */
function keyMap(entries: readonly Owned<readonly [key: string, value: string]>[]): Readonly<Record<string, string>> | undefined {
  if (new Set(entries.map(([[key]]) => key)).size !== entries.length) return undefined;
  const map: Record<string, string> = {};
  for (const [[key, value]] of entries) setKey(map, key, value);
  return Object.freeze(map);
}

/**
 * Each container the templates add, with its list and place. In the containers list the default is
 * `last`; in the init containers list it is `first`, because a native sidecar must be running before
 * the pod's own init containers that may need it. A template's run-to-completion init containers
 * always go first. A name met twice keeps the first template's placement (findConflicts refuses
 * such a selection anyway).
 */
function sidecarsOf(rendered: readonly RenderedTemplate[], volumes: ReadonlySet<string>): Sidecar[] {
  const where = new Map<string, Placement>();
  for (const r of rendered) {
    for (const c of r.containers) if (!where.has(c.name)) where.set(c.name, r.placement ?? (r.nativeSidecar ? 'first' : 'last'));
  }
  const out: Sidecar[] = [];
  const podVolumeMounts = (c: Container): readonly VolumeMount[] => (c.volumeMounts ?? []).filter((m) => !volumes.has(m.name));
  for (const r of rendered) {
    for (const c of r.initContainers) out.push({ container: c, template: r.name, init: true, placement: 'first', podVolumeMounts: podVolumeMounts(c) });
    for (const c of r.containers)
      out.push({ container: c, template: r.name, init: r.nativeSidecar, placement: where.get(c.name) ?? 'first', podVolumeMounts: podVolumeMounts(c) });
  }
  return out;
}
