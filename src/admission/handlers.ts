import type { ReviewHandler } from './pipeline.js';
import { Options, type Config } from '../config/config.js';
import { attempt, InjectorError } from '../errors.js';
import { NoImageMirrors, type ImageMirrors } from '../kube-values/image.js';
import { Keys } from '../inject/keys.js';
import { applyInjection, planInjection } from '../inject/mutate.js';
import { leftToWebhook, type InjectionContext } from '../inject/render.js';
import { keyWarnings, OptInScope, Reason, refusalReason, requiredFor, selectTemplates } from '../inject/policy.js';
import { verifyPod, verifyUpdate } from '../inject/verify.js';
import { isObject, type Pod } from '../kube/types.js';
import { diff } from '../patch/diff.js';
import { setFor, type TemplateSet } from '../templates/load.js';
import type { CompiledTemplate } from '../templates/template.js';
import { base64Patch, DefaultBodyLimits, type BodyLimits, type ReviewRequest } from './codec.js';
import { Endpoints, HandlerKind } from './endpoints.js';
import { DefaultPodLimits, podObject, type PodLimits } from './pod.js';
import { sidecarTemplateReview } from './sidecartemplates.js';
import { allowed, Decision, denied, injected, passed, type Verdict } from './verdict.js';

/** What one review may cost: the pod's lists (checked by podObject) and the patch sent back. */
export interface ReviewLimits {
  /** Checked on the text, before it is parsed (the codec's decodeBody, called by the pipeline). */
  readonly body: BodyLimits;
  readonly pod: PodLimits;
  /** Bytes of JSON patch (before base64); `--max-patch-kib`. */
  readonly patchBytes: number;
}

export const DefaultReviewLimits: ReviewLimits = Object.freeze({
  body: DefaultBodyLimits,
  pod: DefaultPodLimits,
  patchBytes: Options.maxPatchKib.schema.default * 1024,
});

/** The limits the --max-* flags set. */
export function reviewLimits(config: Config): ReviewLimits {
  return {
    body: { objectKeys: config.maxObjectKeys, keys: config.maxJsonKeys, nodes: config.maxJsonNodes },
    pod: {
      containers: config.maxContainers,
      envPerContainer: config.maxEnvPerContainer,
      mountsPerContainer: config.maxMountsPerContainer,
      portsPerContainer: config.maxPortsPerContainer,
      volumes: config.maxVolumes,
    },
    patchBytes: config.maxPatchKib * 1024,
  };
}

/** What the handlers are built over. */
export interface HandlerSource {
  /** The template set in force; each handler reads it once per review, so a review sees one consistent set. */
  readonly templates: () => TemplateSet;
  /** What one review may hold and answer (the --max-* flags); default: their defaults. */
  readonly limits?: ReviewLimits;
  /** The injector's namespace when it serves SidecarTemplate objects (its templates are the cluster-wide ones); default: it serves none. */
  readonly templatesHome?: string;
  /** The registry mirrors later webhooks rewrite sidecar images to (--image-mirror); default: none. */
  readonly imageMirrors?: ImageMirrors;
  /** This install's revision (--revision), recorded in the status annotation of every pod it injects; default: none. */
  readonly revision?: string;
  /** serve --mode hybrid: whether the admission policies inject and check a template in a namespace's pods, left out there by both handlers (InjectionContext.byPolicy). */
  readonly byPolicy?: (t: CompiledTemplate, namespace: string) => boolean;
  /** With byPolicy: a token per namespace that changes whenever its answers there may (PolicySync.byPolicyGeneration), part of that namespace's generation. */
  readonly byPolicyGeneration?: (namespace: string) => object;
  /**
   * Where each review step that decided something is told, one call a step (the pino logger's
   * debug level); absent, as at --log-level info, no step builds anything for it.
   */
  readonly debug?: StepLog;
}

/** One line per decision of a review: its fields and what was decided. */
export type StepLog = (fields: Record<string, unknown>, decided: string) => void;

/** The mutating handler: injects the selected templates and answers with the patch; `scope` says who may opt the pod in. */
export function mutating(source: HandlerSource, scope: OptInScope = OptInScope.Pod): ReviewHandler {
  const { templates } = source;
  const limits = source.limits ?? DefaultReviewLimits;
  const context = { revision: source.revision ?? '', renderBytes: limits.patchBytes, ...(source.byPolicy !== undefined && { byPolicy: source.byPolicy }) };
  const mirrors = source.imageMirrors ?? NoImageMirrors;
  const { debug } = source;
  if (debug === undefined) return (req) => mutatePod(req, templates, scope, limits, context, mirrors);
  return (req) => mutatePod(req, templates, scope, limits, context, mirrors, stepsOf(req, debug, scope));
}

