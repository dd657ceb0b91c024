/**
 * In-process cost of each step of a review, without the network: an answer cache hit, JSON.parse of the body, the
 * envelope check, the mutating handler (selection, injection, diff, base64 patch), the answer's
 * JSON, the metrics and the log line. Shows where the product's CPU per review goes beyond the
 * floor's (which pays only the JSON.parse and the transport).
 *
 * Usage: node --import tsx bench/hotpath.ts [small|typical|large|optout] [iterations]
 */
import { Writable } from 'node:stream';
import { pathToFileURL } from 'node:url';
import { mutate } from '../src/admission/handlers.js';
import { decodeReview, encodeReview } from '../src/admission/codec.js';
import { reviewFacts } from '../src/admission/record.js';
import { createLogger } from '../src/log.js';
import { createMetrics } from '../src/metrics/metrics.js';
import { ANSWER_CACHE_BYTES } from '../src/server/admission.js';
import { AnswerCache, answerOf } from '../src/server/answers.js';
import { loadTemplateSet } from '../src/templates/load.js';
import { Pods, reviewTemplate, type PodSize } from './pods.js';

export interface Step {
  readonly step: string;
  /** CPU microseconds per call, from process.cpuUsage over `iterations` calls after a warm-up. */
  readonly micros: number;
}

/** Times each step of a review of the `size` pod, in this process. */
export async function measureSteps(size: PodSize, iterations = 20000): Promise<Step[]> {
  const t = reviewTemplate(Pods[size]);
  const text = Buffer.concat([t.prefix, Buffer.from('00000000-0000-4000-8000-000000000001'), t.suffix]).toString('utf8');
  const set = await loadTemplateSet('templates');
  const metrics = createMetrics({ processMetrics: false });
  const logger = createLogger('info', new Writable({ write: (_c, _e, cb) => cb() }) as never);
  const parsed = JSON.parse(text);
  const review = decodeReview(parsed);
  const result = mutate(review.request, set);
  const time = (step: string, fn: () => unknown): Step => {
    for (let i = 0; i < Math.min(2000, iterations); i++) fn();
    const start = process.cpuUsage();
    for (let i = 0; i < iterations; i++) fn();
    const used = process.cpuUsage(start);
    return { step, micros: (used.user + used.system) / iterations };
  };
  const line = { endpoint: '/mutate', uid: review.request.uid, operation: 'CREATE', namespace: 'shop', pod: 'checkout-', decision: result.decision, reason: result.reason, templates: result.templates, patchOps: result.patchOps, cached: true, durationMs: 0.4 };
  // An answer cache holding this pod's answer, confirmed as the server's is after three reviews.
  const cache = new AnswerCache(ANSWER_CACHE_BYTES);
  const withUid = (uid: string): string => Buffer.concat([t.prefix, Buffer.from(uid), t.suffix]).toString('utf8');
  for (const uid of ['00000000-0000-4000-8000-00000000000a', '00000000-0000-4000-8000-00000000000b', '00000000-0000-4000-8000-00000000000c']) {
    const lookup = cache.lookup(withUid(uid), set)!;
    const r = decodeReview(JSON.parse(withUid(uid)));
    if (lookup.entry !== undefined && cache.confirm(lookup.entry, lookup.slot, r)) continue;
    const res = mutate(r.request, set);
    cache.put(lookup, r, res, reviewFacts(r.request), encodeReview(r.apiVersion, res.response));
  }
  if (cache.lookup(text, set)?.entry?.confirmed !== true) throw new Error('the answer cache did not keep the pod');
  return [
    time('answer cache hit: lookup and answer, instead of every step below but the metrics and the log line', () => {
      const lookup = cache.lookup(text, set)!;
      return answerOf(lookup.entry!, lookup.slot);
    }),
    time('JSON.parse of the body (the floor does this too)', () => JSON.parse(text)),
    time('envelope check (decodeReview)', () => decodeReview(parsed)),
    time('mutate: select, render, inject, diff, patch, audit', () => mutate(review.request, set)),
    time('answer JSON (encodeReview)', () => encodeReview(review.apiVersion, result.response)),
    time('metrics (observeReview)', () => metrics.observeReview('/mutate', reviewFacts(review.request), result, 0.0004, false)),
    time('log line (pino, to a null stream)', () => logger.info(line, 'review')),
  ];
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const size = (process.argv[2] ?? 'typical') as PodSize;
  for (const s of await measureSteps(size, Number(process.argv[3] ?? 20000))) process.stdout.write(`${s.micros.toFixed(2).padStart(8)} µs  ${s.step}\n`);
}
