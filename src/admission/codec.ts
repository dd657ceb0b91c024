import { runInContext, createContext } from 'node:vm';
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

/** An answer as a handler gives it: everything but the uid, which only the codec sets (encodeAnswer). */
export type ResponseBody = Omit<AdmissionResponse, 'uid'>;

/** The review an answer goes to: its version and its uid, all encodeAnswer echoes. */
export interface ReviewEnvelope {
  readonly apiVersion: ReviewVersion;
  readonly request: { readonly uid: string };
}

/**
 * Serializes the answer in the version the review came in, with `response.uid` set to the
 * review's: the one place a uid is written (controller-runtime and Istio echo it in the transport,
 * never in a handler). The bytes are those of JSON.stringify of the whole AdmissionReview with the
 * response's fields in one order (uid, allowed, status, patchType, patch, warnings,
 * auditAnnotations): AnswerHeads, the uid as a JSON string, then the body's own fields.
 */
export function encodeAnswer(review: ReviewEnvelope, body: ResponseBody): string {
  let text = AnswerHeads[review.apiVersion] + JSON.stringify(review.request.uid) + (body.allowed ? ',"allowed":true' : ',"allowed":false');
  if (body.status !== undefined) text += ',"status":' + JSON.stringify(body.status);
  if (body.patchType !== undefined) text += ',"patchType":' + JSON.stringify(body.patchType);
  if (body.patch !== undefined) text += ',"patch":' + (body.patch === lastPatch ? '"' + body.patch + '"' : JSON.stringify(body.patch));
  if (body.warnings !== undefined) text += ',"warnings":' + JSON.stringify(body.warnings);
  if (body.auditAnnotations !== undefined) text += ',"auditAnnotations":' + JSON.stringify(body.auditAnnotations);
  lastPatch = undefined;
  return text + '}}';
}

// Every field of AdmissionResponse is written by encodeAnswer: one added there fails to compile here until it is.
const everyFieldWritten: [Exclude<keyof AdmissionResponse, 'uid' | 'allowed' | 'status' | 'patchType' | 'patch' | 'warnings' | 'auditAnnotations'>] extends [never] ? true : never = true;
void everyFieldWritten;

/**
 * A JSON patch as an answer carries it: the base64 of its bytes. The codec remembers the last
 * text it made here, and encodeAnswer writes a patch equal to it as it is: base64 holds nothing
 * JSON escapes, where JSON.stringify would scan it a character at a time (about 12 µs for the
 * 2 KB patch of a typical pod on Node 20, as much as the whole rest of the answer). A patch made
 * any other way is stringified; the comparison is by content, so it can only ever skip the
 * escaping of a text that is base64.
 */
export function patchText(patch: Buffer): string {
  lastPatch = patch.toString('base64');
  return lastPatch;
}

/** The text patchText made last, until the answer that carries it is encoded (a review is handled and encoded in one synchronous call). */
let lastPatch: string | undefined;

/** A JSON patch ready for the answer: its base64 (patchText) and its size in bytes. */
export interface EncodedPatch {
  readonly base64: string;
  readonly bytes: number;
}

/** A patch over the size limit: only its size in bytes, for the refusal (PATCH_TOO_LARGE). */
export interface OversizedPatch {
  readonly base64?: undefined;
  readonly bytes: number;
}

/**
 * The patch of the JSON text `text`, as patchText makes it from `toBytes(text)`, its UTF-8 bytes.
 * A text equal to the last one given reuses its base64 and size: pods that differ but get the
 * same patch (the replicas of a StatefulSet, the pods of every ReplicaSet of a Deployment, any
 * pod whose templates read nothing of it) come one after another, and the patch's bytes and
 * base64 cost about a third of the mutating handler for a typical pod.
 *
 * A text of more than `maxBytes` bytes of UTF-8 is refused (PATCH_TOO_LARGE), so it is only
 * measured (Buffer.byteLength, which copies nothing): it is never encoded (its base64 would be
 * 4 * ceil(n / 3) characters more) nor kept until the next mutation. A UTF-16 unit is at most 3
 * bytes of UTF-8, so a text of at most a third of the limit in units, every real pod's, is not
 * even measured.
 */
export function encodePatch(text: string, toBytes: (text: string) => Buffer, maxBytes: number): EncodedPatch | OversizedPatch {
  if (text.length * 3 > maxBytes) {
    const bytes = Buffer.byteLength(text);
    if (bytes > maxBytes) return { bytes };
  }
  if (text !== lastEncoded?.text) {
    const bytes = toBytes(text);
    lastEncoded = { text, bytes: bytes.length, base64: patchText(bytes) };
  }
  lastPatch = lastEncoded.base64;
  return lastEncoded;
}

let lastEncoded: (EncodedPatch & { readonly text: string }) | undefined;

/** How every answer begins, up to its uid: `{"apiVersion":"<version>","kind":"AdmissionReview","response":{"uid":`. */
export const AnswerHeads: Readonly<Record<ReviewVersion, string>> = Object.freeze({
  [ReviewVersion.V1]: `{"apiVersion":"${ReviewVersion.V1}","kind":"AdmissionReview","response":{"uid":`,
  [ReviewVersion.V1Beta1]: `{"apiVersion":"${ReviewVersion.V1Beta1}","kind":"AdmissionReview","response":{"uid":`,
});

/**
 * How the kube-apiserver begins every review, up to the first character of the uid: Go's
 * encoding/json writes the fields in the order of the structs (TypeMeta's kind and apiVersion,
 * then request, whose first field is uid). The answer cache (answers.ts) looks bodies up only
 * when they begin so.
 */
export const ApiserverPrefixes: Readonly<Record<ReviewVersion, string>> = Object.freeze({
  [ReviewVersion.V1]: `{"kind":"AdmissionReview","apiVersion":"${ReviewVersion.V1}","request":{"uid":"`,
  [ReviewVersion.V1Beta1]: `{"kind":"AdmissionReview","apiVersion":"${ReviewVersion.V1Beta1}","request":{"uid":"`,
});

/**
 * Nesting allowed in a review body. The deepest field of a real review is about 20 levels down
 * (request.object.metadata.managedFields[].fieldsV1 mirrors the pod; spec.affinity and projected
 * volumes reach about 13), since core/v1 Pod has no recursive type. Deeper JSON breaks every
 * recursive walk, JSON.stringify among them.
 */
export const MAX_NESTING = 64;

/**
 * What a review body may hold before it is parsed. JSON.parse pays per value it makes, and most
 * for an object layout V8 has not seen before: a key that extends its object's keys so far in a
 * way new to V8 costs about 1.5 µs (a new hidden class, and an interned string when the name is
 * new too), whether the name is new or only its place after the keys before it (64 names in
 * shuffled orders cost nearly as much as distinct ones). A short string value new to V8 costs
 * about 0.3 µs, anything else 0.03 to 0.15 µs. So the nodes are bounded generously, and the
 * layouts, which a real pod has few of, tightly (README, "Limits per review").
 */
export interface BodyLimits {
  /** Keys of one JSON object (`--max-object-keys`). */
  readonly objectKeys: number;
  /** Objects, lists, keys and list items in the whole body (`--max-json-nodes`): every value JSON.parse makes. */
  readonly nodes: number;
  /**
   * Distinct object layouts in the whole body (`--max-object-layouts`): the distinct runs of key
   * names that begin an object, so a key counts once per distinct run of keys before it in its
   * object. Each is a hidden class JSON.parse may have to make. At least the distinct key names.
   */
  readonly objectLayouts: number;
  /**
   * String values of SHORT_STRING_MIN to SHORT_STRING_MAX characters once decoded, as V8 counts them
   * (`--max-short-strings`): JSON.parse interns each, which for a string new to V8 costs about
   * ten times what any other value does (a string-table insertion, and a dead entry each later
   * garbage collection must clear).
   */
  readonly shortStrings: number;
}

