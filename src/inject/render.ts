import { InjectorError } from '../errors.js';
import { NO_KEYS, setKey, type Pod } from '../kube/types.js';
import { renderValues, type RenderValues } from '../templates/placeholders.js';
import { RenderBudget, type CompiledTemplate, type RenderedTemplate } from '../templates/template.js';
import { describeFault, renderedFault } from '../templates/values.js';
import { jobCompletionWarning } from './jobs.js';
import { applyOverrides, overridesFor } from './overrides.js';
import { overrideAnnotations } from '../templates/override-keys.js';
import { planFor, type InjectionPlan } from './plan.js';

/** Facts about a pod that its object alone may not tell (the CLI injects pod templates, which have no owner). */
export interface InjectionContext {
  /** The pod belongs to a Job (directly, or through a CronJob); default: read from ownerReferences. */
  readonly ownedByJob?: boolean;
  /** Build the pod even when a mount names no volume (lint inspects that pod); admission denies it. */
  readonly lenientMounts?: boolean;
  /** The revision of the install that injects (--revision), recorded in the status annotation; default: none. */
  readonly revision?: string;
  /** Bytes the renderings may add to the pod (RenderBudget: the patch limit, --max-patch-kib); default: that flag's default. */
  readonly renderBytes?: number;
  /**
   * Whether the apiserver's admission policies inject and check a template in pods of a namespace
   * (serve --mode hybrid: PolicySync.byPolicy): the webhook still knows it (a pod may name it) but
   * leaves it out of what it injects and of what /validate checks there (leftToWebhook;
   * test/server/hybrid.test.ts).
   */
  readonly byPolicy?: (t: CompiledTemplate, namespace: string) => boolean;
}

/** The selected templates the webhook injects and checks in a pod of `namespace`: all of them, but in hybrid mode those the policies inject there. */
export function leftToWebhook(templates: readonly CompiledTemplate[], context: InjectionContext, namespace: string): readonly CompiledTemplate[] {
  const { byPolicy } = context;
  return byPolicy === undefined ? templates : templates.filter((t) => !byPolicy(t, namespace));
}

/** The selected templates rendered for one pod, and what the handlers add to their answer as warnings. */
export interface Rendering {
  readonly templates: readonly RenderedTemplate[];
  /** Annotations under a template's prefix that were ignored; regular sidecars in a Job's pod. */
  readonly warnings: readonly string[];
  /** What these renderings put into a pod (shared by every pod rendered alike). */
  readonly plan: InjectionPlan;
}

/**
 * Renders the selected templates for one pod, exactly as the mutating and the validating handler
 * both need them: placeholders expanded, native sidecars decided for Job pods, per-pod overrides
 * applied. Throws RENDERING_TOO_LARGE when the renderings would add more than the budget to the
 * pod (before building them), TEMPLATE_VALUE_INVALID when a placeholder renders a value Kubernetes refuses
 * where it lands, OVERRIDE_REFUSED for an invalid value of an override the template allows, and
 * TEMPLATE_CONFLICT when the templates cannot all go into one pod.
 */
export function renderForPod(pod: Pod, templates: readonly CompiledTemplate[], namespace: string, context: InjectionContext = {}): Rendering {
  const job = context.ownedByJob ?? isOwnedByJob(pod);
  const { values, rendered: raw } = settle(pod, templates, namespace, job, context.renderBytes);
  templates.forEach((t, i) => refuseInvalidValues(t, raw[i]!, (key) => labelKept(key, values.labels, raw.slice(0, i))));
  const warnings: string[] = [];
  const annotations = overrideAnnotations(values.annotations, values.addedAnnotations);
  const rendered = templates.map((t, i) => {
    const { overrides, warnings: ignored } = overridesFor(t, annotations, templates);
    if (ignored.length > 0) warnings.push(...ignored);
    const r = applyOverrides(raw[i]!, overrides);
    const blocksJob = job ? jobCompletionWarning(r) : undefined;
    if (blocksJob !== undefined) warnings.push(blocksJob);
    return r;
  });
  const plan = planFor(rendered, context.revision);
  if (plan.conflict !== undefined) throw new InjectorError('TEMPLATE_CONFLICT', [plan.conflict]);
  return { templates: plan.rendered, warnings, plan };
}

/**
 * A rendered value the apiserver would refuse (a label value ending in "-") would make it refuse the
 * pod after admission, with a message that does not name the injector, and a controller could
 * create no pod at all: denied here instead, naming the template, the field and the
 * value. Only the values holding a placeholder are checked (the static ones passed at load): none
 * in most templates, a few regular expressions in the others.
 */
function refuseInvalidValues(t: CompiledTemplate, rendered: RenderedTemplate, labelKept: (key: string) => boolean): void {
  if (t.checks.length === 0) return;
  const fault = renderedFault(t.checks, rendered, labelKept);
  if (fault !== undefined) throw new InjectorError('TEMPLATE_VALUE_INVALID', [describeFault(t.name, fault)]);
}

/** True when the pod's label `key` will not be a template's: the pod has it, or an earlier template sets it (templateKeys' rule). */
function labelKept(key: string, own: Readonly<Record<string, string>>, earlier: readonly RenderedTemplate[]): boolean {
  return Object.hasOwn(own, key) || earlier.some((r) => Object.hasOwn(r.labels, key));
}

/** renderForPod without the warnings. */
export function renderTemplates(
  pod: Pod,
  templates: readonly CompiledTemplate[],
  namespace: string,
  context: InjectionContext = {},
): readonly RenderedTemplate[] {
  return renderForPod(pod, templates, namespace, context).templates;
}

