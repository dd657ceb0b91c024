import { InjectorError } from '../errors.js';
import { clip } from '../log.js';
import type { Pod } from '../kube/types.js';
import type { TemplateSet } from '../templates/load.js';
import type { CompiledTemplate } from '../templates/template.js';
import { requiredIn } from '../templates/required.js';
import { Keys, strayKeyWarnings } from './keys.js';

/** Why a pod did or did not get sidecars; stable strings, used in logs, metrics and audit annotations. */
export const Reason = {
  Injected: 'injected',
  /** The pod already holds every sidecar (a reinvocation): allowed with no patch. */
  AlreadyInjected: 'already-injected',
  /** Not the CREATE of a core/v1 Pod: passed through. */
  NotPodCreate: 'not-pod-create',
  /** A review the handlers cannot act on (no pod, a pod of the wrong shape): refused with 400. */
  InvalidReview: 'invalid-review',
  /** /validate: every selected template's sidecars are in the pod. */
  SidecarsPresent: 'sidecars-present',
  /** /validate: every selected template's sidecars are in the pod, some running their repository from a registry mirror (--image-mirror). */
  SidecarsMirrored: 'sidecars-mirrored',
  /** /validate: the sidecars of a set this replica served within the history window (a template rollout). */
  EarlierTemplates: 'earlier-templates',
  /** /validate: what the status records of a template version this replica never served (a rollout it has not seen yet). */
  RecordedTemplates: 'recorded-templates',
  /** /validate: sidecars named by the status of an earlier injector release, shortly after this one started. */
  UnversionedStatus: 'unversioned-status',
  /** /validate: an opted-in pod without its sidecars, rejected. */
  SidecarsMissing: 'sidecars-missing',
  /** /validate: an opted-in pod without a template the platform made mandatory (spec.required), rejected. */
  RequiredSidecarMissing: 'required-sidecar-missing',
  /** /validate on a pod UPDATE: the update changes no sidecar the platform made mandatory (spec.required). */
  RequiredSidecarsKept: 'required-sidecars-kept',
  /** /validate on a pod UPDATE: the update swaps the image of a mandatory sidecar (or removes it), rejected. */
  RequiredSidecarChanged: 'required-sidecar-changed',
  NotOptedIn: 'not-opted-in',
  OptedOut: 'opted-out',
  NoTemplates: 'no-templates',
  /** Every selected template is injected and checked by the admission policies (serve --mode hybrid): the webhook leaves the pod to them. */
  ByPolicy: 'by-policy',
  UnknownTemplate: 'unknown-template',
  TemplateConflict: 'template-conflict',
  OverrideRefused: 'override-refused',
  /** A template's placeholder rendered a value Kubernetes refuses where it lands. */
  TemplateValueInvalid: 'template-value-invalid',
  VolumeMissing: 'volume-missing',
  /** The pod's own spec.resources would not cover the sidecars' requests or limits. */
  PodResourcesExceeded: 'pod-resources-exceeded',
  /** The pod's annotations would go over Kubernetes' 256 KiB once the injector adds its own. */
  AnnotationsTooLarge: 'annotations-too-large',
  /** A template's rendering for the pod would add more than --max-patch-kib (a pod value its placeholders read many times): refused before it is built. */
  RenderingTooLarge: 'rendering-too-large',
  /** The patch would be larger than --max-patch-kib (a pod of many containers, each given the templates' env and mounts). */
  PatchTooLarge: 'patch-too-large',
  /** /validate/sidecartemplates: the SidecarTemplate written is one the injector would load. */
  TemplateLoadable: 'template-loadable',
  /** /validate/sidecartemplates: no change of what the injector reads (DELETE, the status subresource, an UPDATE of other metadata): passed through. */
  NotTemplateWrite: 'not-template-write',
} as const;
export type Reason = (typeof Reason)[keyof typeof Reason];