export const DefaultBodyLimits: BodyLimits = Object.freeze({
  objectKeys: Options.maxObjectKeys.schema.default,
  nodes: Options.maxJsonNodes.schema.default,
  objectLayouts: Options.maxObjectLayouts.schema.default,
  shortStrings: Options.maxShortStrings.schema.default,
});

/**
 * The lengths of the string values JSON.parse interns: V8 interns every key, and a value at most
 * 10 characters long once decoded (`kMaxInternalizedStringValueLength` in src/json/json-parser:
 * `length <= 10` in Node 20's V8, `< 10` in Node 24's; escapes are decoded first, so
 * `"\u0061"` is one character). Shorter than 2 is the empty string or a one-character string V8
 * keeps ready-made.
 */
const SHORT_STRING_MIN = 2;
const SHORT_STRING_MAX = 10;
/** The most characters a JSON escape writes for one decoded character (`\uXXXX`). */
const ESCAPE_WIDTH = 6;

/** text.indexOf(search, from), or text.length when it is not there. */
function indexOrEnd(text: string, search: string, from: number): number {
  const at = text.indexOf(search, from);
  return at < 0 ? text.length : at;
}

/** The length of the string value written in text[from, to) once its escapes are decoded (UTF-16 code units, as V8 counts). */
function decodedLength(text: string, from: number, to: number): number {
  let length = 0;
  for (let j = from; j < to; j++, length++) {
    if (text.charCodeAt(j) === BACKSLASH) j += text.charCodeAt(j + 1) === LOWER_U ? 5 : 1;
  }
  return length;
}

/**
 * Refuses a body nested deeper than MAX_NESTING, with an object of more keys, more nodes (objects,
 * lists, keys and list items), more short string values or more object layouts than `limits`
 * allow, before JSON.parse. A scan
 * of the text that jumps over strings with indexOf and over long runs of anything else (numbers,
 * white space) with a regular expression, both native, so it costs a fraction of the parse;
 * malformed JSON is left for the parser. Layouts are never more than keys, so only a body of more
 * keys than `limits.objectLayouts` or OWN_CONTEXT_KEYS (none the apiserver sends for a real pod
 * but the largest) is scanned again to count them: every other review pays nothing for that limit.
 */
export function checkBody(text: string, limits: BodyLimits = DefaultBodyLimits): void {
  checkBodyKeys(text, limits);
}

/** checkBody, returning the keys in the body (-1 when the JSON is malformed). */
export function checkBodyKeys(text: string, limits: BodyLimits = DefaultBodyLimits): number {
  const keys = scan(text, limits);
  if (keys > Math.min(limits.objectLayouts, OWN_CONTEXT_KEYS)) countLayouts(text, limits.objectLayouts);
  return keys;
}

/**
 * The most keys of a body parsed with the process's own JSON.parse; a larger one is parsed in a
 * V8 context of its own (parseInOwnContext). A map takes at most 1536 transitions
 * (`TransitionArray::kMaxNumberOfTransitions`), and those of objects that died are dropped only
 * by a major garbage collection: once reviews have filled the map V8 keeps for objects of some
 * key count with keys new to it, every object of that count with a key new to it gets maps of
 * its own, which the next object cannot reuse (JSON.parse takes no feedback from a map outside
 * the transition tree), 2 to 7 µs per key. A body of this many keys pays at most about 30 ms for
 * that; a larger one starts from empty maps.
 */
export const OWN_CONTEXT_KEYS = 4096;

/**
 * The most distinct keys that may follow one run of keys in objects of one key count: the
 * transitions JSON.parse adds to one map. Below V8's 1536 (above), so a body parsed in a context
 * of its own never fills a map itself: 1536 one-key objects of distinct names, then 20 000 of one
 * more, cost JSON.parse 90 to 140 ms. Real pods: at most 21 in the corpus (test/fixtures/corpus,
 * with their managedFields), the distinct first keys of its two-key objects.
 */
export const MAX_KEY_FANOUT = 1024;

/**
 * Objects of this many keys or more JSON.parse makes as dictionaries, with no hidden class (V8's
 * `JSObject::kMapCacheSize`: `ObjectLiteralMapFromCache` gives them the slow-object map).
 */
