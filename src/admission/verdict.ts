import type { InjectorError } from '../errors.js';
import { clip } from '../log.js';
import { Reason } from '../inject/policy.js';
import { auditAnnotations } from './audit.js';
import type { Base64Patch, ResponseBody } from './codec.js';

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
  const response: ResponseBody =
    warnings.length === 0 ? { allowed: true, auditAnnotations: audit } : { allowed: true, warnings: boundedWarnings(warnings), auditAnnotations: audit };
  return { response, decision, reason, templates: NO_TEMPLATES, patchOps: 0, repeatable: true };
}

const NO_WARNINGS: readonly string[] = Object.freeze([]);

/**
 * The apiserver passes on 4096 characters of an answer's warnings, and cuts each to 256 once they go
 * over (k8s.io/apiserver pkg/endpoints/filters/warning.go); an answer stays well below, so that no
 * pod's value (a long key, a list of names) makes one warning hide the others: each warning is cut
 * to WARNING_CHARS, and past WARNINGS_CHARS in all one line counts the rest
 * (test/admission/verdict.test.ts).
 */
const WARNING_CHARS = 240;
const WARNINGS_CHARS = 2048;

/** The warnings an answer carries: each cut to WARNING_CHARS, at most WARNINGS_CHARS in all, then a count of the rest. */
export function boundedWarnings(warnings: readonly string[]): readonly string[] {
  if (warnings.every((w) => w.length <= WARNING_CHARS) && warnings.reduce((n, w) => n + w.length, 0) <= WARNINGS_CHARS) return warnings;
  const out: string[] = [];
  let total = 0;
  for (let i = 0; i < warnings.length; i++) {
    const w = warnings[i]!;
    const shown = w.length <= WARNING_CHARS ? w : `${w.slice(0, WARNING_CHARS - 3)}...`;
    if (total + shown.length > WARNINGS_CHARS - MORE_CHARS) {
      out.push(`${warnings.length - i} more warning${warnings.length - i === 1 ? '' : 's'} not shown`);
      break;
    }
    out.push(shown);
    total += shown.length;
  }
  return out;
}

/** Room kept for the line that counts the warnings left out. */
const MORE_CHARS = 40;

/** The mutating handler's answer: the patch (base64 JSON patch; absent when there is nothing to change) and its warnings. */
export function injected(reason: string, templates: readonly string[], patchOps: number, patch: Base64Patch | undefined, warnings: readonly string[]): Verdict {
  // Fields added in the order of the answer's bytes (goldens): allowed, patchType, patch, warnings, auditAnnotations.
  const response: Mutable<ResponseBody> = { allowed: true };
  if (patch !== undefined) {
    response.patchType = 'JSONPatch';
    response.patch = patch;
  }
  if (warnings.length > 0) response.warnings = boundedWarnings(warnings);
  response.auditAnnotations = auditAnnotations(Decision.Injected, reason, templates);
  return { response, decision: Decision.Injected, reason, templates, patchOps, repeatable: true };
}

/** The validating handler's admission of a pod that holds its sidecars. */
export function allowed(reason: string, templates: readonly string[], repeatable: boolean): Verdict {
  return {
    response: { allowed: true, auditAnnotations: auditAnnotations(Decision.Allowed, reason, templates) },
    decision: Decision.Allowed,
    reason,
    templates,
    patchOps: 0,
    repeatable,
  };
}

/**
 * The most characters of a denial's message: what kubectl prints, the audit log and the owner's
 * Event keep. The messages name what to fix in one line; one that quotes values from the pod (an
 * annotation of 256 KiB, a thousand template names) is cut here, saying how much more there was
 * (test/server/hostile.test.ts).
 */
export const DENIAL_MESSAGE_MAX = 2048;

/** Answers a review with allowed: false and the error's status and message (at most DENIAL_MESSAGE_MAX characters). */
export function denied(err: InjectorError, reason: string, statusReason = 'BadRequest', templates: readonly string[] = NO_TEMPLATES): Verdict {
  const response: ResponseBody = {
    allowed: false,
    status: { code: err.status, message: clip(err.message, DENIAL_MESSAGE_MAX), reason: statusReason },
    auditAnnotations: auditAnnotations(Decision.Denied, reason, templates),
  };
  return { response, decision: Decision.Denied, reason, templates, patchOps: 0, repeatable: true };
}

/** A review the handler cannot act on (no pod, a pod of the wrong shape, over a limit): refused with the error's 4xx, not failed. */
export function refused(err: InjectorError): Verdict {
  return denied(err, Reason.InvalidReview);
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };
