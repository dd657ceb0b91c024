import { InjectorError } from '../errors.js';
import { Options } from '../config/config.js';
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
    throw invalid(`apiVersion must be ${ReviewVersion.V1} or ${ReviewVersion.V1Beta1}, got ${describeValue(apiVersion)}`);
  }
  if (kind !== 'AdmissionReview') throw invalid(`kind must be AdmissionReview, got ${describeValue(kind)}`);
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
 * Nesting allowed in a review body. The deepest field of a real review is about 20 levels down
 * (request.object.metadata.managedFields[].fieldsV1 mirrors the pod; spec.affinity and projected
 * volumes reach about 13), since core/v1 Pod has no recursive type. Deeper JSON breaks every
 * recursive walk, JSON.stringify among them.
 */
export const MAX_NESTING = 64;

/**
 * What a review body may hold before it is parsed. JSON.parse pays per value it makes, and most
 * for what V8 has not seen before: a key name new to it costs about 1.5 µs (a new hidden class
 * and an interned string), a short string value new to it about 0.3 µs, anything else 0.03 to
 * 0.15 µs. Before the nodes were counted this way, 2.6 MiB of small objects with distinct keys
 * held the event loop for half a second, and 3 MiB of distinct short strings in one list (a
 * container's args) for a third of one, though neither held many objects or lists; so such
 * bodies are refused before JSON.parse sees them (README, "Limits per review").
 */
export interface BodyLimits {
  /** Keys of one JSON object (`--max-object-keys`). */
  readonly objectKeys: number;
  /** Objects, lists, keys and list items in the whole body (`--max-json-nodes`): every value JSON.parse makes. */
  readonly nodes: number;
}

export const DefaultBodyLimits: BodyLimits = Object.freeze({ objectKeys: Options.maxObjectKeys.schema.default, nodes: Options.maxJsonNodes.schema.default });

/**
 * Refuses a body nested deeper than MAX_NESTING, with an object of more keys, or with more nodes
 * (objects, lists, keys and list items) than `limits` allow, before JSON.parse. A scan of the text
 * that jumps over strings with indexOf and over long runs of anything else (numbers, white space)
 * with a regular expression, both native, so it costs a fraction of the parse; malformed JSON is
 * left for the parser.
 */
export function checkBody(text: string, limits: BodyLimits = DefaultBodyLimits): void {
  // Per open level: -1 for a list, else the keys of the object seen so far.
  const keys = new Int32Array(MAX_NESTING + 2);
  let depth = 0;
  let nodes = 0;
  let plain = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      i = closingQuote(text, i);
      if (i < 0) return;
    } else if (c === COLON) {
      // A key (and so its value).
      if (keys[depth]! >= 0 && ++keys[depth]! > limits.objectKeys) {
        throw invalid(`the body has an object of more than ${limits.objectKeys} keys (--${Options.maxObjectKeys.flag}); no real pod has a map that large`);
      }
      if (++nodes > limits.nodes) throw tooManyNodes(limits.nodes);
    } else if (c === COMMA) {
      // One more list item (a list's first item is counted with the list).
      if (keys[depth] === -1 && ++nodes > limits.nodes) throw tooManyNodes(limits.nodes);
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > MAX_NESTING) throw invalid(`the body is nested more than ${MAX_NESTING} levels deep; no AdmissionReview is`);
      nodes += c === OPEN_BRACKET ? 2 : 1;
      if (nodes > limits.nodes) throw tooManyNodes(limits.nodes);
      keys[depth] = c === OPEN_BRACE ? 0 : -1;
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      depth = Math.max(0, depth - 1);
    } else if (++plain > PLAIN_RUN) {
      // A long run of digits or white space (the apiserver sends neither): on to the next
      // character that matters, natively, rather than one at a time here.
      STRUCTURE.lastIndex = i;
      const next = STRUCTURE.exec(text);
      if (next === null) return;
      i = next.index - 1;
      plain = 0;
      continue;
    } else {
      continue;
    }
    plain = 0;
  }
}

function tooManyNodes(limit: number): InjectorError {
  return invalid(`the body holds more than ${limit} JSON nodes (objects, lists, keys and list items; --${Options.maxJsonNodes.flag}); no real pod holds that many`);
}

/** Characters in a row outside strings after which checkBody looks for the next one that matters. */
const PLAIN_RUN = 32;
const STRUCTURE = /["{}[\]:,]/g;

const COLON = 0x3a;
const COMMA = 0x2c;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;

/** The index of the quote that ends the string opened at `open`, or -1. */
function closingQuote(text: string, open: number): number {
  let at = open;
  for (;;) {
    at = text.indexOf('"', at + 1);
    if (at < 0) return -1;
    let slashes = 0;
    while (text.charCodeAt(at - 1 - slashes) === BACKSLASH) slashes++;
    if (slashes % 2 === 0) return at;
  }
}

/**
 * What a pod may hold before the injector refuses it: far above any real workload (README, "Limits
 * per review"), low enough that the answer and the work stay small. Kubernetes sets no number of
 * its own; etcd's 1.5 MiB object limit is the only bound, which a pod of tens of thousands of
 * containers meets.
 */
export interface PodLimits {
  /** containers + initContainers + ephemeralContainers. */
  readonly containers: number;
  readonly envPerContainer: number;
  readonly mountsPerContainer: number;
  readonly portsPerContainer: number;
  readonly volumes: number;
}

/** The defaults of the --max-* flags. */
export const DefaultPodLimits: PodLimits = Object.freeze({
  containers: Options.maxContainers.schema.default,
  envPerContainer: Options.maxEnvPerContainer.schema.default,
  mountsPerContainer: Options.maxMountsPerContainer.schema.default,
  portsPerContainer: Options.maxPortsPerContainer.schema.default,
  volumes: Options.maxVolumes.schema.default,
});

/**
 * Kubernetes' metadata limits (apimachinery pkg/api/validation/objectmeta.go and
 * pkg/util/validation/validation.go). The apiserver validates a pod only after the mutating
 * webhooks, so a pod over them reaches the injector; it would be refused after admission anyway.
 */
export const MetadataLimits = {
  /** TotalAnnotationSizeLimitB: keys plus values, in bytes. */
  annotationBytes: 256 * 1024,
  /** qualifiedNameMaxLength: the name part of a label or annotation key. */
  keyName: 63,
  /** DNS1123SubdomainMaxLength: the optional prefix before the `/`. */
  keyPrefix: 253,
  /** LabelValueMaxLength. */
  labelValue: 63,
} as const;

/**
 * The pod of a pod CREATE, with the fields the injector reads checked for type and size in one
 * pass: the apiserver always sends a well-typed Pod, so anything else comes from another client
 * and is refused (400) rather than failing inside the injection (500). Metadata over Kubernetes'
 * limits, and lists over `limits`, are refused with a message naming the limit. Linear in the
 * labels, annotations, containers, env vars, mounts and volumes; the rest of the pod is never
 * walked (checkNesting has bounded its depth).
 */
export function podObject(req: AdmissionRequest, limits: PodLimits = DefaultPodLimits): Pod {
  const pod = req.object;
  if (!isObject(pod)) throw invalid('request.object must be the Pod being created');
  if (pod['kind'] !== undefined && pod['kind'] !== 'Pod') throw invalid(`request.object has kind ${describeValue(pod['kind'])}, not Pod`);
  if (pod['apiVersion'] !== undefined && pod['apiVersion'] !== 'v1') throw invalid(`request.object has apiVersion ${describeValue(pod['apiVersion'])}, not v1`);
  const meta = optionalObject(pod['metadata'], 'metadata');
  if (meta !== undefined) checkMetadata(meta);
  const spec = optionalObject(pod['spec'], 'spec');
  if (spec !== undefined) checkSpec(spec, limits);
  return pod as Pod;
}

function checkMetadata(meta: JsonObject): void {
  checkLabels(meta['labels']);
  checkAnnotations(meta['annotations']);
  for (const field of ['name', 'generateName', 'namespace'] as const) optionalString(meta[field], `metadata.${field}`);
  objectList(meta['ownerReferences'], 'metadata.ownerReferences');
}

function checkLabels(value: unknown): void {
  const labels = optionalObject(value, 'metadata.labels');
  for (const key in labels) {
    const v = labels[key];
    if (typeof v !== 'string') throw invalid(`request.object.metadata.labels must map strings to strings; ${describeValue(key)} maps to ${describeValue(v)}`);
    checkKey(key, 'label');
    if (v.length > MetadataLimits.labelValue) {
      throw overKubernetes(`label ${describeValue(key)} has a value of ${v.length} characters; Kubernetes allows at most ${MetadataLimits.labelValue}`, 'validation.IsValidLabelValue');
    }
  }
}

function checkAnnotations(value: unknown): void {
  const annotations = optionalObject(value, 'metadata.annotations');
  let bytes = 0;
  for (const key in annotations) {
    const v = annotations[key];
    if (typeof v !== 'string') throw invalid(`request.object.metadata.annotations must map strings to strings; ${describeValue(key)} maps to ${describeValue(v)}`);
    checkKey(key, 'annotation');
    bytes += utf8Length(key) + utf8Length(v);
  }
  if (bytes > MetadataLimits.annotationBytes) {
    throw overKubernetes(`the annotations take ${bytes} bytes (keys plus values); Kubernetes allows at most ${MetadataLimits.annotationBytes} (256 KiB)`, 'ValidateAnnotationsSize');
  }
}

/** Bytes of UTF-8, as Go's len() counts a string; short strings in a loop, to spare a native call per key. */
function utf8Length(text: string): number {
  if (text.length > 64) return Buffer.byteLength(text);
  let bytes = text.length;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    // Two bytes up to U+07FF, three beyond; a surrogate pair (two units) is four.
    if (c > 0x7f) bytes += c <= 0x7ff || (c >= 0xd800 && c <= 0xdfff) ? 1 : 2;
  }
  return bytes;
}