const DICTIONARY_KEYS = 128;

/**
 * Counts the hidden classes JSON.parse may build for the body's objects, as V8 builds them: an
 * object of n keys starts at a map kept for objects of n keys (`ObjectLiteralMapFromCache`), and
 * each key moves it along a transition to the map of the keys so far. So a key makes a hidden
 * class for each distinct pair (key count of its object, run of names up to it): `{"a":0}` and
 * `{"a":0,"b":0}` are three, not two. Counting runs of names alone (one tree for every key count)
 * let through a body of 56 000 maps (objects holding the first 1, 2, ... 127 names of a few runs)
 * that cost JSON.parse 90 to 190 ms. Objects of DICTIONARY_KEYS keys or more make none.
 *
 * The runs of names are numbered in a tree of their own (a key makes a new run when the pair (run
 * before, name) is new), and each object's runs are kept until it closes, when its key count is
 * known. Names are compared as the text writes them (the apiserver's encoding/json writes each
 * name one way). Holds at most `limit` runs and `limit` hidden classes: it throws past either.
 */
function countLayouts(text: string, limit: number): void {
  // The run each open object has reached, by depth (0: no key yet), and the depth; the nesting was
  // checked by the first scan.
  const at = new Int32Array(MAX_NESTING + 2);
  // The keys of each open object that are not array indices (V8's properties).
  const named = new Int32Array(MAX_NESTING + 2);
  let depth = 0;
  // Each name seen, numbered from 1, and each run by the pair (run before, name) it adds, as one
  // number (a small integer while the limit is under 2 ** 15).
  const names = new Map<string, number>();
  const runs = new Map<number, number>();
  const base = limit + 1;
  // Each run's run before it and its number of keys. An object's last run names all its keys, so
  // when it closes its hidden classes are (its key count, each run up the tree), as one number;
  // objects of one kind are counted once (`counted`).
  const parent = new Int32Array(base + 1);
  const length = new Int32Array(base + 1);
  const counted = new Uint8Array(base + 1);
  const classes = new Set<number>();
  // The hidden classes that follow each one (as many as the transitions V8 adds to its map).
  const fanout = new Map<number, number>();
  // The last key taken from each run and where it led: objects of one kind repeat their keys in
  // the same order (a pod's env vars, managedFields), so most keys are found without a slice.
  const lastName: (string | undefined)[] = [];
  const lastTo = new Int32Array(base + 1);
  let stringStart = 0;
  let stringEnd = 0;
  let plain = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      stringStart = i + 1;
      i = closingQuote(text, i);
      if (i < 0) return;
      stringEnd = i;
    } else if (c === COLON) {
      const from = at[depth]!;
      // An object of DICTIONARY_KEYS named keys or more (DICTIONARY) makes no hidden class, and a
      // run that long is in no smaller object: its keys from there on are not followed. (They were,
      // and a pod of 2100 annotations, well inside Kubernetes' 256 KiB, was refused.) Keys that are
      // array indices ("0", "17") are elements, not properties: V8 counts none of them, so
      // `{"0":…,…,"127":…, then 127 names}` still gets 127 hidden classes. They are followed as
      // runs like any key (which counts more than V8 makes, never fewer).
      const index = isIndexKey(text, stringStart, stringEnd);
      if (from === DICTIONARY) {
        // Nothing to follow.
      } else if (!index && named[depth]! + 1 >= DICTIONARY_KEYS) {
        at[depth] = DICTIONARY;
      } else {
        if (!index) named[depth]!++;
        const last = lastName[from];
        if (last !== undefined && last.length === stringEnd - stringStart && text.startsWith(last, stringStart)) {
          at[depth] = lastTo[from]!;
        } else {
          const name = text.slice(stringStart, stringEnd);
          let id = names.get(name);
          if (id === undefined) names.set(name, (id = names.size + 1));
          const pair = from * base + id;
          let to = runs.get(pair);
          if (to === undefined) {
            if (runs.size >= limit) throw tooManyLayouts(limit);
            runs.set(pair, (to = runs.size + 1));
            parent[to] = from;
            length[to] = length[from]! + 1;
          }
          lastName[from] = name;
          lastTo[from] = to;
          at[depth] = to;
        }
      }
    } else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      at[++depth] = 0;
      named[depth] = 0;
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      const last = at[depth]!;
      const keys = last === DICTIONARY ? 0 : length[last]!;
      if (keys > 0 && counted[last] === 0) {
        counted[last] = 1;
        for (let run = last; run !== 0; run = parent[run]!) {
          const size = classes.size;
          if (classes.add(keys * base + run).size === size) break;
          const from = keys * base + parent[run]!;
          const next = (fanout.get(from) ?? 0) + 1;
          if (next > MAX_KEY_FANOUT) {
            throw invalid(`the body holds objects of ${keys} keys with more than ${MAX_KEY_FANOUT} different names for key ${length[run]!} after the same keys before it (each a transition JSON.parse adds to one map); no real pod holds that many`);
          }
          fanout.set(from, next);
        }
        if (classes.size > limit) throw tooManyLayouts(limit);
      }
      depth = Math.max(0, depth - 1);
    } else if (c === COMMA) {
      // Nothing to count, but the end of a plain run, as in scan.
    } else if (++plain > PLAIN_RUN) {
      i = skipPlainRun(text, i);
      if (i < 0) return;
      plain = 0;
      continue;
    } else {
      continue;
    }
    plain = 0;
  }
}