/**
 * The validating handler: an opted-in pod must hold every selected template's sidecars when it
 * reaches the end of admission, as the current template set or one served recently defines them
 * (verifyPod: a template rollout reaches replicas at different times).
 */
export function validating(source: HandlerSource, scope: OptInScope = OptInScope.Pod): ReviewHandler {
  const { templates } = source;
  const limits = source.limits ?? DefaultReviewLimits;
  const mirrors = source.imageMirrors ?? NoImageMirrors;
  const context = { renderBytes: limits.patchBytes, ...(source.byPolicy !== undefined && { byPolicy: source.byPolicy }) };
  const { debug } = source;
  if (debug === undefined) return (req) => validatePod(req, templates, scope, limits, context, mirrors);
  return (req) => validatePod(req, templates, scope, limits, context, mirrors, stepsOf(req, debug, scope));
}

/** The step log of one review, every line naming the pod, its namespace and the opt-in scope. */
function stepsOf(req: ReviewRequest, debug: StepLog, scope: OptInScope): StepLog {
  const object = isObject(req.object) ? req.object : {};
  const meta = isObject(object['metadata']) ? object['metadata'] : {};
  const pod = meta['name'] ?? meta['generateName'] ?? '';
  return (fields, decided) => debug({ namespace: req.namespace, pod, scope, ...fields }, decided);
}

const factories: Readonly<Record<HandlerKind, typeof mutating>> = {
  [HandlerKind.Mutate]: mutating,
  [HandlerKind.Validate]: validating,
  [HandlerKind.SidecarTemplate]: (source) => sidecarTemplateReview(source.templatesHome),
};

/** The handlers of every endpoint, and the generation their verdicts belong to. */
export interface Handlers {
  /** The handler of each path of the endpoint table (endpoints.ts). */
  readonly byPath: ReadonlyMap<string, ReviewHandler>;
  /**
   * An opaque token per namespace that changes whenever a verdict for its pods could (its view of
   * the template set with that view's history: a reload that changes the view, or a change of its
   * history), so the answer cache keeps answers per namespace's generation, one namespace's template
   * change costs no other namespace its answers, and no caller learns what a template set is. A
   * number, so a kept answer never holds an old set in memory. Read before the handler, in the same
   * synchronous review.
   */
  readonly generation: (namespace: string) => unknown;
}

/** One handler per row of the endpoint table, built over one template source. */
export function createHandlers(source: HandlerSource): Handlers {
  const ids = new WeakMap<object, WeakMap<object, number>>();
  let last = 0;
  return {
    byPath: new Map(Endpoints.map((e) => [e.path, factories[e.kind](source, e.scope)])),
    generation: (namespace) => {
      const view = setFor(source.templates(), namespace || 'default');
      // The history object changes exactly when the view or its history does (SetHistory); a set without one (no server) is its own token.
      const token = view.history ?? view;
      // Hybrid: which templates the policies hold is part of every verdict too.
      const policies = source.byPolicyGeneration?.(namespace || 'default') ?? NO_POLICIES;
      let byPolicies = ids.get(token);
      if (byPolicies === undefined) ids.set(token, (byPolicies = new WeakMap()));
      const found = byPolicies.get(policies);
      if (found !== undefined) return found;
      byPolicies.set(policies, ++last);
      return last;
    },
  };
}

/** The generation token of handlers without policies (webhook mode). */
const NO_POLICIES = Object.freeze({});

