import type { Container, NamedItem, VolumeMount } from '../kube/types.js';
import { findConflicts } from '../templates/conflicts.js';
import type { Placement } from '../templates/placement.js';
import type { RenderedTemplate } from '../templates/template.js';
import { encodeStatus, statusOf, type InjectionStatus } from './status.js';

/** An item a template adds, with the template's name (for warnings and errors). */
export type Owned<T> = readonly [item: T, template: string];

/** A sidecar container, the list it goes into and where in it. */
export interface Sidecar {
  readonly container: Container;
  readonly template: string;
  /** In initContainers: a native sidecar, or a template's run-to-completion init container. */
  readonly init: boolean;
  readonly placement: Placement;
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
  readonly labels: readonly Owned<readonly [key: string, value: string]>[];
  readonly annotations: readonly Owned<readonly [key: string, value: string]>[];
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

// Keyed by the rendered templates themselves, in order, so an entry lives exactly as long as the
// renderings it was made of (template.ts keeps at most a few hundred per template).
const plans = new WeakMap<RenderedTemplate, Node>();

/** The plan of an injection of these rendered templates; kept when every one of them is frozen (shared). */
export function planFor(rendered: readonly RenderedTemplate[]): InjectionPlan {
  if (!rendered.every((r) => Object.isFrozen(r))) return makePlan(rendered);
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
  if (node === undefined) return makePlan(rendered);
  node.plan ??= makePlan(rendered);
  return node.plan;
}

function makePlan(rendered: readonly RenderedTemplate[]): InjectionPlan {
  const conflicts = findConflicts(rendered);
  const status = statusOf(rendered);
  const owned = <T>(pick: (r: RenderedTemplate) => readonly T[]): Owned<T>[] => rendered.flatMap((r) => pick(r).map((item) => [item, r.name] as const));
  const sidecars = sidecarsOf(rendered);
  const names = (items: readonly Owned<NamedItem>[]): ReadonlySet<string> => new Set(items.map(([item]) => item.name));
  const env = owned((r) => r.env);
  const volumeMounts = owned((r) => r.volumeMounts);
  const volumes = owned((r) => r.volumes);
  const imagePullSecrets = owned((r) => r.imagePullSecrets);
  return Object.freeze({
    rendered: Object.freeze([...rendered]),
    conflict: conflicts.length > 0 ? conflicts.map((c) => c.message).join('; ') : undefined,
    sidecars,
    sidecarNames: new Set(rendered.flatMap((r) => r.containers.map((c) => c.name))),
    env,
    volumeMounts,
    volumes,
    imagePullSecrets,
    labels: owned((r) => Object.entries(r.labels)),
    annotations: owned((r) => Object.entries(r.annotations)),
    wanted: {
      env: names(env),
      mountNames: names(volumeMounts),
      mountPaths: new Set(volumeMounts.map(([m]) => m.mountPath)),
      volumes: names(volumes),
      imagePullSecrets: names(imagePullSecrets),
    },
    status,
    statusText: encodeStatus(status),
  });
}

/**
 * Each container the templates add, with its list and place. In the containers list the default is
 * `last`; in the init containers list it is `first`, because a native sidecar must be running before
 * the pod's own init containers that may need it. A template's run-to-completion init containers
 * always go first. A name met twice keeps the first template's placement (findConflicts refuses
 * such a selection anyway).
 */
function sidecarsOf(rendered: readonly RenderedTemplate[]): Sidecar[] {
  const where = new Map<string, Placement>();
  for (const r of rendered) {
    for (const c of r.containers) if (!where.has(c.name)) where.set(c.name, r.placement ?? (r.nativeSidecar ? 'first' : 'last'));
  }
  const out: Sidecar[] = [];
  for (const r of rendered) {
    for (const c of r.initContainers) out.push({ container: c, template: r.name, init: true, placement: 'first' });
    for (const c of r.containers) out.push({ container: c, template: r.name, init: r.nativeSidecar, placement: where.get(c.name) ?? 'first' });
  }
  return out;
}