/**
 * Whether the key written in text[from, to) is an array index once its escapes are decoded
 * (`"0"`, `"4294967294"`, `"\u0031"`; not `"01"`, `"-1"` or `"4294967295"`): V8 keeps such keys as
 * elements, outside the object's hidden class.
 */
function isIndexKey(text: string, from: number, to: number): boolean {
  const first = text.charCodeAt(from);
  if (first !== BACKSLASH && (first < DIGIT_0 || first > DIGIT_9)) return false;
  let name = text.slice(from, to);
  if (name.includes('\\')) {
    try {
      name = JSON.parse(`"${name}"`) as string;
    } catch {
      return false;
    }
  }
  return INDEX_KEY.test(name) && Number(name) < MAX_ARRAY_LENGTH;
}

const DIGIT_0 = 0x30;
const DIGIT_9 = 0x39;
/** An array index in canonical form: 0, or digits without a leading zero (at most 10). */
const INDEX_KEY = /^(?:0|[1-9][0-9]{0,9})$/;
/** 2 ** 32 - 1: the largest array index is one less. */
const MAX_ARRAY_LENGTH = 4294967295;

/** countLayouts' mark of an open object that has reached DICTIONARY_KEYS named keys. */
const DICTIONARY = -1;

function tooManyLayouts(limit: number): InjectorError {
  return invalid(`the body holds more than ${limit} distinct object layouts (runs of key names; --${Options.maxObjectLayouts.flag}); no real pod holds that many`);
}

/**
 * The scan's count per open level: -1 for a list, else the keys of the object seen so far. One
 * array for every scan (a scan runs to its end synchronously, and sets a level's count when it
 * opens it): a typed array made per review cost 1.3 of the scan's 18 µs for a typical pod.
 */
const SCAN_KEYS = new Int32Array(MAX_NESTING + 2);