const refusalReasons: Partial<Record<InjectorError['code'], Reason>> = {
  OVERRIDE_REFUSED: Reason.OverrideRefused,
  TEMPLATE_VALUE_INVALID: Reason.TemplateValueInvalid,
  RENDERING_TOO_LARGE: Reason.RenderingTooLarge,
  TEMPLATE_CONFLICT: Reason.TemplateConflict,
  TEMPLATE_VOLUME_MISSING: Reason.VolumeMissing,
  ANNOTATIONS_TOO_LARGE: Reason.AnnotationsTooLarge,
  POD_RESOURCES_EXCEEDED: Reason.PodResourcesExceeded,
};

/** The Reason for a pod refused while its templates were rendered or injected (the error code when there is none). */
export function refusalReason(err: InjectorError): string {
  return refusalReasons[err.code] ?? err.code;
}

/**
 * Who may opt a pod in, set by the webhook path the review came to. `pod`: `/mutate` and
 * `/validate`, called for pods labelled `sidecar-injector.io/inject: "true"`. `namespace`:
 * `/mutate/namespace` and `/validate/namespace`, called for the pods of a namespace labelled so,
 * where a pod without the label is in and a pod labelled anything but "true" has opted out.
 * `required`: `/mutate/required` and `/validate/required`, called for every pod of the namespaces
 * the platform selected (the optional required webhooks, no objectSelector): no pod opts in or out
 * there, and only the templates required in its namespace are selected.
 */
export const OptInScope = { Pod: 'pod', Namespace: 'namespace', Required: 'required' } as const;
export type OptInScope = (typeof OptInScope)[keyof typeof OptInScope];

export type Selection =
  | { readonly inject: true; readonly templates: readonly CompiledTemplate[]; readonly explicit: boolean; readonly optedIn: string }
  | { readonly inject: false; readonly reason: Reason; readonly detail: string };

/**
 * Decides whether a pod gets sidecars and which. The server checks the opt-in label itself, so a
 * broader webhook configuration can never inject a pod that did not ask for it: with the pod scope
 * only the label "true" opts in; with the namespace scope (the webhook's namespaceSelector has
 * already chosen the namespace) a pod without the label is in too. The templates the pod names, or
 * else the defaults, are followed by every template required in `namespace` that they lack
 * (required.ts), so no annotation or namespace default leaves one out. With the required scope the
 * pod's labels and annotations are not read: it gets the required templates alone (requiredOnly).
 */
export function selectTemplates(pod: Pod, set: TemplateSet, scope: OptInScope = OptInScope.Pod, namespace = pod.metadata?.namespace ?? 'default'): Selection {
  if (scope === OptInScope.Required) return requiredOnly(set, namespace);
  const meta = pod.metadata ?? {};
  const label = own(meta.labels, Keys.inject);
  if (label === undefined && scope === OptInScope.Pod) return { inject: false, reason: Reason.NotOptedIn, detail: `label ${Keys.inject} is not set` };
  if (label !== undefined && label !== 'true') return { inject: false, reason: Reason.OptedOut, detail: `label ${Keys.inject}="${label}"` };
  const optedIn =
    label === undefined ? `the namespace is labelled ${Keys.inject}="true" and the pod has no ${Keys.inject} label` : `label ${Keys.inject}="true"`;
  const requested = parseNames(own(meta.annotations, Keys.templates) ?? '');
  const required = requiredFor(set, namespace);
  if (requested.length === 0) {
    if (set.defaults.length === 0 && required.length === 0)
      return { inject: false, reason: Reason.NoTemplates, detail: 'no template is marked default and the pod names none' };
    return { inject: true, templates: withRequired(set.defaults, required), explicit: false, optedIn };
  }
  return { inject: true, templates: withRequired(namedTemplates(requested, set), required), explicit: true, optedIn };
}

const NONE: readonly CompiledTemplate[] = Object.freeze([]);

/**
 * The selection of the required paths: the templates required in `namespace`, whatever the pod's
 * inject label, templates annotation or revision label say, so a pod that opted out or names a
 * revision nobody installed still gets them (test/server/required-webhooks.test.ts).
 */
