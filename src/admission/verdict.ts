import type { InjectorError } from '../errors.js';
import { Reason } from '../inject/policy.js';
import { auditAnnotations } from './audit.js';
import type { ResponseBody } from './codec.js';

/** No templates: one shared empty list. */
export const NO_TEMPLATES: readonly string[] = Object.freeze([]);

/** What became of a review; one value per log line and metric sample. */
export const Decision = {
  Injected: 'injected',
  Skipped: 'skipped',
  Allowed: 'allowed',
  Denied: 'denied',
} as const;
export type Decision = (typeof Decision)[keyof typeof Decision];

/**
 * A handler's answer to one review: the AdmissionResponse without its uid (the codec alone sets
 * that), and the facts the review record logs and counts.
 */
export interface Verdict {
  readonly response: ResponseBody;
  readonly decision: Decision;
  readonly reason: string;
  readonly templates: readonly string[];
  readonly patchOps: number;
  /**
   * True when the same request under the same template set always gets this verdict, so the
   * answer cache may keep it. False for a verdict that leans on the history window of the sets
   * served before or on the time since start (they change without a template reload).
   */
  readonly repeatable: boolean;
}

/** The pod passes untouched (not a pod CREATE, not opted in, no templates), with what to warn of (keys that look meant for the injector). */
export function passed(decision: Decision, reason: string, warnings: readonly string[] = NO_WARNINGS): Verdict {
  const audit = auditAnnotations(decision, reason, NO_TEMPLATES);
  const response: ResponseBody = warnings.length === 0 ? { allowed: true, auditAnnotations: audit } : { allowed: true, warnings, auditAnnotations: audit };
  return { response, decision, reason, templates: NO_TEMPLATES, patchOps: 0, repeatable: true };
}

const NO_WARNINGS: readonly string[] = Object.freeze([]);

/** The mutating handler's answer: the patch (base64 JSON patch; absent when there is nothing to change) and its warnings. */
export function injected(reason: string, templates: readonly string[], patchOps: number, patch: string | undefined, warnings: readonly string[]): Verdict {
  // Fields added in the order of the answer's bytes (goldens): allowed, patchType, patch, warnings, auditAnnotations.
  const response: Mutable<ResponseBody> = { allowed: true };
  if (patch !== undefined) {
    response.patchType = 'JSONPatch';
    response.patch = patch;
  }
  if (warnings.length > 0) response.warnings = warnings;
  response.auditAnnotations = auditAnnotations(Decision.Injected, reason, templates);
  return { response, decision: Decision.Injected, reason, templates, patchOps, repeatable: true };
}

/** The validating handler's admission of a pod that holds its sidecars. */
export function allowed(reason: string, templates: readonly string[], repeatable: boolean): Verdict {
  return { response: { allowed: true, auditAnnotations: auditAnnotations(Decision.Allowed, reason, templates) }, decision: Decision.Allowed, reason, templates, patchOps: 0, repeatable };
}

/** Answers a review with allowed: false and the error's status and message. */
export function denied(err: InjectorError, reason: string, statusReason = 'BadRequest', templates: readonly string[] = NO_TEMPLATES): Verdict {
  const response: ResponseBody = { allowed: false, status: { code: err.status, message: err.message, reason: statusReason }, auditAnnotations: auditAnnotations(Decision.Denied, reason, templates) };
  return { response, decision: Decision.Denied, reason, templates, patchOps: 0, repeatable: true };
}

/** A review the handler cannot act on (no pod, a pod of the wrong shape, over a limit): refused with the error's 4xx, not failed. */
export function refused(err: InjectorError): Verdict {
  return denied(err, Reason.InvalidReview);
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };
