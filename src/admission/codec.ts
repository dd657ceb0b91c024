import { InjectorError } from '../errors.js';
import { Options } from '../config/config.js';
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
  /** The pod as stored before an UPDATE; null on CREATE. */
  readonly oldObject?: unknown;
  readonly dryRun?: boolean;
}

/** A request as the handlers see it: without the uid, which only the codec echoes (encodeAnswer). */
export type ReviewRequest = Omit<AdmissionRequest, 'uid'>;

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
  readonly patch?: Base64Patch;
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

/**
 * A JSON patch's text in base64, as AdmissionResponse.patch carries it (a []byte in Go). Made only
 * by base64Patch, so it holds nothing but base64's letters, digits, `+`, `/` and `=`, none of
 * which JSON escapes: encodeAnswer writes it into the answer as it is.
 */
export type Base64Patch = string & { readonly [base64]: true };
declare const base64: unique symbol;

/** The base64 of a JSON patch's text (its UTF-8 bytes). */
export function base64Patch(text: string): Base64Patch {
  return Buffer.from(text).toString('base64') as Base64Patch;
}

/** An answer as a handler gives it: everything but the uid, which only the codec sets (encodeAnswer). */
export type ResponseBody = Omit<AdmissionResponse, 'uid'>;

/** The review an answer goes to: its version and its uid, all encodeAnswer echoes. */
export interface ReviewEnvelope {
  readonly apiVersion: ReviewVersion;
  readonly request: { readonly uid: string };
}

/**
 * The AdmissionReview text of an answer, in the version the review came in, with `response.uid`
 * set to the review's: the one place a uid is written (controller-runtime and Istio echo it in the
 * transport, never in a handler).
 */
export function encodeAnswer(review: ReviewEnvelope, body: ResponseBody): string {
  if (body.patch === undefined)
    return JSON.stringify({ apiVersion: review.apiVersion, kind: 'AdmissionReview', response: { uid: review.request.uid, ...body } });
  // The bytes of JSON.stringify of the same answer (test/admission/codec.test.ts), without
  // JSON.stringify scanning the patch for characters to escape, which base64 has none of: the
  // patch's place is written empty, then filled. The place is found by the response's own two
  // fields, `"patchType":"JSONPatch","patch":""`: no string can hold that text (inside a JSON
  // string every quote is escaped), and the only object with those keys is the response, which
  // the mutating handler fills in that order (verdict.ts injected()). For an answer with the
  // seven sidecars of the bench (a 26 KB patch), 47 to 56 µs become 6 to 10 in process.
  const text = JSON.stringify({ apiVersion: review.apiVersion, kind: 'AdmissionReview', response: { uid: review.request.uid, ...body, patch: '' } });
  const found = text.indexOf(EMPTY_PATCH);
  if (found < 0) throw new Error('encodeAnswer: a patch without patchType JSONPatch just before it');
  const at = found + EMPTY_PATCH.length - 1;
  return text.slice(0, at) + body.patch + text.slice(at);
}

const EMPTY_PATCH = '"patchType":"JSONPatch","patch":""';

/**
 * How the kube-apiserver begins every review, up to the first character of the uid: Go's
 * encoding/json writes the fields in the order of the structs (TypeMeta's kind and apiVersion,
 * then request, whose first field is uid).
 */
const ApiserverPrefixes: Readonly<Record<ReviewVersion, string>> = Object.freeze({
  [ReviewVersion.V1]: `{"kind":"AdmissionReview","apiVersion":"${ReviewVersion.V1}","request":{"uid":"`,
  [ReviewVersion.V1Beta1]: `{"kind":"AdmissionReview","apiVersion":"${ReviewVersion.V1Beta1}","request":{"uid":"`,
});

/** A body as the apiserver writes it, read without parsing: its version, its uid, and where the uid's closing quote is. */
export interface ApiserverEnvelope {
  readonly version: ReviewVersion;
  readonly uid: string;
  /** The index of the quote that closes the uid: the body from there on is all but the uid. */
  readonly uidEnd: number;
}

/**
 * The version and uid of a body that begins as the apiserver writes a review (ApiserverPrefixes),
 * with a uid of at most MAX_RAW_UID printable ASCII characters but `"` and `\`: a whole JSON
 * string that needs no escapes. Undefined for any other body. Nothing is checked beyond that: the
 * uid is what the text says until the body is parsed (a later duplicate `uid` key would win there).
 */
export function apiserverEnvelope(body: Buffer): ApiserverEnvelope | undefined {
  const version = PREFIX_BYTES.find(([, prefix]) => body.length > prefix.length && body.subarray(0, prefix.length).equals(prefix))?.[0];
  if (version === undefined) return undefined;
  const start = ApiserverPrefixes[version].length;
  for (let end = start; end - start <= MAX_RAW_UID && end < body.length; end++) {
    const c = body[end]!;
    if (c === QUOTE) return end === start ? undefined : { version, uid: body.toString('latin1', start, end), uidEnd: end };
    if (c < 0x20 || c > 0x7e || c === BACKSLASH) return undefined;
  }
  return undefined;
}

