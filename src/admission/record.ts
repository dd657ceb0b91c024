import { ErrorCodes, type InjectorError } from '../errors.js';
import { Reason } from '../inject/policy.js';
import { EVENT_MESSAGE_MAX, type OwnerEvent } from '../kube/events.js';
import { isObject } from '../kube/types.js';
import { clip, type Logger } from '../log.js';
import type { ReviewRequest } from './codec.js';
import { Decision, NO_TEMPLATES, type Verdict } from './verdict.js';

/** The decision of a request answered with an HTTP error instead of an AdmissionResponse. */
export const ERROR_DECISION = 'error';

/** Every decision a record may carry. */
export const Decisions: ReadonlySet<string> = new Set([...Object.values(Decision), ERROR_DECISION]);

/** Every reason a record may carry: a policy Reason or, for a refusal or an HTTP error, an error code. */
export const Reasons: ReadonlySet<string> = new Set([...Object.values(Reason), ...Object.keys(ErrorCodes)]);

/**
 * What a review came to, the same for every review of one body but its uid (the answer cache keeps
 * it with the answer). The values taken from the request are clipped, so no client makes a log
 * line long.
 */
export interface ReviewOutcome {
  readonly operation: string;
  /** request.namespace, else the pod's own (controller-made pods often carry none). */
  readonly namespace: string;
  /** The pod's name, else its generateName, else request.name. */
  readonly pod: string;
  readonly decision: string;
  readonly reason: string;
  readonly templates: readonly string[];
  readonly patchOps: number;
  /**
   * Only when the pipeline is asked for it (--owner-events) and the pod was refused for a reason
   * its owner can fix: what the Event on the pod's controller says (src/kube/events.ts).
   */
  readonly ownerEvent?: OwnerEvent;
}

/** Denials whose cause is in the pod's template (its owner's spec), so an Event on the owner says what to change. */
export const OwnerReasons: ReadonlySet<string> = new Set<string>([
  Reason.UnknownTemplate,
  Reason.OverrideRefused,
  Reason.TemplateValueInvalid,
  Reason.RenderingTooLarge,
  Reason.TemplateConflict,
  Reason.VolumeMissing,
  Reason.PodResourcesExceeded,
  Reason.AnnotationsTooLarge,
  Reason.PatchTooLarge,
  Reason.SidecarsMissing,
  Reason.RequiredSidecarMissing,
]);

/**
 * The one record of a request to a review path, answered or not: it is the review's log line as
 * it is written, and what the metrics count (kubewebhook's instrumenting wrapper is the model: one
 * observer of every review, errors included).
 */
export interface ReviewRecord extends ReviewOutcome {
  /** The request's path (clipped). */
  readonly endpoint: string;
  /** request.uid; for a body refused before it was decoded, the uid its apiserver prefix claims if clean (claimedUid in server/admission-app.ts), else ''. */
  readonly uid: string;
  /** True when the answer came from the answer cache. */
  readonly cached: boolean;
  /** From the start of the request to its answer. */
  readonly durationMs: number;
  /** HTTP errors only: the status, the error code and message, the method, and for a fault the error itself. */
  readonly status?: number;
  readonly code?: string;
  readonly detail?: string;
  readonly method?: string;
  readonly err?: unknown;
}

/** Observes every record (the log line, the metrics), in the order given. */
export type ReviewObserver = (record: ReviewRecord) => void;

/**
 * The outcome of a decoded review; only string fields are taken from the object. With `ownerEvents`,
 * a denial for one of OwnerReasons also carries the pod's controller (its ownerReferences are read
 * for those denials only: an injected or skipped pod costs one comparison).
 */