/**
 * Renders against the pod as it will be stored: its own labels and annotations plus those the
 * selected templates add, by templateKeys, the rule injectSidecars applies.
 * So a re-invocation on the injected pod renders alike: it patches nothing and warns of nothing
 * (test/inject/render.test.ts, test/inject/property.test.ts). A template's own labels may hold placeholders, so this repeats
 * until they settle: no extra render when the templates add no key the pod lacks or no placeholder
 * reads one they add (each template knows the keys it reads, from its compilation).
 */
function settle(
  pod: Pod,
  templates: readonly CompiledTemplate[],
  namespace: string,
  job: boolean,
  renderBytes: number | undefined,
): { values: RenderValues; rendered: RenderedTemplate[] } {
  const own = renderValues(pod, namespace);
  let values = own;
  // One budget per rendering of the whole list: the templates share what the pod may gain. The
  // rounds share what they made, so a template that reads none of the added keys renders once.
  const made = new Map<string, RenderedTemplate>();
  const renderAll = (): RenderedTemplate[] => {
    const budget = new RenderBudget(renderBytes, made);
    return templates.map((t) => t.render(values, job, budget));
  };
  let rendered = renderAll();
  // The keys a template adds are written in it (placeholders fill values only): when no template
  // reads one that a selected template adds, the first rendering is the settled one, and the keys
  // added matter only to the override annotations, when a template adds one under such a prefix.
  if (!readsAdded(templates) && !templates.some((t) => t.addsOverrideKeys)) return { values, rendered };
  // Only the keys the templates add are compared, and rendered from beside the pod's own maps,
  // which may hold tens of thousands of keys (256 KiB of annotations) and are never copied here.
  let added: AddedKeys = { labels: undefined, annotations: undefined };
  for (let round = 0; round <= templates.length; round++) {
    const plan = planFor(rendered);
    const next: AddedKeys = { labels: templateKeys(own.labels, plan.labels), annotations: templateKeys(own.annotations, plan.annotations) };
    if (sameMap(next.labels ?? NO_KEYS, added.labels ?? NO_KEYS) && sameMap(next.annotations ?? NO_KEYS, added.annotations ?? NO_KEYS)) break;
    added = next;
    values = { ...own, ...(added.labels && { addedLabels: added.labels }), ...(added.annotations && { addedAnnotations: added.annotations }) };
    // Rendered again with those keys, each template renders as it did, since it reads none of them.
    if (!templates.some((t) => readsAny(t.reads.labels, added.labels) || readsAny(t.reads.annotations, added.annotations))) break;
    rendered = renderAll();
  }
  return { values, rendered };
}

/** True when a template reads a pod label or annotation that one of the templates adds. */
function readsAdded(templates: readonly CompiledTemplate[]): boolean {
  for (const t of templates) {
    if (t.reads.labels.size === 0 && t.reads.annotations.size === 0) continue;
    for (const u of templates) {
      if (readsAny(t.reads.labels, u.spec.labels) || readsAny(t.reads.annotations, u.spec.annotations)) return true;
    }
  }
  return false;
}

function readsAny(keys: ReadonlySet<string>, map: Readonly<Record<string, string>> | undefined): boolean {
  if (map === undefined || keys.size === 0) return false;
  for (const key in map) if (keys.has(key)) return true;
  return false;
}

interface AddedKeys {
  readonly labels: Readonly<Record<string, string>> | undefined;
  readonly annotations: Readonly<Record<string, string>> | undefined;
}

/** Template labels or annotations, `[[key, value], template]` in the templates' order (InjectionPlan.labels). */
export type TemplateKeys = InjectionPlan['labels'];

/** A new map of `own`'s keys, then `added`'s (keys `own` lacks). */
export function copyWithKeys(own: Readonly<Record<string, string>>, added: Readonly<Record<string, string>> | undefined): Record<string, string> {
  // Spread defines each own key as a data property: a `__proto__` key stays a key.
  return { ...own, ...added };
}

/** Only the keys the templates add to `own` (undefined: none), by the rule injectSidecars applies (the pod's value wins, then the first template's); never walks `own`. */
export function templateKeys(
  own: Readonly<Record<string, string>>,
  entries: TemplateKeys,
  onKept?: (key: string, template: string) => void,
): Record<string, string> | undefined {
  let added: Record<string, string> | undefined;
  for (const [[key, value], template] of entries) {
    const current = Object.hasOwn(own, key) ? own : added !== undefined && Object.hasOwn(added, key) ? added : undefined;
    if (current !== undefined) {
      if (current[key] !== value) onKept?.(key, template);
      continue;
    }
    added ??= {};
    setKey(added, key, value);
  }
  return added;
}

function sameMap(a: Readonly<Record<string, string>>, b: Readonly<Record<string, string>>): boolean {
  if (a === b) return true;
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => Object.hasOwn(b, k) && a[k] === b[k]);
}

/**
 * A pod made by the Job controller (a CronJob's pods too: a CronJob makes Jobs, which make the pods)
 * has a controller ownerReference to a batch/v1 Job.
 */
export function isOwnedByJob(pod: Pod): boolean {
  const owners = pod.metadata?.ownerReferences ?? [];
  return Array.isArray(owners) && owners.some((o) => o['kind'] === 'Job' && typeof o['apiVersion'] === 'string' && o['apiVersion'].startsWith('batch/'));
}
