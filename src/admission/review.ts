import { InjectorError } from '../errors.js';
import { isObject, type JsonObject, type Pod } from '../kube/types.js';

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

/** What the log line and the metrics say about a review, whatever its answer. */
export interface ReviewFacts {
  readonly uid: string;
  readonly operation: string;
  /** request.namespace, else the pod's own (controller-made pods often carry none). */
  readonly namespace: string;
  /** The pod's name, else its generateName, else request.name. */
  readonly pod: string;
}

/** The facts of a decoded review; only string fields are taken from the object. */
export function reviewFacts(req: AdmissionRequest): ReviewFacts {
  const object = isObject(req.object) ? req.object : undefined;
  const meta = object !== undefined && isObject(object['metadata']) ? object['metadata'] : undefined;
  const text = (value: unknown): string => (typeof value === 'string' ? value : '');
  return {
    uid: req.uid,
    operation: req.operation ?? '',
    namespace: req.namespace || text(meta?.['namespace']),
    pod: text(meta?.['name']) || text(meta?.['generateName']) || (req.name ?? ''),
  };
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

/**
 * The pod of a pod CREATE, with the fields the injector reads checked for type: the apiserver
 * always sends a well-typed Pod, so anything else comes from another client and is refused (400)
 * rather than failing inside the injection (500). Linear in the number of containers, env vars and
 * mounts; the rest of the pod is never walked.
 */
export function podObject(req: AdmissionRequest): Pod {
  const pod = req.object;
  if (!isObject(pod)) throw invalid('request.object must be the Pod being created');
  if (pod['kind'] !== undefined && pod['kind'] !== 'Pod') throw invalid(`request.object is a ${JSON.stringify(pod['kind'])}, not a Pod`);
  if (pod['apiVersion'] !== undefined && pod['apiVersion'] !== 'v1') throw invalid(`request.object has apiVersion ${JSON.stringify(pod['apiVersion'])}, not v1`);
  const meta = optionalObject(pod['metadata'], 'metadata');
  if (meta !== undefined) {
    for (const field of ['labels', 'annotations'] as const) stringMap(meta[field], `metadata.${field}`);
    for (const field of ['name', 'generateName', 'namespace'] as const) optionalString(meta[field], `metadata.${field}`);
    objectList(meta['ownerReferences'], 'metadata.ownerReferences');
  }
  const spec = optionalObject(pod['spec'], 'spec');
  if (spec !== undefined) {
    for (const field of ['serviceAccountName', 'serviceAccount'] as const) optionalString(spec[field], `spec.${field}`);
    namedList(spec['volumes'], 'spec.volumes');
    // An imagePullSecret may come without a name (LocalObjectReference.name is omitempty).
    objectList(spec['imagePullSecrets'], 'spec.imagePullSecrets');
    for (const field of ['containers', 'initContainers'] as const) {
      namedList(spec[field], `spec.${field}`).forEach((c, i) => {
        const at = `spec.${field}[${i}]`;
        optionalString(c['image'], `${at}.image`);
        namedList(c['env'], `${at}.env`);
        namedList(c['volumeMounts'], `${at}.volumeMounts`).forEach((m, j) => {
          if (typeof m['mountPath'] !== 'string') throw invalid(`request.object.${at}.volumeMounts[${j}].mountPath must be a string`);
        });
        optionalList(c['ports'], `${at}.ports`);
      });
    }
  }
  return pod as Pod;
}

function optionalObject(value: unknown, field: string): JsonObject | undefined {
  if (value === undefined) return undefined;
  if (!isObject(value)) throw invalid(`request.object.${field} must be an object`);
  return value;
}

function optionalString(value: unknown, field: string): void {
  if (value !== undefined && typeof value !== 'string') throw invalid(`request.object.${field} must be a string`);
}

function stringMap(value: unknown, field: string): void {
  const map = optionalObject(value, field);
  if (map === undefined) return;
  for (const key in map) {
    if (Object.hasOwn(map, key) && typeof map[key] !== 'string') throw invalid(`request.object.${field} must map strings to strings`);
  }
}

function optionalList(value: unknown, field: string): readonly unknown[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) throw invalid(`request.object.${field} must be a list`);
  return value;
}

function objectList(value: unknown, field: string): void {
  optionalList(value, field).forEach((item, i) => {
    if (!isObject(item)) throw invalid(`request.object.${field}[${i}] must be an object`);
  });
}

function namedList(value: unknown, field: string): readonly JsonObject[] {
  const list = optionalList(value, field);
  list.forEach((item, i) => {
    if (!isObject(item) || typeof item['name'] !== 'string') throw invalid(`request.object.${field}[${i}] must be an object with a name`);
  });
  return list as readonly JsonObject[];
}

function invalid(detail: string): InjectorError {
  return new InjectorError('REVIEW_INVALID', [detail]);
}
