import { isDeepStrictEqual } from 'node:util';
import { InjectorError } from '../errors.js';
import { Keys } from '../inject/keys.js';
import { injectSidecars } from '../inject/mutate.js';
import { OptInScope, Reason, selectTemplates } from '../inject/policy.js';
import { webhookCalls } from '../kube/selectors.js';
import { isObject, type Labels, type Pod, type WebhookConfiguration } from '../kube/types.js';
import { setFor, type TemplateSet } from '../templates/load.js';
import { requiredIn, whyRequired } from '../templates/required.js';
import { podOwner, type OwnerObject, type Owners } from './owners.js';

/**
 * Whether a running pod's sidecars are what the templates inject now. `missing`: the pod is opted in
 * but carries no injection status, so it runs without its sidecars (created before the injector was
 * installed, or while it was down and its webhooks failed open).
 */
export const PodState = { Current: 'current', Stale: 'stale', Missing: 'missing' } as const;
export type PodState = (typeof PodState)[keyof typeof PodState];

/** Why a pod is stale; stable strings for `-o json`. */
export const StaleReason = {
  /** A template the pod got no longer exists. */
  TemplateRemoved: 'template-removed',
  /** The pod would get other templates now (a default added or removed, its annotation changed). */
  TemplatesChanged: 'templates-changed',
  /** Same templates, but they inject something else now (image, resources, anything: a new digest or version). */
  SidecarsChanged: 'sidecars-changed',
  /** The templates would now refuse the pod (a conflict, a refused override). */
  WouldBeRefused: 'would-be-refused',
  /** The pod would not be injected now (its label changed, no default template is left). */
  NoLongerSelected: 'no-longer-selected',
  /** The status annotation cannot be read: injected by a version that wrote another format, or edited. */
  StatusUnreadable: 'status-unreadable',
} as const;
export type StaleReason = (typeof StaleReason)[keyof typeof StaleReason];

/** Why a pod is missing its sidecars; stable strings for `-o json`. */
export const MissingReason = {
  /** Opted in, no status annotation: admission never injected it. */
  NotInjected: 'not-injected',
  /** Opted in and not injected, and the templates would refuse it now: a restart would leave it without pods. */
  WouldBeRefused: 'would-be-refused',
} as const;
export type MissingReason = (typeof MissingReason)[keyof typeof MissingReason];

/** What differs between the sidecars a pod got and the ones it would get now. */
export interface Difference {
  readonly reason: StaleReason;
  readonly detail: string;
}

/** One injected pod and its verdict. */
export interface PodDrift {
  readonly name: string;
  readonly state: PodState;
  readonly reason?: StaleReason | MissingReason;
  readonly detail?: string;
  /** The status annotation as injected. */
  readonly recorded?: RecordedStatus;
  /** The status an injection would record now. */
  readonly current?: RecordedStatus;
}

/** The workload that owns pods (a Deployment through its ReplicaSet, a CronJob through its Job), or the pod itself. */
export interface WorkloadRef {
  readonly namespace: string;
  readonly kind: string;
  readonly name: string;
}

export interface WorkloadDrift extends WorkloadRef {
  /**
   * For a listed workload (Deployment, StatefulSet, DaemonSet, CronJob): whether the pods its
   * template makes are opted in, as the webhooks decide it. `drift --restart` rolls only those.
   */
  readonly templateOptsIn?: boolean;
  /** The workload's injected and missing pods: all of them with `--all`, else only the stale and missing ones. */
  readonly pods: readonly PodDrift[];
  /** How many of its pods are injected, how many of those are stale, and how many opted-in pods are not injected. */
  readonly injected: number;
  readonly stale: number;
  readonly missing: number;
  /** The command line that replaces the workload's pods, or what to do when there is none. */
  readonly rollout: string;
}

export interface DriftReport {
  /** The revision judged (`drift --revision`); absent for the default install. */
  readonly revision?: string;
  readonly templates: { readonly source: string; readonly digest: string };
  /** Where the webhooks' selectors, which decide which pods are opted in, were read. */
  readonly webhooks: { readonly source: string };
  /** Injected pods found (every one, whether listed or not). */
  readonly injected: number;
  readonly stale: number;
  /** Opted-in pods without an injection status. */
  readonly missing: number;
  /** The counts of each namespace with pods judged, in name order. */
  readonly namespaces: readonly NamespaceDrift[];
  readonly workloads: readonly WorkloadDrift[];
}

