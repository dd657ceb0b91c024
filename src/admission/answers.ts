import { AnswerHeads, ApiserverPrefixes, ReviewVersion, type DecodedReview } from './codec.js';

/**
 * Answers to reviews seen before. The pods of one ReplicaSet reach the webhook as the same text
 * but for `request.uid`: controller-made pods have no name (only generateName) and the apiserver
 * gives every call a fresh uid. A rollout of N replicas then costs two injections (an answer is
 * kept the second time it is computed), one parse to confirm the third review, and N - 3 lookups
 * that parse nothing.
 *
 * The cache sits behind the codec: the byte format it relies on (the apiserver's envelope prefix,
 * the answer head) is the codec's (ApiserverPrefixes, AnswerHeads), and its callers make one call,
 * `answer(body, generation, steps)`, handing it the steps of a review to run when it cannot answer.
 * It works on the body's bytes as they came: a lookup neither decodes nor copies them.
 *
 * Correct by construction, whatever a client sends:
 * - A body can be looked up only if it begins with the apiserver's own encoding of the envelope,
 *   `{"kind":"AdmissionReview","apiVersion":"<version>","request":{"uid":"`, followed by a uid of
 *   printable ASCII without `"` or `\` and then `"`. The key is the bytes after that uid. Such a
 *   uid is a whole JSON string token that needs no escapes, so the answer can echo it verbatim.
 * - An answer is kept only from a review that parsed, whose parsed uid is that raw uid, whose
 *   answer is exactly what the steps produced for it, and which the steps say may be kept (an
 *   answer that can change without a new generation, such as a verdict that leans on the history
 *   window of the template sets, never is).
 * - Two such bodies with the same key and version are the same bytes but for the uid token, so
 *   they decode to the same text and parse to the same review, except that the token may be
 *   shadowed by a later duplicate `uid` key. The first review with the key and a different uid is
 *   parsed to settle that: if its parsed uid is its raw uid, the token is the effective
 *   `request.uid` and from then on the entry answers without parsing (a shadowed token gives both
 *   reviews the same parsed uid, so the check fails and the entry is dropped).
 * - The handlers never see the uid (the codec alone writes it), so the answer is the stored one
 *   with the uid put back in: the bytes a fresh run of the steps would have produced.
 * - Entries belong to one generation (an opaque token: the template set's identity) and one
 *   endpoint; another generation starts an empty cache.
 * - Memory is bounded by `maxBytes` (the key's bytes and the answer's text per entry, two bytes a
 *   character for text beyond Latin-1), least recently used first out; a body larger than an
 *   eighth of it is never kept.
 */
export class AnswerCache<T> {
  readonly #maxBytes: number;
  /** Entries by fingerprint (a few entries may share one); a key is compared whole before use. */
  readonly #buckets = new Map<number, Entry<T>[]>();
  /** Every entry, least recently used first. */
  readonly #recency = new Set<Entry<T>>();
  /** Fingerprints of answers computed once and not kept: an answer is kept the second time it is computed. */
  readonly #seen = new Set<number>();
  #generation: unknown;
  #bytes = 0;

  constructor(maxBytes: number) {
    this.#maxBytes = maxBytes;
  }

