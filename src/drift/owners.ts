import { InjectorError } from '../errors.js';
import { selectorMatches } from '../kube/selectors.js';
import { isObject, type LabelSelector, type Labels, type Pod } from '../kube/types.js';

/**
 * Which workload a pod really belongs to. A pod's ownerReferences are written by whoever creates
 * the pod, so a bare pod can name any ReplicaSet or Job of its namespace as its controller. A link
 * is followed only when the controller the pod names exists with the uid the reference carries and
 * its selector takes the pod's labels, as the controllers themselves decide which pods are theirs
 * (the ReplicaSet, Job, StatefulSet and DaemonSet controllers adopt and count only pods their
 * selector matches). Held by test/drift/owners.test.ts and, through the API stand-in,
 * test/drift/forged-owners.test.ts.
 */

/** A kind that can own pods, as listed: its uid, selector, controller and pod template's labels. */
export interface OwnerObject {
  readonly kind: string;
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
  readonly selector?: LabelSelector;
  /** The object's own controller ownerReference (a ReplicaSet's Deployment, a Job's CronJob). */
  readonly controller?: ControllerRef;
  /** The labels of the pods it creates: spec.template (a CronJob's spec.jobTemplate.spec.template). */
  readonly templateLabels: Labels;
}

/** The ownerReference marked `controller: true`. */
export interface ControllerRef {
  readonly kind: string;
  readonly name: string;
  readonly uid: string;
}

/** Every listed owner, by `kind/namespace/name`. */
export type Owners = ReadonlyMap<string, OwnerObject>;

/** The kinds drift lists to verify owner chains, each with where its pod template's labels are. */
export const OwnerKinds = ['ReplicaSet', 'Deployment', 'StatefulSet', 'DaemonSet', 'Job', 'CronJob'] as const;
export type OwnerKind = (typeof OwnerKinds)[number];

/** The controller ownerReference of an object's metadata (the one with controller: true). */
export function controllerOf(meta: { readonly ownerReferences?: readonly unknown[] } | undefined): ControllerRef | undefined {
  const refs = Array.isArray(meta?.ownerReferences) ? meta.ownerReferences : [];
  const ref = refs.find((o) => isObject(o) && o['controller'] === true);
  if (!isObject(ref) || typeof ref['kind'] !== 'string' || typeof ref['name'] !== 'string') return undefined;
  return { kind: ref['kind'], name: ref['name'], uid: typeof ref['uid'] === 'string' ? ref['uid'] : '' };
}

/** Indexes listed objects of one kind each (list items carry no `kind`, so it is given). */
export function ownerIndex(lists: readonly { readonly kind: OwnerKind; readonly items: readonly unknown[] }[]): Owners {
  const index = new Map<string, OwnerObject>();
  for (const { kind, items } of lists) {
    for (const item of items) {
      const owner = ownerObject(kind, item);
      if (owner !== undefined) index.set(key(kind, owner.namespace, owner.name), owner);
    }
  }
  return index;
}

function ownerObject(kind: OwnerKind, item: unknown): OwnerObject | undefined {
  if (!isObject(item) || !isObject(item['metadata'])) return undefined;
  const meta = item['metadata'];
  const spec = isObject(item['spec']) ? item['spec'] : {};
  const podSpec = kind === 'CronJob' ? at(spec, 'jobTemplate', 'spec') : spec;
  const controller = controllerOf(meta as { ownerReferences?: unknown[] });
  const selector = isObject(podSpec?.['selector']) ? (podSpec['selector'] as LabelSelector) : undefined;
  return {
    kind,
    namespace: String(meta['namespace'] ?? ''),
    name: String(meta['name'] ?? ''),
    uid: String(meta['uid'] ?? ''),
    ...(selector !== undefined && { selector }),
    ...(controller !== undefined && { controller }),
    templateLabels: labelsOf(at(podSpec ?? {}, 'template', 'metadata')?.['labels']),
  };
}

function at(obj: Record<string, unknown>, ...path: string[]): Record<string, unknown> | undefined {
  let here: unknown = obj;
  for (const step of path) here = isObject(here) ? here[step] : undefined;
  return isObject(here) ? here : undefined;
}

function labelsOf(value: unknown): Labels {
  if (!isObject(value)) return {};
  return Object.fromEntries(Object.entries(value).filter((e): e is [string, string] => typeof e[1] === 'string'));
}

function key(kind: string, namespace: string, name: string): string {
  return `${kind}/${namespace}/${name}`;
}

/**
 * The owner `ref` names, if it exists with that uid and its selector takes `labels`. A missing or
 * empty selector takes nothing here: apps/v1 and batch/v1 refuse one, so only a forgery has it.
 * A CronJob has no selector of its own; its Job's selector was checked one step before.
 */
function verified(ref: ControllerRef, namespace: string, labels: Labels, owners: Owners): OwnerObject | undefined {
  const owner = owners.get(key(ref.kind, namespace, ref.name));
  if (owner === undefined || ref.uid === '' || owner.uid !== ref.uid) return undefined;
  if (owner.kind === 'CronJob') return owner;
  if (owner.selector === undefined || isEmpty(owner.selector)) return undefined;
  try {
    return selectorMatches(owner.selector, labels) ? owner : undefined;
  } catch (err) {
    // A selector the API server would have refused is no proof of ownership.
    if (err instanceof InjectorError) return undefined;
    throw err;
  }
}

function isEmpty(s: LabelSelector): boolean {
  return Object.keys(s.matchLabels ?? {}).length === 0 && (s.matchExpressions ?? []).length === 0;
}

/** What a pod's verified chain leads to: the workload, and the listed object when there is one. */
export interface PodOwner {
  readonly namespace: string;
  readonly kind: string;
  readonly name: string;
  /** The listed workload, verified; absent for a bare pod and for a controller of a kind drift does not list. */
  readonly object?: OwnerObject;
}

/** The kinds whose controllers create pods themselves; a Deployment or CronJob never owns a pod directly. */
const POD_OWNERS: readonly string[] = ['ReplicaSet', 'Job', 'StatefulSet', 'DaemonSet'];

/** The next link of a chain: a ReplicaSet's Deployment, a Job's CronJob. */
const PARENT: Readonly<Record<string, string>> = { ReplicaSet: 'Deployment', Job: 'CronJob' };

/**
 * The workload a pod belongs to: a Deployment through its ReplicaSet, a CronJob through its Job, a
 * StatefulSet or DaemonSet, each link verified (uid and selector). A controller of a kind drift does
 * not list (an Argo Rollout) is named as the pod names it, for the report's advice only: nothing of
 * such a kind is ever restarted. A link that does not verify leaves the pod on its own (kind Pod).
 */
export function podOwner(pod: Pod, owners: Owners): PodOwner {
  const namespace = pod.metadata?.namespace ?? 'default';
  const bare = { namespace, kind: 'Pod', name: pod.metadata?.name ?? '' };
  const ref = controllerOf(pod.metadata);
  if (ref === undefined) return bare;
  if (!(OwnerKinds as readonly string[]).includes(ref.kind)) return { namespace, kind: ref.kind, name: ref.name };
  const labels = pod.metadata?.labels ?? {};
  const owner = POD_OWNERS.includes(ref.kind) ? verified(ref, namespace, labels, owners) : undefined;
  if (owner === undefined) return bare;
  const parentKind = PARENT[owner.kind];
  const parent = parentKind !== undefined && owner.controller?.kind === parentKind ? verified(owner.controller, namespace, labels, owners) : undefined;
  const found = parent ?? owner;
  return { namespace, kind: found.kind, name: found.name, object: found };
}
