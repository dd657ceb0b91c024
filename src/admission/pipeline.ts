import { asInjectorError, InjectorError } from '../errors.js';
import { AnswerCache } from './answers.js';
import { decodeBody, encodeAnswer, type BodyLimits, type DecodedReview, type ResponseBody, type ReviewEnvelope, type ReviewRequest } from './codec.js';
import { reviewOutcome, reviewRecord, type ReviewOutcome, type ReviewRecord } from './record.js';
import { refused, type Verdict } from './verdict.js';

/** A handler as the pipeline sees it: a decoded request (without its uid) in, a verdict out. */
export type ReviewHandler = (request: ReviewRequest) => Verdict;

export interface PipelineOptions {
  /** The path the pipeline answers, as the record names it. */
  readonly endpoint: string;
  readonly handle: ReviewHandler;
  /**
   * An opaque token per namespace that changes whenever a verdict for a pod of that namespace could
   * (its view of the template set); the answer cache keeps each answer under its namespace's. A
   * token that cannot be read keeps nothing.
   */
  readonly generation: (namespace: string) => unknown;
  /** Bytes of answers kept for reviews that repeat but for the uid (0 keeps none). */
  readonly answerCacheBytes: number;
  /** What a body may hold before it is parsed (--max-object-keys, --max-json-keys, --max-json-nodes). */
  readonly bodyLimits?: BodyLimits;
  /** Records of denials an owner can fix carry the pod's controller, for its Event (--owner-events; default false: nothing is read for them). */
  readonly ownerEvents?: boolean;
}

/** A review's answer: the AdmissionReview text, and the one record the observers get. */
export interface Reviewed {
  readonly text: string;
  readonly record: ReviewRecord;
}

/**
 * A fault after the review was decoded (an internal error, a template set that cannot be read):
 * the error edge answers it with HTTP 500, so the webhook's failurePolicy decides, and a
 * metav1.Status that carries its message to the user (server/status-answer.ts); the record keeps the
 * uid. Never a half-made patch.
 */
export class ReviewFault extends Error {
  readonly review: ReviewEnvelope;
  /** The error the answer states (INTERNAL for anything that is not an InjectorError). */
  readonly error: InjectorError;

  constructor(review: ReviewEnvelope, err: unknown) {
    const error = asInjectorError(err);
    super(error.message, { cause: error });
    this.name = 'ReviewFault';
    this.review = review;
    this.error = error;
  }
}

/**
 * One endpoint's review pipeline, outside the HTTP server: decode -> handle -> encode with the uid,
 * synchronous from the body's bytes to the answer's text. The answer cache answers a body it has
 * seen but for the uid without parsing or handling it.
 *
 * A kept answer is given only while its namespace's generation is the one it was kept under (read
 * at the lookup); a computed answer is kept under its namespace's generation as read before the
 * handler ran. The handler reads the template set itself. Because the whole review runs in one
 * synchronous call, no template reload (an await in the template store) can fall between those
 * reads and the handler: an answer is kept under the generation it was computed in.
 */
export class ReviewPipeline {
  readonly #endpoint: string;
  readonly #handle: ReviewHandler;
  readonly #generation: (namespace: string) => unknown;
  readonly #cache: AnswerCache<Kept>;
  readonly #bodyLimits: BodyLimits | undefined;
  readonly #ownerEvents: boolean;

  constructor(options: PipelineOptions) {
    this.#endpoint = options.endpoint;
    this.#handle = options.handle;
    this.#generation = options.generation;
    this.#cache = new AnswerCache(options.answerCacheBytes);
    this.#bodyLimits = options.bodyLimits;
    this.#ownerEvents = options.ownerEvents ?? false;
  }

  /**
   * Answers one review body. Throws an InjectorError (4xx) for a body that is not a review, and a
   * ReviewFault for a fault once the review is decoded; the transport's error edge answers both.
   */
  review(body: Buffer, started: number = performance.now()): Reviewed {
    const slot = this.#cache.slot(body);
    const kept = slot && this.#cache.get(slot, (namespace) => this.#currentGeneration(namespace));
    if (slot !== undefined && kept !== undefined) {
      const text = encodeAnswer({ apiVersion: slot.version, request: { uid: slot.uid } }, kept.response);
      return { text, record: reviewRecord(this.#endpoint, slot.uid, kept.outcome, true, started) };
    }
    const review = decodeBody(body.toString('utf8'), this.#bodyLimits);
    const generation = slot && this.#currentGeneration(review.request.namespace ?? '');
    const verdict = this.#verdict(review);
    const text = encodeAnswer(review, verdict.response);
    const outcome = reviewOutcome(review.request, verdict, this.#ownerEvents);
    if (slot !== undefined && verdict.repeatable) this.#cache.offer(slot, review, { response: verdict.response, outcome }, text.length, generation);
    return { text, record: reviewRecord(this.#endpoint, review.request.uid, outcome, false, started) };
  }

  /** Entries and bytes the answer cache holds. */
  get cacheSize(): { readonly entries: number; readonly bytes: number } {
    return this.#cache.size;
  }

  #verdict(review: DecodedReview): Verdict {
    try {
      return this.#handle(review.request);
    } catch (err) {
      // A review the handler cannot act on (no pod, a pod of the wrong shape) is refused, not failed.
      if (err instanceof InjectorError && err.status < 500) return refused(err);
      throw new ReviewFault(review, err);
    }
  }

  // A source that cannot give its token now keeps nothing; the handler meets the same failure
  // when it reads the set, once the review is decoded, so its 500 carries the uid.
  #currentGeneration(namespace: string): unknown {
    try {
      return this.#generation(namespace);
    } catch {
      return undefined;
    }
  }
}

/** What the cache keeps of a review: the handler's answer and the record's facts, the same for every review of one key. */
interface Kept {
  readonly response: ResponseBody;
  readonly outcome: ReviewOutcome;
}