  /**
   * The answer to a review body: the one kept for an earlier body that differed only in its uid
   * (nothing parsed once the entry is confirmed), else the steps' own (decode, then answer), which
   * is offered to the cache. `generation` names what the answers depend on; undefined keeps nothing.
   * Errors of the steps (a bad body, a fault) are thrown as they are, and nothing is kept.
   */
  answer(body: Buffer, generation: unknown, steps: ReviewSteps<T>): Answer<T> {
    const slot = generation === undefined ? undefined : this.#slotOf(body);
    if (slot === undefined) return steps.answer(steps.decode(body));
    const entry = generation === this.#generation ? this.#find(slot) : undefined;
    if (entry?.confirmed) return hit(entry, slot);
    const review = steps.decode(body);
    if (entry !== undefined && this.#confirm(entry, slot, review)) return hit(entry, slot);
    const computed = steps.answer(review);
    if (computed.keep) this.#put(slot, generation, review, computed);
    return computed;
  }

  /** Entries and bytes held. */
  get size(): { readonly entries: number; readonly bytes: number } {
    return { entries: this.#recency.size, bytes: this.#bytes };
  }

  #slotOf(body: Buffer): Slot | undefined {
    if (this.#maxBytes === 0) return undefined;
    const version = startsWith(body, PREFIX_BYTES[ReviewVersion.V1]) ? ReviewVersion.V1 : startsWith(body, PREFIX_BYTES[ReviewVersion.V1Beta1]) ? ReviewVersion.V1Beta1 : undefined;
    if (version === undefined) return undefined;
    const start = PREFIX_BYTES[version].length;
    let end = start;
    for (let c = body[end]; c !== QUOTE; c = body[++end]) {
      // Printable ASCII but the backslash; undefined (the end of the body) fails too.
      if (c === undefined || c < 0x20 || c > 0x7e || c === BACKSLASH || end - start > MAX_UID) return undefined;
    }
    if (end === start || body.length - end > this.#maxBytes / 8) return undefined;
    // Printable ASCII: its Latin-1 and UTF-8 readings are the same string.
    return { version, uid: body.toString('latin1', start, end), fingerprint: fingerprint(body, end), body, keyStart: end };
  }

  #find(slot: Slot): Entry<T> | undefined {
    const bucket = this.#buckets.get(slot.fingerprint);
    if (bucket === undefined) return undefined;
    // One memcmp per candidate, where a Map keyed by the text would hash all of it on every
    // lookup (about 9 µs for a typical pod).
    const keyLength = slot.body.length - slot.keyStart;
    for (const entry of bucket) {
      if (entry.key.length === keyLength && entry.version === slot.version && slot.body.compare(entry.key, 0, keyLength, slot.keyStart) === 0) {
        // Most recently used last, so eviction takes the oldest first.
        this.#recency.delete(entry);
        this.#recency.add(entry);
        return entry;
      }
    }
    return undefined;
  }

  /**
   * Whether a found entry may answer a review it was not yet confirmed for, given that review
   * parsed: true when the parsed uid is the slot's raw uid (which confirms the entry once the uid
   * differs from the one it was made with); otherwise the entry is dropped.
   */
  #confirm(entry: Entry<T>, slot: Slot, review: DecodedReview): boolean {
    if (review.request.uid !== slot.uid || review.apiVersion !== slot.version) {
      this.#drop(entry);
      return false;
    }
    if (slot.uid !== entry.madeFor) entry.confirmed = true;
    return true;
  }

  /** Keeps the answer computed for the parsed `review` of a slot that found nothing usable. */
  #put(slot: Slot, generation: unknown, review: DecodedReview, computed: Answer<T>): void {
    if (review.request.uid !== slot.uid || review.apiVersion !== slot.version) return;
    const head = AnswerHeads[slot.version];
    const uidEnd = head.length + slot.uid.length + 2;
    if (!computed.text.startsWith(head) || computed.text.charCodeAt(head.length) !== QUOTE || !computed.text.startsWith(slot.uid, head.length + 1) || computed.text.charCodeAt(uidEnd - 1) !== QUOTE) return;
    if (generation !== this.#generation) this.#reset(generation);
    // Kept only when its fingerprint was computed before: a pod seen once (most pods of a cluster
    // where every Deployment has one replica) costs a number here, not an entry that would live
    // long enough to be promoted to the old generation and then become garbage there.
    if (!this.#seen.delete(slot.fingerprint)) {
      if (this.#seen.size >= MAX_SEEN) this.#seen.clear();
      this.#seen.add(slot.fingerprint);
      return;
    }
    const old = this.#find(slot);
    if (old !== undefined) this.#drop(old);
    const tail = computed.text.slice(uidEnd);
    // A copy of its own: a view would keep the whole body (and a pooled one its neighbours).
    const key = Buffer.allocUnsafeSlow(slot.body.length - slot.keyStart);
    slot.body.copy(key, 0, slot.keyStart);
    const bytes = key.length + heldBytes(tail) + ENTRY_OVERHEAD;
    const entry: Entry<T> = { version: slot.version, fingerprint: slot.fingerprint, key, madeFor: slot.uid, confirmed: false, value: computed.value, tail, bytes };
    const bucket = this.#buckets.get(slot.fingerprint);
    if (bucket === undefined) this.#buckets.set(slot.fingerprint, [entry]);
    else if (bucket.push(entry) > MAX_BUCKET) this.#drop(bucket[0]!);
    this.#recency.add(entry);
    this.#bytes += entry.bytes;
    for (const oldest of this.#recency) {
      if (this.#bytes <= this.#maxBytes) break;
      this.#drop(oldest);
    }
  }

  #drop(entry: Entry<T>): void {
    const bucket = this.#buckets.get(entry.fingerprint);
    const at = bucket?.indexOf(entry) ?? -1;
    if (bucket === undefined || at < 0) return;
    bucket.splice(at, 1);
    if (bucket.length === 0) this.#buckets.delete(entry.fingerprint);
    this.#recency.delete(entry);
    this.#bytes -= entry.bytes;
  }

  #reset(generation: unknown): void {
    this.#buckets.clear();
    this.#recency.clear();
    this.#seen.clear();
    this.#bytes = 0;
    this.#generation = generation;
  }
}

/** What running a review gives: its answer text and what the answer was made from. */
export interface Answer<T> {
  readonly version: ReviewVersion;
  /** The review's uid, as the answer echoes it. */
  readonly uid: string;
  /** The AdmissionReview text, as encodeAnswer wrote it. */
  readonly text: string;
  /** What the caller keeps with the answer (the same for every review of one key). */
  readonly value: T;
  /** False for an answer that may change without a new generation: it is never kept. */
  readonly keep: boolean;
  /** True when the answer came from the cache. */
  readonly cached: boolean;
}

/** The steps of a review the cache runs when it cannot answer: both throw for a review they refuse. */
export interface ReviewSteps<T> {
  /** Checks and parses a body (the codec's decodeBody, once the bytes are text). */
  decode(body: Buffer): DecodedReview;
  /** Handles a decoded review and encodes its answer. */
  answer(review: DecodedReview): Answer<T>;
}

/** Where one body's answer is kept: its version and raw uid, and its key (the bytes after the uid, from keyStart) with a cheap hash of them. */
interface Slot {
  readonly version: ReviewVersion;
  readonly uid: string;
  readonly fingerprint: number;
  readonly body: Buffer;
  readonly keyStart: number;
}

/** A kept answer. */
interface Entry<T> {
  readonly version: ReviewVersion;
  readonly fingerprint: number;
  /** The bytes after the uid. */
  readonly key: Buffer;
  /** The uid of the review the answer was made for. */
  readonly madeFor: string;
  /** True once a review with another uid confirmed that the uid token is the effective one. */
  confirmed: boolean;
  readonly value: T;
  /** The answer text after the uid's JSON string. */
  readonly tail: string;
  readonly bytes: number;
}

/** The entry's answer to the review of `slot`: the AdmissionReview text with the slot's uid. */
function hit<T>(entry: Entry<T>, slot: Slot): Answer<T> {
  return { version: slot.version, uid: slot.uid, text: AnswerHeads[slot.version] + '"' + slot.uid + '"' + entry.tail, value: entry.value, keep: true, cached: true };
}

/** What V8 holds for a string: one byte a character, two when any character is beyond Latin-1. */
function heldBytes(text: string): number {
  return WIDE.test(text) ? 2 * text.length : text.length;
}

/** True when `bytes` begins with `prefix`. */
function startsWith(bytes: Buffer, prefix: Uint8Array): boolean {
  if (bytes.length < prefix.length) return false;
  for (let i = 0; i < prefix.length; i++) if (bytes[i] !== prefix[i]) return false;
  return true;
}

/**
 * A hash of every byte from `start`, four at a time: the bytes are copied (memcpy) into an
 * aligned scratch array and read as 32-bit words over two lanes, so that neither a lane's
 * multiply chain nor a load per byte sets the pace. About 1.8 µs for a typical pod, where a hash
 * of each character of the text (charCodeAt) took 5.3 µs for its first 2 KiB alone, and V8's own
 * hash of the whole text about 9. A collision costs a comparison or a slot in a bucket, never a
 * wrong answer.
 */
function fingerprint(bytes: Buffer, start: number): number {
  let a = bytes.length - start;
  let b = 0;
  for (let at = start; at < bytes.length; at += SCRATCH_BYTES.length) {
    const n = Math.min(SCRATCH_BYTES.length, bytes.length - at);
    bytes.copy(SCRATCH_BYTES, 0, at, at + n);
    // The last word's bytes beyond the key are zeros, whatever an earlier key left there.
    const words = (n + 3) >> 2;
    for (let k = n; k < words << 2; k++) SCRATCH_BYTES[k] = 0;
    let i = 0;
    for (; i + 1 < words; i += 2) {
      a = Math.imul(a ^ SCRATCH[i]!, FNV_PRIME);
      b = Math.imul(b ^ SCRATCH[i + 1]!, FNV_PRIME);
    }
    if (i < words) a = Math.imul(a ^ SCRATCH[i]!, FNV_PRIME);
  }
  return (a ^ Math.imul(b, GOLDEN)) | 0;
}

/** Where fingerprint reads a key's bytes as words: 16 KiB at a time. */
const SCRATCH = new Int32Array(4096);
const SCRATCH_BYTES = new Uint8Array(SCRATCH.buffer);
const FNV_PRIME = 0x01000193;
const GOLDEN = 0x9e3779b1 | 0;

/** The apiserver's envelope prefixes, as bytes. */
const PREFIX_BYTES: Readonly<Record<ReviewVersion, Uint8Array>> = {
  [ReviewVersion.V1]: Buffer.from(ApiserverPrefixes[ReviewVersion.V1], 'latin1'),
  [ReviewVersion.V1Beta1]: Buffer.from(ApiserverPrefixes[ReviewVersion.V1Beta1], 'latin1'),
};

const QUOTE = 0x22;
const WIDE = /[^\x00-\xff]/;
const BACKSLASH = 0x5c;
/** Kubernetes uids are 36-character UUIDs; anything much longer is not worth a lookup. */
const MAX_UID = 128;
/** Fingerprints remembered at most before the memory of first sightings starts again. */
const MAX_SEEN = 8192;
/** Distinct reviews kept under one fingerprint at most, so a lookup compares a few keys at most. */
const MAX_BUCKET = 8;
/** The entry, its value and the string headers, roughly. */
const ENTRY_OVERHEAD = 512;