/** The scan of checkBody: throws past the limits, else returns the keys in the body (-1 when the JSON is malformed). */
function scan(text: string, limits: BodyLimits): number {
  const keys = SCAN_KEYS;
  // Outside any object (malformed text only): counted from 0 as in a fresh array.
  keys[0] = 0;
  let depth = 0;
  let nodes = 0;
  let allKeys = 0;
  let shortStrings = 0;
  // The next backslash at or after the string being looked at (text.length: none), found by one
  // forward search at a time, so finding which strings hold an escape reads the text once.
  let nextSlash = -1;
  let plain = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      const open = i;
      i = closingQuote(text, i);
      if (i < 0) return -1;
      let length = i - open - 1;
      // V8 decides on the decoded length: `\u003c` is one character (and Go's encoding/json
      // writes `<`, `>` and `&` so), so up to 6 written characters per decoded one.
      if (length >= SHORT_STRING_MIN && length <= SHORT_STRING_MAX * ESCAPE_WIDTH) {
        if (nextSlash <= open) nextSlash = indexOrEnd(text, '\\', open + 1);
        if (nextSlash < i) length = decodedLength(text, open + 1, i);
      }
      if (length >= SHORT_STRING_MIN && length <= SHORT_STRING_MAX && !isKey(text, i + 1) && ++shortStrings > limits.shortStrings) {
        throw invalid(`the body holds more than ${limits.shortStrings} short strings (values of ${SHORT_STRING_MIN} to ${SHORT_STRING_MAX} characters, each interned by JSON.parse; --${Options.maxShortStrings.flag}); no real pod holds that many`);
      }
    } else if (c === COLON) {
      // A key (and so its value).
      if (keys[depth]! >= 0 && ++keys[depth]! > limits.objectKeys) {
        throw invalid(`the body has an object of more than ${limits.objectKeys} keys (--${Options.maxObjectKeys.flag}); no real pod has a map that large`);
      }
      if (++nodes > limits.nodes) throw tooManyNodes(limits.nodes);
      allKeys++;
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
      i = skipPlainRun(text, i);
      if (i < 0) break;
      plain = 0;
      continue;
    } else {
      continue;
    }
    plain = 0;
  }
  return allKeys;
}

function tooManyNodes(limit: number): InjectorError {
  return invalid(`the body holds more than ${limit} JSON nodes (objects, lists, keys and list items; --${Options.maxJsonNodes.flag}); no real pod holds that many`);
}

/** Whether the string that ended just before `from` is a key: the next character but white space is a colon. */
function isKey(text: string, from: number): boolean {
  let c = text.charCodeAt(from);
  while (c === SPACE || c === NEWLINE || c === RETURN || c === TAB) c = text.charCodeAt(++from);
  return c === COLON;
}

/** Characters in a row outside strings after which checkBody looks for the next one that matters. */
const PLAIN_RUN = 32;
const STRUCTURE = /["{}[\]:,]/g;

/**
 * A long run of digits or white space (the apiserver sends neither): the index just before the
 * next character that matters, found natively rather than one at a time in the scans, or -1 when
 * none is left.
 */
function skipPlainRun(text: string, from: number): number {
  STRUCTURE.lastIndex = from;
  const next = STRUCTURE.exec(text);
  return next === null ? -1 : next.index - 1;
}

const COLON = 0x3a;
const SPACE = 0x20;
const NEWLINE = 0x0a;
const RETURN = 0x0d;
const TAB = 0x09;
const COMMA = 0x2c;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const LOWER_U = 0x75;
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
  const keys = checkBodyKeys(text, limits);
  return decodeReview(keys > OWN_CONTEXT_KEYS ? parseInOwnContext(text) : parseJson(text));
}

/**
 * Parses a large body with the JSON.parse of a V8 context made for it: its maps for objects of
 * each key count are new, so no transitions left by earlier reviews can make its objects build
 * maps of their own (OWN_CONTEXT_KEYS), and checkBody has made sure the body cannot fill one
 * itself (MAX_KEY_FANOUT). Its objects and lists are plain JSON data of that context: the
 * injector reads them with typeof, Array.isArray and own-property lookups, never instanceof or
 * prototypes. The next context is made after the review (about 1 ms and 150 KB), and this one is
 * garbage once the review is.
 */
function parseInOwnContext(text: string): unknown {
  const parse = spareParse ?? contextParse();
  spareParse = undefined;
  setImmediate(() => (spareParse ??= contextParse()));
  try {
    return parse(text);
  } catch (err) {
    throw new InjectorError('BODY_MALFORMED', [(err as Error).message], { cause: err });
  }
}

function contextParse(): (text: string) => unknown {
  return runInContext('JSON.parse', createContext()) as (text: string) => unknown;
}

let spareParse: ((text: string) => unknown) | undefined;

/** Parses a body read by the transport; malformed JSON is a 400. */
export function parseJson(text: string): unknown {
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

