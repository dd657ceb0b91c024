import { InjectorError } from '../errors.js';
import { isObject } from '../kube/types.js';

/** The AdmissionReview versions the apiserver may send; the answer goes back in the same one. */
export const ReviewVersion = {
  V1: 'admission.k8s.io/v1',
  V1Beta1: 'admission.k8s.io/v1beta1',
} as const;
export type ReviewVersion = (typeof ReviewVersion)[keyof typeof ReviewVersion];

export interface GroupVersionKind {
  readonly group?: string;
  readonly version?: string;
  readonly kind?: string;
}

export interface GroupVersionResource {
  readonly group?: string;
  readonly version?: string;
  readonly resource?: string;
}

/** The fields of `request` the injector reads; the rest is ignored. */
export interface AdmissionRequest {
  readonly uid: string;
  readonly kind?: GroupVersionKind;
  readonly resource?: GroupVersionResource;
  readonly subResource?: string;
  readonly name?: string;
  readonly namespace?: string;
  readonly operation?: string;
  readonly object?: unknown;
  readonly dryRun?: boolean;
}

export interface DecodedReview {
  readonly apiVersion: ReviewVersion;
  readonly request: AdmissionRequest;
}

export interface AdmissionStatus {
  readonly code: number;
  readonly message: string;
  readonly reason?: string;
}

export interface AdmissionResponse {
  readonly uid: string;
  readonly allowed: boolean;
  readonly status?: AdmissionStatus;
  readonly patch?: string;
  readonly patchType?: 'JSONPatch';
  readonly warnings?: readonly string[];
  readonly auditAnnotations?: Readonly<Record<string, string>>;
}

const versions: ReadonlySet<string> = new Set(Object.values(ReviewVersion));

/**
 * Checks the envelope of a parsed body: an AdmissionReview of a known version with a request that
 * has a uid. Only the fields the injector reads are type-checked; the pod itself is checked later.
 */
export function decodeReview(body: unknown): DecodedReview {
  if (!isObject(body)) throw invalid('the body must be a JSON object');
  const { apiVersion, kind, request } = body;
  if (typeof apiVersion !== 'string' || !versions.has(apiVersion)) {
    throw invalid(`apiVersion must be ${ReviewVersion.V1} or ${ReviewVersion.V1Beta1}, got ${JSON.stringify(apiVersion) ?? 'nothing'}`);
  }
  if (kind !== 'AdmissionReview') throw invalid(`kind must be AdmissionReview, got ${JSON.stringify(kind) ?? 'nothing'}`);
  if (!isObject(request)) throw invalid('request is missing');
  if (typeof request['uid'] !== 'string' || request['uid'] === '') throw invalid('request.uid is missing');
  for (const field of ['namespace', 'operation', 'subResource', 'name'] as const) {
    if (request[field] !== undefined && typeof request[field] !== 'string') throw invalid(`request.${field} must be a string`);
  }
  for (const field of ['kind', 'resource'] as const) {
    if (request[field] !== undefined && !isObject(request[field])) throw invalid(`request.${field} must be an object`);
  }
  return { apiVersion: apiVersion as ReviewVersion, request: request as unknown as AdmissionRequest };
}

/** Serializes the answer in the version the review came in, echoing its uid. */
export function encodeReview(apiVersion: ReviewVersion, response: AdmissionResponse): string {
  return JSON.stringify({ apiVersion, kind: 'AdmissionReview', response });
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

function invalid(detail: string): InjectorError {
  return new InjectorError('REVIEW_INVALID', [detail]);
}