/** One namespace's pods: with templates from the cluster, each namespace may see templates of its own. */
export interface NamespaceDrift {
  readonly namespace: string;
  readonly injected: number;
  readonly stale: number;
  readonly missing: number;
  /** Injected pods that are up to date. */
  readonly current: number;
}

/**
 * A status annotation as recorded: every format the injector has written keeps `templates`, the
 * names in order; the rest (a digest of the rendering, or per-template versions) is compared as data.
 */
export type RecordedStatus = Readonly<Record<string, unknown>> & { readonly templates: readonly string[] };

/**
 * The two functions that know the status annotation (`sidecar-injector.io/status`, owned by the
 * rollout work, BRIEF contract 3); everything else goes through them. Both read it as data, so a
 * new format (per-template versions) needs no change here to be compared, only to be explained.
 */
export function recordedStatus(pod: Pod): RecordedStatus | 'unreadable' | undefined {
  const text = pod.metadata?.annotations?.[Keys.status];
  if (text === undefined) return undefined;
  try {
    const value: unknown = JSON.parse(text);
    if (!isObject(value) || !Array.isArray(value['templates']) || !value['templates'].every((t) => typeof t === 'string')) return 'unreadable';
    return value as RecordedStatus;
  } catch {
    return 'unreadable';
  }
}

/** How a pod's recorded status differs from the one an injection records now; undefined when it does not. */
export function compareStatus(recorded: RecordedStatus, fresh: RecordedStatus): Difference | undefined {
  if (recorded.templates.join(',') !== fresh.templates.join(',')) {
    return { reason: StaleReason.TemplatesChanged, detail: `injected with ${list(recorded.templates)}, would get ${list(fresh.templates)} now` };
  }
  if (isDeepStrictEqual(recorded, fresh)) return undefined;
  return { reason: StaleReason.SidecarsChanged, detail: changeDetail(recorded, fresh) };
}

// Says which templates changed, from what to what, in the terms the format offers: per-template
// records (`injected: [{template, version}]`), or one digest of the whole rendering. The same
// wording for both, so the report reads alike across releases.
function changeDetail(recorded: RecordedStatus, fresh: RecordedStatus): string {
  const before = perTemplate(recorded);
  const after = perTemplate(fresh);
  if (before !== undefined && after !== undefined) {
    const changed = fresh.templates.filter((t) => !isDeepStrictEqual(before.get(t), after.get(t)));
    return changed.map((t) => `"${t}" changed (was ${versionOf(before.get(t))}, now ${versionOf(after.get(t))})`).join('; ');
  }
  if (typeof recorded['digest'] === 'string' && typeof fresh['digest'] === 'string') {
    return `${list(fresh.templates)} changed (was ${recorded['digest']}, now ${fresh['digest']})`;
  }
  return `${list(fresh.templates)}: the status was recorded in another format (an earlier release)`;
}

function versionOf(record: unknown): string {
  const version = isObject(record) ? record['version'] : undefined;
  return typeof version === 'string' ? version : 'unknown';
}

function perTemplate(status: RecordedStatus): Map<string, unknown> | undefined {
  const injected = status['injected'];
  if (!Array.isArray(injected)) return undefined;
  return new Map(injected.filter(isObject).map((r) => [String(r['template']), r]));
}

/**
 * Whether the pod is the install of `revision`'s to judge: its status names that revision (none for
 * the default install), or it has no readable status (a missing pod: the webhooks' selectors decide).
 */
function injectedBy(pod: Pod, revision: string): boolean {
  const recorded = recordedStatus(pod);
  if (recorded === undefined || recorded === 'unreadable') return true;
  const named = recorded['revision'];
  return (typeof named === 'string' ? named : '') === revision;
}

