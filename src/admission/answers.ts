import { hash } from 'node:crypto';
import { apiserverEnvelope, type DecodedReview, type ReviewVersion } from './codec.js';

/**
 * Answers to reviews that repeat but for their uid. The pods of one ReplicaSet reach the webhook
 * as the same bytes but for `request.uid`: controller-made pods have no name (only generateName)
 * and the apiserver gives every call a fresh uid. A rollout of N replicas then costs two reviews
 * run in full and N - 2 that are neither parsed nor handled (docs/performance.md).
 *
 * Correct by construction, whatever a client sends:
 * - Only a body that begins as the apiserver writes a review, with a uid that is a plain JSON
 *   string (the codec's apiserverEnvelope), is looked up. Its key is the version and the SHA-256
 *   of every byte after the uid: two bodies with one key are the same bytes but for the uid.
 * - An answer is kept only after two reviews of one key, with different uids, each parsed to its
 *   own raw uid, were run in full, and only if the run says it may be kept (a verdict that leans on
 *   the history window of the template sets never is). Were the raw uid shadowed by a later
 *   duplicate `uid` key, both would have parsed to the same uid; so for every body of that key the
 *   raw uid is the one a parse gives, and the kept value is what a full run gives it.
 * - The cache keeps what the handler answered, never bytes: the codec encodes it with the uid.
 * - Each entry belongs to the generation of its review's namespace (an opaque token: that
 *   namespace's view of the template set); an entry whose namespace's generation has changed since
 *   is never answered, so one namespace's template change costs only that namespace's entries
 *   (test/admission/answers.test.ts, "namespace").
 * - Memory is bounded by `maxBytes` (what the caller says each value holds, and a fixed overhead
 *   an entry), least recently used first out.
 * - A body seen once takes no entry and displaces none: its first sighting (key and uid) waits
 *   among the last RECENT_SIGHTINGS first sightings only, so a stream of distinct pods (every pod
 *   of another Deployment, a StatefulSet) never evicts a kept answer, and its sightings die young
 *   (test/admission/answers.test.ts).
 */
export class AnswerCache<T> {
  readonly #maxBytes: number;
  /** Entries by key, least recently used first: a Map iterates in insertion order, and a hit moves its entry last. */
  readonly #entries = new Map<string, Entry<T>>();
  /** The first uid of each body seen once lately, by key, oldest first. */
  readonly #sightings = new Map<string, string>();
  #bytes = 0;

  constructor(maxBytes: number) {
    this.#maxBytes = maxBytes;
  }

  /** Where a body's answer is kept, or undefined for a body the cache never keeps. */
  slot(body: Buffer): CacheSlot | undefined {
    if (this.#maxBytes === 0) return undefined;
    const envelope = apiserverEnvelope(body);
    if (envelope === undefined) return undefined;
    const key = envelope.version + hash('sha256', body.subarray(envelope.uidEnd), 'base64');
    return { key, uid: envelope.uid, version: envelope.version };
  }

  /** The value kept for the slot's key, if any (a first sighting keeps none) and its namespace's generation is still the one it was kept in. */
  get(slot: CacheSlot, generationOf: (namespace: string) => unknown): T | undefined {
    const entry = this.#entries.get(slot.key);
    if (entry === undefined) return undefined;
    this.#entries.delete(slot.key);
    if (generationOf(entry.namespace) !== entry.generation) {
      this.#bytes -= entry.bytes;
      return undefined;
    }
    this.#entries.set(slot.key, entry);
    return entry.value;
  }

  /**
   * Offers the value a full run gave the parsed `review` of the slot's body, holding about `bytes`,
   * computed in `generation` (its namespace's, read before the run; undefined keeps nothing).
   */
  offer(slot: CacheSlot, review: DecodedReview, value: T, bytes: number, generation: unknown): void {
    const namespace = review.request.namespace;
    if (generation === undefined || namespace === undefined || namespace === '') return;
    // The slot's raw uid must be the one the parse gave (not shadowed by a later `uid` key).
    if (review.request.uid !== slot.uid || review.apiVersion !== slot.version || bytes > this.#maxBytes / 8) return;
    if (this.#entries.has(slot.key)) return;
    const firstUid = this.#sightings.get(slot.key);
    if (firstUid === undefined) return this.#sighted(slot.key, slot.uid);
    // The same body again with the same uid (a retry) proves nothing about the uid.
    if (firstUid === slot.uid) return;
    this.#sightings.delete(slot.key);
    this.#add(slot.key, { value, bytes: ENTRY_BYTES + bytes, namespace, generation });
  }

  /** Kept values and the bytes they hold (first sightings are not counted: they are a few, bounded apart). */
  get size(): { readonly entries: number; readonly bytes: number } {
    return { entries: this.#entries.size, bytes: this.#bytes };
  }

  #sighted(key: string, uid: string): void {
    this.#sightings.set(key, uid);
    if (this.#sightings.size <= RECENT_SIGHTINGS) return;
    for (const oldest of this.#sightings.keys()) {
      this.#sightings.delete(oldest);
      break;
    }
  }

  #add(key: string, entry: Entry<T>): void {
    this.#entries.set(key, entry);
    this.#bytes += entry.bytes;
    for (const [oldKey, oldest] of this.#entries) {
      if (this.#bytes <= this.#maxBytes) break;
      this.#drop(oldKey, oldest);
    }
  }

  #drop(key: string, entry: Entry<T>): void {
    this.#entries.delete(key);
    this.#bytes -= entry.bytes;
  }
}

/** A body as the cache files it: its key, and the version and raw uid it was sent with. */
export interface CacheSlot {
  readonly key: string;
  readonly uid: string;
  readonly version: ReviewVersion;
}

/** A kept value. */
interface Entry<T> {
  readonly value: T;
  readonly bytes: number;
  /** The review's namespace, and its generation when the value was computed. */
  readonly namespace: string;
  readonly generation: unknown;
}

/**
 * First sightings remembered. The pods of one ReplicaSet reach the webhook back to back (the
 * controller creates a scale-up's pods in concurrent batches), so a second sighting comes within a
 * few reviews. Few enough that at thousands of distinct reviews a second a sighting is gone before
 * V8 moves it to the old space (a scavenge every 50 or so reviews, docs/performance.md).
 */
const RECENT_SIGHTINGS = 64;

/** An entry's key, uid, Map slot and object, roughly. */
const ENTRY_BYTES = 256;