/** Only the lengths of a qualified name; its characters are the apiserver's to judge. */
function checkKey(key: string, what: 'label' | 'annotation'): void {
  if (key.length <= MetadataLimits.keyName) return;
  const slash = key.indexOf('/');
  const name = slash < 0 ? key.length : key.length - slash - 1;
  if (name > MetadataLimits.keyName) {
    throw overKubernetes(`${what} key ${describeValue(key)} has a name part of ${name} characters; Kubernetes allows at most ${MetadataLimits.keyName}`, 'validation.IsQualifiedName');
  }
  if (slash > MetadataLimits.keyPrefix) {
    throw overKubernetes(`${what} key ${describeValue(key)} has a prefix of ${slash} characters; Kubernetes allows at most ${MetadataLimits.keyPrefix}`, 'validation.IsQualifiedName');
  }
}

const ContainerLists = ['containers', 'initContainers', 'ephemeralContainers'] as const;

function checkSpec(spec: JsonObject, limits: PodLimits): void {
  for (const field of ['serviceAccountName', 'serviceAccount'] as const) optionalString(spec[field], `spec.${field}`);
  const volumes = namedList(spec['volumes'], 'spec.volumes');
  if (volumes.length > limits.volumes) throw overLimit(`${volumes.length} volumes`, limits.volumes, Options.maxVolumes.flag);
  // An imagePullSecret may come without a name (LocalObjectReference.name is omitempty).
  objectList(spec['imagePullSecrets'], 'spec.imagePullSecrets').forEach((s, i) => optionalString(s['name'], `spec.imagePullSecrets[${i}].name`));
  const lists = ContainerLists.map((field) => namedList(spec[field], `spec.${field}`));
  const count = lists.reduce((n, list) => n + list.length, 0);
  if (count > limits.containers) throw overLimit(`${count} containers (containers, initContainers and ephemeralContainers together)`, limits.containers, Options.maxContainers.flag);
  lists.forEach((list, k) => list.forEach((c, i) => checkContainer(c, `spec.${ContainerLists[k]!}[${i}]`, limits)));
}

function checkContainer(c: JsonObject, at: string, limits: PodLimits): void {
  optionalString(c['image'], `${at}.image`);
  const env = namedList(c['env'], `${at}.env`);
  if (env.length > limits.envPerContainer) throw overLimit(`${env.length} env vars in ${at}`, limits.envPerContainer, Options.maxEnvPerContainer.flag);
  env.forEach((e, j) => optionalString(e['value'], `${at}.env[${j}].value`));
  const mounts = namedList(c['volumeMounts'], `${at}.volumeMounts`);
  if (mounts.length > limits.mountsPerContainer) throw overLimit(`${mounts.length} volumeMounts in ${at}`, limits.mountsPerContainer, Options.maxMountsPerContainer.flag);
  mounts.forEach((m, j) => {
    if (typeof m['mountPath'] !== 'string') throw invalid(`request.object.${at}.volumeMounts[${j}].mountPath must be a string`);
  });
  const ports = optionalList(c['ports'], `${at}.ports`);
  if (ports.length > limits.portsPerContainer) throw overLimit(`${ports.length} ports in ${at}`, limits.portsPerContainer, Options.maxPortsPerContainer.flag);
}

function optionalObject(value: unknown, field: string): JsonObject | undefined {
  if (value === undefined) return undefined;
  if (!isObject(value)) throw invalid(`request.object.${field} must be an object`);
  return value;
}

function optionalString(value: unknown, field: string): void {
  if (value !== undefined && typeof value !== 'string') throw invalid(`request.object.${field} must be a string`);
}

function optionalList(value: unknown, field: string): readonly unknown[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) throw invalid(`request.object.${field} must be a list`);
  return value;
}

function objectList(value: unknown, field: string): readonly JsonObject[] {
  const list = optionalList(value, field);
  list.forEach((item, i) => {
    if (!isObject(item)) throw invalid(`request.object.${field}[${i}] must be an object`);
  });
  return list as readonly JsonObject[];
}

function namedList(value: unknown, field: string): readonly JsonObject[] {
  const list = optionalList(value, field);
  list.forEach((item, i) => {
    if (!isObject(item) || typeof item['name'] !== 'string') throw invalid(`request.object.${field}[${i}] must be an object with a name`);
  });
  return list as readonly JsonObject[];
}

/** A value for a message: a string quoted and cut short, anything else by its type (never walked). */
export function describeValue(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 64 ? `${value.slice(0, 64)}…` : value);
  if (value === undefined) return 'nothing';
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'an object';
  return String(value as number | boolean);
}

function invalid(detail: string): InjectorError {
  return new InjectorError('REVIEW_INVALID', [detail]);
}

function overKubernetes(detail: string, rule: string): InjectorError {
  return new InjectorError('POD_OVER_KUBERNETES_LIMIT', [detail, rule]);
}

function overLimit(what: string, limit: number, flag: string): InjectorError {
  return new InjectorError('POD_OVER_LIMIT', [what, limit, flag]);
}