/** The verdict on one pod; undefined for a pod that was never injected (no status annotation). */
export function podDrift(pod: Pod, set: TemplateSet, revision = '', scope: OptInScope = OptInScope.Namespace): PodDrift | undefined {
  const name = pod.metadata?.name ?? '';
  const recorded = recordedStatus(pod);
  if (recorded === undefined) return undefined;
  if (recorded === 'unreadable')
    return stale(name, { reason: StaleReason.StatusUnreadable, detail: `annotation ${Keys.status} is not JSON with a "templates" list` });
  const gone = recorded.templates.filter((t) => !set.templates.has(t));
  if (gone.length > 0)
    return stale(
      name,
      { reason: StaleReason.TemplateRemoved, detail: `template${gone.length === 1 ? '' : 's'} ${list(gone)} no longer exist${gone.length === 1 ? 's' : ''}` },
      recorded,
    );
  const fresh = reinject(pod, set, revision, scope);
  if ('refused' in fresh) return stale(name, fresh.refused, recorded);
  const difference = compareStatus(recorded, fresh.status);
  if (difference !== undefined) return stale(name, withRequired(difference, recorded, set, pod.metadata?.namespace ?? 'default'), recorded, fresh.status);
  return { name, state: PodState.Current, recorded, current: fresh.status };
}

/** What decides whether admission would inject a pod: the webhook configurations and each namespace's labels. */
export interface OptInView {
  readonly configurations: readonly WebhookConfiguration[];
  /** Where the configurations were read, for the report. */
  readonly source: string;
  /** The labels of each namespace the pods are in (a namespace absent here has none). */
  readonly namespaceLabels: ReadonlyMap<string, Labels>;
}

/**
 * The verdict on a pod without a status annotation: `missing` when admission would inject it now,
 * undefined when it would not (not opted in, opted out, no template applies). The selection is the
 * webhook's own: the configurations' namespace and object selectors pick the path (webhookCalls),
 * and the server's selectTemplates decides with that path's scope (dapr #4171, linkerd2 #3290:
 * pods created while the injector was down or before it was installed).
 */
export function missingSidecars(pod: Pod, set: TemplateSet, view: OptInView): PodDrift | undefined {
  const name = pod.metadata?.name ?? '';
  const scope = mutatingScope(pod, view);
  if (scope === undefined) return undefined;
  const admitted = asAdmitted(pod);
  try {
    const selection = selectTemplates(admitted, set, scope);
    if (!selection.inject) return undefined;
    injectSidecars(admitted, selection.templates, pod.metadata?.namespace ?? 'default');
    const names = list(selection.templates.map((t) => t.name));
    return { name, state: PodState.Missing, reason: MissingReason.NotInjected, detail: `no sidecars: ${selection.optedIn}, would get ${names}` };
  } catch (err) {
    if (!(err instanceof InjectorError)) throw err;
    return {
      name,
      state: PodState.Missing,
      reason: MissingReason.WouldBeRefused,
      detail: `no sidecars, and the templates would refuse it now: ${err.message}`,
    };
  }
}

/** The opt-in scope of the first mutating webhook the apiserver would call for the pod's CREATE; undefined when none would be. */
function mutatingScope(pod: Pod, view: OptInView): OptInScope | undefined {
  const namespace = pod.metadata?.namespace ?? 'default';
  const where = { namespace, namespaceLabels: view.namespaceLabels.get(namespace) ?? {}, podLabels: pod.metadata?.labels ?? {} };
  const hook = webhookCalls(where, view.configurations).find((c) => c.configuration === 'MutatingWebhookConfiguration');
  if (hook === undefined) return undefined;
  // The namespace opt-in's paths end in /namespace, as src/cli/admit.ts reads them.
  return hook.path.endsWith('/namespace') ? OptInScope.Namespace : OptInScope.Pod;
}

/** A pod injected without a template now required in its namespace: the difference says so, naming it and why (required.ts). */
function withRequired(d: Difference, recorded: RecordedStatus, set: TemplateSet, namespace: string): Difference {
  const lacking = (set.required ?? []).filter((t) => requiredIn(t, namespace) && !recorded.templates.includes(t.name));
  if (lacking.length === 0) return d;
  return { ...d, detail: `${d.detail}; ${lacking.map((t) => whyRequired(t, namespace)).join('; ')}` };
}

