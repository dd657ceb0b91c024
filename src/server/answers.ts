import type { ReviewResult } from '../admission/handlers.js';
import { encodeReview, ReviewVersion, type DecodedReview } from '../admission/codec.js';
import type { ReviewFacts } from '../admission/record.js';
import type { TemplateSet } from '../templates/load.js';

/**
 * Answers to reviews seen before. The pods of one ReplicaSet reach the webhook as the same text
 * but for `request.uid`: controller-made pods have no name (only generateName) and the apiserver
 * gives every call a fresh uid. A rollout of N replicas then costs two injections (an answer is
 * kept the second time it is computed), one parse to confirm the third review, and N - 3 lookups
 * that parse nothing.
 *
 * Correct by construction, whatever a client sends:
 * - A body can be looked up only if it begins with the apiserver's own encoding of the envelope,
 *   `{"kind":"AdmissionReview","apiVersion":"<version>","request":{"uid":"`, followed by a uid of
 *   printable ASCII without `"` or `\` and then `"`. The key is the text after that uid. Such a uid
 *   is a whole JSON string token that needs no escapes, so the answer can echo it verbatim.
 * - An answer is kept only from a review that parsed, whose parsed uid is that raw uid, and whose
 *   answer is exactly what the handler produced for it.
 * - Two such bodies with the same key and version are the same text but for the uid token, so
 *   they parse to the same review, except that the token may be shadowed by a later duplicate
 *   `uid` key. The first review with the key and a different uid is parsed to settle that: if its
 *   parsed uid is its raw uid, the token is the effective `request.uid` and from then on the entry
 *   answers without parsing (a shadowed token gives both reviews the same parsed uid, so the check
 *   fails and the entry is dropped).
 * - The handlers read the uid only to echo it, so the answer is the stored one with the uid put
 *   back in: the bytes a fresh run of the handler would have produced.
 * - Entries belong to one template set and one endpoint; a reload starts an empty cache.
 * - Memory is bounded by `maxBytes` (key, answer text and patch per entry, two bytes a character
 *   for text beyond Latin-1), least recently used first out; a body larger than an eighth of it is
 *   never kept.
 */
export class AnswerCache {
  readonly #maxBytes: number;
  /** Entries by fingerprint (a few entries may share one); a key is compared whole before use. */
  readonly #buckets = new Map<number, Entry[]>();
  /** Every entry, least recently used first. */
  readonly #recency = new Set<Entry>();
  /** Fingerprints of answers computed once and not kept: an answer is kept the second time it is computed. */
  readonly #seen = new Set<number>();
  #set: TemplateSet | undefined;
  #bytes = 0;

  constructor(maxBytes: number) {
    this.#maxBytes = maxBytes;
  }