function requiredOnly(set: TemplateSet, namespace: string): Selection {
  const required = requiredFor(set, namespace);
  if (required.length === 0) return { inject: false, reason: Reason.NoTemplates, detail: `no template is required in namespace ${namespace}` };
  return {
    inject: true,
    templates: required,
    explicit: false,
    optedIn: 'the platform enforces its required templates in the namespace (the required webhooks)',
  };
}

/** The templates required in `namespace`, in name order. */
export function requiredFor(set: TemplateSet, namespace: string): readonly CompiledTemplate[] {
  return set.required === undefined ? NONE : set.required.filter((t) => requiredIn(t, namespace));
}

/** The templates chosen, then each required one they lack, in name order: whatever a pod names, it gets those too (required.ts). */
function withRequired(chosen: readonly CompiledTemplate[], required: readonly CompiledTemplate[]): readonly CompiledTemplate[] {
  if (required.length === 0) return chosen;
  const missing = required.filter((r) => !chosen.some((t) => t.name === r.name));
  return missing.length === 0 ? chosen : [...chosen, ...missing];
}

/**
 * Resolves the templates annotation; throws TEMPLATE_UNKNOWN naming the names that do not exist and
 * the ones that do, each list cut to a few names and "N more", each name a pod wrote cut to
 * NAME_SHOWN characters: a 256 KiB annotation, or a namespace of a thousand templates, never makes
 * the message long (test/inject/policy.test.ts).
 */
function namedTemplates(names: readonly string[], set: TemplateSet): CompiledTemplate[] {
  const unknown = names.filter((n) => !set.templates.has(n));
  if (unknown.length > 0) {
    const known = [...set.templates.keys()].sort();
    throw new InjectorError('TEMPLATE_UNKNOWN', [
      listed(
        unknown.map((n) => `"${clip(n, NAME_SHOWN)}"`),
        UNKNOWN_SHOWN,
      ),
      Keys.templates,
      listed(known, KNOWN_SHOWN),
    ]);
  }
  return names.map((n) => set.templates.get(n)!);
}

/** The most unknown names, known names, and characters of one unknown name a TEMPLATE_UNKNOWN message shows. */
const UNKNOWN_SHOWN = 5;
const KNOWN_SHOWN = 20;
const NAME_SHOWN = 63;

/** The first `shown` items, comma-separated, and how many more there are. */
function listed(items: readonly string[], shown: number): string {
  const head = items.slice(0, shown).join(', ');
  return items.length > shown ? `${head} and ${items.length - shown} more` : head;
}

/** Splits the templates annotation: comma-separated, blanks ignored, first mention wins. */
export function parseNames(value: string): string[] {
  // Most pods name no template: nothing to split.
  if (value === '') return [];
  return [
    ...new Set(
      value
        .split(',')
        .map((n) => n.trim())
        .filter((n) => n !== ''),
    ),
  ];
}

function own(map: Record<string, string> | undefined, key: string): string | undefined {
  if (map === undefined || !Object.prototype.hasOwnProperty.call(map, key)) return undefined;
  const v = map[key];
  return typeof v === 'string' ? v : undefined;
}

/**
 * The pod's labels and annotations that look meant for the injector but are not read by it
 * (strayKeyWarnings: a typo of a key, a wrong prefix, a key on the wrong object), said in the
 * AdmissionResponse of /mutate and by `explain` and `inject`; `selected`: the templates the pod
 * gets, if any. Warnings only: the pod is decided as if the keys were not there.
 */
export function keyWarnings(pod: Pod, set: TemplateSet, selected?: readonly CompiledTemplate[]): readonly string[] {
  const meta = pod.metadata;
  if (meta === undefined || (meta.labels === undefined && meta.annotations === undefined)) return NO_WARNINGS;
  return strayKeyWarnings(meta, selected === undefined ? { templates: set.templates } : { templates: set.templates, selected: selected.map((t) => t.name) });
}

const NO_WARNINGS: readonly string[] = Object.freeze([]);