/**
 * What admission would record for the pod if it were created now: the server's own selection and
 * injection (selectTemplates, injectSidecars), run on the pod as it looked when it was admitted.
 */
function reinject(pod: Pod, set: TemplateSet, revision: string, scope: OptInScope): { status: RecordedStatus } | { refused: Difference } {
  const namespace = pod.metadata?.namespace ?? 'default';
  const admitted = asAdmitted(pod);
  try {
    // The scope of the webhook the pod's CREATE reaches: by its label, or by its namespace's.
    const selection = selectTemplates(admitted, set, scope);
    if (!selection.inject) return { refused: { reason: StaleReason.NoLongerSelected, detail: `would not be injected now: ${selection.detail}` } };
    // The annotation this injection writes, read back as any recorded one is.
    const fresh = recordedStatus(injectSidecars(admitted, selection.templates, namespace, { revision }).pod);
    if (fresh === undefined || fresh === 'unreadable') throw new Error('the injection wrote no readable status annotation');
    return { status: fresh };
  } catch (err) {
    if (!(err instanceof InjectorError)) throw err;
    return { refused: { reason: StaleReason.WouldBeRefused, detail: `the templates would refuse it now: ${err.message}` } };
  }
}

/**
 * The pod as the webhook saw it: a controller's pod had only generateName at admission (the apiserver
 * names it afterwards), which `{{ pod.name }}` rendered, and the status annotation was not there yet.
 */
function asAdmitted(pod: Pod): Pod {
  const meta = pod.metadata ?? {};
  const { name: _named, ...unnamed } = meta;
  const annotations = { ...meta.annotations };
  delete annotations[Keys.status];
  return { ...pod, metadata: { ...(meta.generateName ? unnamed : meta), annotations } };
}

function stale(name: string, d: Difference, recorded?: RecordedStatus, current?: RecordedStatus): PodDrift {
  return {
    name,
    state: PodState.Stale,
    reason: d.reason,
    detail: d.detail,
    ...(recorded !== undefined && { recorded }),
    ...(current !== undefined && { current }),
  };
}

function list(names: readonly string[]): string {
  return names.length === 0 ? 'no templates' : names.map((n) => `"${n}"`).join(', ');
}

/** The workload a pod belongs to, following only verified owner links (podOwner). */
export function workloadOf(pod: Pod, owners: Owners): WorkloadRef {
  const { namespace, kind, name } = podOwner(pod, owners);
  return { namespace, kind, name };
}

/** What replaces a workload's stale pods with freshly injected ones. */
export function rolloutCommand(w: WorkloadRef, stalePods: readonly string[]): string {
  const ns = `kubectl -n ${w.namespace}`;
  switch (w.kind) {
    case 'Deployment':
    case 'StatefulSet':
    case 'DaemonSet':
      return `${ns} rollout restart ${w.kind.toLowerCase()}/${w.name}`;
    case 'CronJob':
      return `${ns} create job ${w.name}-refresh --from=cronjob/${w.name}   # or wait: the next scheduled Job gets the current templates`;
    case 'Job':
      // A Job's pods are never restarted in place, and its generated selector forbids `replace --force`.
      return `${ns} delete job ${w.name}   # then create it again from its manifest`;
    case 'ReplicaSet':
      return `${ns} delete pod ${stalePods.join(' ')}   # the ReplicaSet creates them again`;
    case 'Pod':
      return `${ns} delete pod ${w.name}   # then create it again from its manifest: nothing re-creates a bare pod`;
    default:
      return `# restart ${w.kind} ${w.namespace}/${w.name} through its controller`;
  }
}

export interface DriftOptions {
  /** List current pods too, not only the stale and missing ones. */
  readonly all: boolean;
  /** Where the templates came from, for the report. */
  readonly source: string;
  /** What opts a pod in, to find the pods missing their sidecars. */
  readonly optIn: OptInView;
  /**
   * The install whose pods are judged ('' or absent: the default install): a pod whose status
   * names another revision is that install's, and is left out.
   */
  readonly revision?: string;
}

