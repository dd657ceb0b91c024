import type { ErrorCode, ErrorStatus } from '../errors.js';

/**
 * The StatusReason Kubernetes gives each HTTP status an error of ours may have: the constants of
 * k8s.io/apimachinery pkg/apis/meta/v1/types.go, each documented with its status code (408 has no
 * reason of its own; "Timeout" is the one for a request not completed in time). A status added to
 * the error table fails to compile here until it has its reason.
 */
export const StatusReasons = {
  400: 'BadRequest',
  403: 'Forbidden',
  404: 'NotFound',
  405: 'MethodNotAllowed',
  408: 'Timeout',
  // No reason of its own either: BadRequest is "the request itself was invalid".
  411: 'BadRequest',
  413: 'RequestEntityTooLarge',
  415: 'UnsupportedMediaType',
  429: 'TooManyRequests',
  500: 'InternalError',
} as const satisfies Record<ErrorStatus, string>;

/** What an error answer says: the HTTP status, our stable error code and the message for a person. */
export interface StatusAnswer {
  readonly status: ErrorStatus;
  /** Our stable code, from the table of src/errors.ts. */
  readonly code: ErrorCode;
  readonly message: string;
  /** Seconds the client should wait before it retries (a 429); the Retry-After header says the same. */
  readonly retryAfterSeconds?: number;
}

/**
 * The body of every error answer: a metav1.Status, the one error body the kube-apiserver's webhook
 * client reads. That client is client-go's rest client (`r.Do(ctx).Into(response)` in apiserver
 * pkg/admission/plugin/webhook/{mutating,validating}/dispatcher.go): for a non-2xx answer
 * `Result.Error()` (client-go rest/request.go) decodes the body, and only a Status with
 * `status: "Failure"` becomes the error, whose message the user then reads after "failed calling
 * webhook ...: failed to call webhook:". Any other body, an AdmissionReview included, leaves the
 * generic "the server rejected our request for an unknown reason" (apimachinery
 * pkg/api/errors/errors.go NewGenericServerResponse). The scheme the webhook client decodes with
 * knows Status: admission/v1's addKnownTypes calls metav1.AddToGroupVersion, which registers it
 * unversioned, as `kind: Status, apiVersion: v1`. Read at client-go 32ce75a7, apiserver 24a394e5,
 * apimachinery eed236ce, api 10b39a39 (test/helpers/client-go.ts plays these steps in the tests).
 *
 * Every field has the JSON type of its Go tag (client-go fails the whole decode on a mismatch, so
 * a number in `status` would lose the message). Our stable code, for machines, is the first
 * cause's `reason` (StatusCause's CauseType): `reason` itself is Kubernetes' closed set.
 */
export function encodeStatusAnswer(answer: StatusAnswer): string {
  const cause = { reason: answer.code, message: answer.message };
  const details = answer.retryAfterSeconds === undefined ? { causes: [cause] } : { causes: [cause], retryAfterSeconds: answer.retryAfterSeconds };
  return JSON.stringify({
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message: answer.message,
    reason: StatusReasons[answer.status],
    details,
    code: answer.status,
  });
}
