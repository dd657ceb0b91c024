import { Options, type Config } from '../config/config.js';
import { attempt, InjectorError } from '../errors.js';
import { Keys } from '../inject/keys.js';
import { injectSidecars } from '../inject/mutate.js';
import { OptInScope, Reason, refusalReason, selectTemplates } from '../inject/policy.js';
import { verifyPod } from '../inject/verify.js';
import { isObject, type Pod } from '../kube/types.js';
import { diff, encodePatch } from '../patch/diff.js';
import type { TemplateSet } from '../templates/load.js';
import { withAudit } from './audit.js';
import { DefaultBodyLimits, type AdmissionRequest, type AdmissionResponse, type BodyLimits } from './codec.js';
import { DefaultPodLimits, podObject, type PodLimits } from './pod.js';

/** What became of a review; one value per log line and metric sample. */
export const Decision = {
  Injected: 'injected',
  Skipped: 'skipped',
  Allowed: 'allowed',
  Denied: 'denied',
} as const;
export type Decision = (typeof Decision)[keyof typeof Decision];

/** The answer to one review plus the facts the transport logs and counts. */
export interface ReviewResult {
  readonly response: AdmissionResponse;
  readonly decision: Decision;
  readonly reason: string;
  readonly templates: readonly string[];
  readonly patchOps: number;
}

/** What one review may cost: the pod's lists (checked by podObject) and the patch sent back. */
export interface ReviewLimits {
  /** Checked on the text, before it is parsed (checkBody, called by the transport). */
  readonly body: BodyLimits;
  readonly pod: PodLimits;
  /** Bytes of JSON patch (before base64); `--max-patch-kib`. */
  readonly patchBytes: number;
}

export const DefaultReviewLimits: ReviewLimits = Object.freeze({ body: DefaultBodyLimits, pod: DefaultPodLimits, patchBytes: Options.maxPatchKib.schema.default * 1024 });

/** The limits the --max-* flags set. */
export function reviewLimits(config: Config): ReviewLimits {
  return {
    body: { objectKeys: config.maxObjectKeys, nodes: config.maxJsonNodes },
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

/** The mutating handler: injects the selected templates and answers with the patch; `scope` says who may opt the pod in. */
export function mutate(req: AdmissionRequest, set: TemplateSet, scope: OptInScope = OptInScope.Pod, limits: ReviewLimits = DefaultReviewLimits): ReviewResult {
  return withAudit(mutatePod(req, set, scope, limits));
}

function mutatePod(req: AdmissionRequest, set: TemplateSet, scope: OptInScope, limits: ReviewLimits): ReviewResult {
  if (!isPodCreate(req)) return pass(req, Decision.Skipped, Reason.NotPodCreate);
  const pod = checkedPod(req, scope, limits);
  if (pod === undefined) return pass(req, Decision.Skipped, Reason.OptedOut);
  const namespace = namespaceOf(req, pod);
  const selection = attempt(() => selectTemplates(pod, set, scope));
  if (selection instanceof InjectorError) return deny(req, selection, Reason.UnknownTemplate);
  if (!selection.inject) return pass(req, Decision.Skipped, selection.reason);

  const result = attempt(() => injectSidecars(pod, selection.templates, namespace));
  if (result instanceof InjectorError) return deny(req, result, refusalReason(result));
  const ops = diff(pod, result.pod);
  const patch = ops.length > 0 ? Buffer.from(encodePatch(ops)) : undefined;
  // An answer of megabytes (a pod of many containers, each given the templates' env and mounts)
  // costs memory here and in the apiserver; the pod is refused with the size instead.
  if (patch !== undefined && patch.length > limits.patchBytes) {
    return deny(req, new InjectorError('PATCH_TOO_LARGE', [patch.length, limits.patchBytes, Options.maxPatchKib.flag]), Reason.InvalidReview);
  }
  const response: AdmissionResponse = {
    uid: req.uid,
    allowed: true,
    ...(patch !== undefined && { patchType: 'JSONPatch' as const, patch: patch.toString('base64') }),
    ...(result.warnings.length > 0 && { warnings: result.warnings }),
  };
  return { response, decision: Decision.Injected, reason: ops.length > 0 ? Reason.Injected : Reason.AlreadyInjected, templates: result.status.templates, patchOps: ops.length };
}

/**
 * The validating handler: an opted-in pod must hold every selected template's sidecars when it
 * reaches the end of admission, as the current template set or one served recently defines them
 * (verifyPod: a template rollout reaches replicas at different times).
 */
export function validate(req: AdmissionRequest, set: TemplateSet, scope: OptInScope = OptInScope.Pod, limits: ReviewLimits = DefaultReviewLimits): ReviewResult {
  return withAudit(validatePod(req, set, scope, limits));
}

function validatePod(req: AdmissionRequest, set: TemplateSet, scope: OptInScope, limits: ReviewLimits): ReviewResult {
  if (!isPodCreate(req)) return pass(req, Decision.Skipped, Reason.NotPodCreate);
  const pod = checkedPod(req, scope, limits);
  if (pod === undefined) return pass(req, Decision.Skipped, Reason.OptedOut);
  const verdict = verifyPod(pod, set, namespaceOf(req, pod), {}, scope);
  if (verdict.kind === 'skipped') return pass(req, Decision.Skipped, verdict.reason);
  if (verdict.kind === 'denied') return { ...deny(req, verdict.error, verdict.reason, verdict.statusReason), templates: verdict.templates };
  return { response: { uid: req.uid, allowed: true }, decision: Decision.Allowed, reason: verdict.reason, templates: verdict.templates, patchOps: 0 };
}

/**
 * The pod, checked for shape and for the review limits; undefined for a pod whose check failed but
 * whose inject label says it is not opted in. The injector never acts on such a pod, so refusing it
 * for a limit of ours (--max-containers, ...) would deny a pod that did not ask for anything; the
 * apiserver's own validation still judges it.
 */
function checkedPod(req: AdmissionRequest, scope: OptInScope, limits: ReviewLimits): Pod | undefined {
  try {
    return podObject(req.object, limits.pod);
  } catch (err) {
    if (err instanceof InjectorError && err.status < 500 && !optedInByLabel(req.object, scope)) return undefined;
    throw err;
  }
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
function namespaceOf(req: AdmissionRequest, pod: Pod): string {
  return req.namespace || pod.metadata?.namespace || 'default';
}

function pass(req: AdmissionRequest, decision: Decision, reason: string): ReviewResult {
  return { response: { uid: req.uid, allowed: true }, decision, reason, templates: [], patchOps: 0 };
}

/** Answers a review with allowed: false and the error's status and message. */
export function deny(req: AdmissionRequest, err: InjectorError, reason: string, statusReason = 'BadRequest'): ReviewResult {
  const response: AdmissionResponse = { uid: req.uid, allowed: false, status: { code: err.status, message: err.message, reason: statusReason } };
  return { response, decision: Decision.Denied, reason, templates: [], patchOps: 0 };
}

/** True for the reviews the injector acts on: the CREATE of a core/v1 Pod itself, not a subresource. */
export function isPodCreate(req: AdmissionRequest): boolean {
  return (
    req.operation === 'CREATE' &&
    req.kind?.kind === 'Pod' &&
    (req.kind.group ?? '') === '' &&
    (req.resource?.resource ?? 'pods') === 'pods' &&
    (req.subResource ?? '') === ''
  );
}