/**
 * Judges every pod against the set its namespace sees (`setFor`: a namespace's own SidecarTemplates
 * over the cluster-wide ones; a directory's set is the same for all), groups the injected and
 * missing ones by workload (sorted by namespace, kind, name), and keeps the stale and missing ones
 * unless `all`.
 */
export function driftReport(pods: readonly Pod[], owners: Owners, set: TemplateSet, opts: DriftOptions): DriftReport {
  const groups = new Map<string, { ref: WorkloadRef & { templateOptsIn?: boolean }; pods: PodDrift[] }>();
  const revision = opts.revision ?? '';
  for (const pod of pods) {
    if (!injectedBy(pod, revision)) continue;
    // A pod the webhooks are never sent is not the injector's, whatever annotations it carries:
    // anyone who can create a pod can write a status annotation.
    const scope = mutatingScope(pod, opts.optIn);
    if (scope === undefined) continue;
    const seen = setFor(set, pod.metadata?.namespace ?? 'default');
    const verdict = podDrift(pod, seen, revision, scope) ?? missingSidecars(pod, seen, opts.optIn);
    if (verdict === undefined) continue;
    const owner = podOwner(pod, owners);
    const ref = {
      namespace: owner.namespace,
      kind: owner.kind,
      name: owner.name,
      ...(owner.object !== undefined && { templateOptsIn: templateOptsIn(owner.object, seen, opts.optIn) }),
    };
    const key = `${ref.namespace}\u0000${ref.kind}\u0000${ref.name}`;
    const group = groups.get(key) ?? { ref, pods: [] };
    group.pods.push(verdict);
    groups.set(key, group);
  }
  const workloads = [...groups.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([, g]) => workloadDrift(g.ref, g.pods, opts.all))
    .filter((w) => w.pods.length > 0);
  const all = [...groups.values()].flatMap((g) => g.pods);
  const byNamespace = new Map<string, PodDrift[]>();
  for (const g of groups.values()) byNamespace.set(g.ref.namespace, [...(byNamespace.get(g.ref.namespace) ?? []), ...g.pods]);
  const namespaces = [...byNamespace.keys()].sort().map((ns) => namespaceDrift(ns, byNamespace.get(ns)!));
  const { injected, stale, missing } = namespaceDrift('', all);
  return {
    ...(revision !== '' && { revision }),
    templates: { source: opts.source, digest: set.digest },
    webhooks: { source: opts.optIn.source },
    injected,
    stale,
    missing,
    namespaces,
    workloads,
  };
}

/**
 * Whether a pod made from the workload's template would be opted in: a webhook would be sent its
 * CREATE and the server's opt-in rule takes its labels (selectTemplates' NotOptedIn and OptedOut).
 */
function templateOptsIn(owner: OwnerObject, set: TemplateSet, view: OptInView): boolean {
  const pod: Pod = { metadata: { namespace: owner.namespace, labels: owner.templateLabels } };
  const scope = mutatingScope(pod, view);
  if (scope === undefined) return false;
  const selection = selectTemplates(pod, set, scope);
  return selection.inject || (selection.reason !== Reason.NotOptedIn && selection.reason !== Reason.OptedOut);
}

function namespaceDrift(namespace: string, pods: readonly PodDrift[]): NamespaceDrift {
  const count = (state: PodState): number => pods.filter((p) => p.state === state).length;
  return {
    namespace,
    injected: pods.length - count(PodState.Missing),
    stale: count(PodState.Stale),
    missing: count(PodState.Missing),
    current: count(PodState.Current),
  };
}

function workloadDrift(ref: WorkloadRef & { templateOptsIn?: boolean }, pods: readonly PodDrift[], all: boolean): WorkloadDrift {
  const sorted = [...pods].sort(byName);
  const outdated = sorted.filter((p) => p.state !== PodState.Current);
  const count = (state: PodState): number => pods.filter((p) => p.state === state).length;
  return {
    ...ref,
    pods: all ? sorted : outdated,
    injected: pods.length - count(PodState.Missing),
    stale: count(PodState.Stale),
    missing: count(PodState.Missing),
    rollout: rolloutCommand(
      ref,
      outdated.map((p) => p.name),
    ),
  };
}

function byName(a: PodDrift, b: PodDrift): number {
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}
