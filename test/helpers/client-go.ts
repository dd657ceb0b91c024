/**
 * What the kube-apiserver makes of a webhook's non-2xx answer, step by step as client-go and the
 * apiserver do it, so a test can tell whether the user would read our message. Read from:
 * - k8s.io/client-go rest/request.go (commit 32ce75a7d6bc6960fd048d3d1e3b34185418d8c8):
 *   transformResponse gives every non-2xx answer newUnstructuredResponseError, i.e.
 *   apimachinery's NewGenericServerResponse, whose message depends on the status alone (the body
 *   counts only for a text/* Content-Type); Result.Into returns Result.Error(), which decodes the
 *   body with the default kind {Version: "v1"} and returns the decoded object as the error only
 *   when it is a *metav1.Status with status "Failure".
 * - k8s.io/apimachinery (commit eed236ceee2c19c2753a3d93ac0631dc20750454):
 *   pkg/api/errors/errors.go NewGenericServerResponse and StatusError.Error() (the Status's
 *   message); pkg/runtime/serializer/json/json.go Decode (a missing kind fails, apiVersion
 *   defaults to v1); pkg/apis/meta/v1/types.go, the JSON tags of Status, StatusDetails,
 *   StatusCause and ListMeta (a value of the wrong JSON type fails the whole decode).
 * - k8s.io/api admission/v1/register.go (commit 10b39a39bcee995dfe7cd5e8e7b922be5e46f1e2): the
 *   webhook client's scheme (admission v1 and v1beta1) knows AdmissionReview and, through
 *   metav1.AddToGroupVersion, the unversioned Status as `v1, Kind=Status`.
 * - k8s.io/apiserver (commit 24a394e516bfda066d7e2221d7d92c052de27c54):
 *   pkg/admission/plugin/webhook/{mutating,validating}/dispatcher.go wrap the error in
 *   ErrCallingWebhook{Reason: "failed to call webhook: %w"} (pkg/util/webhook/error.go: "failed
 *   calling webhook %q: %v") and, with failurePolicy Fail, apierrors.NewInternalError
 *   ("Internal error occurred: %v").
 *
 * Stricter than client-go on purpose: a field the Status has no tag for is a failure here (Go
 * would ignore it), so no field of ours can hide in an answer.
 */

/** A metav1.Status as it decodes. */
export interface DecodedStatus {
  readonly kind: 'Status';
  readonly apiVersion: 'v1';
  readonly metadata?: Record<string, unknown>;
  readonly status?: string;
  readonly message?: string;
  readonly reason?: string;
  readonly details?: {
    readonly name?: string;
    readonly group?: string;
    readonly kind?: string;
    readonly uid?: string;
    readonly causes?: readonly { readonly reason?: string; readonly message?: string; readonly field?: string }[];
    readonly retryAfterSeconds?: number;
  };
  readonly code?: number;
}

/** What the apiserver makes of the answer: the Status when client-go decoded one, and the message its user reads. */
export interface WebhookCallError {
  readonly status: DecodedStatus | undefined;
  /** Why the body was not taken as a Status (undefined when it was). */
  readonly notStatus: string | undefined;
  /** The error client-go returns from `r.Do(ctx).Into(response)`: its message. */
  readonly clientError: string;
  /** What the user reads with failurePolicy Fail. */
  readonly userMessage: string;
}

/** What the apiserver makes of a non-2xx answer of webhook `webhook`. */
export function webhookCallError(
  webhook: string,
  answer: { readonly status: number; readonly contentType: string | undefined; readonly text: string },
): WebhookCallError {
  if (answer.status >= 200 && answer.status <= 206) throw new Error(`a ${answer.status} is not an error answer`);
  let status: DecodedStatus | undefined;
  let notStatus: string | undefined;
  try {
    status = decodeStatus(answer.text);
    if (status.status !== 'Failure') notStatus = `status is ${JSON.stringify(status.status)}, not "Failure"`;
  } catch (err) {
    notStatus = (err as Error).message;
  }
  const clientError =
    notStatus === undefined
      ? (status?.message ?? '')
      : genericMessage(answer.status, isText(answer.contentType) ? answer.text.slice(0, 2048).trim() : 'unknown');
  return {
    status: notStatus === undefined ? status : undefined,
    notStatus,
    clientError,
    userMessage: `Internal error occurred: failed calling webhook ${JSON.stringify(webhook)}: failed to call webhook: ${clientError}`,
  };
}

/** client-go's isTextResponse: no Content-Type, or a text/* one. */
function isText(contentType: string | undefined): boolean {
  if (contentType === undefined || contentType === '') return true;
  return contentType.split(';', 1)[0]!.trim().toLowerCase().startsWith('text/');
}

