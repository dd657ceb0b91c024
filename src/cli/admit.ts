import { checkBody, DefaultBodyLimits, type BodyLimits, type ReviewRequest } from '../admission/codec.js';
import { mutating, validating } from '../admission/handlers.js';
import { attempt, InjectorError } from '../errors.js';
import { Keys, workloadKeyWarnings } from '../inject/keys.js';
import { keyWarnings, OptInScope, Reason, selectTemplates, type Selection } from '../inject/policy.js';
import { isOwnedByJob } from '../inject/render.js';
import { apiserverReview } from '../kube/apiserver-review.js';
import { namespaceCalls, webhookCalls, type WebhookCall } from '../kube/selectors.js';
import type { Labels, Pod, WebhookConfiguration } from '../kube/types.js';
import { setFor, type TemplateSet } from '../templates/load.js';
import { requiredIn, whyRequired } from '../templates/required.js';
import { applyJsonPatch, decodePatch, type Operation } from '../patch/apply.js';
import type { PodSite } from '../workload/workload.js';

/**
 * What a cluster installed from this repository does with one pod CREATE, played through the
 * server's own pieces in the apiserver's order: the webhook configurations' selectors decide which
 * paths receive the pod, the mutating handler itself answers and its JSON patch is applied as the
 * apiserver applies it (applyJsonPatch), and the validating handler gives its verdict on the pod
 * as patched. So the pod shown is the one the cluster would store, from the one patch generator.
 */
export interface Admission {
  readonly verdict: 'injected' | 'not-injected' | 'rejected';
  /** A stable reason: the server's Reason values, plus `namespace-rule`, `not-selected` and `patch-not-applicable` (the apiserver could not apply the patch: a bug). */
  readonly reason: string;
  /** Why, in words. */
  readonly why: readonly string[];
  /** The pod as it would be stored (the input's own pod when nothing was injected). */
  readonly pod: Pod;
  /** The JSON patch the mutating webhooks answered, in the order they were called; empty when none. */
  readonly patch: readonly Operation[];
  /** The mutating handler's selection, when the pod was opted in. */
  readonly selection?: Extract<Selection, { inject: true }>;
  /** What the AdmissionResponses would warn of. */
  readonly warnings: readonly string[];
}

/** The webhook configurations installed and the labels given for the namespaces of the input. */
export interface Cluster {
  readonly configurations: readonly WebhookConfiguration[];
  readonly namespaceLabels: Labels;
}

/** Where the shipped configurations come from (src/generated/shipped-webhooks.ts is generated from it); named in messages. */
const SHIPPED_WEBHOOKS = 'manifests/base/webhooks.yaml';

const isMutating = (call: WebhookCall): boolean => call.configuration === 'MutatingWebhookConfiguration';
const isValidating = (call: WebhookCall): boolean => call.configuration === 'ValidatingWebhookConfiguration';

/**
 * Plays the admission of one pod; never throws for a pod the server would deny (that is a `rejected`
 * verdict). Its warnings begin with what only the CLI can see: the injector's keys on a
 * workload's own metadata, which its pods never get.
 */
export function admitPod(site: PodSite, set: TemplateSet, cluster: Cluster): Admission {
  // SidecarTemplates of the pod's namespace overlay the cluster-wide ones, as in the server.
  const admission = admitted(site, setFor(set, site.namespace), cluster);
  const workload = site.workloadMetadata === undefined ? [] : workloadKeyWarnings(site.kind, site.workloadMetadata, site.pod.metadata ?? {});
  return workload.length === 0 ? admission : { ...admission, warnings: [...workload, ...admission.warnings] };
}

function admitted(site: PodSite, set: TemplateSet, cluster: Cluster): Admission {
  const where = { namespace: site.namespace, namespaceLabels: cluster.namespaceLabels };
  const calls = webhookCalls({ ...where, podLabels: site.pod.metadata?.labels ?? {} }, cluster.configurations);
  if (calls.length === 0) return notSent(site, set, namespaceCalls(where, cluster.configurations));
  const refused = refusedBody(site, calls);
  if (refused !== undefined) return refused;

  const source = { templates: () => set };
  let pod = site.pod;
  let selection: Admission['selection'];
  const why: string[] = [];
  const warnings: string[] = [];
  const patch: Operation[] = [];
  const rejected = (reason: string, message: string): Admission => ({
    verdict: 'rejected',
    reason,
    why: [...why, message],
    pod: site.pod,
    patch: [],
    ...(selection !== undefined && { selection }),
    warnings,
  });
  for (const hook of calls.filter(isMutating)) {
    // The handler decides; selectTemplates only says why, in words.
    const chosen = attempt(() => selectTemplates(pod, set, scopeOf(hook), site.namespace));
    const answer = attempt(() => mutating(source, scopeOf(hook))(podCreate(pod, site.namespace)));
    if (answer instanceof InjectorError) return rejected(Reason.InvalidReview, answer.message);
    warnings.push(...(answer.response.warnings ?? []));
    if (!(chosen instanceof InjectorError) && chosen.inject) {
      selection = chosen;
      why.push(
        chosen.optedIn,
        templatesReason(chosen, pod),
        ...chosen.templates.filter((t) => requiredIn(t, site.namespace)).map((t) => whyRequired(t, site.namespace)),
      );
      if (isOwnedByJob(pod)) why.push('the pod belongs to a Job');
    }
    if (!answer.response.allowed) return rejected(answer.reason, answer.response.status?.message ?? 'denied');
    if (chosen instanceof InjectorError || !chosen.inject)
      return {
        verdict: 'not-injected',
        reason: answer.reason,
        why: chosen instanceof InjectorError ? [chosen.message] : [chosen.detail],
        pod: site.pod,
        patch: [],
        warnings,
      };
    const ops = decodePatch(answer.response.patch);
    const patched = attempt(() => applyJsonPatch(pod, ops));
    if (patched instanceof InjectorError) return rejected('patch-not-applicable', patched.message);
    pod = patched;
    patch.push(...ops);
  }
  // The validating webhooks see the pod after every mutation, labels included.
  for (const hook of webhookCalls({ ...where, podLabels: pod.metadata?.labels ?? {} }, cluster.configurations).filter(isValidating)) {
    // As the server's pipeline does: a pod the handler cannot act on (over a --max-* limit) is refused, not a crash.
    const answer = attempt(() => validating(source, scopeOf(hook))(podCreate(pod, site.namespace)));
    if (answer instanceof InjectorError) return rejected(Reason.InvalidReview, answer.message);
    warnings.push(...(answer.response.warnings ?? []));
    if (!answer.response.allowed) {
      const message = answer.response.status?.message ?? 'denied';
      return rejected(answer.reason, `the validating webhook ${hook.webhook} (${hook.path}) would reject it: ${message}`);
    }
  }
  if (selection === undefined)
    return { verdict: 'not-injected', reason: 'not-selected', why: ['no mutating webhook of the injector receives this pod'], pod, patch, warnings };
  return { verdict: 'injected', reason: Reason.Injected, why, pod, patch, selection, warnings };
}