function mutatePod(
  req: ReviewRequest,
  templates: () => TemplateSet,
  scope: OptInScope,
  limits: ReviewLimits,
  context: InjectionContext,
  mirrors: ImageMirrors,
  step?: StepLog,
): Verdict {
  if (!isPodCreate(req)) {
    step?.({ operation: req.operation, subResource: req.subResource }, 'skipped: not the CREATE of a pod');
    return passed(Decision.Skipped, Reason.NotPodCreate);
  }
  const pod = checkedPod(req, scope, limits, templates);
  if (pod === undefined) {
    step?.({}, 'skipped: a pod that did not opt in, over a review limit');
    return passed(Decision.Skipped, Reason.OptedOut);
  }
  const namespace = namespaceOf(req, pod);
  const set = setFor(templates(), namespace);
  const selection = attempt(() => selectTemplates(pod, set, scope, namespace));
  if (selection instanceof InjectorError) {
    step?.({ code: selection.code, error: selection.message }, 'denied: the templates the pod names');
    return denied(selection, Reason.UnknownTemplate);
  }
  // Keys that look meant for the injector are warned of whatever it decides: a typo is
  // most often why a pod got the default templates, or none.
  if (!selection.inject) {
    step?.({ reason: selection.reason, detail: selection.detail }, 'skipped: not selected');
    return passed(Decision.Skipped, selection.reason, keyWarnings(pod, set));
  }
  const chosen = leftToWebhook(selection.templates, context, namespace);
  if (chosen.length === 0) {
    step?.({ templates: selection.templates.map((t) => t.name) }, 'skipped: the admission policies inject every selected template');
    return passed(Decision.Skipped, Reason.ByPolicy, keyWarnings(pod, set, selection.templates));
  }
  step?.(
    {
      optedIn: selection.optedIn,
      templates: chosen.map((t) => `${t.namespace === undefined ? '' : `${t.namespace}/`}${t.name}@${t.version}`),
      from: selection.explicit ? 'the templates annotation' : 'the default templates',
      set: set.digest,
    },
    'selected',
  );
  // /mutate/required leaves a pod /validate/required admits as it is (requiredHeld); /mutate warns of its keys.
  if (scope === OptInScope.Required && requiredHeld(pod, set, namespace, mirrors, limits))
    return injected(
      Reason.AlreadyInjected,
      chosen.map((t) => t.name),
      0,
      undefined,
      NO_WARNINGS,
    );
  const keys = scope === OptInScope.Required ? NO_WARNINGS : keyWarnings(pod, set, selection.templates);

  const injection = attempt(() => planInjection(pod, chosen, namespace, context));
  if (injection instanceof InjectorError) {
    step?.({ code: injection.code, error: injection.message }, 'denied: the selected templates cannot be injected into this pod');
    return denied(injection, refusalReason(injection));
  }
  // The patch is the difference between the pod and the injected pod, lists compared by name.
  const ops = diff(pod, applyInjection(pod, injection));
  const text = JSON.stringify(ops);
  const warnings = keys.length === 0 ? injection.warnings : [...keys, ...injection.warnings];
  step?.({ templates: injection.plan.status.templates, ops: ops.length, warnings }, ops.length === 0 ? 'injected already: nothing to add' : 'injected');
  if (ops.length === 0) return injected(Reason.AlreadyInjected, injection.plan.status.templates, 0, undefined, warnings);
  // An answer of megabytes (a pod of many containers, each given the templates' env and mounts)
  // costs memory here and in the apiserver; the pod is refused with the size instead.
  const bytes = Buffer.byteLength(text);
  if (bytes > limits.patchBytes) {
    return denied(new InjectorError('PATCH_TOO_LARGE', [bytes, limits.patchBytes, Options.maxPatchKib.flag]), Reason.PatchTooLarge);
  }
  // AdmissionResponse.patch is []byte in Go: base64 in JSON.
  return injected(Reason.Injected, injection.plan.status.templates, ops.length, base64Patch(text), warnings);
}

/**
 * Whether the pod already holds the templates required in its namespace, as /validate/required
 * judges it (verifyPod): one /mutate injected, or /mutate/required before a reinvocation. Such a
 * pod gets no patch, so the status annotation /mutate wrote for all its templates stays, and the
 * two webhooks, called in either order, never add a sidecar twice (test/server/required-webhooks.test.ts).
 */
function requiredHeld(pod: Pod, set: TemplateSet, namespace: string, mirrors: ImageMirrors, limits: ReviewLimits): boolean {
  return verifyPod(pod, set, namespace, { renderBytes: limits.patchBytes }, OptInScope.Required, mirrors).kind === 'allowed';
}

const NO_WARNINGS: readonly string[] = Object.freeze([]);

/**
 * Verdicts that lean on the history of the sets served before (their window ends while the set
 * stays) or on the time since start: never kept by the answer cache.
 */
const HistoryReasons: ReadonlySet<string> = new Set([Reason.EarlierTemplates, Reason.RecordedTemplates, Reason.UnversionedStatus]);

function validatePod(
  req: ReviewRequest,
  templates: () => TemplateSet,
  scope: OptInScope,
  limits: ReviewLimits,
  context: InjectionContext,
  mirrors: ImageMirrors,
  step?: StepLog,
): Verdict {
  if (isPodUpdate(req)) return validateUpdate(req, templates(), limits, step);
  if (!isPodCreate(req)) return passed(Decision.Skipped, Reason.NotPodCreate);
  const pod = checkedPod(req, scope, limits, templates);
  if (pod === undefined) return passed(Decision.Skipped, Reason.OptedOut);
  const namespace = namespaceOf(req, pod);
  const verdict = verifyPod(pod, setFor(templates(), namespace), namespace, context, scope, mirrors);
  step?.(
    {
      reason: verdict.reason,
      ...(verdict.kind !== 'skipped' && { templates: verdict.templates }),
      ...(verdict.kind === 'denied' && { error: verdict.error.message }),
    },
    `validated: ${verdict.kind}`,
  );
  if (verdict.kind === 'skipped') return passed(Decision.Skipped, verdict.reason);
  if (verdict.kind === 'denied') return denied(verdict.error, verdict.reason, verdict.statusReason, verdict.templates);
  return allowed(verdict.reason, verdict.templates, !HistoryReasons.has(verdict.reason));
}

/**
 * A pod UPDATE (the required validating webhook's rules send them, whatever the pod's labels):
 * refused when it swaps or drops a sidecar a template required in the namespace injects
 * (verifyUpdate). In a namespace no template is required in, passed as before without reading the
 * pod. The verdict depends on the current set alone, so the answer cache may keep it.
 */
function validateUpdate(req: ReviewRequest, templates: TemplateSet, limits: ReviewLimits, step?: StepLog): Verdict {
  const namespace = req.namespace || 'default';
  const set = setFor(templates, namespace);
  if (requiredFor(set, namespace).length === 0) return passed(Decision.Skipped, Reason.NotPodCreate);
  const pod = podObject(req.object, limits.pod);
  const old = podObject(req.oldObject, limits.pod);
  const verdict = verifyUpdate(pod, old, set, namespace, { renderBytes: limits.patchBytes });
  step?.(
    { operation: req.operation, reason: verdict.reason, ...(verdict.kind === 'denied' && { error: verdict.error.message }) },
    `validated the update: ${verdict.kind}`,
  );
  if (verdict.kind === 'skipped') return passed(Decision.Skipped, verdict.reason);
  if (verdict.kind === 'denied') return denied(verdict.error, verdict.reason, verdict.statusReason, verdict.templates);
  return allowed(verdict.reason, verdict.templates, true);
}

/**
 * The pod, checked for shape and for the review limits; undefined for a pod whose check failed but
 * whose inject label says it is not opted in (on the required paths: whose namespace no template is
 * required in). The injector never acts on such a pod, so refusing it for a limit of ours
 * (--max-containers, ...) would deny a pod that did not ask for anything; the apiserver's own
 * validation still judges it.
 */
function checkedPod(req: ReviewRequest, scope: OptInScope, limits: ReviewLimits, templates: () => TemplateSet): Pod | undefined {
  try {
    return podObject(req.object, limits.pod);
  } catch (err) {
    if (err instanceof InjectorError && err.status < 500 && !inScope(req, scope, templates)) return undefined;
    throw err;
  }
}

/** Whether the injector acts on the review's pod: by its label, or on the required paths by the templates required in the review's namespace. */
function inScope(req: ReviewRequest, scope: OptInScope, templates: () => TemplateSet): boolean {
  if (scope !== OptInScope.Required) return optedInByLabel(req.object, scope);
  const namespace = req.namespace || 'default';
  return requiredFor(setFor(templates(), namespace), namespace).length > 0;
}

/** The opt-in rule of selectTemplates read from the raw object: false only for a pod whose label (or its absence) does not opt it in. */
function optedInByLabel(object: unknown, scope: OptInScope): boolean {
  // No pod at all (request.object missing, null, a list) is a broken review, refused as such.
  if (!isObject(object)) return true;
  const meta = object['metadata'];
  const labels = isObject(meta) ? meta['labels'] : undefined;
  const label = isObject(labels) && Object.hasOwn(labels, Keys.inject) ? labels[Keys.inject] : undefined;
  if (label === undefined) return scope === OptInScope.Namespace;
  return typeof label !== 'string' || label === 'true';
}

// Pods created by controllers often carry no metadata.namespace; request.namespace always has it.
function namespaceOf(req: ReviewRequest, pod: Pod): string {
  return req.namespace || pod.metadata?.namespace || 'default';
}

/** True for the reviews the injector acts on: the CREATE of a core/v1 Pod itself, not a subresource. */
function isPodCreate(req: ReviewRequest): boolean {
  return req.operation === 'CREATE' && isPod(req);
}

/** True for the UPDATE of a core/v1 Pod itself (`kubectl set image`), not a subresource such as pods/status. */
function isPodUpdate(req: ReviewRequest): boolean {
  return req.operation === 'UPDATE' && isPod(req);
}

function isPod(req: ReviewRequest): boolean {
  return req.kind?.kind === 'Pod' && (req.kind.group ?? '') === '' && (req.resource?.resource ?? 'pods') === 'pods' && (req.subResource ?? '') === '';
}