export function reviewOutcome(req: ReviewRequest, verdict: Verdict, ownerEvents = false): ReviewOutcome {
  const object = isObject(req.object) ? req.object : undefined;
  const meta = object !== undefined && isObject(object['metadata']) ? object['metadata'] : undefined;
  // The answer cache keeps the outcome: no string of it may be a view of a larger one. JSON.parse
  // gives strings of their own, and clip's cut of a long value is one too.
  return {
    operation: clip(req.operation ?? ''),
    namespace: clip(req.namespace || text(meta?.['namespace'])),
    pod: clip(text(meta?.['name']) || text(meta?.['generateName']) || (req.name ?? '')),
    decision: verdict.decision,
    reason: verdict.reason,
    templates: verdict.templates,
    patchOps: verdict.patchOps,
    ...(ownerEvents && verdict.decision === Decision.Denied && OwnerReasons.has(verdict.reason) && ownerEventOf(req, meta, verdict)),
  };
}

/** The Event for the pod's controller ownerReference, as clipped copies; undefined for a pod without one. */
function ownerEventOf(req: ReviewRequest, meta: Record<string, unknown> | undefined, verdict: Verdict): { ownerEvent: OwnerEvent } | undefined {
  const refs = meta?.['ownerReferences'];
  if (!Array.isArray(refs)) return undefined;
  // A pod has at most one controller; the apiserver refuses a second. The scan is bounded by what
  // the body limits let a review hold.
  const ref: unknown = refs.find((r: unknown) => isObject(r) && r['controller'] === true);
  if (!isObject(ref) || text(ref['kind']) === '' || text(ref['name']) === '') return undefined;
  const message = verdict.response.status?.message ?? verdict.reason;
  return {
    ownerEvent: {
      apiVersion: clip(text(ref['apiVersion'])),
      kind: clip(text(ref['kind'])),
      name: clip(text(ref['name'])),
      uid: clip(text(ref['uid'])),
      dryRun: req.dryRun === true,
      message: clip(message, EVENT_MESSAGE_MAX - 32),
    },
  };
}

function text(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

/** The record of an answered review. */
export function reviewRecord(endpoint: string, uid: string, outcome: ReviewOutcome, cached: boolean, started: number): ReviewRecord {
  return {
    endpoint,
    uid: clip(uid),
    operation: outcome.operation,
    namespace: outcome.namespace,
    pod: outcome.pod,
    decision: outcome.decision,
    reason: outcome.reason,
    templates: outcome.templates,
    patchOps: outcome.patchOps,
    ...(outcome.ownerEvent !== undefined && { ownerEvent: outcome.ownerEvent }),
    cached,
    durationMs: millisSince(started),
  };
}

/** The record of a request answered with an HTTP error; `uid` once the review was decoded, or as a refused body claims it. */
export function errorRecord(endpoint: string, method: string, err: InjectorError, uid: string, started: number): ReviewRecord {
  return {
    endpoint: clip(endpoint),
    uid: clip(uid),
    operation: '',
    namespace: '',
    pod: '',
    decision: ERROR_DECISION,
    reason: err.code,
    templates: NO_TEMPLATES,
    patchOps: 0,
    cached: false,
    durationMs: millisSince(started),
    status: err.status,
    code: err.code,
    detail: clip(err.message),
    method: clip(method),
    // A fault's stack goes to the log; a client's mistake needs only its code and message.
    ...(err.status >= 500 && { err: err.cause ?? err }),
  };
}

/** Milliseconds since `started` (performance.now(): a double, where hrtime.bigint() makes BigInts to subtract), to the microsecond. */
function millisSince(started: number): number {
  return Math.round((performance.now() - started) * 1e3) / 1e3;
}

/**
 * The log observer: one pino line per request, its fields the record's (flat values, those from
 * the request clipped): info for an answer, warn for a refused request, error for a fault.
 */
export function logReviews(logger: Logger): ReviewObserver {
  return (record) => {
    // The Event's facts are not a log field: the line keeps flat values, and already holds the reason.
    if (record.ownerEvent !== undefined) {
      const { ownerEvent: _, ...line } = record;
      logger.info(line, REVIEW_MESSAGE);
    } else if (record.status === undefined) logger.info(record, REVIEW_MESSAGE);
    else if (record.status < 500) logger.warn(record, REVIEW_MESSAGE);
    else logger.error(record, REVIEW_MESSAGE);
  };
}

const REVIEW_MESSAGE = 'review';