/**
 * A review the server refuses before it reads it (HTTP 400), with its own check (checkBody) and the
 * serve defaults of --max-object-keys, --max-json-keys and --max-json-nodes: every webhook then
 * fails as its failurePolicy says, so the pod is created without sidecars (the mutating webhooks
 * fail open) unless a webhook that fails closed (the validating one) receives it too. The review is the apiserver's for the pod as the CLI sees it,
 * with the creator's managedFields entry the apiserver adds; defaulting adds a few fields more,
 * so a pod just under a limit may still be refused, never one that is refused here.
 */
function refusedBody(site: PodSite, calls: readonly WebhookCall[], limits: BodyLimits = DefaultBodyLimits): Admission | undefined {
  const refusal = attempt(() => checkBody(apiserverReview(site), limits));
  if (refusal === undefined) return undefined;
  // The refusal comes last: it is the line `inject` reports for a rejected pod.
  const why = `the review of this pod would be refused before it is read (HTTP 400): ${refusal.message}`;
  const closed = calls.find((call) => call.failurePolicy === 'Fail');
  if (closed === undefined) {
    return {
      verdict: 'not-injected',
      reason: refusal.code,
      why: ['every webhook of the injector that receives the pod has failurePolicy Ignore, so it is created without sidecars', why],
      pod: site.pod,
      patch: [],
      warnings: [],
    };
  }
  return {
    verdict: 'rejected',
    reason: refusal.code,
    why: [`the webhook ${closed.webhook} (${closed.path}) receives the pod and has failurePolicy Fail, so it is not created`, why],
    pod: site.pod,
    patch: [],
    warnings: [],
  };
}

/**
 * Why no webhook receives the pod: its namespace (no webhook is `open` to its pods), or its labels
 * (said as the server's policy says it). A pod whose labels keep it from the webhooks gets the
 * warnings /mutate would give about its keys: the label written as an annotation, or
 * with a typo, is most often why.
 */
function notSent(site: PodSite, set: TemplateSet, open: readonly WebhookCall[]): Admission {
  if (open.length === 0) {
    return {
      verdict: 'not-injected',
      reason: 'namespace-rule',
      why: [`namespace ${site.namespace} is excluded by the namespaceSelector of every webhook in ${SHIPPED_WEBHOOKS}`],
      pod: site.pod,
      patch: [],
      warnings: [],
    };
  }
  const warnings = keyWarnings(site.pod, set);
  const scope = open.some((w) => scopeOf(w) === OptInScope.Namespace) ? OptInScope.Namespace : OptInScope.Pod;
  const chosen = attempt(() => selectTemplates(site.pod, set, scope, site.namespace));
  const detail = chosen instanceof InjectorError || chosen.inject ? undefined : chosen;
  if (detail === undefined)
    return {
      verdict: 'not-injected',
      reason: 'not-selected',
      why: [`the objectSelector of the webhooks in ${SHIPPED_WEBHOOKS} does not match the pod's labels`],
      pod: site.pod,
      patch: [],
      warnings,
    };
  return { verdict: 'not-injected', reason: detail.reason, why: [detail.detail], pod: site.pod, patch: [], warnings };
}

function templatesReason(selection: Extract<Selection, { inject: true }>, pod: Pod): string {
  if (!selection.explicit) return `no ${Keys.templates} annotation: the default templates apply`;
  return `annotation ${Keys.templates}="${pod.metadata?.annotations?.[Keys.templates] ?? ''}" names the templates`;
}

/** The paths of the namespace opt-in end in /namespace. */
function scopeOf(hook: WebhookCall): OptInScope {
  return hook.path.endsWith('/namespace') ? OptInScope.Namespace : OptInScope.Pod;
}

function podCreate(pod: Pod, namespace: string): ReviewRequest {
  return {
    kind: { group: '', version: 'v1', kind: 'Pod' },
    resource: { group: '', version: 'v1', resource: 'pods' },
    namespace,
    operation: 'CREATE',
    object: pod,
  };
}