const PREFIX_BYTES = Object.values(ReviewVersion).map((version) => [version, Buffer.from(ApiserverPrefixes[version], 'latin1')] as const);
/** Kubernetes uids are 36-character UUIDs (`uuid.NewUUID()` in the apiserver's admission plugin). */
const MAX_RAW_UID = 128;

/**
 * Nesting allowed in a review body. The deepest field of a real review is about 20 levels down
 * (request.object.metadata.managedFields[].fieldsV1 mirrors the pod; spec.affinity and projected
 * volumes reach about 13), since core/v1 Pod has no recursive type. Deeper JSON breaks every
 * recursive walk, JSON.stringify among them.
 */
export const MAX_NESTING = 64;

/**
 * What a review body may hold before it is parsed. The apiserver sends up to 3 MiB (its request
 * limit), and JSON.parse of 3 MiB of small values or keys new to V8 holds the event loop for up to
 * a second; these bounds keep it, and the review after it, under 50 ms (measured by
 * bench/shapes.ts; docs/limits-and-security.md). A key is the costliest value to parse (a name,
 * or an order of names, new to V8 costs it 1 to 2 µs), so keys are bounded apart from the other
 * values (at most about 0.6 µs each: a short string new to V8, which JSON.parse interns).
 */
export interface BodyLimits {
  /** Keys of one JSON object (`--max-object-keys`): a map the handlers walk, such as labels or annotations. */
  readonly objectKeys: number;
  /** Keys in the whole body (`--max-json-keys`). */
  readonly keys: number;
  /** Objects, lists, keys and list items in the whole body (`--max-json-nodes`): every value JSON.parse makes. */
  readonly nodes: number;
}

export const DefaultBodyLimits: BodyLimits = Object.freeze({
  objectKeys: Options.maxObjectKeys.schema.default,
  keys: Options.maxJsonKeys.schema.default,
  nodes: Options.maxJsonNodes.schema.default,
});

/**
 * Refuses a body nested deeper than MAX_NESTING, or holding more than `limits` allow, before
 * JSON.parse: one pass over the text that jumps over strings with indexOf. Malformed JSON is left
 * for the parser.
 */
export function checkBody(text: string, limits: BodyLimits = DefaultBodyLimits): void {
  // Per open level: the keys of the object so far, or LIST.
  const counts = new Int32Array(MAX_NESTING + 2);
  let depth = 0;
  let nodes = 0;
  let keys = 0;
  for (let i = 0; i < text.length; i++) {
    switch (text.charCodeAt(i)) {
      case QUOTE:
        i = closingQuote(text, i);
        if (i < 0) return;
        break;
      case COLON:
        // A key, and so a node of its object.
        if (counts[depth] !== LIST && ++counts[depth]! > limits.objectKeys) {
          throw invalid(`the body has an object of more than ${limits.objectKeys} keys (--${Options.maxObjectKeys.flag}); no real pod has a map that large`);
        }
        if (++keys > limits.keys)
          throw invalid(`the body holds more than ${limits.keys} keys in all (--${Options.maxJsonKeys.flag}); no real pod holds that many`);
        if (++nodes > limits.nodes) throw tooManyNodes(limits.nodes);
        break;
      case COMMA:
        // One more list item (a list's first item is counted with the list).
        if (counts[depth] === LIST && ++nodes > limits.nodes) throw tooManyNodes(limits.nodes);
        break;
      case OPEN_BRACE:
      case OPEN_BRACKET:
        if (++depth > MAX_NESTING) throw invalid(`the body is nested more than ${MAX_NESTING} levels deep; no AdmissionReview is`);
        counts[depth] = text.charCodeAt(i) === OPEN_BRACE ? 0 : LIST;
        nodes += counts[depth] === LIST ? 2 : 1;
        if (nodes > limits.nodes) throw tooManyNodes(limits.nodes);
        break;
      case CLOSE_BRACE:
      case CLOSE_BRACKET:
        depth = Math.max(0, depth - 1);
        break;
    }
  }
}

/** checkBody's count of an open list, where any other level counts its keys. */
const LIST = -1;

function tooManyNodes(limit: number): InjectorError {
  return invalid(
    `the body holds more than ${limit} JSON nodes (objects, lists, keys and list items; --${Options.maxJsonNodes.flag}); no real pod holds that many`,
  );
}

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

/** Decodes a review body: the limits checked on the text (checkBody), then JSON.parse, then the envelope (decodeReview). */
export function decodeBody(text: string, limits: BodyLimits = DefaultBodyLimits): DecodedReview {
  checkBody(text, limits);
  return decodeReview(parseJson(text));
}

/** Parses a body read by the transport; malformed JSON is a 400. */
function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new InjectorError('BODY_MALFORMED', [(err as Error).message], { cause: err });
  }
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