  /**
   * Looks a body up by its text alone: undefined when the cache cannot answer it, else its slot
   * and the entry kept for it, if any.
   */
  lookup(text: string, set: TemplateSet): Lookup | undefined {
    const slot = this.#slotOf(text);
    return slot === undefined ? undefined : { slot, set, entry: this.#find(slot, set) };
  }

  #slotOf(text: string): Slot | undefined {
    if (this.#maxBytes === 0) return undefined;
    const version = text.startsWith(Prefixes[ReviewVersion.V1]) ? ReviewVersion.V1 : text.startsWith(Prefixes[ReviewVersion.V1Beta1]) ? ReviewVersion.V1Beta1 : undefined;
    if (version === undefined) return undefined;
    const start = Prefixes[version].length;
    let end = start;
    for (let c = text.charCodeAt(end); c !== QUOTE; c = text.charCodeAt(++end)) {
      // Printable ASCII but the backslash; NaN (the end of the text) fails too.
      if (!(c >= 0x20 && c <= 0x7e) || c === BACKSLASH || end - start > MAX_UID) return undefined;
    }
    if (end === start || text.length - end > this.#maxBytes / 8) return undefined;
    return { version, uid: text.slice(start, end), fingerprint: fingerprint(text, end), key: text.slice(end) };
  }

  #find(slot: Slot, set: TemplateSet): Entry | undefined {
    if (set !== this.#set) return undefined;
    const bucket = this.#buckets.get(slot.fingerprint);
    if (bucket === undefined) return undefined;
    // One memcmp per candidate: V8 compares two flat one-byte strings with memcmp, where a Map
    // keyed by the text would hash all of it on every lookup (about 7 µs for a typical pod).
    for (const entry of bucket) {
      if (entry.key === slot.key && entry.version === slot.version) {
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
  confirm(entry: Entry, slot: Slot, review: DecodedReview): boolean {
    if (review.request.uid !== slot.uid || review.apiVersion !== slot.version) {
      this.#drop(entry);
      return false;
    }
    if (slot.uid !== entry.madeFor) entry.confirmed = true;
    return true;
  }

  /** Keeps the answer `text` (as encodeReview wrote it) to the parsed `review` of a lookup that found nothing usable. */
  put({ slot, set }: Lookup, review: DecodedReview, result: ReviewResult, facts: ReviewFacts, text: string): void {
    if (review.request.uid !== slot.uid || review.apiVersion !== slot.version) return;
    const head = AnswerHeads[slot.version] + slot.uid;
    if (!text.startsWith(head) || text.charCodeAt(head.length) !== QUOTE) return;
    if (set !== this.#set) this.#reset(set);
    // Kept only when its fingerprint was computed before: a pod seen once (most pods of a cluster
    // where every Deployment has one replica) costs a number here, not an entry that would live
    // long enough to be promoted to the old generation and then become garbage there.
    if (!this.#seen.delete(slot.fingerprint)) {
      if (this.#seen.size >= MAX_SEEN) this.#seen.clear();
      this.#seen.add(slot.fingerprint);
      return;
    }
    const old = this.#find(slot, set);
    if (old !== undefined) this.#drop(old);
    const tail = text.slice(head.length);
    // The patch is held twice: in the answer text and in the result.
    const bytes = heldBytes(slot.key) + heldBytes(tail) + (result.response.patch?.length ?? 0) + ENTRY_OVERHEAD;
    const entry: Entry = { ...slot, madeFor: slot.uid, confirmed: false, result, facts, tail, bytes };
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

  /** Entries and bytes held. */
  get size(): { readonly entries: number; readonly bytes: number } {
    return { entries: this.#recency.size, bytes: this.#bytes };
  }

  #drop(entry: Entry): void {
    const bucket = this.#buckets.get(entry.fingerprint);
    const at = bucket?.indexOf(entry) ?? -1;
    if (bucket === undefined || at < 0) return;
    bucket.splice(at, 1);
    if (bucket.length === 0) this.#buckets.delete(entry.fingerprint);
    this.#recency.delete(entry);
    this.#bytes -= entry.bytes;
  }

  #reset(set: TemplateSet): void {
    this.#buckets.clear();
    this.#recency.clear();
    this.#seen.clear();
    this.#bytes = 0;
    this.#set = set;
  }
}

/** What a lookup found. */
export interface Lookup {
  readonly slot: Slot;
  /** The template set the lookup was made under. */
  readonly set: TemplateSet;
  readonly entry?: Entry | undefined;
}

/** Where one body's answer is kept: its version and raw uid, the text after the uid, and a cheap hash of that. */
export interface Slot {
  readonly version: ReviewVersion;
  readonly uid: string;
  readonly fingerprint: number;
  readonly key: string;
}

/** A kept answer. */
export interface Entry extends Slot {
  /** The uid of the review the answer was made for. */
  readonly madeFor: string;
  /** True once a review with another uid confirmed that the uid token is the effective one. */
  confirmed: boolean;
  readonly result: ReviewResult;
  /** What the log line and the metrics say about the review (the same for every review of the key). */
  readonly facts: ReviewFacts;
  /** The answer text after the uid. */
  readonly tail: string;
  readonly bytes: number;
}

/** The entry's answer to the review of `slot`: its result and the AdmissionReview text, both with the slot's uid. */
export function answerOf(entry: Entry, slot: Slot): { readonly result: ReviewResult; readonly facts: ReviewFacts; readonly text: string } {
  const { uid } = slot;
  return {
    result: { ...entry.result, response: { ...entry.result.response, uid } },
    facts: { ...entry.facts, uid },
    text: AnswerHeads[slot.version] + uid + entry.tail,
  };
}

/** What V8 holds for a string: one byte a character, two when any character is beyond Latin-1. */
function heldBytes(text: string): number {
  return WIDE.test(text) ? 2 * text.length : text.length;
}

/**
 * A hash of the text from `start`: every character of its first 2 KiB, where the apiserver writes
 * what sets pods apart (the namespace and user, then the pod's name, labels, annotations and
 * owner), then 32 characters spread over the rest, and the length. About 2 µs, where V8's own hash
 * of every character of a typical pod costs about 7; a collision costs a comparison or a slot in a
 * bucket, never a wrong answer.
 */
function fingerprint(text: string, start: number): number {
  let h = text.length - start;
  const head = Math.min(text.length, start + FINGERPRINT_HEAD);
  for (let i = start; i < head; i++) h = (Math.imul(h, 31) + text.charCodeAt(i)) | 0;
  const step = Math.max(1, Math.floor((text.length - head) / FINGERPRINT_SAMPLES));
  for (let i = head; i < text.length; i += step) h = (Math.imul(h, 31) + text.charCodeAt(i)) | 0;
  return h;
}

const QUOTE = 0x22;
const WIDE = /[^\x00-\xff]/;
const BACKSLASH = 0x5c;
/** Kubernetes uids are 36-character UUIDs; anything much longer is not worth a lookup. */
const MAX_UID = 128;
const FINGERPRINT_HEAD = 2048;
const FINGERPRINT_SAMPLES = 32;
/** Fingerprints remembered at most before the memory of first sightings starts again. */
const MAX_SEEN = 8192;
/** Distinct reviews kept under one fingerprint at most, so a lookup compares a few keys at most. */
const MAX_BUCKET = 8;
/** The entry, the result object and the string headers, roughly. */
const ENTRY_OVERHEAD = 512;

/** How the kube-apiserver (Go's encoding/json, fields in declaration order) begins every review. */
const Prefixes: Readonly<Record<ReviewVersion, string>> = {
  [ReviewVersion.V1]: `{"kind":"AdmissionReview","apiVersion":"${ReviewVersion.V1}","request":{"uid":"`,
  [ReviewVersion.V1Beta1]: `{"kind":"AdmissionReview","apiVersion":"${ReviewVersion.V1Beta1}","request":{"uid":"`,
};

/** How encodeReview begins every answer, up to the uid: taken from encodeReview itself, so the two cannot drift. */
const AnswerHeads: Readonly<Record<ReviewVersion, string>> = Object.fromEntries(
  Object.values(ReviewVersion).map((version) => {
    const marker = '\u0000uid\u0000';
    const text = encodeReview(version, { uid: marker, allowed: true });
    return [version, text.slice(0, text.indexOf(JSON.stringify(marker)) + 1)];
  }),
) as Record<ReviewVersion, string>;
