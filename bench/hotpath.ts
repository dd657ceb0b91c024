/**
 * In-process cost of each step of a review, without the network: an answer cache hit and a whole review through the
 * pipeline, JSON.parse of the body, the envelope check, the mutating handler (selection, injection, diff, base64 patch),
 * the answer's JSON, the metrics and the log line. Shows where the product's CPU per review goes beyond the
 * floor's (which pays only the JSON.parse and the transport).
 *
 * Usage: node --import tsx bench/hotpath.ts [small|typical|large|optout] [iterations]
 */
import { Writable } from 'node:stream';
import { pathToFileURL } from 'node:url';
import fastJsonPatch from 'fast-json-patch';
import { checkBody, decodeReview, encodeAnswer } from '../src/admission/codec.js';
import { createHandlers } from '../src/admission/handlers.js';
import { ReviewPipeline } from '../src/admission/pipeline.js';
import { logReviews } from '../src/admission/record.js';
import { createLogger } from '../src/log.js';
import { createMetrics } from '../src/metrics/metrics.js';
import { ANSWER_CACHE_BYTES } from '../src/server/admission-app.js';
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
  const withUid = (uid: string): string => Buffer.concat([t.prefix, Buffer.from(uid), t.suffix]).toString('utf8');
  const text = withUid('00000000-0000-4000-8000-000000000001');
  const set = await loadTemplateSet('templates');
  const handlers = createHandlers({ templates: () => set });
  const mutate = handlers.byPath.get('/mutate')!;
  const validate = handlers.byPath.get('/validate')!;
  const metrics = createMetrics({ processMetrics: false });
  const log = logReviews(createLogger('info', new Writable({ write: (_c, _e, cb) => cb() }) as never));
  const parsed = JSON.parse(text);
  const review = decodeReview(parsed);
  const verdict = mutate(review.request);
  // The pod as the apiserver stores it after the patch, as /validate sees every opted-in pod.
  const patchBytes = Buffer.from(verdict.response.patch ?? '', 'base64');
  const patched = fastJsonPatch.applyPatch(structuredClone(review.request.object), JSON.parse(patchBytes.toString('utf8'))).newDocument;
  const injected = { ...review.request, object: patched };
  if (validate(injected).decision !== 'allowed') throw new Error('the validating handler did not allow the injected pod');
  // A pipeline whose answer cache holds this pod's answer, as the server's does after two reviews of it with other uids.
  const cached = new ReviewPipeline({ endpoint: '/mutate', handle: mutate, generation: handlers.generation, answerCacheBytes: ANSWER_CACHE_BYTES });
  for (const uid of ['00000000-0000-4000-8000-00000000000a', '00000000-0000-4000-8000-00000000000b']) cached.review(Buffer.from(withUid(uid)));
  if (!cached.review(Buffer.from(text)).record.cached) throw new Error('the answer cache did not keep the pod');
  const fresh = new ReviewPipeline({ endpoint: '/mutate', handle: mutate, generation: handlers.generation, answerCacheBytes: 0 });
  const bytes = Buffer.from(text);
  const record = fresh.review(bytes).record;
  const time = (step: string, fn: () => unknown): Step => {
    for (let i = 0; i < Math.min(2000, iterations); i++) fn();
    const start = process.cpuUsage();
    for (let i = 0; i < iterations; i++) fn();
    const used = process.cpuUsage(start);
    return { step, micros: (used.user + used.system) / iterations };
  };
  return [
    time('answer cache hit: the whole pipeline (lookup, answer, record), instead of every step below but the metrics and the log line', () =>
      cached.review(bytes),
    ),
    time('the whole pipeline without the answer cache (every step below but the metrics and the log line)', () => fresh.review(bytes)),
    time('body limits (checkBody)', () => checkBody(text)),
    time('JSON.parse of the body (the floor does this too)', () => JSON.parse(text)),
    time('envelope check (decodeReview)', () => decodeReview(parsed)),
    time('mutate: select, render, inject, diff, patch, audit', () => mutate(review.request)),
    time('validate: select, render, check the sidecars, audit (the injected pod)', () => validate(injected)),
    time('answer JSON (encodeAnswer)', () => encodeAnswer(review, verdict.response)),
    time('metrics (observeReview)', () => metrics.observeReview(record)),
    time('log line (as pino writes it, to a null stream)', () => log(record)),
  ];
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const size = (process.argv[2] ?? 'typical') as PodSize;
  for (const s of await measureSteps(size, Number(process.argv[3] ?? 20000))) process.stdout.write(`${s.micros.toFixed(2).padStart(8)} µs  ${s.step}\n`);
}
