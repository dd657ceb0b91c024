import { Keys } from '../inject/keys.js';
import type { LabelSelector } from '../kube/types.js';
import type { TemplateSet } from '../templates/load.js';
import { NativeSidecar, type CompiledTemplate } from '../templates/template.js';
import { REVISION_LABEL } from './bindings.js';
import { celString } from './cel.js';

/**
 * Which templates a pod selects, as CEL every policy of a view evaluates the same way (the
 * webhook's selectTemplates), and what each policy knows of the view's other templates.
 */

/** What every template's policy knows of the others: their item names, to keep the webhook's order whichever policy runs first. */
export interface SetContext {
  readonly defaults: readonly string[];
  /** The required templates, in name order. */
  readonly required: readonly CompiledTemplate[];
  /** Per template, the names of the containers it adds (containers and initContainers). */
  readonly containers: string;
  /** Per template placed first in containers / last: its container names. */
  readonly firstContainers: string;
  readonly lastContainers: string;
  /** Per template placed next to a named container: that container (where `last` puts them when the pod lacks it). */
  readonly anchors: string;
  /** Per template, the names of its items placed first in initContainers: its init containers, and its native sidecars unless placed next to a container. */
  readonly firstInit: string;
  /** Per template placed next to a container, its native sidecars in initContainers: of the templates native in every pod, and of those too that are native in Jobs' pods. */
  readonly anchoredNative: string;
  readonly anchoredNativeInJobs: string;
  readonly volumes: string;
  readonly pullSecrets: string;
  readonly env: string;
  readonly mounts: string;
}

export function contextOf(set: TemplateSet): SetContext {
  const all = [...set.templates.values()];
  const map = (pick: (t: CompiledTemplate) => readonly string[]): string => `{${all.map((t) => `${celString(t.name)}: ${celList(pick(t))}`).join(', ')}}`;
  const names = (items: readonly { readonly name: string }[]): string[] => items.map((i) => i.name);
  const anchored = (...modes: NativeSidecar[]): string =>
    `{${all
      .filter((t) => typeof t.placement === 'object' && modes.includes(t.nativeMode))
      .map((t) => `${celString(t.name)}: ${celList(names(t.spec.containers))}`)
      .join(', ')}}`;
  return {
    defaults: set.defaults.map((t) => t.name),
    required: set.required ?? [],
    containers: map((t) => [...names(t.spec.initContainers), ...names(t.spec.containers)]),
    firstContainers: map((t) => (t.placement === 'first' ? names(t.spec.containers) : [])),
    lastContainers: map((t) => (t.placement === 'first' ? [] : names(t.spec.containers))),
    anchors: `{${all.flatMap((t) => (typeof t.placement === 'object' ? [`${celString(t.name)}: ${celString('before' in t.placement ? t.placement.before : t.placement.after)}`] : [])).join(', ')}}`,
    firstInit: map((t) => [...names(t.spec.initContainers), ...(typeof t.placement === 'object' ? [] : names(t.spec.containers))]),
    anchoredNative: anchored(NativeSidecar.Always),
    anchoredNativeInJobs: anchored(NativeSidecar.Always, NativeSidecar.JobsOnly),
    volumes: map((t) => names(t.spec.volumes)),
    pullSecrets: map((t) => names(t.spec.imagePullSecrets)),
    env: map((t) => names(t.spec.env)),
    mounts: map((t) => t.spec.volumeMounts.map((m) => m.mountPath)),
  };
}

export const celList = (items: readonly string[]): string => `[${items.map(celString).join(', ')}]`;

// The selection, as selectTemplates makes it: the templates annotation (comma-separated, blanks
// ignored), else the default templates.
export const REQUESTED = `object.metadata.?annotations[?${celString(Keys.templates)}].orValue("").split(",").map(n, n.trim()).filter(n, n != "")`;
/** The selection of an opted-in pod, as selectTemplates makes it: the pod's names, else the defaults, then each template required in its namespace that they lack. */
export function selectedExpr(context: SetContext): string {
  const chosen = `(size(${REQUESTED}) > 0 ? ${REQUESTED} : ${celList(context.defaults)})`;
  if (context.required.length === 0) return chosen;
  return `(${chosen} + ${requiredHere(context)}.filter(r, !(r in ${chosen})))`;
}

/** The templates required in the pod's namespace, in name order (requiredFor). */
export function requiredHere(context: SetContext): string {
  const cases = context.required.map((t) => `(r == ${celString(t.name)} && ${requiredIn(t.required?.namespaceSelector)})`);
  return `${celList(context.required.map((t) => t.name))}.filter(r, ${cases.join(' || ')})`;
}

/** A required template's namespaceSelector (on kubernetes.io/metadata.name alone, requiredSpecFaults) as CEL over request.namespace. */
export function requiredIn(selector: LabelSelector | undefined): string {
  const terms = [
    ...Object.values(selector?.matchLabels ?? {}).map((v) => `request.namespace == ${celString(v)}`),
    ...(selector?.matchExpressions ?? []).map((r) =>
      r.operator === 'In'
        ? `request.namespace in ${celList(r.values ?? [])}`
        : r.operator === 'NotIn'
          ? `!(request.namespace in ${celList(r.values ?? [])})`
          : r.operator === 'Exists'
            ? 'true'
            : 'false',
    ),
  ];
  return terms.length === 0 ? 'true' : `(${terms.join(' && ')})`;
}

/**
 * Whether the default install's bindings take the pod (bindings, OPTED_IN): no revision label on
 * the pod or its namespace, and the pod labelled "true", or unlabelled in a namespace labelled "true".
 */
export const OPTED_IN_BY_BINDINGS = [
  `!(${celString(REVISION_LABEL)} in object.metadata.?labels.orValue({}))`,
  `!(${celString(REVISION_LABEL)} in namespaceObject.metadata.?labels.orValue({}))`,
  `(object.metadata.?labels[?${celString(Keys.inject)}].orValue("") == "true" || (!(${celString(Keys.inject)} in object.metadata.?labels.orValue({})) && namespaceObject.metadata.?labels[?${celString(Keys.inject)}].orValue("") == "true"))`,
].join(' && ');

// Any value of the label but "true" opts the pod out (the namespace binding lets a pod without it in).
export const OPTED_IN = `!has(object.metadata.labels) || !(${celString(Keys.inject)} in object.metadata.labels) || object.metadata.labels[${celString(Keys.inject)}] == "true"`;
// A pod of a Job (a CronJob's too), as isOwnedByJob decides.
export const IN_JOB = `object.metadata.?ownerReferences.orValue([]).exists(o, o.kind == "Job" && o.apiVersion.startsWith("batch/"))`;