/** apimachinery's NewGenericServerResponse, for a request without a resource (the webhook client's). */
function genericMessage(code: number, serverMessage: string): string {
  switch (code) {
    case 409:
      return 'the server reported a conflict';
    case 404:
      return 'the server could not find the requested resource';
    case 400:
      return 'the server rejected our request for an unknown reason';
    case 401:
      return 'the server has asked for the client to provide credentials';
    case 403:
    case 415:
      return serverMessage;
    case 406:
      return serverMessage === '' || serverMessage === 'unknown'
        ? 'the server was unable to respond with a content type that the client supports'
        : serverMessage;
    case 405:
      return 'the server does not allow this method on the requested resource';
    case 422:
      return 'the server rejected our request due to an error in our request';
    case 503:
      return 'the server is currently unable to handle the request';
    case 504:
      return 'the server was unable to return a response in the time allotted, but may still be processing the request';
    case 429:
      return 'the server has received too many requests and has asked us to try again later';
    default:
      return code >= 500
        ? `an error on the server (${JSON.stringify(serverMessage)}) has prevented the request from succeeding`
        : `the server responded with the status code ${code} but did not return more information`;
  }
}

/** Decodes a body as the webhook client's codec does when asked for a Status, or throws why it is not one. */
export function decodeStatus(text: string): DecodedStatus {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (err) {
    throw new Error(`not JSON: ${(err as Error).message}`, { cause: err });
  }
  if (!isRecord(body)) throw new Error('not a JSON object');
  // The serializer's first look (meta.Interpret) reads apiVersion and kind as strings.
  const apiVersion = optional(body, 'apiVersion', 'string', 'apiVersion') ?? '';
  const kind = optional(body, 'kind', 'string', 'kind') ?? '';
  if (kind === '') throw new Error("Object 'Kind' is missing");
  // gvkWithDefaults: no apiVersion means the default, v1.
  const gv = apiVersion === '' ? 'v1' : apiVersion;
  if (gv !== 'v1' || kind !== 'Status') throw new Error(`decodes as ${gv}, Kind=${kind}, not a Status`);
  checkFields(body, STATUS_FIELDS, '');
  return body as unknown as DecodedStatus;
}

type JsonType = 'string' | 'int32' | 'int64' | 'object' | 'array';
type Fields = Readonly<Record<string, JsonType | { readonly object: Fields } | { readonly arrayOf: Fields }>>;

const LIST_META: Fields = { selfLink: 'string', resourceVersion: 'string', continue: 'string', remainingItemCount: 'int64' };
const CAUSE: Fields = { reason: 'string', message: 'string', field: 'string' };
const DETAILS: Fields = { name: 'string', group: 'string', kind: 'string', uid: 'string', causes: { arrayOf: CAUSE }, retryAfterSeconds: 'int32' };
const STATUS_FIELDS: Fields = {
  kind: 'string',
  apiVersion: 'string',
  metadata: { object: LIST_META },
  status: 'string',
  message: 'string',
  reason: 'string',
  details: { object: DETAILS },
  code: 'int32',
};

/** Every field of `value` against its Go type (null is Go's zero value for any); an unknown field fails too. */
function checkFields(value: Record<string, unknown>, fields: Fields, at: string): void {
  for (const [name, field] of Object.entries(value)) {
    const where = `${at}${name}`;
    const type = fields[name];
    if (type === undefined) throw new Error(`${where}: no such field in metav1.Status`);
    if (field === null) continue;
    if (typeof type === 'object') {
      if ('object' in type) {
        if (!isRecord(field)) throw new Error(`${where}: must be an object`);
        checkFields(field, type.object, `${where}.`);
      } else {
        if (!Array.isArray(field)) throw new Error(`${where}: must be an array`);
        field.forEach((item, i) => {
          if (!isRecord(item)) throw new Error(`${where}[${i}]: must be an object`);
          checkFields(item, type.arrayOf, `${where}[${i}].`);
        });
      }
      continue;
    }
    checkType(field, type, where);
  }
}

function checkType(value: unknown, type: JsonType, where: string): void {
  const ok =
    type === 'string'
      ? typeof value === 'string'
      : type === 'int32'
        ? Number.isInteger(value) && Math.abs(value as number) < 2 ** 31
        : type === 'int64'
          ? Number.isSafeInteger(value)
          : type === 'object'
            ? isRecord(value)
            : Array.isArray(value);
  if (!ok) throw new Error(`${where}: cannot unmarshal ${JSON.stringify(value)} into Go value of type ${type}`);
}

function optional(body: Record<string, unknown>, name: string, type: JsonType, where: string): string | undefined {
  const value = body[name];
  if (value === undefined || value === null) return undefined;
  checkType(value, type, where);
  return value as string;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Our stable error code in an error answer's body (a Status's first cause), or undefined. */
export function errorCode(body: any): string | undefined {
  return body?.kind === 'Status' ? body.details?.causes?.[0]?.reason : undefined;
}
